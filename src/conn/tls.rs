//! TLS termination: picking a certificate by SNI from a set that can be
//! swapped while connections are being served (a reload or a renewal
//! replaces it; handshakes already under way keep the one they picked).

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::config::TlsSettings;
use crate::pki::{self, PkiError};

/// Picks a certificate by SNI: exact name, then wildcard, then the default
/// (the first configured certificate), so clients without SNI still connect.
#[derive(Debug)]
struct SniTable {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by the suffix after `*.`, e.g. `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
}

impl SniTable {
    fn new(settings: &TlsSettings) -> Option<Self> {
        let default = settings.certificates.first()?.key.clone();
        let mut exact = HashMap::new();
        let mut wildcard = HashMap::new();
        for c in &settings.certificates {
            for name in &c.names {
                match name.strip_prefix("*.") {
                    Some(suffix) => wildcard.entry(suffix.to_string()),
                    None => exact.entry(name.clone()),
                }
                .or_insert_with(|| c.key.clone());
            }
        }
        Some(SniTable {
            exact,
            wildcard,
            default,
        })
    }

    fn pick(&self, sni: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = sni.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        if let Some(k) = self.exact.get(&name) {
            return k.clone();
        }
        if let Some((_, parent)) = name.split_once('.')
            && let Some(k) = self.wildcard.get(parent)
        {
            return k.clone();
        }
        self.default.clone()
    }
}

/// The certificates of one TLS listener, swappable as a whole.
#[derive(Debug)]
pub struct Certificates(ArcSwap<SniTable>);

impl Certificates {
    /// Replace the certificate set; new handshakes use it at once.
    pub fn replace(&self, settings: &TlsSettings) -> Result<(), PkiError> {
        let table = SniTable::new(settings).ok_or(PkiError::NoCertificates)?;
        self.0.store(Arc::new(table));
        Ok(())
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load().pick(hello.server_name()))
    }
}

/// The acceptor for one TLS listener, and the handle that swaps its
/// certificates.
pub fn acceptor(settings: &TlsSettings) -> Result<(TlsAcceptor, Arc<Certificates>), PkiError> {
    let table = SniTable::new(settings).ok_or(PkiError::NoCertificates)?;
    let certificates = Arc::new(Certificates(ArcSwap::from_pointee(table)));
    let config = pki::server_config(certificates.clone())?;
    Ok((TlsAcceptor::from(config), certificates))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Certificate;

    fn cert(names: &[&str]) -> Certificate {
        let (key, names, _) = pki::self_signed(names).expect("generate");
        Certificate {
            cert_path: "mem".into(),
            key_path: "mem".into(),
            names,
            key,
        }
    }

    #[test]
    fn sni_picks_exact_then_wildcard_then_default() {
        let a = cert(&["a.test"]);
        let b = cert(&["b.test", "*.wild.test"]);
        let r = SniTable::new(&TlsSettings {
            certificates: vec![a.clone(), b.clone()],
        })
        .expect("resolver");
        assert!(Arc::ptr_eq(&r.pick(Some("B.test")), &b.key));
        assert!(Arc::ptr_eq(&r.pick(Some("x.wild.test")), &b.key));
        assert!(
            Arc::ptr_eq(&r.pick(Some("x.y.wild.test")), &a.key),
            "wildcards cover one label"
        );
        assert!(Arc::ptr_eq(&r.pick(Some("other.test")), &a.key));
        assert!(Arc::ptr_eq(&r.pick(None), &a.key));
    }

    #[test]
    fn a_replaced_set_serves_new_handshakes() {
        let a = cert(&["a.test"]);
        let b = cert(&["a.test"]);
        let (_, certs) = acceptor(&TlsSettings {
            certificates: vec![a.clone()],
        })
        .expect("acceptor");
        assert!(Arc::ptr_eq(&certs.0.load().pick(Some("a.test")), &a.key));
        certs
            .replace(&TlsSettings {
                certificates: vec![b.clone()],
            })
            .expect("replace");
        assert!(Arc::ptr_eq(&certs.0.load().pick(Some("a.test")), &b.key));
    }
}
