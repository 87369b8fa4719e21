//! TLS to PostgreSQL with rustls on weir's one crypto provider (aws-lc-rs):
//! the driver's `MakeTlsConnect`, built from `sslmode` (docs/decisions/093).
//!
//! `require` encrypts without checking the certificate, as libpq does
//! (handshake signatures are still checked, so the key exchange is with
//! the holder of the certificate's key); `verify-ca` checks the chain
//! against `sslrootcert`'s CAs only; `verify-full` checks the chain
//! against the web PKI roots and `sslrootcert`, and the host name. With
//! `sslcert`/`sslkey` weir shows its own certificate. The connection
//! gives SCRAM its `tls-server-end-point` binding, so a password exchange
//! over `require` cannot be relayed by a man in the middle once the
//! server (or `channel_binding=require`) asks for it (decision 104).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Socket;
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::config::{PostgresTls, PostgresUrl};
use crate::pki::PkiError;

/// The ALPN PostgreSQL 17 checks for (and earlier versions ignore).
const ALPN: &[u8] = b"postgresql";

/// Makes a TLS connection per connection attempt, from one client config
/// (none for `sslmode=disable`, when the driver never asks for one).
#[derive(Clone)]
pub(super) struct Tls(Option<Arc<rustls::ClientConfig>>);

impl Tls {
    /// The connector `url` asks for, and the mode the driver is told.
    pub(super) fn new(url: &PostgresUrl) -> Result<(Tls, SslMode), PkiError> {
        let mode = match &url.tls {
            PostgresTls::Disable => return Ok((Tls(None), SslMode::Disable)),
            PostgresTls::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        };
        let provider = crate::pki::provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(crate::pki::VERSIONS)?;
        let builder = match &url.tls {
            PostgresTls::VerifyFull { root_cert } => {
                builder.with_root_certificates(crate::pki::client_roots(root_cert.as_deref())?)
            }
            PostgresTls::VerifyCa { root_cert } => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in crate::pki::load_ca_file(root_cert)? {
                    roots.add(cert)?;
                }
                let chain = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider.clone(),
                )
                .build()
                .map_err(|e| PkiError::Generate(e.to_string()))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Lenient {
                        provider,
                        chain: Some(chain),
                    }))
            }
            _ => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Lenient {
                    provider,
                    chain: None,
                })),
        };
        let mut config = match &url.client_cert {
            Some((cert, key)) => {
                let (chain, key) = crate::pki::load_pair(cert, key)?;
                builder.with_client_auth_cert(chain, key)?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok((Tls(Some(Arc::new(config))), mode))
    }
}

impl MakeTlsConnect<Socket> for Tls {
    type Stream = Stream;
    type TlsConnect = Connect;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Connect, Self::Error> {
        Ok(Connect(match &self.0 {
            Some(config) => Some((config.clone(), ServerName::try_from(domain.to_string())?)),
            None => None,
        }))
    }
}

/// One connection's handshake to come (none with `sslmode=disable`).
pub(super) struct Connect(Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>);

impl TlsConnect<Socket> for Connect {
    type Stream = Stream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Stream>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        Box::pin(async move {
            let Some((config, name)) = self.0 else {
                return Err(io::Error::other("TLS is off (`sslmode=disable`)"));
            };
            tokio_rustls::TlsConnector::from(config)
                .connect(name, socket)
                .await
                .map(Stream)
        })
    }
}

/// The encrypted connection.
pub(super) struct Stream(tokio_rustls::client::TlsStream<Socket>);

impl tokio_postgres::tls::TlsStream for Stream {
    /// `tls-server-end-point` (RFC 5929): the server certificate's hash,
    /// which SCRAM-SHA-256-PLUS mixes into the proof, so the password
    /// exchange only succeeds on a connection to the certificate's
    /// holder. None for a certificate whose hash it cannot name (then
    /// plain SCRAM, unless `channel_binding=require`).
    fn channel_binding(&self) -> ChannelBinding {
        let cert = self
            .0
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first());
        match cert.and_then(|c| end_point(c)) {
            Some(hash) => ChannelBinding::tls_server_end_point(hash),
            None => ChannelBinding::none(),
        }
    }
}

/// The `tls-server-end-point` binding of a certificate: its DER hashed
/// with its signature's hash, SHA-256 for MD5 and SHA-1 (RFC 5929 §4.1);
/// `None` for a signature without one (Ed25519, RSA-PSS), as libpq.
fn end_point(cert: &CertificateDer<'_>) -> Option<Vec<u8>> {
    use aws_lc_rs::digest;
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let algorithm = match parsed.signature_algorithm.algorithm.to_id_string().as_str() {
        // md5WithRSA, sha1WithRSA, sha256WithRSA, ecdsa-with-SHA1, -SHA256
        "1.2.840.113549.1.1.4"
        | "1.2.840.113549.1.1.5"
        | "1.2.840.113549.1.1.11"
        | "1.2.840.10045.4.1"
        | "1.2.840.10045.4.3.2" => &digest::SHA256,
        // sha384WithRSA, ecdsa-with-SHA384
        "1.2.840.113549.1.1.12" | "1.2.840.10045.4.3.3" => &digest::SHA384,
        // sha512WithRSA, ecdsa-with-SHA512
        "1.2.840.113549.1.1.13" | "1.2.840.10045.4.3.4" => &digest::SHA512,
        _ => return None,
    };
    Some(digest::digest(algorithm, cert.as_ref()).as_ref().to_vec())
}

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The verifier of `sslmode=require` (any certificate) and of `verify-ca`
/// (the chain checked as `verify-full` does, against `sslrootcert`'s CAs,
/// and the host name not: a server reached by an address its certificate
/// does not name); the handshake signatures checked with the provider's
/// algorithms either way.
#[derive(Debug)]
struct Lenient {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // The chain is checked before the name: a name error means the
        // chain passed.
        match chain.verify_server_cert(end_entity, intermediates, name, ocsp, now) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
