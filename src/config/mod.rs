//! weir's configuration: the validated types the server runs from, and the
//! loader that turns a TOML file into them.
//!
//! Loading is all-or-nothing: [`Config::load`] either returns a config in
//! which every value has been checked (addresses parse, certificates load,
//! routes are unambiguous) or every problem found, each with file, line,
//! column, key and a fix. `weir run` and `weir check` share this path, so a
//! config that checks is a config that starts.

mod load;
pub mod reader;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

pub use reader::{Problem, Problems};

/// Defaults, in one place so the docs and the code cannot drift apart.
pub mod defaults {
    use std::time::Duration;

    pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
    pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
    pub const POOL_MAX_IDLE_PER_HOST: usize = 64;
    pub const HTTPS_PORT: u16 = 443;
    pub const MAX_CONCURRENT_REQUESTS: usize = 1024;

    pub const MAX_CONNECTIONS: usize = 1024;
    pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
    pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
    pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(60);
    pub const MAX_REQUESTS_PER_CONNECTION: u64 = 1000;
    pub const MIN_BODY_RATE: u64 = 1024;
    pub const BODY_RATE_PERIOD: Duration = Duration::from_secs(10);
    pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
    pub const PRESSURE_THRESHOLD_PERCENT: u8 = 80;
    pub const PRESSURE_TIMEOUT: Duration = Duration::from_secs(1);

    pub const H1_MAX_HEADERS: usize = 100;
    pub const H1_MAX_HEAD_SIZE: usize = 64 * 1024;
    pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;
    pub const H2_MAX_HEADER_LIST_SIZE: u32 = 64 * 1024;
    pub const H2_MAX_PENDING_RESETS: usize = 20;
    pub const H2_MAX_CONTROL_FRAMES_PER_SECOND: u32 = 1000;
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from (for messages and reloads).
    pub source: PathBuf,
    pub server: ServerSettings,
    pub connections: ConnectionSettings,
    pub http1: Http1Settings,
    pub http2: Http2Settings,
    pub log: LogSettings,
    pub admin: Option<AdminSettings>,
    pub listeners: Vec<ListenerConfig>,
    pub routes: Vec<RouteConfig>,
    pub upstream: UpstreamSettings,
}

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub shutdown_timeout: Duration,
    /// Peers whose X-Forwarded-* headers are believed and appended to.
    pub trusted_proxies: Vec<IpNet>,
    /// Runtime worker threads; 0 means one per core.
    pub workers: usize,
    /// Process-wide bound on requests in flight; 0 disables the gate.
    pub max_concurrent_requests: usize,
}

/// The connection layer: the shared cap, reclaiming under load, deadlines.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// Process-wide cap on client connections, shared by every listener; 0 = none.
    pub max: usize,
    /// Cap per client IP (IPv6 per /64); 0 = none.
    pub max_per_ip: usize,
    pub tls_handshake_timeout: Duration,
    /// Total time to receive a request head, from its first byte (or from
    /// the connection becoming ready, for the first request).
    pub request_head_timeout: Duration,
    /// Idle time between requests (HTTP/1.1) or with no open stream (HTTP/2).
    pub keepalive_timeout: Duration,
    /// Requests per connection before it is closed gracefully; 0 = none.
    pub max_requests: u64,
    /// Minimum request body rate in bytes/s, checked per `body_rate_period`; 0 = off.
    pub min_body_rate: u64,
    pub body_rate_period: Duration,
    /// How long a client may leave a response unread before it is cut.
    pub send_timeout: Duration,
    /// Percent of `max` above which deadlines shrink to `pressure_timeout`.
    pub pressure_threshold_percent: u8,
    pub pressure_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            max: defaults::MAX_CONNECTIONS,
            max_per_ip: 0,
            tls_handshake_timeout: defaults::TLS_HANDSHAKE_TIMEOUT,
            request_head_timeout: defaults::REQUEST_HEAD_TIMEOUT,
            keepalive_timeout: defaults::KEEPALIVE_TIMEOUT,
            max_requests: defaults::MAX_REQUESTS_PER_CONNECTION,
            min_body_rate: defaults::MIN_BODY_RATE,
            body_rate_period: defaults::BODY_RATE_PERIOD,
            send_timeout: defaults::SEND_TIMEOUT,
            pressure_threshold_percent: defaults::PRESSURE_THRESHOLD_PERCENT,
            pressure_timeout: defaults::PRESSURE_TIMEOUT,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Http1Settings {
    pub max_headers: usize,
    /// Largest request head (request line + headers) in bytes.
    pub max_head_size: usize,
}

impl Default for Http1Settings {
    fn default() -> Self {
        Http1Settings {
            max_headers: defaults::H1_MAX_HEADERS,
            max_head_size: defaults::H1_MAX_HEAD_SIZE,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Http2Settings {
    pub max_concurrent_streams: u32,
    pub max_header_list_size: u32,
    /// Streams a client may reset before they are accepted (rapid reset).
    pub max_pending_resets: usize,
    /// PING, SETTINGS, PRIORITY and RST_STREAM frames a client may send per
    /// second before the connection is closed (runs of empty DATA, HEADERS
    /// and CONTINUATION frames are limited separately).
    pub max_control_frames_per_second: u32,
}

impl Default for Http2Settings {
    fn default() -> Self {
        Http2Settings {
            max_concurrent_streams: defaults::H2_MAX_CONCURRENT_STREAMS,
            max_header_list_size: defaults::H2_MAX_HEADER_LIST_SIZE,
            max_pending_resets: defaults::H2_MAX_PENDING_RESETS,
            max_control_frames_per_second: defaults::H2_MAX_CONTROL_FRAMES_PER_SECOND,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct LogSettings {
    pub format: LogFormat,
    /// A tracing filter directive such as `info` or `weir=debug`.
    pub level: String,
    pub access_log: bool,
}

#[derive(Debug, Clone)]
pub struct AdminSettings {
    pub address: SocketAddr,
}

#[derive(Debug, Clone)]
pub struct ListenerConfig {
    pub name: String,
    pub address: SocketAddr,
    pub tls: Option<TlsSettings>,
    /// When set, this listener only redirects to HTTPS.
    pub redirect_https: Option<RedirectSettings>,
}

#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// The first certificate is the default for clients without a matching SNI.
    pub certificates: Vec<Certificate>,
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
pub struct RedirectSettings {
    pub https_port: u16,
}

/// A host pattern: an exact name, or `*.suffix` for any subdomain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    Exact(String),
    /// Stored with the leading dot: `*.example.com` is `.example.com`.
    Wildcard(String),
}

/// Normalise a requested host (a Host header or an authority) into the
/// form host patterns are stored in: lower-case, without port, without
/// a trailing dot. Returns `None` for an empty or malformed host. Borrows
/// when the host is already in normal form (the common case).
pub fn normalise_host(raw: &str) -> Option<Cow<'_, str>> {
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

#[derive(Debug, Clone)]
pub struct RouteConfig {
    pub name: String,
    /// Empty means any host.
    pub hosts: Vec<HostPattern>,
    /// Path prefix, matched on segment boundaries.
    pub path: String,
    pub upstream: http::Uri,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub max_request_body: Option<u64>,
    /// Send the client's Host upstream (true) or the upstream's authority.
    pub preserve_host: bool,
    /// Remove the matched path prefix before forwarding.
    pub strip_prefix: bool,
    /// Requests in flight on this route; 0 = only the global bound.
    pub max_concurrent_requests: usize,
}

#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
    /// Extra CA certificates trusted for `https://` upstreams, besides web PKI roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        UpstreamSettings {
            pool_idle_timeout: defaults::POOL_IDLE_TIMEOUT,
            pool_max_idle_per_host: defaults::POOL_MAX_IDLE_PER_HOST,
            ca_file: None,
        }
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            shutdown_timeout: defaults::SHUTDOWN_TIMEOUT,
            trusted_proxies: Vec::new(),
            workers: 0,
            max_concurrent_requests: defaults::MAX_CONCURRENT_REQUESTS,
        }
    }
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            level: "info".into(),
            access_log: true,
        }
    }
}

impl Config {
    /// Read and validate a config file.
    pub fn load(path: &Path) -> Result<Config, Problems> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Problems(vec![Problem {
                file: path.to_path_buf(),
                position: None,
                key: String::new(),
                message: format!("cannot read the file: {e}"),
                fix: Some("pass an existing, readable file to --config".into()),
            }])
        })?;
        Config::parse(path, &text)
    }

    /// Validate config text; `path` is used for messages and relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Config, Problems> {
        load::parse(path, text)
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
