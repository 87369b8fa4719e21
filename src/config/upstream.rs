//! What proxy and LLM upstream groups share in the config: the HTTP
//! version weir speaks to their servers, the members of a group and how
//! they are balanced, ejected and retried. Data only: the behaviour is
//! `upstream::balance`'s. A leaf the route and LLM files both read.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Which HTTP versions weir speaks to an upstream (`http_version`).
/// Upgrades (WebSocket) always go over HTTP/1.1, whatever this says.
/// HTTP/1.1 is the default because hyper-util's pool holds one HTTP/2
/// connection per server and worker: past the server's stream limit,
/// requests queue on it instead of opening another connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum UpstreamHttp {
    /// `https://`: offer `h2` and `http/1.1` by ALPN, and speak what the
    /// server picks; `http://`: HTTP/1.1 (a cleartext server cannot say
    /// it speaks HTTP/2 before it is spoken to).
    Auto,
    /// HTTP/1.1 only, as nginx speaks to upstreams.
    #[default]
    Http1,
    /// HTTP/2 only: ALPN `h2` on `https://`, h2c with prior knowledge on
    /// `http://` (what gRPC servers speak in cleartext).
    Http2,
}

impl UpstreamHttp {
    pub(crate) const ALL: [UpstreamHttp; 3] =
        [UpstreamHttp::Auto, UpstreamHttp::Http1, UpstreamHttp::Http2];

    pub(crate) fn name(self) -> &'static str {
        match self {
            UpstreamHttp::Auto => "auto",
            UpstreamHttp::Http1 => "1.1",
            UpstreamHttp::Http2 => "2",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// When a server is taken out, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ejection {
    /// Consecutive failures that take a server out.
    pub(crate) after: u32,
    /// The first time out; each further one in a row doubles it.
    pub(crate) base: Duration,
    /// The longest time out.
    pub(crate) max: Duration,
    /// The largest share of the group (percent) out at once; at least one
    /// server may always be.
    pub(crate) max_share: u8,
    /// A server coming back takes a share growing from a tenth to all of
    /// its weight over this long (zero: all at once).
    pub(crate) slow_start: Duration,
}

impl Default for Ejection {
    fn default() -> Self {
        Ejection {
            after: 5,
            base: Duration::from_secs(10),
            max: Duration::from_secs(300),
            max_share: 50,
            slow_start: Duration::ZERO,
        }
    }
}

/// How many retries a route may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryBudget {
    /// Retries allowed per 100 requests in the window.
    pub(crate) percent: u32,
    /// Retries allowed per second of the window whatever the requests.
    pub(crate) min_per_second: u32,
    /// How far back requests and retries are counted.
    pub(crate) window: Duration,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            percent: 20,
            min_per_second: 10,
            window: Duration::from_secs(10),
        }
    }
}

/// How a group chooses among the servers that are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Two servers at random, the one with the lower latency average ×
    /// (requests in flight + 1) ÷ weight (Linkerd's and Envoy's default):
    /// a slow or busy server gets a falling share, with no global scan.
    P2cEwma,
    /// Smooth weighted round robin (nginx's).
    RoundRobin,
    /// The fewest requests in flight per unit of weight; ties at random.
    LeastInFlight,
    /// A consistent-hash ring over the request's key: a key stays on one
    /// server, and when a server leaves or returns only its keys move.
    Hash,
}

impl Policy {
    pub(crate) const ALL: [Policy; 4] = [
        Policy::P2cEwma,
        Policy::RoundRobin,
        Policy::LeastInFlight,
        Policy::Hash,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Policy::P2cEwma => "p2c_ewma",
            Policy::RoundRobin => "round_robin",
            Policy::LeastInFlight => "least_in_flight",
            Policy::Hash => "hash",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Where a proxy route's server is: a URL, or a unix domain socket
/// (`unix:/run/app.sock`), spoken to in HTTP/1.1 as `http://localhost`:
/// that URL is what the rest of the upstream side sees (the `Host` sent
/// when the client's is not, the health check's URL), and only the dialer
/// looks at the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerUrl {
    pub(crate) uri: http::Uri,
    /// The socket's path, made absolute against the config file's
    /// directory; none for a TCP server.
    pub(crate) socket: Option<Arc<Path>>,
}

impl ServerUrl {
    /// The URL a unix-socket server is spoken to as.
    pub(crate) fn unix(path: Arc<Path>) -> Self {
        ServerUrl {
            uri: http::Uri::from_static("http://localhost/"),
            socket: Some(path),
        }
    }
}

impl From<http::Uri> for ServerUrl {
    fn from(uri: http::Uri) -> Self {
        ServerUrl { uri, socket: None }
    }
}

impl std::fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.socket {
            Some(path) => write!(f, "unix:{}", path.display()),
            None => self.uri.fmt(f),
        }
    }
}

/// One server as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member<T> {
    pub(crate) target: T,
    /// Relative share, 1 or more.
    pub(crate) weight: u32,
    /// Used only when no primary is in.
    pub(crate) backup: bool,
}
