//! A server of a group and the pooled clients that reach it.
//!
//! Keep-alive connections are reused per server and worker, capped by
//! `pool_max_idle_per_host` and closed after `pool_idle_timeout`: in
//! weir's own pool for HTTP/1.1 ([`super::pool`]), in hyper-util's pooled
//! client when HTTP/2 may be spoken; both dial through hyper-rustls. `https://` upstreams are verified against the web
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

use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::time::Instant;

use super::balance::Change;
use super::body::Attempt;
use super::dial::{Connector, Dial, connector};
use super::pool::H1Pool;
use crate::config::{ServerUrl, UpstreamHttp, UpstreamSettings};
use crate::telemetry::{Metrics, ServerMetrics};
use crate::worker::PerWorker;

pub(crate) type UpstreamClient = super::client::UpstreamClient<ToServer, Attempt>;

/// An HTTP/2 connection with requests on it is pinged this often, so one
/// that died silently (a NAT dropped it, the server vanished) is found
/// before every request multiplexed on it waits out `response_timeout`.
const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
/// A ping unanswered for this long closes the connection.
const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// A pooled client over `connector`, shared by every kind of upstream
/// (proxy routes', their health checks, LLM routes'), generic over the
/// request body. With `http = Http2` every connection is HTTP/2 (h2c with
/// prior knowledge on `http://`), and a worker opens one connection per
/// server at a time rather than one per request in a burst.
pub(crate) fn pooled_client<C, B>(
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

/// A pool of weir's own for HTTP/1.1 requests to `server` (its scheme and
/// authority), whatever authority a request names.
pub(crate) fn h1_pool<B>(
    connect_timeout: Duration,
    tls: &rustls::ClientConfig,
    settings: &UpstreamSettings,
    server: http::Uri,
) -> H1Pool<B>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<super::error::BoxError>,
{
    H1Pool::new(
        Dial::Tcp(connector(connect_timeout, tls, UpstreamHttp::Http1)),
        server,
        settings.pool_idle_timeout,
        settings.pool_max_idle_per_host,
    )
}

/// A connector that dials one server whatever the request's authority.
#[derive(Clone)]
pub(crate) struct ToServer {
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
pub(crate) struct Clients {
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

/// How a group's servers are reached: kept by DNS re-resolution, which
/// makes the clients of the servers that join.
#[derive(Clone)]
pub(crate) struct Dialing {
    pub(super) connect_timeout: Duration,
    pub(super) settings: UpstreamSettings,
    pub(super) tls: rustls::ClientConfig,
    pub(super) http: UpstreamHttp,
    pub(super) workers: usize,
}

impl Dialing {
    /// The clients that dial `scheme://authority`, whatever authority a
    /// request names; or, with `socket`, HTTP/1.1 pools that dial it.
    fn clients(
        &self,
        scheme: &http::uri::Scheme,
        authority: &http::uri::Authority,
        socket: Option<&Arc<Path>>,
    ) -> Clients {
        let server = http::Uri::builder()
            .scheme(scheme.clone())
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .unwrap_or_default();
        if let Some(path) = socket {
            let dial = Dial::Unix {
                path: path.clone(),
                connect_timeout: self.connect_timeout,
            };
            return Clients {
                requests: PerWorker::new(self.workers, || {
                    UpstreamClient::Http1(Box::new([H1Pool::new(
                        dial.clone(),
                        server.clone(),
                        self.settings.pool_idle_timeout,
                        self.settings.pool_max_idle_per_host,
                    )]))
                }),
                upgrades: None,
            };
        }
        let make = |http: UpstreamHttp| {
            PerWorker::new(self.workers, || match http {
                UpstreamHttp::Http1 => UpstreamClient::Http1(Box::new([h1_pool(
                    self.connect_timeout,
                    &self.tls,
                    &self.settings,
                    server.clone(),
                )])),
                UpstreamHttp::Auto | UpstreamHttp::Http2 => {
                    let inner = connector(self.connect_timeout, &self.tls, http);
                    let to = ToServer {
                        inner,
                        server: server.clone(),
                    };
                    UpstreamClient::Hyper(Box::new(pooled_client(to, &self.settings, http)))
                }
            })
        };
        let may_be_h2 = match self.http {
            UpstreamHttp::Http1 => false,
            UpstreamHttp::Auto => *scheme == http::uri::Scheme::HTTPS,
            UpstreamHttp::Http2 => true,
        };
        Clients {
            requests: make(self.http),
            upgrades: may_be_h2.then(|| make(UpstreamHttp::Http1)),
        }
    }
}

impl Clients {
    /// This worker's client for a request, or for an upgrade, and whether
    /// it may speak HTTP/2 (then the request's authority is the host the
    /// upstream sees).
    pub(crate) fn get(&self, upgrade: bool) -> (&UpstreamClient, bool) {
        match (&self.upgrades, upgrade) {
            (Some(h1), true) => (h1.get(), false),
            (Some(_), false) => (self.requests.get(), true),
            (None, _) => (self.requests.get(), false),
        }
    }
}

/// One server of a route's group: where its requests go.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) scheme: http::uri::Scheme,
    /// Where connections go: the URL's authority, or one address its name
    /// resolved to.
    pub(crate) authority: http::uri::Authority,
    /// The URL's authority when `authority` is an address it resolved to:
    /// the `Host` the server expects when the client's is not passed on.
    pub(crate) host: Option<http::uri::Authority>,
    /// The server URL's path without a trailing slash ("" for the root).
    pub(crate) base_path: String,
    /// A unix-socket server's path (its URL is then `http://localhost`).
    pub(crate) socket: Option<Arc<Path>>,
    /// The server URL as configured, and the address it resolved to, for
    /// logs and metrics; unique in its group.
    pub(crate) label: Arc<str>,
    pub(crate) metrics: ServerMetrics,
    /// The pools that reach it, one per worker.
    pub(crate) clients: Clients,
}

impl Server {
    /// The server `uri` names, or with `addr`, one of the addresses its
    /// name resolved to; its clients made as `dial` says.
    pub(super) fn new(
        url: &ServerUrl,
        addr: Option<std::net::IpAddr>,
        route: &Arc<str>,
        metrics: &Metrics,
        dial: &Dialing,
    ) -> Self {
        let uri = &url.uri;
        // Validated by config loading: upstream URLs always have a host.
        let named = uri
            .authority()
            .cloned()
            .unwrap_or_else(|| http::uri::Authority::from_static("invalid"));
        let scheme = uri.scheme().cloned().unwrap_or(http::uri::Scheme::HTTP);
        let label: Arc<str> = server_label(url, addr).into();
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
        let clients = dial.clients(&scheme, &authority, url.socket.as_ref());
        Server {
            clients,
            metrics: metrics.server_metrics(route, &label),
            scheme,
            authority,
            host,
            base_path: uri.path().trim_end_matches('/').to_string(),
            socket: url.socket.clone(),
            label,
        }
    }

    /// Log and count a server going out of its group or coming back.
    pub(crate) fn changed(&self, route: &str, change: Option<Change>) {
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
pub(super) fn server_label(url: &ServerUrl, addr: Option<std::net::IpAddr>) -> String {
    match addr {
        None => url.to_string(),
        Some(ip) => format!("{url} ({ip})"),
    }
}
