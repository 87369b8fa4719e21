//! The pooled client a route uses to reach its upstream.
//!
//! hyper-util's pooled client over hyper-rustls: keep-alive connections are
//! reused per upstream host, capped by `pool_max_idle_per_host` and closed
//! after `pool_idle_timeout`. `https://` upstreams are verified against the
//! web PKI roots (webpki-roots, so the result does not depend on the host's
//! CA bundle) plus an optional `ca_file`. Upstream connections speak
//! HTTP/1.1, like nginx's default, which keeps upgrades and trailers simple.

use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::body::Attempt;
use tokio::time::Instant;

use arc_swap::ArcSwap;

use crate::balance::{Budget, Change, Group, Member};
use crate::config::{HashKey, Retry, RouteConfig, UpstreamGroup, UpstreamSettings};
use crate::sync::Locked;
use crate::telemetry::{Metrics, ServerMetrics};
use crate::worker::PerWorker;

pub type UpstreamClient = Client<HttpsConnector<HttpConnector>, Attempt>;

/// A pooled HTTP/1.1 client over TLS-or-plain, shared by every kind of
/// upstream (proxy routes' and LLM routes'), generic over the request body.
pub fn pooled_client<B>(
    connect_timeout: std::time::Duration,
    settings: &UpstreamSettings,
    tls: &rustls::ClientConfig,
) -> Client<HttpsConnector<HttpConnector>, B>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(settings.pool_idle_timeout)
        .pool_max_idle_per_host(settings.pool_max_idle_per_host)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(connector)
}

/// One server of a route's group: where its requests go.
#[derive(Debug)]
pub struct Server {
    pub scheme: http::uri::Scheme,
    /// Where connections go: the URL's authority, or one address its name
    /// resolved to.
    pub authority: http::uri::Authority,
    /// The URL's authority when `authority` is an address it resolved to:
    /// the `Host` the server expects when the client's is not passed on.
    pub host: Option<http::uri::Authority>,
    /// The server URL's path without a trailing slash ("" for the root).
    pub base_path: String,
    /// The server URL as configured, and the address it resolved to, for
    /// logs and metrics; unique in its group.
    pub label: Arc<str>,
    pub metrics: ServerMetrics,
}

impl Server {
    /// The server `uri` names, or with `addr`, one of the addresses its
    /// name resolved to.
    pub(super) fn new(
        uri: &http::Uri,
        addr: Option<std::net::IpAddr>,
        route: &Arc<str>,
        metrics: &Metrics,
    ) -> Self {
        // Validated by config loading: upstream URLs always have a host.
        let named = uri
            .authority()
            .cloned()
            .unwrap_or_else(|| http::uri::Authority::from_static("invalid"));
        let scheme = uri.scheme().cloned().unwrap_or(http::uri::Scheme::HTTP);
        let label: Arc<str> = server_label(uri, addr).into();
        let (authority, host) = match addr {
            None => (named, None),
            Some(ip) => {
                let port = named
                    .port_u16()
                    .unwrap_or(if scheme == http::uri::Scheme::HTTPS {
                        443
                    } else {
                        80
                    });
                let at = std::net::SocketAddr::new(ip, port).to_string();
                let authority = at.parse().unwrap_or_else(|_| named.clone());
                (authority, Some(named))
            }
        };
        Server {
            metrics: metrics.server_metrics(route, &label),
            scheme,
            authority,
            host,
            base_path: uri.path().trim_end_matches('/').to_string(),
            label,
        }
    }

    /// Log and count a server going out of its group or coming back.
    pub fn changed(&self, route: &str, change: Option<Change>) {
        match change {
            Some(Change::Out { until }) => {
                self.metrics.up.set(0);
                self.metrics.ejections.inc();
                let secs = until.saturating_duration_since(Instant::now()).as_secs();
                tracing::warn!(route, server = %self.label, out_for_s = secs, "server taken out of its group after failing");
            }
            Some(Change::Down) => {
                self.metrics.up.set(0);
                tracing::warn!(route, server = %self.label, "server failed its health check");
            }
            Some(Change::Back) => {
                self.metrics.up.set(1);
                tracing::info!(route, server = %self.label, "server back in its group");
            }
            None => {}
        }
    }
}

/// How a server shows in logs and metrics: its URL, and the address its
/// name resolved to.
pub(super) fn server_label(uri: &http::Uri, addr: Option<std::net::IpAddr>) -> String {
    match addr {
        None => uri.to_string(),
        Some(ip) => format!("{uri} ({ip})"),
    }
}

/// Where a route sends its requests — a group of servers and what weir
/// knows of them — and the clients that get them there: one pool per
/// worker (keyed by server inside), so a worker reuses only connections
/// driven by its own runtime.
pub struct Upstream {
    pub client: PerWorker<UpstreamClient>,
    /// Replaced whole when a server name resolves to other addresses; a
    /// request works on the group it loaded.
    pub group: Arc<ArcSwap<Group<Server>>>,
    pub hash_key: Option<HashKey>,
    /// The group as configured, for logs when no server was picked.
    pub label: Arc<str>,
    pub retry: RouteRetry,
}

/// A route's retry rule and what its budget has spent.
pub struct RouteRetry {
    pub methods: Vec<http::Method>,
    pub budget: Budget,
    /// When the spent budget was last logged: once per window.
    warned: std::sync::Mutex<Option<Instant>>,
}

impl RouteRetry {
    fn new(retry: &Retry) -> Self {
        RouteRetry {
            methods: retry.methods.clone(),
            budget: Budget::new(retry.budget, Instant::now()),
            warned: std::sync::Mutex::new(None),
        }
    }

    /// Whether a retry fits the budget; counted and logged when not.
    pub fn allowed(&self, route: &Arc<str>, metrics: &Metrics) -> bool {
        let now = Instant::now();
        if self.budget.try_retry(now) {
            return true;
        }
        metrics.retry_budget_exhausted(route);
        let window = self.budget.rule().window;
        let mut warned = self.warned.locked();
        if warned.is_none_or(|w| now.saturating_duration_since(w) >= window) {
            *warned = Some(now);
            tracing::warn!(route = %route, "retry budget spent: failures are answered without trying another server");
        }
        false
    }
}

impl Upstream {
    pub fn new(
        route: &RouteConfig,
        group: &UpstreamGroup,
        settings: &UpstreamSettings,
        tls: &rustls::ClientConfig,
        workers: usize,
        metrics: &Arc<Metrics>,
    ) -> Self {
        let route_name: Arc<str> = route.name.as_str().into();
        // Names are served as the system resolves them per connection until
        // their first lookup gives the addresses.
        let members = group
            .servers
            .iter()
            .map(|m| Member {
                target: Server::new(&m.target, None, &route_name, metrics),
                weight: m.weight,
                backup: m.backup,
            })
            .collect();
        let label = match &group.servers[..] {
            [one] => one.target.to_string(),
            many => format!("{} servers", many.len()),
        };
        let servers = Arc::new(ArcSwap::from_pointee(Group::new(
            members,
            group.policy,
            group.ejection,
        )));
        if let Some(check) = &group.health_check {
            let client = pooled_client(route.connect_timeout, settings, tls);
            super::check::spawn(&servers, check.clone(), route_name.clone(), client);
        }
        super::resolve::spawn(&servers, group, settings, route_name, metrics);
        Upstream {
            client: PerWorker::new(workers, || {
                pooled_client(route.connect_timeout, settings, tls)
            }),
            group: servers,
            hash_key: group.hash_key.clone(),
            label: label.into(),
            retry: RouteRetry::new(&group.retry),
        }
    }
}
