//! `[cluster]`: the Redis that a fleet of weirs shares its limits through,
//! and how long and how a request waits for it. Only data and validation:
//! the connection is `crate::cluster`'s.

use super::keys::cluster::*;
use super::*;

pub(super) fn cluster(top: &Section<'_, '_>) -> Option<ClusterSettings> {
    let t = top.table("cluster")?;
    let url = url(&t);
    let password = secrets::secret(&t, &PASSWORD_ENV, &PASSWORD_FILE, "the Redis password");
    let key_prefix = match t.string(&KEY_PREFIX) {
        Some(p) if p.value.is_empty() || p.value.chars().any(char::is_whitespace) => {
            p.problem(
                t.doc(),
                "a key prefix must be non-empty, without spaces",
                Some(format!("write it like \"{}\"", KEY_PREFIX.text())),
            );
            None
        }
        Some(p) => Some(p.value),
        None => Some(KEY_PREFIX.text().to_string()),
    };
    let timeout = match t.raw_present(&TIMEOUT) {
        true => t.duration(&TIMEOUT),
        false => Some(TIMEOUT.duration()),
    };
    let on_failure = match t.string(&ON_FAILURE) {
        None => Some(FailureMode::Open),
        Some(m) => match m.value.as_str() {
            "fail_open" => Some(FailureMode::Open),
            "fail_closed" => Some(FailureMode::Closed),
            other => {
                m.problem(
                    t.doc(),
                    format!("`{other}` is not a failure mode"),
                    Some("use \"fail_open\" or \"fail_closed\"".into()),
                );
                None
            }
        },
    };
    let lease_ttl = match t.raw_present(&LEASE_TTL) {
        true => t.duration(&LEASE_TTL),
        false => Some(LEASE_TTL.duration()),
    };
    let ca_file = ca_file(&t, &CA_FILE);
    if let (Some(f), Some(u)) = (&ca_file, &url)
        && !u.starts_with("rediss://")
    {
        f.problem(
            t.doc(),
            "`ca_file` has no effect with a redis:// URL: the connection is not TLS",
            Some("use a rediss:// URL, or remove `ca_file`".into()),
        );
    }
    Some(ClusterSettings {
        url: url?,
        password: password.ok()?.map(|(s, _)| s),
        key_prefix: key_prefix?,
        timeout: timeout?,
        on_failure: on_failure?,
        lease_ttl: lease_ttl?,
        ca_file: ca_file.map(|f| f.value),
    })
}

/// The Redis URL, checked by the parser the connection uses, with no
/// password in it (secrets are never written in the config).
fn url(t: &Section<'_, '_>) -> Option<String> {
    let fix = "write it like \"redis://10.0.0.5:6379/0\" or \"rediss://redis.internal:6380\"";
    if !t.raw_present(&URL) {
        t.problem(URL.name, "missing", Some(format!("add `url`: {fix}")));
        return None;
    }
    let u = t.string(&URL)?;
    if !(u.value.starts_with("redis://") || u.value.starts_with("rediss://")) {
        u.problem(
            t.doc(),
            format!("`{}` must start with redis:// or rediss://", u.value),
            Some(fix.into()),
        );
        return None;
    }
    let info = match redis::IntoConnectionInfo::into_connection_info(u.value.as_str()) {
        Ok(info) => info,
        Err(e) => {
            u.problem(
                t.doc(),
                format!("`{}` is not a Redis URL: {e}", u.value),
                Some(fix.into()),
            );
            return None;
        }
    };
    if info.redis_settings().password().is_some() {
        u.problem(
            t.doc(),
            "the URL holds a password",
            Some("remove it from the URL and use `password_file` or `password_env`".into()),
        );
        return None;
    }
    Some(u.value)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};
    use super::*;

    #[test]
    fn defaults_and_every_key() {
        let c = parse(
            Path::new("w.toml"),
            &format!("[cluster]\nurl = \"redis://127.0.0.1:6379\"\n{MINIMAL}"),
        )
        .expect("valid");
        let s = c.cluster.expect("cluster");
        assert_eq!(s.key_prefix, "weir:");
        assert_eq!(s.timeout, Duration::from_millis(20));
        assert_eq!(s.on_failure, FailureMode::Open);
        assert_eq!(s.lease_ttl, Duration::from_secs(15));
        assert!(
            c.routes[0].shared_limits,
            "shared by default with [cluster]"
        );
        let c = parse(Path::new("w.toml"), MINIMAL).expect("valid");
        assert!(c.cluster.is_none());
        assert!(!c.routes[0].shared_limits);
    }

    #[test]
    fn a_password_in_the_url_a_bad_mode_and_a_long_wait_are_refused() {
        let p = problems(&format!(
            "[cluster]\nurl = \"redis://:hunter2@127.0.0.1:6379\"\ntimeout = \"2s\"\n\
             on_failure = \"open\"\nlease_ttl = \"100ms\"\n{MINIMAL}"
        ));
        assert_eq!(p.len(), 4, "{p:#?}");
        assert!(
            p[0].contains("cluster.url: the URL holds a password"),
            "{}",
            p[0]
        );
        assert!(p[1].contains("cluster.timeout: `2s` is longer"), "{}", p[1]);
        assert!(
            p[2].contains("cluster.on_failure: `open` is not a failure mode"),
            "{}",
            p[2]
        );
        assert!(
            p[3].contains("cluster.lease_ttl: `100ms` is shorter"),
            "{}",
            p[3]
        );
        let p = problems(&format!("[cluster]\nurl = \"http://x\"\n{MINIMAL}"));
        assert!(p[0].contains("must start with redis://"), "{p:?}");
        let p = problems(&format!("[cluster]\n{MINIMAL}"));
        assert!(p[0].contains("cluster.url: missing"), "{p:?}");
    }

    #[test]
    fn a_ca_file_is_read_at_load_and_needs_tls() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_, _, pem) = crate::pki::self_signed(&["redis.test"]).expect("ca");
        std::fs::write(dir.path().join("ca.pem"), pem).expect("write");
        std::fs::write(dir.path().join("empty.pem"), "").expect("write");
        let config = |url: &str, file: &str| {
            let text = format!("[cluster]\nurl = \"{url}\"\nca_file = \"{file}\"\n{MINIMAL}");
            parse(&dir.path().join("w.toml"), &text)
        };
        let c = config("rediss://redis.test:6380", "ca.pem").expect("valid");
        assert_eq!(
            c.cluster.expect("cluster").ca_file,
            Some(dir.path().join("ca.pem"))
        );
        for (url, file, want) in [
            (
                "rediss://h",
                "missing.pem",
                "cluster.ca_file: cannot read certificates",
            ),
            (
                "rediss://h",
                "empty.pem",
                "cluster.ca_file: no certificate found",
            ),
            (
                "redis://h",
                "ca.pem",
                "cluster.ca_file: `ca_file` has no effect with a redis:// URL",
            ),
        ] {
            let p = config(url, file).expect_err("refused").0;
            assert_eq!(p.len(), 1, "{p:#?}");
            let p = p[0].to_string();
            assert!(p.contains(want) && p.contains("w.toml:"), "{p}");
        }
    }

    #[test]
    fn a_route_scope_needs_the_cluster() {
        let p = problems(&format!("{MINIMAL}limit_scope = \"cluster\"\n"));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("route[0].limit_scope: there is no `[cluster]`"),
            "{}",
            p[0]
        );
        let c = parse(
            Path::new("w.toml"),
            &format!("[cluster]\nurl = \"redis://h\"\n{MINIMAL}limit_scope = \"local\"\n"),
        )
        .expect("valid");
        assert!(!c.routes[0].shared_limits);
    }
}
