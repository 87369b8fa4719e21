//! Listeners: addresses, TLS (files or ACME), redirects, and the host
//! patterns routes are chosen by.

use ipnet::IpNet;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::secret::Secret;

#[derive(Debug, Clone)]
pub(crate) struct ListenerConfig {
    pub(crate) name: String,
    pub(crate) address: SocketAddr,
    pub(crate) tls: Option<TlsSettings>,
    /// When set, this listener only redirects to HTTPS.
    pub(crate) redirect_https: Option<RedirectSettings>,
    /// Sources that must open every connection with a PROXY protocol
    /// header (v1 or v2); empty: the feature is off on this listener.
    pub(crate) proxy_protocol_from: Vec<IpNet>,
    /// Address rules checked at accept (after the PROXY header), before
    /// TLS; a denied client's connection is closed.
    pub(crate) access: Option<super::AddressRules>,
}

#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// The first certificate is the default for clients without a matching
    /// SNI. May be empty when `acme` is set.
    pub certificates: Vec<Certificate>,
    /// Certificates obtained and renewed over ACME.
    pub acme: Option<AcmeSettings>,
}

/// A TLS listener's ACME settings, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AcmeSettings {
    /// The CA's directory URL.
    pub(crate) directory: String,
    /// Extra root CA for reaching the directory (a private CA's).
    pub(crate) ca_file: Option<PathBuf>,
    /// Contact address for the account (without `mailto:`).
    pub(crate) email: Option<String>,
    /// Exact DNS names to certify, lower-case, one certificate each.
    pub(crate) names: Vec<String>,
    pub(crate) challenge: AcmeChallenge,
    /// Account key and certificates live here (mode 0700, files 0600).
    pub(crate) state_dir: PathBuf,
    pub(crate) external_account: Option<ExternalAccount>,
    /// The wait after a first failed attempt; it doubles per failure.
    pub(crate) retry_base: Duration,
}

/// How the CA checks that weir answers for a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcmeChallenge {
    /// A TLS handshake with ALPN `acme-tls/1` on the TLS listener (port 443).
    TlsAlpn01,
    /// `GET /.well-known/acme-challenge/<token>` on a plain listener (port 80).
    Http01,
}

impl AcmeChallenge {
    pub(crate) fn name(self) -> &'static str {
        match self {
            AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            AcmeChallenge::Http01 => "http-01",
        }
    }
}

/// External Account Binding (RFC 8555 §7.3.4): a key id and HMAC key the
/// CA issued out of band.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExternalAccount {
    pub(crate) key_id: String,
    /// The HMAC key as the CA gave it (base64url), checked to decode.
    pub(crate) hmac_key: Secret,
}

#[derive(Clone)]
pub struct Certificate {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    /// DNS names from the certificate's subjectAltName, used to pick it by SNI.
    pub names: Vec<String>,
    pub key: Arc<rustls::sign::CertifiedKey>,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("cert_path", &self.cert_path)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct RedirectSettings {
    pub(crate) https_port: u16,
}

/// A host pattern: an exact name, or `*.suffix` for any subdomain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum HostPattern {
    Exact(String),
    /// Stored with the leading dot: `*.example.com` is `.example.com`.
    Wildcard(String),
}

/// Normalise a requested host (a Host header or an authority) into the
/// form host patterns are stored in: lower-case, without port, without
/// a trailing dot. Returns `None` for an empty or malformed host. Borrows
/// when the host is already in normal form (the common case).
pub(crate) fn normalise_host(raw: &str) -> Option<Cow<'_, str>> {
    let host = if let Some(rest) = raw.strip_prefix('[') {
        // IPv6 literal: keep the brackets, drop the port.
        let end = rest.find(']')?;
        &raw[..end + 2]
    } else {
        raw.rsplit_once(':').map_or(raw, |(h, _)| h)
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Some(Cow::Owned(host.to_ascii_lowercase()))
    } else {
        Some(Cow::Borrowed(host))
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Wildcard(s) => write!(f, "*{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_normalised() {
        assert_eq!(
            normalise_host("Example.COM:8443").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            normalise_host("example.com.").as_deref(),
            Some("example.com")
        );
        assert_eq!(normalise_host("[::1]:80").as_deref(), Some("[::1]"));
        assert_eq!(normalise_host(""), None);
    }
}
