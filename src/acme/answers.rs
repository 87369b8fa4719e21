//! What ACME publishes for the data path to read: the certificates issued
//! for a listener, and the answers to challenges in progress.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::sync::RwLocked;

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::AcmeError;

/// The ALPN protocol of the tls-alpn-01 challenge (RFC 8737).
pub(crate) const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// Certificates issued over ACME for one TLS listener, by name. Read on
/// every handshake (lock-free); written when a certificate arrives.
#[derive(Debug, Default)]
pub(crate) struct Issued(ArcSwap<HashMap<String, Arc<CertifiedKey>>>);

impl Issued {
    pub(crate) fn get(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        self.0.load().get(name).cloned()
    }

    /// A certificate for clients that sent no SNI or an unknown name: the
    /// first name's, so the answer does not change between handshakes.
    pub(crate) fn fallback(&self) -> Option<Arc<CertifiedKey>> {
        let map = self.0.load();
        map.keys().min().and_then(|k| map.get(k)).cloned()
    }

    /// Serve `key` for `name` from the next handshake on; connections
    /// already established keep the certificate they were given.
    pub(crate) fn install(&self, name: &str, key: Arc<CertifiedKey>) {
        self.0.rcu(|map| {
            let mut map = HashMap::clone(map);
            map.insert(name.to_string(), key.clone());
            map
        });
    }
}

/// Challenge answers, shared by every listener: http-01 tokens are unique
/// and a tls-alpn-01 answer is looked up by the name in the handshake.
/// Entries live only while an order is being validated.
#[derive(Debug, Default)]
pub struct Challenges {
    http01: RwLock<HashMap<String, Arc<str>>>,
    tls_alpn01: RwLock<HashMap<String, Arc<CertifiedKey>>>,
}

impl Challenges {
    /// The key authorization to answer `GET /.well-known/acme-challenge/<token>`.
    pub(crate) fn http01(&self, token: &str) -> Option<Arc<str>> {
        self.http01.read_locked().get(token).cloned()
    }

    /// The challenge certificate for a handshake offering only `acme-tls/1`.
    pub(crate) fn tls_alpn01(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        self.tls_alpn01
            .read_locked()
            .get(&name.to_ascii_lowercase())
            .cloned()
    }

    /// Publish an http-01 answer until the guard is dropped.
    pub(super) fn publish_http01(&self, token: &str, key_authorization: &str) -> Published<'_> {
        self.http01
            .write_locked()
            .insert(token.to_string(), key_authorization.into());
        Published {
            challenges: self,
            entry: Entry::Http01(token.to_string()),
        }
    }

    /// Publish a tls-alpn-01 certificate until the guard is dropped.
    pub(super) fn publish_tls_alpn01(&self, name: &str, key: Arc<CertifiedKey>) -> Published<'_> {
        self.tls_alpn01.write_locked().insert(name.to_string(), key);
        Published {
            challenges: self,
            entry: Entry::TlsAlpn01(name.to_string()),
        }
    }

    /// Answer another instance's http-01 challenge (see `shared`) until
    /// [`Challenges::withdraw_http01`].
    pub(super) fn mirror_http01(&self, token: &str, key_authorization: &str) {
        self.http01
            .write_locked()
            .insert(token.to_string(), key_authorization.into());
    }

    pub(super) fn withdraw_http01(&self, token: &str) {
        self.http01.write_locked().remove(token);
    }

    /// Answer another instance's tls-alpn-01 challenge with `key` until
    /// [`Challenges::withdraw_tls_alpn01`].
    pub(super) fn mirror_tls_alpn01(&self, name: &str, key: Arc<CertifiedKey>) {
        self.tls_alpn01.write_locked().insert(name.to_string(), key);
    }

    /// Withdraw `key` for `name` — only that one: this instance's own
    /// order may have published another for the name since.
    pub(super) fn withdraw_tls_alpn01(&self, name: &str, key: &Arc<CertifiedKey>) {
        let mut map = self.tls_alpn01.write_locked();
        if map.get(name).is_some_and(|k| Arc::ptr_eq(k, key)) {
            map.remove(name);
        }
    }
}

enum Entry {
    Http01(String),
    TlsAlpn01(String),
}

/// A published challenge answer; withdrawn when dropped, so an order that
/// fails or is cancelled leaves nothing behind.
pub(super) struct Published<'a> {
    challenges: &'a Challenges,
    entry: Entry,
}

impl Drop for Published<'_> {
    fn drop(&mut self) {
        match &self.entry {
            Entry::Http01(token) => {
                self.challenges.http01.write_locked().remove(token);
            }
            Entry::TlsAlpn01(name) => {
                self.challenges.tls_alpn01.write_locked().remove(name);
            }
        }
    }
}

/// The self-signed certificate RFC 8737 asks for: the name, and the
/// critical acmeIdentifier extension holding SHA-256 of the key
/// authorization.
pub(super) fn alpn_certificate(
    name: &str,
    digest: &[u8],
) -> Result<Arc<rustls::sign::CertifiedKey>, AcmeError> {
    let fail = |e: &dyn std::fmt::Display| AcmeError::Order(format!("challenge certificate: {e}"));
    let key = rcgen::KeyPair::generate().map_err(|e| fail(&e))?;
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).map_err(|e| fail(&e))?;
    params
        .custom_extensions
        .push(rcgen::CustomExtension::new_acme_identifier(digest));
    let cert = params.self_signed(&key).map_err(|e| fail(&e))?;
    let der_key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| fail(&e))?;
    let cert: CertificateDer<'static> = cert.der().clone();
    crate::pki::challenge_key(cert, der_key).map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_withdrawn_when_the_order_ends() {
        let c = Challenges::default();
        let (key, _, _) = crate::pki::self_signed(&["a.test"]).expect("cert");
        {
            let _h = c.publish_http01("tok", "tok.thumb");
            let _t = c.publish_tls_alpn01("a.test", key);
            assert_eq!(c.http01("tok").as_deref(), Some("tok.thumb"));
            assert!(c.tls_alpn01("A.test").is_some());
            assert!(c.http01("other").is_none());
        }
        assert!(c.http01("tok").is_none());
        assert!(c.tls_alpn01("a.test").is_none());
    }

    #[test]
    fn the_fallback_is_stable() {
        let issued = Issued::default();
        assert!(issued.fallback().is_none());
        let (b, _, _) = crate::pki::self_signed(&["b.test"]).expect("cert");
        let (a, _, _) = crate::pki::self_signed(&["a.test"]).expect("cert");
        issued.install("b.test", b);
        issued.install("a.test", a.clone());
        assert!(Arc::ptr_eq(&issued.fallback().expect("some"), &a));
    }
}
