//! The process-wide sections: `[server]`, `[connections]`, `[http1]`,
//! `[http2]`, `[log]`, `[admin]` and `[cluster]`.

use ipnet::IpNet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::Secret;
use super::keys::{connections, http1, http2, log, server};

/// `[cluster]`: where a fleet's shared limits live, and what to do when
/// that store does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `redis://host:port/db` or `rediss://…` (TLS), without a password.
    pub url: String,
    /// Redis AUTH password, from a file or the environment.
    pub password: Option<Secret>,
    /// Put before every key weir writes (several fleets can share a Redis).
    pub key_prefix: String,
    /// The longest a request waits for Redis before the failure mode decides.
    pub timeout: Duration,
    pub on_failure: FailureMode,
    /// How long a concurrency slot outlives the instance holding it.
    pub lease_ttl: Duration,
    /// CA certificates a `rediss://` Redis's certificate may chain to,
    /// besides the web PKI roots (a private CA's).
    pub ca_file: Option<PathBuf>,
}

/// `[database]`: where runtime keys and usage rows are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatabaseSettings {
    /// Which database, and where.
    pub(crate) url: DatabaseUrl,
    /// Usage rows older than this are deleted.
    pub(crate) usage_retention: Duration,
    /// Usage rows waiting to be written, at most.
    pub(crate) usage_queue: usize,
}

/// `[database] url`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DatabaseUrl {
    /// An SQLite file (created with its schema at start).
    Sqlite(PathBuf),
    /// A PostgreSQL server.
    Postgres(PostgresUrl),
}

/// `[database] url = "postgres://…"`, read: the URL as the driver reads
/// it, and the TLS weir does itself (the driver knows neither
/// `verify-full` nor `sslrootcert`; docs/decisions/093, 104).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PostgresUrl {
    /// The URL without `sslmode`, `sslrootcert`, `sslcert` and `sslkey`.
    pub(crate) url: String,
    pub(crate) tls: PostgresTls,
    /// `sslcert` and `sslkey`: the certificate weir shows the server.
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
}

/// `sslmode` (and `sslrootcert`), as libpq has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PostgresTls {
    /// `disable`, the default: no TLS.
    Disable,
    /// `prefer`: TLS when the server offers it, certificate not checked.
    Prefer,
    /// `require`: TLS, certificate not checked.
    Require,
    /// `verify-ca`: TLS, the chain checked against `sslrootcert`'s CAs
    /// only (the web PKI's would let anyone with a public certificate
    /// in), the host name not.
    VerifyCa { root_cert: PathBuf },
    /// `verify-full`: TLS, the chain checked against the web PKI roots
    /// and `sslrootcert`, and the host name.
    VerifyFull { root_cert: Option<PathBuf> },
}

impl DatabaseUrl {
    /// Where, for the log (never a password).
    pub(crate) fn shown(&self) -> String {
        match self {
            DatabaseUrl::Sqlite(p) => p.display().to_string(),
            DatabaseUrl::Postgres(p) => match p.url.split_once('@') {
                Some((_, at)) => format!("postgres://…@{at}"),
                None => p.url.clone(),
            },
        }
    }
}

/// What a shared limit does while Redis is slow or gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Each instance enforces its share of the limit (1/N) itself.
    Open,
    /// Refuse with 503 and `Retry-After`.
    Closed,
}

impl FailureMode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            FailureMode::Open => "fail_open",
            FailureMode::Closed => "fail_closed",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ServerSettings {
    pub(crate) shutdown_timeout: Duration,
    /// Where budget windows start (`budget_time_zone`; UTC by default).
    pub(crate) budget_time_zone: crate::calendar::Zone,
    /// In a drain, how long an HTTP/1.1 connection with nothing arriving
    /// is kept open before it is closed (a request on its way is answered,
    /// with `Connection: close`).
    pub(crate) drain_grace: Duration,
    /// Peers whose X-Forwarded-* headers are believed and appended to.
    pub(crate) trusted_proxies: Vec<IpNet>,
    /// Pages for what weir answers before a route is known (no route, a
    /// shed, a bad Host), and for plain routes without their own.
    pub(crate) error_pages: Option<std::sync::Arc<super::ErrorPages>>,
    /// Runtime worker threads; 0 means one per core.
    pub(crate) workers: usize,
    /// Process-wide bound on requests in flight; 0 disables the gate.
    pub(crate) max_concurrent_requests: usize,
    /// Process-wide bound on request bytes held in memory by LLM routes
    /// (they read a body whole to route by model); 0 = no bound.
    pub(crate) max_buffered_body_bytes: u64,
    /// Files static routes may hold open at once, process-wide.
    pub(crate) max_open_static_files: usize,
    /// The whole time an LLM route may take to read a request body.
    pub(crate) body_read_timeout: Duration,
    /// Reload when the config file changes (besides SIGHUP and the admin API).
    pub(crate) watch_config: bool,
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
    /// Tunnels (upgraded connections): closed after this long with no
    /// byte either way, and after `tunnel_max_lifetime` (zero: never).
    pub tunnel_idle_timeout: Duration,
    pub tunnel_max_lifetime: Duration,
    /// Open tunnels per client address (IPv6 per /64); 0 = none.
    pub max_tunnels_per_ip: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            max: connections::MAX.uint() as usize,
            max_per_ip: connections::MAX_PER_IP.uint() as usize,
            tls_handshake_timeout: connections::TLS_HANDSHAKE_TIMEOUT.duration(),
            request_head_timeout: connections::REQUEST_HEAD_TIMEOUT.duration(),
            keepalive_timeout: connections::KEEPALIVE_TIMEOUT.duration(),
            max_requests: connections::MAX_REQUESTS.uint(),
            min_body_rate: connections::MIN_BODY_RATE.size(),
            body_rate_period: connections::BODY_RATE_PERIOD.duration(),
            send_timeout: connections::SEND_TIMEOUT.duration(),
            pressure_threshold_percent: connections::PRESSURE_THRESHOLD.uint() as u8,
            pressure_timeout: connections::PRESSURE_TIMEOUT.duration(),
            tunnel_idle_timeout: connections::TUNNEL_IDLE_TIMEOUT.duration(),
            tunnel_max_lifetime: connections::TUNNEL_MAX_LIFETIME.duration(),
            max_tunnels_per_ip: connections::MAX_TUNNELS_PER_IP.uint() as usize,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Http1Settings {
    pub(crate) max_headers: usize,
    /// Largest request head (request line + headers) in bytes.
    pub(crate) max_head_size: usize,
}

impl Default for Http1Settings {
    fn default() -> Self {
        Http1Settings {
            max_headers: http1::MAX_HEADERS.uint() as usize,
            max_head_size: http1::MAX_HEAD_SIZE.size() as usize,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Http2Settings {
    pub(crate) max_concurrent_streams: u32,
    pub(crate) max_header_list_size: u32,
    /// Streams a client may reset before they are accepted (rapid reset).
    pub(crate) max_pending_resets: usize,
    /// PING, SETTINGS, PRIORITY and RST_STREAM frames a client may send per
    /// second before the connection is closed (runs of empty DATA, HEADERS
    /// and CONTINUATION frames are limited separately).
    pub(crate) max_control_frames_per_second: u32,
}

impl Default for Http2Settings {
    fn default() -> Self {
        Http2Settings {
            max_concurrent_streams: http2::MAX_CONCURRENT_STREAMS.uint() as u32,
            max_header_list_size: http2::MAX_HEADER_LIST_SIZE.size() as u32,
            max_pending_resets: http2::MAX_PENDING_RESETS.uint() as usize,
            max_control_frames_per_second: http2::MAX_CONTROL_FRAMES_PER_SECOND.uint() as u32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub(crate) struct LogSettings {
    pub(crate) format: LogFormat,
    /// A tracing filter directive such as `info` or `weir=debug`.
    pub(crate) level: String,
    pub(crate) access_log: bool,
    /// Write logs here instead of stderr.
    pub(crate) file: Option<PathBuf>,
    /// Write the access log here instead of with the other logs.
    pub(crate) access_file: Option<PathBuf>,
    /// One JSON usage record per LLM request.
    pub(crate) usage_log: bool,
    /// Write the usage records here instead of to stdout.
    pub(crate) usage_file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub(crate) struct AdminSettings {
    pub(crate) address: SocketAddr,
    /// Bearer token for `/admin/*`; without one those endpoints answer 404.
    pub(crate) token: Option<Secret>,
    /// A read-only token: it may only read the dashboard's JSON.
    pub(crate) view_token: Option<Secret>,
    /// How often the dashboard samples the metrics.
    pub(crate) dashboard_interval: Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            shutdown_timeout: server::SHUTDOWN_TIMEOUT.duration(),
            drain_grace: server::DRAIN_GRACE.duration(),
            trusted_proxies: Vec::new(),
            error_pages: None,
            workers: server::WORKERS.uint() as usize,
            max_concurrent_requests: server::MAX_CONCURRENT_REQUESTS.uint() as usize,
            max_buffered_body_bytes: server::MAX_BUFFERED_BODY_BYTES.size(),
            max_open_static_files: server::MAX_OPEN_STATIC_FILES.uint() as usize,
            body_read_timeout: server::BODY_READ_TIMEOUT.duration(),
            watch_config: server::WATCH_CONFIG.flag(),
            budget_time_zone: crate::calendar::Zone::UTC,
        }
    }
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            level: log::LEVEL.text().into(),
            access_log: log::ACCESS_LOG.flag(),
            file: None,
            access_file: None,
            usage_log: log::USAGE_LOG.flag(),
            usage_file: None,
        }
    }
}
