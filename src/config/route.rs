//! Routes: what each matches, its kind, and a proxy route's group of
//! servers (balancing, retries, health checks, the upstream pools).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::upstream::UpstreamHttp;
use super::{Ejection, HostPattern, LlmSettings, Member, Policy, RetryBudget, ServerUrl, keys};

#[derive(Debug, Clone)]
pub(crate) struct RouteConfig {
    pub(crate) name: String,
    /// Empty means any host.
    pub(crate) hosts: Vec<HostPattern>,
    /// Path prefix, matched on segment boundaries.
    pub(crate) path: String,
    /// What the route does with what it matches.
    pub(crate) kind: RouteKind,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) max_request_body: Option<u64>,
    /// Send the client's Host upstream (true) or the upstream's authority.
    pub(crate) preserve_host: bool,
    /// Route by the normalised path but forward the client's path as sent,
    /// encoded separators and all (upstreams that read the path opaquely).
    pub(crate) raw_path: bool,
    /// Remove the matched path prefix before forwarding.
    pub(crate) strip_prefix: bool,
    /// Requests in flight on this route; 0 = only the global bound.
    pub(crate) max_concurrent_requests: usize,
    /// Per-client rate limit.
    pub(crate) rate_limit: Option<RateQuota>,
    /// The rate limit and the per-token concurrency are the fleet's
    /// (through `[cluster]`), not this process's.
    pub(crate) shared_limits: bool,
    pub(crate) headers: ResponseHeaders,
    /// The `Upgrade` protocols tunnelled to the upstream, lowercase
    /// (`websocket` unless the route lists others); any other is ignored
    /// and the request forwarded as a plain one (RFC 9110 §7.8).
    pub(crate) upgrade_protocols: Vec<String>,
    /// Response compression (`[route.compress]`); `None`: responses go as
    /// they come, at the cost of one branch.
    pub(crate) compress: Option<std::sync::Arc<super::Compression>>,
    /// Address rules and basic auth; `None`: anyone may ask.
    pub(crate) access: Option<Arc<super::Access>>,
    /// Files served for the errors weir answers on this route.
    pub(crate) error_pages: Option<Arc<super::ErrorPages>>,
    /// Header rules, request id, path rewrite (`crate::rules`).
    pub(crate) rules: Option<Arc<super::RouteRules>>,
}

/// Headers a route sets on its responses.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResponseHeaders {
    /// `Strict-Transport-Security`, sent on HTTPS responses only.
    pub(crate) hsts: Option<http::HeaderValue>,
    pub(crate) server: ServerHeader,
}

/// What happens to the upstream's `Server` header.
#[derive(Debug, Clone, Default)]
pub(crate) enum ServerHeader {
    #[default]
    Pass,
    Remove,
    Set(http::HeaderValue),
}

/// A route's kind and what only that kind needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RouteKind {
    /// Forward everything to a group of upstream servers (one, for
    /// `upstream = URL`).
    Proxy { upstream: Box<UpstreamGroup> },
    /// An LLM API gateway route.
    Llm(Arc<LlmSettings>),
    /// Files from a directory (`crate::statics`).
    Static(Arc<super::StaticSettings>),
    /// Answer every request with a redirect (`crate::rules::redirect`).
    Redirect(Arc<super::RedirectRoute>),
}

/// A proxy route's servers and how one is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UpstreamGroup {
    pub(crate) servers: Vec<Member<ServerUrl>>,
    pub(crate) policy: Policy,
    /// What a request is hashed by, for [`Policy::Hash`].
    pub(crate) hash_key: Option<HashKey>,
    pub(crate) ejection: Ejection,
    pub(crate) health_check: Option<HealthCheck>,
    pub(crate) retry: Retry,
    /// The HTTP versions weir speaks to the group's servers.
    pub(crate) http: UpstreamHttp,
}

/// Which requests that got no answer go to another server, and how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Retry {
    /// Methods retried once on another server after being sent and getting
    /// no response head (a request that never left goes elsewhere whatever
    /// its method).
    pub(crate) methods: Vec<http::Method>,
    pub(crate) budget: RetryBudget,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            methods: vec![http::Method::GET, http::Method::HEAD, http::Method::OPTIONS],
            budget: RetryBudget::default(),
        }
    }
}

/// An active HTTP health check, run for each server of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthCheck {
    /// Path (and query) asked with GET.
    pub(crate) path: String,
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
    /// Passes in a row that bring a server back.
    pub(crate) rise: u32,
    /// Failures in a row that take it out.
    pub(crate) fall: u32,
    /// Statuses that pass; empty: any 2xx or 3xx.
    pub(crate) expect_status: Vec<u16>,
}

impl HealthCheck {
    pub(crate) fn passes(&self, status: u16) -> bool {
        if self.expect_status.is_empty() {
            (200..400).contains(&status)
        } else {
            self.expect_status.contains(&status)
        }
    }
}

impl UpstreamGroup {
    /// A group of one server, with the defaults.
    #[cfg(test)]
    pub(crate) fn one(uri: http::Uri) -> Self {
        UpstreamGroup {
            servers: vec![Member {
                target: uri.into(),
                weight: 1,
                backup: false,
            }],
            policy: Policy::P2cEwma,
            hash_key: None,
            ejection: Ejection::default(),
            health_check: None,
            retry: Retry::default(),
            http: UpstreamHttp::Http1,
        }
    }
}

/// What a request is hashed by to choose its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HashKey {
    Header(http::HeaderName),
    Cookie(String),
    ClientIp,
}

#[derive(Debug, Clone)]
pub(crate) struct UpstreamSettings {
    pub(crate) pool_idle_timeout: Duration,
    pub(crate) pool_max_idle_per_host: usize,
    /// Extra CA certificates trusted for `https://` upstreams, besides web PKI roots.
    pub(crate) ca_file: Option<PathBuf>,
    /// DNS servers asked for group members' names; empty: the system's.
    pub(crate) nameservers: Vec<SocketAddr>,
    /// How often group members' names are looked up again (sooner when the
    /// record's TTL is shorter).
    pub(crate) resolve_interval: Duration,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        UpstreamSettings {
            pool_idle_timeout: keys::upstream::POOL_IDLE_TIMEOUT.duration(),
            pool_max_idle_per_host: keys::upstream::POOL_MAX_IDLE_PER_HOST.uint() as usize,
            ca_file: None,
            nameservers: Vec::new(),
            resolve_interval: keys::upstream::RESOLVE_INTERVAL.duration(),
        }
    }
}

/// A per-client rate: one request per `interval` sustained (`"10/min"`:
/// 6 s; `rate_limit_per_second = 10`: 100 ms), `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RateQuota {
    pub(crate) interval: Duration,
    pub(crate) burst: u32,
}
