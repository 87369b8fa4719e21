//! The pooled clients a route uses to reach its servers.
//!
//! hyper-util's pooled client over hyper-rustls: keep-alive connections are
//! reused per server, capped by `pool_max_idle_per_host` and closed after
//! `pool_idle_timeout`. `https://` upstreams are verified against the web
//! PKI roots (webpki-roots, so the result does not depend on the host's CA
//! bundle) plus an optional `ca_file`. Which HTTP versions are spoken is
//! the upstream's `http_version`: HTTP/1.1 by default; with `"auto"` an
//! `https://` server is offered `h2` and `http/1.1` by ALPN and spoken to
//! in what it picks; with `"2"` only HTTP/2 (h2c on `http://`). An HTTP/2
//! connection carries every request of a worker to that server as
//! streams. Upgrades always take an HTTP/1.1 connection of their own.
//!
//! Each server has its own clients, whose connector dials that server
//! whatever authority the request names: the request's authority can then
//! be the client's host, which HTTP/2 sends as `:authority` (the Host of
//! HTTP/2), while the pool and the connection stay the server's.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::body::Attempt;
use tokio::time::Instant;

use crate::balance::{Change, Group, Member};
use crate::config::{HashKey, RouteConfig, UpstreamGroup, UpstreamHttp, UpstreamSettings};
use crate::telemetry::{Metrics, ServerMetrics};
use crate::worker::PerWorker;

/// TCP, then TLS for `https://`, offering the ALPN protocols of the
/// upstream's HTTP versions.
pub type Connector = HttpsConnector<HttpConnector>;

pub type UpstreamClient = Client<ToServer, Attempt>;

/// An HTTP/2 connection with requests on it is pinged this often, so one
/// that died silently (a NAT dropped it, the server vanished) is found
/// before every request multiplexed on it waits out `response_timeout`.
const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
/// A ping unanswered for this long closes the connection.
const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The connector for an upstream spoken to in `http`.
pub fn connector(
    connect_timeout: Duration,
    tls: &rustls::ClientConfig,
    http: UpstreamHttp,
) -> Connector {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_connect_timeout(Some(connect_timeout));
    tcp.set_nodelay(true);
    let b = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http();
    match http {
        UpstreamHttp::Http1 => b.enable_http1().wrap_connector(tcp),
        UpstreamHttp::Auto => b.enable_http1().enable_http2().wrap_connector(tcp),
        UpstreamHttp::Http2 => b.enable_http2().wrap_connector(tcp),
    }
}

/// A pooled client over `connector`, shared by every kind of upstream
/// (proxy routes', their health checks, LLM routes'), generic over the
/// request body. With `http = Http2` every connection is HTTP/2 (h2c with
/// prior knowledge on `http://`), and a worker opens one connection per
/// server at a time rather than one per request in a burst.
pub fn pooled_client<C, B>(
    connector: C,
    settings: &UpstreamSettings,
    http: UpstreamHttp,
) -> Client<C, B>
where
    C: hyper_util::client::legacy::connect::Connect + Clone,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(settings.pool_idle_timeout)
        .pool_max_idle_per_host(settings.pool_max_idle_per_host)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .http2_only(http == UpstreamHttp::Http2)
        .http2_keep_alive_interval(H2_PING_INTERVAL)
        .http2_keep_alive_timeout(H2_PING_TIMEOUT)
        .build(connector)
}

/// A connector that dials one server whatever the request's authority.
#[derive(Clone)]
pub struct ToServer {
    inner: Connector,
    /// The server's scheme and authority: where the TCP connection goes,
    /// and the name TLS verifies (SNI).
    server: http::Uri,
}

impl tower_service::Service<http::Uri> for ToServer {
    type Response = <Connector as tower_service::Service<http::Uri>>::Response;
    type Error = <Connector as tower_service::Service<http::Uri>>::Error;
    type Future = <Connector as tower_service::Service<http::Uri>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, _asked: http::Uri) -> Self::Future {
        self.inner.call(self.server.clone())
    }
}

/// A server's clients, one per worker: `requests` speaks the route's
/// HTTP versions; `upgrades`, when those may be HTTP/2, is HTTP/1.1 only,
/// since an HTTP/2 connection cannot carry an HTTP/1.1 upgrade.
pub struct Clients {
    requests: PerWorker<UpstreamClient>,
    upgrades: Option<PerWorker<UpstreamClient>>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("upgrades_apart", &self.upgrades.is_some())
            .finish()
    }
}

impl Clients {
    fn new(
        server: http::Uri,
        route: &RouteConfig,
        settings: &UpstreamSettings,
        tls: &rustls::ClientConfig,
        http: UpstreamHttp,
        workers: usize,
    ) -> Self {
        let make = |http: UpstreamHttp| {
            let server = server.clone();
            PerWorker::new(workers, move || {
                let inner = connector(route.connect_timeout, tls, http);
                let to = ToServer {
                    inner,
                    server: server.clone(),
                };
                pooled_client(to, settings, http)
            })
        };
        let may_be_h2 = match http {
            UpstreamHttp::Http1 => false,
            UpstreamHttp::Auto => server.scheme() == Some(&http::uri::Scheme::HTTPS),
            UpstreamHttp::Http2 => true,
        };
        Clients {
            requests: make(http),
            upgrades: may_be_h2.then(|| make(UpstreamHttp::Http1)),
        }
    }

    /// This worker's client for a request, or for an upgrade, and whether
    /// it may speak HTTP/2 (then the request's authority is the host the
    /// upstream sees).
    pub fn get(&self, upgrade: bool) -> (&UpstreamClient, bool) {
        match (&self.upgrades, upgrade) {
            (Some(h1), true) => (h1.get(), false),
            (Some(_), false) => (self.requests.get(), true),
            (None, _) => (self.requests.get(), false),
        }
    }
}

/// One server of a route's group: where its requests go.
#[derive(Debug)]
pub struct Server {
    pub scheme: http::uri::Scheme,
    pub authority: http::uri::Authority,
    /// The server URL's path without a trailing slash ("" for the root).
    pub base_path: String,
    /// The server URL as configured, for logs.
    pub label: Arc<str>,
    pub metrics: ServerMetrics,
    /// The pools that reach it, one per worker.
    pub clients: Clients,
}

impl Server {
    fn new(uri: &http::Uri, route: &Arc<str>, metrics: &Metrics, clients: Clients) -> Self {
        let label: Arc<str> = uri.to_string().into();
        Server {
            clients,
            metrics: metrics.server_metrics(route, &label),
            scheme: uri.scheme().cloned().unwrap_or(http::uri::Scheme::HTTP),
            // Validated by config loading: upstream URLs always have a host.
            authority: uri
                .authority()
                .cloned()
                .unwrap_or_else(|| http::uri::Authority::from_static("invalid")),
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

/// Where a route sends its requests: a group of servers, what weir knows
/// of them, and the clients that reach each (one pool per worker, so a
/// worker reuses only connections driven by its own runtime).
pub struct Upstream {
    pub group: Arc<Group<Server>>,
    pub hash_key: Option<HashKey>,
    /// The group as configured, for logs when no server was picked.
    pub label: Arc<str>,
}

impl Upstream {
    pub fn new(
        route: &RouteConfig,
        group: &UpstreamGroup,
        settings: &UpstreamSettings,
        tls: &rustls::ClientConfig,
        workers: usize,
        metrics: &Metrics,
    ) -> Self {
        let route_name: Arc<str> = route.name.as_str().into();
        let members = group
            .servers
            .iter()
            .map(|m| Member {
                target: Server::new(
                    &m.target,
                    &route_name,
                    metrics,
                    Clients::new(m.target.clone(), route, settings, tls, group.http, workers),
                ),
                weight: m.weight,
                backup: m.backup,
            })
            .collect();
        let label = match &group.servers[..] {
            [one] => one.target.to_string(),
            many => format!("{} servers", many.len()),
        };
        let servers = Arc::new(Group::new(members, group.policy, group.ejection));
        if let Some(check) = &group.health_check {
            let client = pooled_client(
                connector(route.connect_timeout, tls, group.http),
                settings,
                group.http,
            );
            super::check::spawn(&servers, check.clone(), route_name, client);
        }
        Upstream {
            group: servers,
            hash_key: group.hash_key.clone(),
            label: label.into(),
        }
    }
}
