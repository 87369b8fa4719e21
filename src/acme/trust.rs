//! Whether a certificate found in the fleet's Redis may be served: one
//! written there by anyone but an instance that ordered it is not.
//!
//! Anyone who can write the key prefix can put a certificate there, so
//! parsing, pairing with its key and covering the name are not enough. It
//! must verify as a TLS client would verify it — its chain to the roots
//! the issuing CA's certificates chain to (the web PKI's, compiled in, plus
//! the listener's `acme.ca_file`, which for a private CA holds its roots),
//! for the name, now, for server authentication — and its lifetime
//! (notAfter − notBefore) must be at most [`MAX_LIFETIME`]: no CA weir
//! orders from issues longer ones, so a longer one was not ordered, and
//! left in place it would never be renewed (decision 068).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::{ServerName, UnixTime};

use super::store::Stored;

/// The longest lifetime of a shared certificate: 398 days, the CA/Browser
/// Forum's limit for publicly trusted TLS certificates issued until March
/// 2026 (those issued since are shorter; Let's Encrypt's are 90 days).
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(398 * 86_400);

/// Why `s` may not be served for `name` (`None`: it may).
pub(crate) fn refuse(s: &Stored, name: &str, ca_file: Option<&Path>) -> Option<String> {
    let lifetime = s
        .not_after
        .duration_since(s.not_before)
        .unwrap_or(Duration::ZERO);
    if lifetime > MAX_LIFETIME {
        return Some(format!(
            "a lifetime of {} days, over the {} days any CA issues",
            lifetime.as_secs() / 86_400,
            MAX_LIFETIME.as_secs() / 86_400
        ));
    }
    let roots = match crate::pki::client_roots(ca_file) {
        Ok(r) => r,
        Err(e) => return Some(format!("no roots to verify it against: {e}")),
    };
    let verifier =
        match WebPkiServerVerifier::builder_with_provider(Arc::new(roots), crate::pki::provider())
            .build()
        {
            Ok(v) => v,
            Err(e) => return Some(format!("no roots to verify it against: {e}")),
        };
    let Some((leaf, intermediates)) = s.key.cert.split_first() else {
        return Some("no certificate".into());
    };
    let server = match ServerName::try_from(name) {
        Ok(n) => n,
        Err(e) => return Some(format!("{name}: {e}")),
    };
    verifier
        .verify_server_cert(leaf, intermediates, &server, &[], UnixTime::now())
        .err()
        .map(|e| format!("its chain does not verify to the CA's roots: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate for `a.test` valid `days` from yesterday, signed by
    /// itself or by a CA; the CA's root is written to the returned file.
    fn made(days: u64, by_ca: bool) -> (Stored, tempfile::NamedTempFile) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .expect("after 1970");
        let start = rcgen::date_time_ymd(1970, 1, 1) + since_epoch - time_days(1);
        let mut params = CertificateParams::new(vec!["a.test".to_string()]).expect("params");
        params.not_before = start;
        params.not_after = start + time_days(days);
        let key = KeyPair::generate().expect("key");
        let mut ca_params = CertificateParams::new(Vec::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().expect("ca key");
        let ca = ca_params.self_signed(&ca_key).expect("ca");
        let cert = if by_ca {
            let issuer = Issuer::from_params(&ca_params, &ca_key);
            params.signed_by(&key, &issuer).expect("signed")
        } else {
            params.self_signed(&key).expect("self-signed")
        };
        let pem = format!("{}{}", cert.pem(), key.serialize_pem());
        let roots = tempfile::NamedTempFile::new().expect("roots file");
        std::fs::write(roots.path(), ca.pem()).expect("write roots");
        let s = super::super::store::parse(pem.as_bytes(), "a.test").expect("parse");
        (s, roots)
    }

    fn time_days(days: u64) -> std::time::Duration {
        std::time::Duration::from_secs(days * 86_400)
    }

    #[test]
    fn a_shared_certificate_must_chain_to_the_roots_and_live_at_most_398_days() {
        let (s, roots) = made(90, true);
        assert_eq!(
            refuse(&s, "a.test", Some(roots.path())),
            None,
            "issued by the CA"
        );
        let why = refuse(&s, "a.test", None).expect("not a web PKI root");
        assert!(why.contains("does not verify"), "{why}");
        let why = refuse(&s, "b.test", Some(roots.path())).expect("another name");
        assert!(why.contains("does not verify"), "{why}");
        let (s, roots) = made(90, false);
        let why = refuse(&s, "a.test", Some(roots.path())).expect("self-signed");
        assert!(why.contains("does not verify"), "{why}");
        let (s, roots) = made(400, true);
        let why = refuse(&s, "a.test", Some(roots.path())).expect("too long");
        assert!(why.contains("lifetime of 400 days"), "{why}");
        let (s, roots) = made(398, true);
        assert_eq!(
            refuse(&s, "a.test", Some(roots.path())),
            None,
            "398 days is allowed"
        );
    }
}
