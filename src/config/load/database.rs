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
                match postgres(&u.value, &t.doc().dir_at(u.span.start)) {
                    Ok(p) => Some(DatabaseUrl::Postgres(p)),
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

/// A PostgreSQL URL the driver reads, asking for nothing weir lacks, with
/// `sslmode` and `sslrootcert` taken out for weir's own TLS (the driver
/// knows neither `verify-full` nor `sslrootcert`): the problem and its fix
/// otherwise. A relative `sslrootcert` is the config file's directory's.
fn postgres(url: &str, dir: &std::path::Path) -> Result<PostgresUrl, (String, String)> {
    let (url, mode, root_cert) = take_tls(url);
    let config: tokio_postgres::Config = url.parse().map_err(|e| {
        (
            format!("the PostgreSQL URL is not valid: {e}"),
            "write it like \"postgres://weir:PASSWORD@db.internal:5432/weir\"".to_string(),
        )
    })?;
    if config.get_hosts().is_empty() {
        return Err((
            "the PostgreSQL URL names no host".into(),
            "write it like \"postgres://weir:PASSWORD@db.internal:5432/weir\"".into(),
        ));
    }
    let root_cert = root_cert.map(|p| dir.join(p));
    let tls = match (mode.as_deref(), root_cert) {
        (Some("verify-full"), root_cert) => PostgresTls::VerifyFull { root_cert },
        (Some("verify-ca"), _) => {
            return Err((
                "`sslmode=verify-ca` (the chain checked, the host name not) is not supported"
                    .into(),
                "use `sslmode=verify-full` with the host name the certificate names".into(),
            ));
        }
        (Some(m), _) if !matches!(m, "disable" | "prefer" | "require") => {
            return Err((
                format!("`sslmode={m}` is not a mode weir knows"),
                "write `sslmode=disable`, `require` or `verify-full`".into(),
            ));
        }
        (m, Some(_)) => {
            return Err((
                format!(
                    "`sslrootcert` has no effect with `sslmode={}`: the certificate is not checked",
                    m.unwrap_or("disable")
                ),
                "add `sslmode=verify-full`, or remove `sslrootcert`".into(),
            ));
        }
        (None | Some("disable"), None) => PostgresTls::Disable,
        (Some("prefer"), None) => PostgresTls::Prefer,
        (Some(_), None) => PostgresTls::Require,
    };
    if let PostgresTls::VerifyFull {
        root_cert: Some(path),
    } = &tls
        && let Err(e) = crate::pki::client_config(Some(path))
    {
        return Err((
            format!("`sslrootcert`: {e}"),
            "give a PEM file of the CA certificates that issued the server's".into(),
        ));
    }
    Ok(PostgresUrl { url, tls })
}

/// `url` without its `sslmode` and `sslrootcert` parameters, and their
/// values (percent-decoded).
fn take_tls(url: &str) -> (String, Option<String>, Option<String>) {
    // The query starts at the first `?` after the user and password.
    let (user, rest) = match url.rsplit_once('@') {
        Some((user, rest)) => (format!("{user}@"), rest),
        None => (String::new(), url),
    };
    let Some((host, query)) = rest.split_once('?') else {
        return (url.to_string(), None, None);
    };
    let base = format!("{user}{host}");
    let (mut mode, mut root_cert, mut kept) = (None, None, Vec::new());
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = || {
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned()
        };
        match key {
            "sslmode" => mode = Some(value()),
            "sslrootcert" => root_cert = Some(value()),
            _ => kept.push(pair),
        }
    }
    match kept.is_empty() {
        true => (base, mode, root_cert),
        false => (format!("{base}?{}", kept.join("&")), mode, root_cert),
    }
}
