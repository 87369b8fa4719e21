//! `[database]`: the store of runtime keys and usage rows. Only data and
//! validation: the connection is `crate::store`'s.

use super::keys::database::*;
use super::*;

pub(super) fn database(top: &Section<'_, '_>) -> Option<DatabaseSettings> {
    let t = top.table("database")?;
    let path = match t.string(&URL) {
        None => Some(t.doc().dir_at(t.span().start).join("weir.db")),
        Some(u) => match u.value.strip_prefix("sqlite:") {
            Some(p) if !p.is_empty() => Some(t.doc().dir_at(u.span.start).join(p)),
            _ if u.value.starts_with("postgres://") || u.value.starts_with("postgresql://") => {
                u.problem(
                    t.doc(),
                    "PostgreSQL is not supported by this version of weir yet",
                    Some("use \"sqlite:weir.db\" (one instance) for now".into()),
                );
                None
            }
            _ => {
                u.problem(
                    t.doc(),
                    format!("`{}` is not a database URL weir knows", u.value),
                    Some(
                        "write it like \"sqlite:weir.db\" or \"sqlite:/var/lib/weir/weir.db\""
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
        path: path?,
        usage_retention: usage_retention?,
        usage_queue: usize::try_from(usage_queue?).unwrap_or(usize::MAX).max(1),
    })
}
