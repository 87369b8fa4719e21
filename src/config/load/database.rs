//! `[database]`: the store of runtime keys and usage rows. Only data and
//! validation: the connection is `crate::store`'s.

use super::keys::database::*;
use super::*;

pub(super) fn database(top: &Section<'_, '_>) -> Option<DatabaseSettings> {
    let t = top.table("database")?;
    let url = match t.string(&URL) {
        None => Some(DatabaseUrl::Sqlite(
            t.doc().dir_at(t.span().start).join("weir.db"),
        )),
        Some(u) => match u.value.strip_prefix("sqlite:") {
            Some(p) if !p.is_empty() => {
                Some(DatabaseUrl::Sqlite(t.doc().dir_at(u.span.start).join(p)))
            }
            _ if u.value.starts_with("postgres://") || u.value.starts_with("postgresql://") => {
                match postgres(&u.value) {
                    Ok(()) => Some(DatabaseUrl::Postgres(u.value.clone())),
                    Err((problem, fix)) => {
                        u.problem(t.doc(), problem, Some(fix));
                        None
                    }
                }
            }
            _ => {
                u.problem(
                    t.doc(),
                    format!("`{}` is not a database URL weir knows", u.value),
                    Some(
                        "write it like \"sqlite:weir.db\", \"sqlite:/var/lib/weir/weir.db\" or \"postgres://weir:PASSWORD@db.internal:5432/weir\""
                            .into(),
                    ),
                );
                None
            }
        },
    };
    let usage_retention = match t.raw_present(&USAGE_RETENTION) {
        true => t.duration(&USAGE_RETENTION),
        false => Some(USAGE_RETENTION.duration()),
    };
    let usage_queue = match t.raw_present(&USAGE_QUEUE) {
        true => t.uint(&USAGE_QUEUE),
        false => Some(USAGE_QUEUE.uint()),
    };
    Some(DatabaseSettings {
        url: url?,
        usage_retention: usage_retention?,
        usage_queue: usize::try_from(usage_queue?).unwrap_or(usize::MAX).max(1),
    })
}

/// A PostgreSQL URL the driver reads, asking for nothing weir lacks: the
/// problem and its fix otherwise.
fn postgres(url: &str) -> Result<(), (String, String)> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| {
        (
            format!("the PostgreSQL URL is not valid: {e}"),
            "write it like \"postgres://weir:PASSWORD@db.internal:5432/weir\"".to_string(),
        )
    })?;
    if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        return Err((
            "TLS to PostgreSQL (`sslmode=require`) is not supported by this version of weir".into(),
            "reach the database over a private network or a local TLS tunnel, with `sslmode=disable` (docs/operations.md, \"The database\")".into(),
        ));
    }
    if config.get_hosts().is_empty() {
        return Err((
            "the PostgreSQL URL names no host".into(),
            "write it like \"postgres://weir:PASSWORD@db.internal:5432/weir\"".into(),
        ));
    }
    Ok(())
}
