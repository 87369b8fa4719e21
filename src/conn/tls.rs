//! TLS termination: picking a certificate by SNI from a set that can be
//! swapped while connections are being served (a reload replaces the
//! files' certificates, ACME installs issued ones; handshakes already under
//! way keep the one they picked), and answering ACME's tls-alpn-01
//! challenge handshakes.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::acme::{ACME_TLS_ALPN, Challenges, Issued};
use crate::config::TlsSettings;
use crate::pki::{self, PkiError};

/// The certificate files' names: exact, then wildcard, then the default
/// (the first configured certificate), so clients without SNI connect.
#[derive(Debug, Default)]
struct SniTable {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by the suffix after `*.`, e.g. `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
}

impl SniTable {
    fn new(settings: &TlsSettings) -> Self {
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
        SniTable {
            exact,
            wildcard,
            default: settings.certificates.first().map(|c| c.key.clone()),
        }
    }

    /// A certificate whose names cover `name`.
    fn covering(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        if let Some(k) = self.exact.get(name) {
            return Some(k.clone());
        }
        let (_, parent) = name.split_once('.')?;
        self.wildcard.get(parent).cloned()
    }
}

/// The certificates of one TLS listener: from files (swappable as a
/// whole) and from ACME (installed name by name).
#[derive(Debug)]
pub struct Certificates {
    files: ArcSwap<SniTable>,
    issued: Arc<Issued>,
    challenges: Arc<Challenges>,
}

impl Certificates {
    /// Replace the files' certificates; new handshakes use them at once.
    pub(crate) fn replace(&self, settings: &TlsSettings) -> Result<(), PkiError> {
        if settings.certificates.is_empty() && settings.acme.is_none() {
            return Err(PkiError::NoCertificates);
        }
        self.files.store(Arc::new(SniTable::new(settings)));
        Ok(())
    }

    /// Where ACME installs this listener's certificates.
    pub(crate) fn issued(&self) -> &Arc<Issued> {
        &self.issued
    }

    /// The certificate for a handshake: an ACME challenge answer when the
    /// client offers only `acme-tls/1`; else an issued certificate for the
    /// name, a file's covering the name, the files' default, any issued
    /// one. `None` fails the handshake: a name ACME has not certified yet
    /// is refused rather than served a certificate no client trusts.
    fn pick(&self, sni: Option<&str>, acme_only: bool) -> Option<Arc<CertifiedKey>> {
        let name = sni.map(str::to_ascii_lowercase);
        if acme_only {
            return self.challenges.tls_alpn01(name.as_deref()?);
        }
        let files = self.files.load();
        if let Some(name) = &name {
            if let Some(k) = self.issued.get(name) {
                return Some(k);
            }
            if let Some(k) = files.covering(name) {
                return Some(k);
            }
        }
        files.default.clone().or_else(|| self.issued.fallback())
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme_only = hello.alpn().is_some_and(|mut protocols| {
            protocols.next() == Some(ACME_TLS_ALPN) && protocols.next().is_none()
        });
        self.pick(hello.server_name(), acme_only)
    }
}

/// The acceptor for one TLS listener, and the handle that swaps its
/// certificates. It offers ALPN `h2`, `http/1.1` and, last, `acme-tls/1`
/// (only a CA's validator asks for it alone).
pub fn acceptor(
    settings: &TlsSettings,
    challenges: Arc<Challenges>,
) -> Result<(TlsAcceptor, Arc<Certificates>), PkiError> {
    let certificates = Arc::new(Certificates {
        files: ArcSwap::from_pointee(SniTable::default()),
        issued: Arc::default(),
        challenges,
    });
    certificates.replace(settings)?;
    let mut config = pki::server_config(certificates.clone())?;
    if let Some(c) = Arc::get_mut(&mut config) {
        c.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
    }
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

    fn settings(certificates: Vec<Certificate>) -> TlsSettings {
        TlsSettings {
            certificates,
            acme: None,
        }
    }

    #[test]
    fn sni_picks_exact_then_wildcard_then_default() {
        let a = cert(&["a.test"]);
        let b = cert(&["b.test", "*.wild.test"]);
        let (_, r) =
            acceptor(&settings(vec![a.clone(), b.clone()]), Arc::default()).expect("resolver");
        let pick = |sni| r.pick(sni, false).expect("a certificate");
        assert!(Arc::ptr_eq(&pick(Some("B.test")), &b.key));
        assert!(Arc::ptr_eq(&pick(Some("x.wild.test")), &b.key));
        assert!(
            Arc::ptr_eq(&pick(Some("x.y.wild.test")), &a.key),
            "wildcards cover one label"
        );
        assert!(Arc::ptr_eq(&pick(Some("other.test")), &a.key));
        assert!(Arc::ptr_eq(&pick(None), &a.key));
        assert!(
            r.pick(Some("a.test"), true).is_none(),
            "an acme-tls/1 handshake never gets a served certificate"
        );
    }

    #[test]
    fn issued_certificates_win_for_their_names_and_unissued_names_are_refused() {
        let file = cert(&["a.test"]);
        let acme_only = TlsSettings {
            certificates: vec![],
            acme: None,
        };
        assert!(
            acceptor(&acme_only, Arc::default()).is_err(),
            "no certificates and no acme"
        );
        let (_, certs) = acceptor(&settings(vec![file.clone()]), Arc::default()).expect("acceptor");
        let issued = cert(&["a.test"]);
        certs.issued().install("a.test", issued.key.clone());
        assert!(Arc::ptr_eq(
            &certs.pick(Some("a.test"), false).expect("a"),
            &issued.key
        ));
        assert!(Arc::ptr_eq(
            &certs.pick(Some("b.test"), false).expect("b"),
            &file.key
        ));

        // A listener whose only certificates come from ACME: nothing before
        // issuance, then the issued one for every handshake.
        let certs = Certificates {
            files: ArcSwap::from_pointee(SniTable::default()),
            issued: Arc::default(),
            challenges: Arc::default(),
        };
        assert!(certs.pick(Some("a.test"), false).is_none());
        assert!(certs.pick(None, false).is_none());
        certs.issued().install("a.test", issued.key.clone());
        assert!(certs.pick(Some("a.test"), false).is_some());
        assert!(certs.pick(None, false).is_some(), "no SNI: the issued one");
    }

    #[test]
    fn a_replaced_set_serves_new_handshakes() {
        let a = cert(&["a.test"]);
        let b = cert(&["a.test"]);
        let (_, certs) = acceptor(&settings(vec![a.clone()]), Arc::default()).expect("acceptor");
        let pick = |c: &Certificates| c.pick(Some("a.test"), false).expect("a certificate");
        assert!(Arc::ptr_eq(&pick(&certs), &a.key));
        certs.replace(&settings(vec![b.clone()])).expect("replace");
        assert!(Arc::ptr_eq(&pick(&certs), &b.key));
    }
}
