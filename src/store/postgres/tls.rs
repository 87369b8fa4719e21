//! TLS to PostgreSQL with rustls on weir's one crypto provider (aws-lc-rs):
//! the driver's `MakeTlsConnect`, built from `sslmode` (docs/decisions/093).
//!
//! `require` encrypts without checking the certificate, as libpq does
//! (handshake signatures are still checked, so the key exchange is with
//! the holder of the certificate's key); `verify-full` checks the chain
//! against the web PKI roots and `sslrootcert`, and the host name.

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

use crate::config::PostgresTls;
use crate::pki::PkiError;

/// The ALPN PostgreSQL 17 checks for (and earlier versions ignore).
const ALPN: &[u8] = b"postgresql";

/// Makes a TLS connection per connection attempt, from one client config
/// (none for `sslmode=disable`, when the driver never asks for one).
#[derive(Clone)]
pub(super) struct Tls(Option<Arc<rustls::ClientConfig>>);

impl Tls {
    /// The connector `tls` asks for, and the mode the driver is told.
    pub(super) fn new(tls: &PostgresTls) -> Result<(Tls, SslMode), PkiError> {
        let mode = match tls {
            PostgresTls::Disable => return Ok((Tls(None), SslMode::Disable)),
            PostgresTls::Prefer => SslMode::Prefer,
            PostgresTls::Require | PostgresTls::VerifyFull { .. } => SslMode::Require,
        };
        let mut config = match tls {
            PostgresTls::Disable => return Ok((Tls(None), SslMode::Disable)),
            PostgresTls::Prefer | PostgresTls::Require => {
                let provider = crate::pki::provider();
                rustls::ClientConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(crate::pki::VERSIONS)?
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
                    .with_no_client_auth()
            }
            PostgresTls::VerifyFull { root_cert } => {
                crate::pki::client_config(root_cert.as_deref())?
            }
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
    /// None: SCRAM runs without channel binding (`channel_binding=prefer`,
    /// the driver's default, then goes on without it).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
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

/// `sslmode=require`'s verifier: any certificate, but the handshake
/// signatures checked with the provider's algorithms.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
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
            &self.0.signature_verification_algorithms,
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
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
