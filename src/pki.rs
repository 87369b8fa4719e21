//! Certificates and keys: the one place that reads PEM files, pairs a chain
//! with its key, generates self-signed certificates, and builds the rustls
//! configurations weir uses on either side of a connection.
//!
//! A leaf: it knows nothing of listeners, routes or requests, so config
//! validation, the TLS listener and the upstream client all use it without
//! importing each other. Everything runs on rustls' `ring` provider (pure
//! Rust plus assembly, nothing to build with cmake) and TLS 1.2/1.3 only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate, key or CA file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot read certificates from {}: {source}", path.display())]
    ReadCertificates {
        path: PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    #[error("no certificate found in {}", .0.display())]
    NoCertificate(PathBuf),
    #[error("cannot read a private key from {}: {source}", path.display())]
    ReadKey {
        path: PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    #[error("the certificate cannot be parsed: {0}")]
    Unparsable(webpki::Error),
    #[error("the key does not fit the certificate: {0}")]
    KeyMismatch(rustls::Error),
    #[error("{} and {}: {source}", cert.display(), key.display())]
    Pair {
        cert: PathBuf,
        key: PathBuf,
        source: Box<PkiError>,
    },
    #[error("{}: not a usable CA certificate: {source}", path.display())]
    BadCa {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("a TLS listener needs at least one certificate")]
    NoCertificates,
    #[error("cannot generate a certificate: {0}")]
    Generate(String),
    #[error("TLS setup failed: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A certificate chain with its key, and the DNS names it is valid for.
pub(crate) type LoadedCertificate = (Arc<CertifiedKey>, Vec<String>);

/// The crypto provider weir uses everywhere: aws-lc-rs, for TLS, signing
/// keys and digests alike (docs/decisions/ says why this one, and only one).
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

pub(crate) const VERSIONS: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// Every certificate in a PEM file; at least one.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| PkiError::ReadCertificates {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(PkiError::NoCertificate(path.to_path_buf()));
    }
    Ok(certs)
}

/// Load a PEM certificate chain and its private key, check they belong
/// together, and return the DNS names the leaf certificate is valid for.
pub fn load_certificate(cert_path: &Path, key_path: &Path) -> Result<LoadedCertificate, PkiError> {
    let (chain, key) = load_pair(cert_path, key_path)?;
    certified_key(chain, key)
}

/// A PEM certificate chain and its private key, checked to belong
/// together, as a client shows them (`ClientConfig::with_client_auth_cert`).
pub(crate) fn load_pair(
    cert_path: &Path,
    key_path: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), PkiError> {
    let chain = read_chain(cert_path)?;
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|source| PkiError::ReadKey {
        path: key_path.to_path_buf(),
        source,
    })?;
    certified_key(chain.clone(), key.clone_key()).map_err(|e| PkiError::Pair {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        source: Box::new(e),
    })?;
    Ok((chain, key))
}

/// Pair a DER chain (leaf first, non-empty) with its key.
pub(crate) fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<LoadedCertificate, PkiError> {
    let Some(leaf) = chain.first() else {
        return Err(PkiError::Unparsable(webpki::Error::BadDer));
    };
    let names = webpki::EndEntityCert::try_from(leaf)
        .map_err(PkiError::Unparsable)?
        .valid_dns_names()
        .map(|n| n.to_ascii_lowercase())
        .collect();
    let certified =
        CertifiedKey::from_der(chain, key, &provider()).map_err(PkiError::KeyMismatch)?;
    Ok((Arc::new(certified), names))
}

/// Pair a certificate with its key without parsing the certificate: for
/// ACME's tls-alpn-01 answer, whose critical acmeIdentifier extension the
/// web PKI parser rightly refuses. Only a CA's validator ever sees it.
pub(crate) fn challenge_key(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, PkiError> {
    let signer = provider()
        .key_provider
        .load_private_key(key)
        .map_err(PkiError::KeyMismatch)?;
    Ok(Arc::new(CertifiedKey::new(vec![cert], signer)))
}

/// A self-signed certificate for `names` (the demo's, and tests'); also
/// returns the certificate as PEM so a client can trust it.
pub(crate) fn self_signed(
    names: &[&str],
) -> Result<(Arc<CertifiedKey>, Vec<String>, String), PkiError> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let generated =
        rcgen::generate_simple_self_signed(names).map_err(|e| PkiError::Generate(e.to_string()))?;
    let pem = generated.cert.pem();
    let chain = vec![generated.cert.der().clone()];
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
        .map_err(|e| PkiError::Generate(e.to_string()))?;
    let (certified, names) = certified_key(chain, key)?;
    Ok((certified, names, pem))
}

/// A certificate's notAfter in Unix seconds (`None`: not a certificate
/// this parser reads), for the dashboard.
pub(crate) fn not_after_unix(der: &[u8]) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(cert.tbs_certificate.validity.not_after.timestamp())
}

/// Read a PEM file of CA certificates.
pub(crate) fn load_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    read_chain(path)
}

/// A TLS server configuration whose certificates come from `resolver`,
/// offering ALPN `h2` then `http/1.1`, resuming sessions with stateless
/// tickets.
///
/// Tickets rather than a server-side cache: a returning client skips the
/// certificate signature and key exchange however many clients there are
/// (a cache of N sessions serves only the last N), and weir holds nothing
/// per session. The ticketer rotates its key every 6 hours and accepts
/// the previous one; keys live in memory only, so after a restart or an
/// upgrade clients do one full handshake again. nginx, HAProxy and Caddy
/// issue tickets by default too.
pub(crate) fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
) -> Result<Arc<rustls::ServerConfig>, PkiError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    Ok(Arc::new(config))
}

/// A TLS client configuration trusting the web PKI roots (compiled in, so
/// the result does not depend on the host's CA bundle) plus `ca_file`.
pub(crate) fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, PkiError> {
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)?
        .with_root_certificates(client_roots(ca_file)?)
        .with_no_client_auth())
}

/// The roots [`client_config`] trusts: the web PKI's and `ca_file`'s.
pub(crate) fn client_roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, PkiError> {
    let mut roots = rustls::RootCertStore::empty();
    // The roots crate is kept to whole certificates (the Redis client
    // needs them as PEM); one that rustls cannot parse is left out.
    roots.add_parsable_certificates(webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().cloned());
    if let Some(path) = ca_file {
        for cert in load_ca_file(path)? {
            roots.add(cert).map_err(|source| PkiError::BadCa {
                path: path.to_path_buf(),
                source,
            })?;
        }
    }
    Ok(roots)
}

/// The roots [`client_config`] trusts (the web PKI's, plus `ca_file`'s,
/// checked the same way) as PEM, for a client that takes extra roots only
/// as PEM and only in place of its own (the Redis client's `root_cert`).
pub(crate) fn client_roots_pem(ca_file: Option<&Path>) -> Result<Vec<u8>, PkiError> {
    client_config(ca_file)?;
    let extra = match ca_file {
        Some(path) => load_ca_file(path)?,
        None => Vec::new(),
    };
    let mut pem = String::new();
    for cert in webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .chain(&extra)
    {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        // Base64 is ASCII: every 64-byte chunk is a str.
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    Ok(pem.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatched_key_is_rejected_naming_both_files() {
        let (_, _, pem_a) = self_signed(&["a.test"]).expect("a");
        let other = rcgen::generate_simple_self_signed(vec!["b.test".to_string()]).expect("b");
        let dir = tempfile::tempdir().expect("tempdir");
        let c = dir.path().join("c.pem");
        let k = dir.path().join("k.pem");
        std::fs::write(&c, pem_a).expect("write");
        std::fs::write(&k, other.signing_key.serialize_pem()).expect("write");
        let err = load_certificate(&c, &k).expect_err("mismatch").to_string();
        assert!(err.contains("does not fit"), "{err}");
        assert!(err.contains("c.pem and") && err.contains("k.pem"), "{err}");
    }

    #[test]
    fn the_roots_as_pem_are_the_web_pkis_and_the_ca_files() {
        let (_, _, ca) = self_signed(&["ca.test"]).expect("ca");
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("ca.pem");
        std::fs::write(&p, &ca).expect("write");
        let pem = client_roots_pem(Some(&p)).expect("roots");
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .expect("pem");
        assert_eq!(
            certs.len(),
            webpki_root_certs::TLS_SERVER_ROOT_CERTS.len() + 1
        );
        assert_eq!(certs.last(), load_ca_file(&p).expect("ca").first());
        assert_eq!(
            certs.first(),
            webpki_root_certs::TLS_SERVER_ROOT_CERTS.first()
        );
    }

    #[test]
    fn an_empty_ca_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("ca.pem");
        std::fs::write(&p, "").expect("write");
        assert!(matches!(load_ca_file(&p), Err(PkiError::NoCertificate(_))));
    }
}
