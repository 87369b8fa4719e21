//! The admin listener: `/health` for load balancers, `/metrics` for
//! Prometheus and `/usage` (LLM client tokens against their budgets), open
//! to whoever can reach the listener (loopback by default); and `/admin/*` behind a bearer token — reload, reopen-logs,
//! status (rendered here from what the running server reports) and the
//! effective config — which, without a configured token, answers 404; and
//! the dashboard (`/dashboard/`, its JSON under `/admin/dashboard/`, which
//! a read-only view token may also read). It
//! has its own socket and
//! accept loop, outside the request path, so it keeps answering while the
//! proxy listeners are busy or draining — and reports the drain, so a load
//! balancer can stop sending.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use subtle::ConstantTimeEq;

pub(crate) mod dashboard;
mod keys;
mod segments;
mod teams;

use crate::admit::auth_failures::AuthFailures;
use crate::config::{Config, RouteKind, Secret};
use crate::listen::accept::{AcceptLoop, SpareFd};
use crate::respond::{ErrorShape, Payload, error_response, render};
use crate::sync::Locked;
use crate::telemetry::Metrics;

/// What a successful reload reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReloadReport {
    /// The generation of the snapshot now serving.
    pub(crate) generation: u64,
    /// Settings that changed in the file but only take effect at restart.
    pub(crate) restart_needed: Vec<&'static str>,
}

/// A reload under way: every problem found, or what the reload did.
pub(crate) type Reloading = Pin<Box<dyn Future<Output = Result<ReloadReport, Vec<String>>> + Send>>;

/// The usage view under way (a budget the fleet keeps is read from Redis).
pub(crate) type UsageView = Pin<Box<dyn Future<Output = Vec<serde_json::Value>> + Send>>;

/// A runtime key's budget view under way (`None`: no route takes
/// runtime keys, or the key is not live).
pub(crate) type KeyBudgetView = Pin<Box<dyn Future<Output = Option<serde_json::Value>> + Send>>;

/// What the admin API acts on and reports (implemented by the running
/// server, so this module does not import its caller).
pub(crate) trait Reload: Send + Sync {
    /// Reload the config from its file, off the caller's runtime: every
    /// problem found, or what the reload did.
    fn reload(self: Arc<Self>) -> Reloading;
    /// What `/admin/status` reports, as it is now.
    fn status(&self) -> Status;
    /// The effective config, secrets redacted.
    fn config(&self) -> String;
    /// Each LLM route's client tokens against their budgets (`client`:
    /// only the tokens of that name).
    fn usage(self: Arc<Self>, client: Option<String>) -> UsageView;
    /// Runtime key `id`'s budget and its team's, each window's use and
    /// reset, from the fleet when it keeps them (`{budget, team_budget}`).
    fn key_budget(self: Arc<Self>, id: String) -> KeyBudgetView;
    /// Runtime keys' and teams' budgets as they stand in this process,
    /// for the dashboard.
    fn keyed_budgets(&self) -> Vec<serde_json::Value>;
    /// Every upstream group's members as they stand now, for the
    /// dashboard.
    fn members(&self) -> Vec<dashboard::RouteMembers>;
}

/// The running server's state that `/admin/status` reports (with the
/// requests in flight and shed, from the metrics).
pub(crate) struct Status {
    /// The config now running.
    pub(crate) config: Config,
    pub(crate) generation: u64,
    pub(crate) uptime: Duration,
    /// When the running config was loaded (Unix seconds).
    pub(crate) loaded_at_unix: u64,
    pub(crate) listeners: Vec<(String, SocketAddr)>,
    pub(crate) open_connections: usize,
}

impl Status {
    /// Version, uptime, config source and generation, listeners, routes,
    /// connections, requests in flight, sheds.
    fn json(&self, metrics: &Metrics) -> serde_json::Value {
        let routes: Vec<serde_json::Value> = self
            .config
            .routes
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "kind": kind_name(&r.kind),
                    "hosts": r.hosts.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "path": r.path,
                })
            })
            .collect();
        let listeners: Vec<serde_json::Value> = self
            .listeners
            .iter()
            .map(|(n, a)| serde_json::json!({"name": n, "address": a.to_string()}))
            .collect();
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_seconds": self.uptime.as_secs(),
            "config": {
                "source": self.config.source.display().to_string(),
                "generation": self.generation,
                "loaded_at_unix": self.loaded_at_unix,
            },
            "listeners": listeners,
            "routes": routes,
            "open_connections": self.open_connections,
            "requests_in_flight": metrics.in_flight(),
            "requests_shed": metrics.shed_total(),
        })
    }
}

/// What a route is, as the status and the dashboard name it.
fn kind_name(kind: &RouteKind) -> &'static str {
    match kind {
        RouteKind::Proxy { .. } => "proxy",
        RouteKind::Llm(l) => l.protocol.name(),
        RouteKind::Static(_) => "static",
        RouteKind::Redirect(_) => "redirect",
    }
}

/// State the admin endpoints report on and act through.
pub(crate) struct AdminState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) draining: AtomicBool,
    /// Bearer token for `/admin/*`; `None` = those endpoints are off (404).
    pub(crate) token: Option<Secret>,
    /// A read-only token: it may only GET `/admin/dashboard/*`.
    pub(crate) view_token: Option<Secret>,
    /// The dashboard's ring of samples, and how often it samples.
    pub(crate) series: dashboard::Series,
    pub(crate) dashboard_interval: Duration,
    pub(crate) reload: Arc<dyn Reload>,
    /// Failed authentications, for the once-per-10-s log line.
    pub(crate) auth_failures: AtomicU64,
    /// Failed authentications per client, limited.
    pub(crate) auth_failures_by_client: AuthFailures,
    /// Runtime keys and usage rows, with `[database]`.
    pub(crate) database: Option<crate::keys::Database>,
}

/// Failed admin authentications a client may make at once; then one a
/// minute.
pub(crate) const AUTH_FAILURE_BURST: u32 = 5;

/// The limiter for failed admin authentications.
pub(crate) fn auth_failure_limit() -> AuthFailures {
    AuthFailures::new(1, AUTH_FAILURE_BURST)
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Payload> {
    let mut resp = Response::new(Payload::text(format!("{body}\n")));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Whether the request carries `token` (constant-time compare).
fn authorized(req: &Request<Incoming>, token: Option<&Secret>) -> bool {
    let Some(token) = token else { return false };
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(weir_wire::fields::bearer)
        .is_some_and(|t| bool::from(t.as_bytes().ct_eq(token.0.as_bytes())))
}

/// What the view token may do: read the dashboard's JSON, nothing else.
fn view_only(req: &Request<Incoming>) -> bool {
    (req.method() == Method::GET || req.method() == Method::HEAD)
        && req.uri().path().starts_with("/admin/dashboard/")
}

/// `/admin/*`: off without a token; 401 (logged at most once per 10 s,
/// so failed attempts cannot flood the log) without the right one; 403
/// for the view token anywhere but reading the dashboard.
async fn admin_api(
    req: Request<Incoming>,
    state: Arc<AdminState>,
    peer: std::net::IpAddr,
) -> Response<Payload> {
    let shape = ErrorShape::Json;
    if state.token.is_none() && state.view_token.is_none() {
        return error_response(shape, StatusCode::NOT_FOUND);
    }
    // A client that keeps failing is refused before its token is looked
    // at: guessing is limited to AUTH_FAILURE_BURST tries, then one a
    // minute.
    if let Some(secs) = state.auth_failures_by_client.refused(peer) {
        return render(shape, StatusCode::TOO_MANY_REQUESTS, None, Some(secs));
    }
    let full = authorized(&req, state.token.as_ref());
    if !full && authorized(&req, state.view_token.as_ref()) {
        if !view_only(&req) {
            return error_response(shape, StatusCode::FORBIDDEN);
        }
    } else if !full {
        // Failures alone spend the client's budget.
        state.auth_failures_by_client.failed(peer);
        static LAST_LOG: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
        let n = state.auth_failures.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = LAST_LOG.locked();
        if last.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10)) {
            *last = Some(std::time::Instant::now());
            tracing::warn!(failures_so_far = n, "admin API: authentication failed");
        }
        let mut resp = error_response(shape, StatusCode::UNAUTHORIZED);
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return resp;
    }
    let path = req.uri().path();
    if path.starts_with("/admin/dashboard/") {
        return dashboard::api(&req, &state).await;
    }
    if path == "/admin/keys" || path.starts_with("/admin/keys/") || path == "/admin/usage" {
        return keys::handle(req, state.database.as_ref(), &state.reload).await;
    }
    if path == "/admin/teams" || path.starts_with("/admin/teams/") {
        return match state.database.as_ref() {
            Some(database) => teams::handle(req, database).await,
            None => keys::problem(
                StatusCode::NOT_FOUND,
                "no database is configured: add a `[database]` table to keep teams at runtime (or define them in `[[teams]]`)",
            ),
        };
    }
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/admin/reload") => match state.reload.clone().reload().await {
            Ok(r) => json(
                StatusCode::OK,
                serde_json::json!({"status": "reloaded", "generation": r.generation, "restart_needed": r.restart_needed}),
            ),
            Err(problems) => json(
                StatusCode::UNPROCESSABLE_ENTITY,
                serde_json::json!({"status": "failed", "problems": problems}),
            ),
        },
        (_, "/admin/reload") => error_response(shape, StatusCode::METHOD_NOT_ALLOWED),
        (&Method::POST, "/admin/reopen-logs") => {
            let problems = crate::telemetry::logfile::reopen_all();
            if problems.is_empty() {
                json(StatusCode::OK, serde_json::json!({"status": "reopened"}))
            } else {
                json(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    serde_json::json!({"status": "failed", "problems": problems}),
                )
            }
        }
        (&Method::GET, "/admin/status") => {
            json(StatusCode::OK, state.reload.status().json(&state.metrics))
        }
        (&Method::GET, "/admin/config") => {
            let mut resp = Response::new(Payload::text(state.reload.config()));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            resp
        }
        _ => error_response(shape, StatusCode::NOT_FOUND),
    }
}

fn handle(req: &Request<Incoming>, state: &AdminState) -> Response<Payload> {
    let shape = ErrorShape::for_plain_route(req.headers());
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return error_response(shape, StatusCode::METHOD_NOT_ALLOWED);
    }
    let path = req.uri().path();
    let (status, content_type, body) = match path {
        "/health" => {
            let draining = state.draining.load(Ordering::Relaxed);
            let status = if draining {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::OK
            };
            let body = format!(
                "{{\"status\":\"{}\",\"version\":\"{}\"}}\n",
                if draining { "draining" } else { "ok" },
                env!("CARGO_PKG_VERSION")
            );
            (status, "application/json", body)
        }
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            state.metrics.encode(),
        ),
        _ => return error_response(shape, StatusCode::NOT_FOUND),
    };
    let mut resp = Response::new(Payload::text(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// `GET /usage`: every client token of every LLM route against its
/// budget; `GET /usage/<client>`: the tokens of that name (404 if none).
async fn usage(path: &str, state: &AdminState) -> Response<Payload> {
    let client = path
        .strip_prefix("/usage/")
        .map(|c| c.trim_end_matches('/'))
        .filter(|c| !c.is_empty());
    let clients = state.reload.clone().usage(client.map(str::to_string)).await;
    if client.is_some() && clients.is_empty() {
        return json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "no client token of that name"}),
        );
    }
    json(StatusCode::OK, serde_json::json!({"clients": clients}))
}

/// Accept admin connections until the task is dropped. Accept errors get
/// the same policy as the proxy listeners (back-off, spare descriptor,
/// de-duplicated logs): the admin listener is what an operator reaches for
/// when descriptors run out.
pub(crate) async fn run(socket: TcpListener, state: Arc<AdminState>) {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1().timer(TokioTimer::new());
    let http = Arc::new(http);
    let mut accepts = AcceptLoop::new(socket, SpareFd::new(), "admin");
    let metrics = state.metrics.clone();
    accepts.on_error = Box::new(move |kind| metrics.accept_error(kind));
    // The dashboard's sampler lives as long as this task, and only when
    // someone may read what it samples.
    let dashboard_on = state.token.is_some() || state.view_token.is_some();
    let sampler = dashboard::sample(state.clone());
    tokio::pin!(sampler);
    loop {
        let (stream, peer) = tokio::select! {
            next = accepts.next() => next,
            () = &mut sampler, if dashboard_on => continue,
        };
        let state = state.clone();
        let http = http.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let state = state.clone();
                async move {
                    let path = req.uri().path();
                    let dashboard = path == "/dashboard" || path.starts_with("/dashboard/");
                    let resp = if dashboard && (state.token.is_some() || state.view_token.is_some())
                    {
                        dashboard::page(&req)
                    } else if path.starts_with("/admin/") {
                        admin_api(req, state, peer.ip()).await
                    } else if (path == "/usage" || path.starts_with("/usage/"))
                        && (req.method() == Method::GET || req.method() == Method::HEAD)
                    {
                        usage(path, &state).await
                    } else {
                        handle(&req, &state)
                    };
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = http.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
