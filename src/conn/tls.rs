//! TLS termination: certificate loading, SNI selection, and the rustls
//! server configuration (TLS 1.2 and 1.3 only, ALPN `h2` then `http/1.1`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::TlsSettings;

/// The crypto provider weir uses everywhere (ring: pure Rust + asm, no cmake).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Load a PEM certificate chain and its private key, check they belong
/// together, and return the DNS names the leaf certificate is valid for.
pub fn load_certificate(
    cert_path: &Path,
    key_path: &Path,
) -> Result<(Arc<CertifiedKey>, Vec<String>), String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", cert_path.display()))?;
    if chain.is_empty() {
        return Err(format!("no certificate found in {}", cert_path.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| format!("cannot read a private key from {}: {e}", key_path.display()))?;
    certified_key(chain, key)
        .map_err(|e| format!("{} and {}: {e}", cert_path.display(), key_path.display()))
}

/// Build a [`CertifiedKey`] from DER parts (also used for the demo's
/// generated certificate).
pub fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<(Arc<CertifiedKey>, Vec<String>), String> {
    let names = {
        let leaf = webpki::EndEntityCert::try_from(&chain[0])
            .map_err(|e| format!("the certificate cannot be parsed: {e}"))?;
        leaf.valid_dns_names()
            .map(|n| n.to_ascii_lowercase())
            .collect()
    };
    let certified = CertifiedKey::from_der(chain, key, &provider())
        .map_err(|e| format!("the key does not fit the certificate: {e}"))?;
    Ok((Arc::new(certified), names))
}

/// Picks a certificate by SNI: exact name, then wildcard, then the default
/// (the first configured certificate), so clients without SNI still connect.
#[derive(Debug)]
struct SniResolver {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by the suffix after `*.`, e.g. `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
}

impl SniResolver {
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
        Some(SniResolver {
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

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pick(hello.server_name()))
    }
}

/// The rustls configuration for one TLS listener.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<rustls::ServerConfig>, String> {
    let resolver = SniResolver::new(settings).ok_or("a TLS listener needs a certificate")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A self-signed certificate for the given names (used by `weir demo` and tests).
pub fn self_signed(names: &[&str]) -> Result<(Arc<CertifiedKey>, Vec<String>, String), String> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let generated = rcgen::generate_simple_self_signed(names).map_err(|e| e.to_string())?;
    let pem = generated.cert.pem();
    let chain = vec![generated.cert.der().clone()];
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
        .map_err(|e| e.to_string())?;
    let (certified, names) = certified_key(chain, key)?;
    Ok((certified, names, pem))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Certificate;

    fn cert(names: &[&str]) -> Certificate {
        let (key, names, _) = self_signed(names).expect("generate");
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
        let r = SniResolver::new(&TlsSettings {
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
    fn mismatched_key_is_rejected() {
        let (_, _, pem_a) = self_signed(&["a.test"]).expect("a");
        let other = rcgen::generate_simple_self_signed(vec!["b.test".to_string()]).expect("b");
        let dir = tempfile::tempdir().expect("tempdir");
        let c = dir.path().join("c.pem");
        let k = dir.path().join("k.pem");
        std::fs::write(&c, pem_a).expect("write");
        std::fs::write(&k, other.signing_key.serialize_pem()).expect("write");
        let err = load_certificate(&c, &k).expect_err("mismatch");
        assert!(err.contains("does not fit"), "{err}");
    }
}
