//! `[listener.tls.acme]`: certificates obtained and renewed over ACME.

use std::net::IpAddr;

use super::keys::acme::*;
use super::keys::external_account as account;
use super::*;

/// The `acme` table of a TLS listener. Names default to every exact host
/// the routes serve; a wildcard needs DNS-01, which weir does not do.
pub(super) fn acme_settings(
    a: &Section<'_, '_>,
    routes: &[RouteConfig],
    has_plain: bool,
) -> Option<AcmeSettings> {
    let mut ok = true;
    let directory = match a.string(&DIRECTORY) {
        None => defaults::ACME_DIRECTORY.to_string(),
        Some(d) => match d.value.as_str() {
            "letsencrypt" => defaults::ACME_DIRECTORY.to_string(),
            "letsencrypt-staging" => defaults::ACME_STAGING_DIRECTORY.to_string(),
            url => match url.parse::<http::Uri>() {
                Ok(u) if u.scheme_str() == Some("https") && u.host().is_some() => url.to_string(),
                _ => {
                    d.problem(
                        a.doc(),
                        format!("`{url}` is not an https:// URL"),
                        Some(
                            "use the CA's ACME directory URL, or \"letsencrypt\" / \"letsencrypt-staging\""
                                .into(),
                        ),
                    );
                    ok = false;
                    String::new()
                }
            },
        },
    };
    let ca_file = path_opt(a, &CA_FILE);
    if let Some(f) = &ca_file
        && let Err(e) = crate::pki::load_ca_file(&f.value)
    {
        f.problem(
            a.doc(),
            e.to_string(),
            Some("point `ca_file` at a PEM file of CA certificates".into()),
        );
        ok = false;
    }
    let email = a.string(&EMAIL).and_then(|e| {
        let valid = e.value.split_once('@').is_some_and(|(user, domain)| {
            !user.is_empty() && domain.contains('.') && !e.value.contains(char::is_whitespace)
        });
        if !valid {
            e.problem(
                a.doc(),
                format!("`{}` is not an email address", e.value),
                Some("use an address like \"ops@example.com\", or leave `email` out".into()),
            );
            ok = false;
        }
        valid.then_some(e.value)
    });
    let challenge = match a.string(&CHALLENGE) {
        None => AcmeChallenge::TlsAlpn01,
        Some(c) => match c.value.as_str() {
            "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
            "http-01" => AcmeChallenge::Http01,
            other => {
                let why = if other == "dns-01" {
                    "weir does not answer dns-01 challenges".to_string()
                } else {
                    format!("unknown challenge `{other}`")
                };
                c.problem(
                    a.doc(),
                    why,
                    Some("use \"tls-alpn-01\" (the default) or \"http-01\"".into()),
                );
                ok = false;
                AcmeChallenge::TlsAlpn01
            }
        },
    };
    if challenge == AcmeChallenge::Http01 && !has_plain {
        a.problem(
            CHALLENGE.name,
            "http-01 is answered on a plain HTTP listener, and there is none",
            Some(
                "add a `[[listener]]` without `tls` (port 80 for a public CA), or use \"tls-alpn-01\""
                    .into(),
            ),
        );
        ok = false;
    }
    let names = match a.string_list(&NAMES) {
        Some(list) => {
            let mut names = Vec::new();
            for n in list {
                match acme_name(&n.value) {
                    Ok(name) => names.push(name),
                    Err(why) => {
                        n.problem(a.doc(), why, Some("list exact DNS names, like \"www.example.com\"; serve a wildcard from a certificate file".into()));
                        ok = false;
                    }
                }
            }
            names
        }
        None => {
            // Every exact host of every route; wildcards and IPs are skipped.
            let mut names: Vec<String> = routes
                .iter()
                .flat_map(|r| &r.hosts)
                .filter_map(|h| match h {
                    HostPattern::Exact(n) => acme_name(n).ok(),
                    HostPattern::Wildcard(_) => None,
                })
                .collect();
            names.sort();
            names.dedup();
            names
        }
    };
    if ok && names.is_empty() {
        a.problem(
            NAMES.name,
            "no host names to certify: no route has an exact `host`",
            Some("add `names = [\"www.example.com\"]`, or give routes exact hosts".into()),
        );
        ok = false;
    }
    let state_dir = match a.string(&STATE_DIR) {
        Some(d) => a.doc().dir_at(d.span.start).join(&d.value),
        None => PathBuf::from(STATE_DIR.text()),
    };
    if let Err(e) = writable_dir(&state_dir) {
        a.problem(
            STATE_DIR.name,
            format!("{} is not a writable directory: {e}", state_dir.display()),
            Some("create it for the user weir runs as, or point `state_dir` elsewhere".into()),
        );
        ok = false;
    }
    let external_account = a
        .table(&EXTERNAL_ACCOUNT)
        .and_then(|e| external_account(&e));
    if a.raw_present(&EXTERNAL_ACCOUNT) && external_account.is_none() {
        ok = false;
    }
    let retry_base = a.duration(&RETRY_BASE).unwrap_or(RETRY_BASE.duration());
    ok.then_some(AcmeSettings {
        directory,
        ca_file: ca_file.map(|f| f.value),
        email,
        names,
        challenge,
        state_dir,
        external_account,
        retry_base,
    })
}

/// A name a CA can certify over tls-alpn-01 or http-01, lower-case.
fn acme_name(raw: &str) -> Result<String, String> {
    let name = raw.trim_end_matches('.').to_ascii_lowercase();
    if name.starts_with("*.") {
        return Err(format!(
            "`{raw}` is a wildcard: wildcard certificates need the dns-01 challenge, which weir does not answer"
        ));
    }
    if name.parse::<IpAddr>().is_ok() {
        return Err(format!("`{raw}` is an IP address, not a DNS name"));
    }
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.len() > 253 || !name.split('.').all(valid_label) {
        return Err(format!("`{raw}` is not a valid DNS name"));
    }
    Ok(name)
}

/// Create the directory if needed (mode 0700) and prove a file can be
/// written in it, as weir will when a certificate arrives.
fn writable_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let probe = dir.join(format!(".weir-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

fn external_account(e: &Section<'_, '_>) -> Option<ExternalAccount> {
    let key_id = e.string(&account::KEY_ID);
    if key_id.is_none() {
        e.problem(
            account::KEY_ID.name,
            "missing",
            Some("add the key id (kid) the CA gave you".into()),
        );
    }
    let key = match secrets::secret(
        e,
        &account::HMAC_KEY_ENV,
        &account::HMAC_KEY_FILE,
        "the HMAC key",
    ) {
        Ok(Some(key)) => Some(key),
        Ok(None) => {
            e.problem(
                account::HMAC_KEY_ENV.name,
                "missing",
                Some(
                    "set `hmac_key_env` or `hmac_key_file` to the HMAC key the CA gave you".into(),
                ),
            );
            None
        }
        Err(secrets::Reported) => None,
    };
    let (key, at) = key?;
    use base64::Engine;
    if base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(key.0.trim_end_matches('='))
        .is_err()
    {
        at.problem(
            e.doc(),
            "the HMAC key is not base64url",
            Some("use the key exactly as the CA printed it".into()),
        );
        return None;
    }
    Some(ExternalAccount {
        key_id: key_id?.value,
        hmac_key: key,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;

    /// A TLS listener with only an `acme` table (plus `acme_extra`), and
    /// routes for `hosts`.
    fn acme_config(dir: &Path, acme_extra: &str, hosts: &[&str], plain: bool) -> String {
        let mut t = String::new();
        if plain {
            t.push_str("[[listener]]\naddress = \"127.0.0.1:0\"\n");
        }
        t.push_str(&format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n[listener.tls.acme]\nstate_dir = \"{}\"\n{acme_extra}\n",
            dir.display()
        ));
        for h in hosts {
            t.push_str(&format!(
                "[[route]]\nhost = \"{h}\"\nupstream = \"http://127.0.0.1:1\"\n"
            ));
        }
        t
    }

    fn acme_of(c: &Config) -> &AcmeSettings {
        c.listeners
            .iter()
            .find_map(|l| l.tls.as_ref()?.acme.as_ref())
            .expect("an acme listener")
    }

    #[test]
    fn acme_names_default_to_the_routes_exact_hosts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = acme_config(
            dir.path(),
            "",
            &[
                "b.example.com",
                "A.example.com",
                "*.wild.example.com",
                "10.0.0.1",
            ],
            false,
        );
        let c = parse(Path::new("w.toml"), &text).expect("valid");
        let acme = acme_of(&c);
        assert_eq!(acme.names, ["a.example.com", "b.example.com"]);
        assert_eq!(acme.directory, defaults::ACME_DIRECTORY);
        assert_eq!(acme.challenge, AcmeChallenge::TlsAlpn01);
        assert_eq!(acme.retry_base, RETRY_BASE.duration());
        let tls = c.listeners[0].tls.as_ref().expect("tls");
        assert!(tls.certificates.is_empty(), "acme alone is enough");
    }

    #[test]
    fn acme_problems_are_all_reported_with_their_fixes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blocker = dir.path().join("a-file");
        std::fs::write(&blocker, "").expect("write");
        let text = acme_config(
            &blocker.join("state"),
            "directory = \"http://ca.example/dir\"\nemail = \"nobody\"\nnames = [\"*.example.com\", \"ok.example.com\", \"bad_name.example.com\"]\nchallenge = \"http-01\"\nexternal_account = { key_id = \"kid\", hmac_key_env = \"WEIR_TEST_SURELY_UNSET_VARIABLE\" }",
            &[],
            false,
        );
        let p = problems(&text).join("\n");
        for want in [
            "tls.acme.directory",
            "not an https:// URL",
            "tls.acme.email",
            "not an email address",
            "wildcard certificates need the dns-01 challenge",
            "`bad_name.example.com` is not a valid DNS name",
            "http-01 is answered on a plain HTTP listener, and there is none",
            "tls.acme.state_dir",
            "is not a writable directory",
            "WEIR_TEST_SURELY_UNSET_VARIABLE",
        ] {
            assert!(p.contains(want), "missing {want:?} in:\n{p}");
        }
    }

    #[test]
    fn acme_without_names_or_with_dns_01_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = problems(&acme_config(dir.path(), "", &["*.example.com"], false)).join("\n");
        assert!(p.contains("no host names to certify"), "{p}");
        let p = problems(&acme_config(
            dir.path(),
            "challenge = \"dns-01\"",
            &["a.example.com"],
            true,
        ))
        .join("\n");
        assert!(p.contains("weir does not answer dns-01"), "{p}");
    }

    #[test]
    fn acme_http_01_with_a_plain_listener_and_eab_is_accepted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("hmac");
        std::fs::write(&key, "c2VjcmV0LWhtYWMta2V5\n").expect("write");
        let text = acme_config(
            &dir.path().join("state"),
            &format!(
                "challenge = \"http-01\"\ndirectory = \"letsencrypt-staging\"\nexternal_account = {{ key_id = \"kid-1\", hmac_key_file = \"{}\" }}",
                key.display()
            ),
            &["a.example.com"],
            true,
        );
        let c = parse(Path::new("w.toml"), &text).expect("valid");
        let acme = acme_of(&c);
        assert_eq!(acme.challenge, AcmeChallenge::Http01);
        assert_eq!(acme.directory, defaults::ACME_STAGING_DIRECTORY);
        let eab = acme.external_account.as_ref().expect("eab");
        assert_eq!(eab.key_id, "kid-1");
        assert_eq!(eab.hmac_key.0, "c2VjcmV0LWhtYWMta2V5");
        assert!(dir.path().join("state").is_dir(), "the state dir is made");
    }
}
