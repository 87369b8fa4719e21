//! The dashboard: a page on the admin listener that shows the edge (as
//! HAProxy's stats page does) and the LLM side (as LiteLLM's usage views
//! do), live, from what the server already knows.
//!
//! Two halves ([085](../../../docs/decisions/085-dashboard.md)):
//! - the page, its script, its styles and the charting library (uPlot,
//!   [086](../../../docs/decisions/086-charting-library-vendored.md)),
//!   compiled into the binary and served openly under `/dashboard/`:
//!   they carry no data, work with no network beyond the admin listener,
//!   and run under a strict Content-Security-Policy;
//! - the JSON under `/admin/dashboard/` (`state`, `series`, `usage`),
//!   behind the admin token or the read-only view token, which the page
//!   asks for and sends as a bearer header.
//!
//! The figures come from the process's own Prometheus registry, read by
//! [`series`]' sampler every `dashboard_interval` into a bounded ring,
//! and from read-only accessors of the modules that own the state
//! (upstream groups' members, certificates in the config, budgets): a
//! request on any route does no work for the dashboard.

mod scrape;
mod series;
mod state;

use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

pub(crate) use series::Series;
pub(crate) use state::RouteMembers;

use super::AdminState;
use crate::respond::{ErrorShape, Payload, error_response};

/// What the page may load and do: only its own files and JSON, nothing
/// inline, never framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The page's files, by the path under `/dashboard/`.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "",
        "text/html; charset=utf-8",
        include_bytes!("assets/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/app.css"),
    ),
    (
        "uplot.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/uPlot.iife.min.js"),
    ),
    (
        "uplot.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/uPlot.min.css"),
    ),
    (
        "LICENSE-uplot.txt",
        "text/plain; charset=utf-8",
        include_bytes!("assets/LICENSE-uplot"),
    ),
];

/// The headers every dashboard answer carries.
fn guarded(
    mut resp: Response<Payload>,
    content_type: &'static str,
    cache: &'static str,
) -> Response<Payload> {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

/// `GET /dashboard/…`: the page's files (`/dashboard` moves to
/// `/dashboard/`, so the page's relative links resolve).
pub(crate) fn page(req: &Request<Incoming>) -> Response<Payload> {
    let shape = ErrorShape::for_plain_route(req.headers());
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return error_response(shape, StatusCode::METHOD_NOT_ALLOWED);
    }
    let path = req.uri().path();
    if path == "/dashboard" {
        let mut resp = Response::new(Payload::text(String::new()));
        *resp.status_mut() = StatusCode::PERMANENT_REDIRECT;
        resp.headers_mut()
            .insert(header::LOCATION, HeaderValue::from_static("/dashboard/"));
        return resp;
    }
    let name = path.strip_prefix("/dashboard/").unwrap_or(path);
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => guarded(
            Response::new(Payload::text(bytes::Bytes::from_static(body))),
            content_type,
            "no-cache",
        ),
        None => error_response(shape, StatusCode::NOT_FOUND),
    }
}

/// `GET /admin/dashboard/{state,series,usage}`, already authorized (by
/// either token).
pub(crate) async fn api(req: &Request<Incoming>, state: &AdminState) -> Response<Payload> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return error_response(ErrorShape::Json, StatusCode::METHOD_NOT_ALLOWED);
    }
    let body = match req.uri().path().trim_end_matches('/') {
        "/admin/dashboard/state" => {
            let status = state.reload.status();
            let members = state.reload.members();
            let mut budgets = state.reload.clone().usage(None).await;
            budgets.extend(state.reload.keyed_budgets());
            state.series.with(|memory| {
                state::state(&state::Inputs {
                    status: &status,
                    memory,
                    members: &members,
                    budgets: &budgets,
                    draining: state.draining.load(std::sync::atomic::Ordering::Relaxed),
                    database: state.database.is_some(),
                })
            })
        }
        "/admin/dashboard/series" => state
            .series
            .with(|m| series::json(m, state.dashboard_interval)),
        "/admin/dashboard/usage" => return usage(req, state).await,
        _ => return error_response(ErrorShape::Json, StatusCode::NOT_FOUND),
    };
    json(StatusCode::OK, &body)
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response<Payload> {
    let mut resp = Response::new(Payload::text(format!("{body}\n")));
    *resp.status_mut() = status;
    guarded(resp, "application/json", "no-store")
}

/// `GET /admin/dashboard/usage?group_by=…&from=…&to=…`: the database's
/// report (as `/admin/usage` gives it) with `[database]`; else this
/// process's counters since it started, by client, model, upstream or
/// route.
async fn usage(req: &Request<Incoming>, state: &AdminState) -> Response<Payload> {
    let query = req.uri().query().unwrap_or("");
    if let Some(database) = &state.database {
        // `/admin/usage`'s answer, with the dashboard's headers.
        let resp = super::keys::usage(query, database).await;
        return guarded(resp, "application/json", "no-store");
    }
    let by = query
        .split('&')
        .find_map(|p| p.strip_prefix("group_by="))
        .unwrap_or("client");
    let label = match by {
        "client" | "key" => "client",
        "model" | "upstream" | "route" => by,
        other => {
            return json(
                StatusCode::BAD_REQUEST,
                &serde_json::json!({"error": format!(
                    "without [database] usage is grouped by client, model, upstream or route, not `{other}` (sessions and agents are kept in the database)"
                )}),
            );
        }
    };
    let lines = state.series.with(|m| {
        m.latest
            .as_deref()
            .map_or_else(Vec::new, |now| state::usage_lines(now, label))
    });
    json(
        StatusCode::OK,
        &serde_json::json!({"source": "process", "usage": lines}),
    )
}

/// Run the sampler for the admin listener's lifetime.
pub(crate) async fn sample(state: std::sync::Arc<AdminState>) {
    let interval = state.dashboard_interval.max(Duration::from_secs(1));
    state
        .series
        .clone()
        .sample(state.metrics.clone(), interval)
        .await;
}
