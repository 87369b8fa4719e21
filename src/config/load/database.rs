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
/// the TLS parameters taken out for weir's own TLS (the driver knows
/// neither `verify-ca`, `verify-full` nor the certificate files): the
/// problem and its fix otherwise. Relative files are the config file's
/// directory's.
fn postgres(url: &str, dir: &std::path::Path) -> Result<PostgresUrl, (String, String)> {
    let (url, taken) = take_tls(url);
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
    let tls = ssl_mode(taken.mode.as_deref(), taken.root_cert.map(|p| dir.join(p)))?;
    let client_cert = client_cert(&tls, taken.cert, taken.key, dir)?;
    if config.get_channel_binding() == tokio_postgres::config::ChannelBinding::Require
        && tls == PostgresTls::Disable
    {
        return Err((
            "`channel_binding=require` needs TLS: it binds the password exchange to the TLS connection".into(),
            "add `sslmode=require` (or `verify-full`), or remove `channel_binding`".into(),
        ));
    }
    let root_cert = match &tls {
        PostgresTls::VerifyFull { root_cert } => root_cert.as_deref(),
        PostgresTls::VerifyCa { root_cert } => Some(root_cert.as_path()),
        _ => None,
    };
    if let Some(path) = root_cert
        && let Err(e) = crate::pki::client_config(Some(path))
    {
        return Err((
            format!("`sslrootcert`: {e}"),
            "give a PEM file of the CA certificates that issued the server's".into(),
        ));
    }
    Ok(PostgresUrl {
        url,
        tls,
        client_cert,
    })
}

/// `sslmode`, with `sslrootcert` where it has an effect.
fn ssl_mode(
    mode: Option<&str>,
    root_cert: Option<std::path::PathBuf>,
) -> Result<PostgresTls, (String, String)> {
    Ok(match (mode, root_cert) {
        (Some("verify-full"), root_cert) => PostgresTls::VerifyFull { root_cert },
        (Some("verify-ca"), Some(root_cert)) => PostgresTls::VerifyCa { root_cert },
        (Some("verify-ca"), None) => {
            return Err((
                "`sslmode=verify-ca` needs `sslrootcert`: it trusts that file's CAs only (with the web PKI's, any public certificate would pass, whoever holds it)".into(),
                "add `sslrootcert=PATH` (a PEM file of the CAs that issued the server's certificate), or use `sslmode=verify-full`".into(),
            ));
        }
        (Some(m), _) if !matches!(m, "disable" | "prefer" | "require") => {
            return Err((
                format!("`sslmode={m}` is not a mode weir knows"),
                "write `sslmode=disable`, `require`, `verify-ca` or `verify-full`".into(),
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
    })
}

/// `sslcert` and `sslkey`, both or neither, with TLS, read and checked.
fn client_cert(
    tls: &PostgresTls,
    cert: Option<String>,
    key: Option<String>,
    dir: &std::path::Path,
) -> Result<Option<(std::path::PathBuf, std::path::PathBuf)>, (String, String)> {
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (dir.join(cert), dir.join(key)),
        (Some(_), None) | (None, Some(_)) => {
            return Err((
                "`sslcert` and `sslkey` go together: the client certificate and its key".into(),
                "give both, or neither".into(),
            ));
        }
    };
    if *tls == PostgresTls::Disable {
        return Err((
            "`sslcert` has no effect without TLS".into(),
            "add `sslmode=verify-full` (or `require`), or remove `sslcert` and `sslkey`".into(),
        ));
    }
    if let Err(e) = crate::pki::load_pair(&cert, &key) {
        return Err((
            format!("`sslcert`/`sslkey`: {e}"),
            "give the PEM certificate (chain) PostgreSQL's CA issued for the user, and its private key".into(),
        ));
    }
    Ok(Some((cert, key)))
}

/// The TLS parameters `take_tls` takes out of a URL (percent-decoded).
#[derive(Default)]
struct TakenTls {
    mode: Option<String>,
    root_cert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

/// `url` without its TLS parameters, and their values.
fn take_tls(url: &str) -> (String, TakenTls) {
    let mut taken = TakenTls::default();
    // The query starts at the first `?` after the user and password.
    let (user, rest) = match url.rsplit_once('@') {
        Some((user, rest)) => (format!("{user}@"), rest),
        None => (String::new(), url),
    };
    let Some((host, query)) = rest.split_once('?') else {
        return (url.to_string(), taken);
    };
    let base = format!("{user}{host}");
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = || {
            Some(
                percent_encoding::percent_decode_str(value)
                    .decode_utf8_lossy()
                    .into_owned(),
            )
        };
        match key {
            "sslmode" => taken.mode = value(),
            "sslrootcert" => taken.root_cert = value(),
            "sslcert" => taken.cert = value(),
            "sslkey" => taken.key = value(),
            _ => kept.push(pair),
        }
    }
    match kept.is_empty() {
        true => (base, taken),
        false => (format!("{base}?{}", kept.join("&")), taken),
    }
}
