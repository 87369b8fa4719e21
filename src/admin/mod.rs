//! The admin listener: `/health` for load balancers and `/metrics` for
//! Prometheus. It has its own socket and accept loop, outside the request
//! path, so it keeps answering while the proxy listeners are busy or
//! draining — and reports the drain, so a load balancer can stop sending.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::listen::accept::{AcceptLoop, SpareFd};
use crate::respond::{ErrorShape, Payload, error_response};
use crate::telemetry::Metrics;

/// State the admin endpoints report on.
pub struct AdminState {
    pub metrics: Arc<Metrics>,
    pub draining: AtomicBool,
}

fn handle(req: &Request<Incoming>, state: &AdminState) -> Response<Payload> {
    let shape = ErrorShape::for_plain_route(req.headers());
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return error_response(shape, StatusCode::METHOD_NOT_ALLOWED);
    }
    let (status, content_type, body) = match req.uri().path() {
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

/// Accept admin connections until the task is dropped. Accept errors get
/// the same policy as the proxy listeners (back-off, spare descriptor,
/// de-duplicated logs): the admin listener is what an operator reaches for
/// when descriptors run out.
pub async fn run(socket: TcpListener, state: Arc<AdminState>) {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1().timer(TokioTimer::new());
    let http = Arc::new(http);
    let mut accepts = AcceptLoop::new(socket, SpareFd::new(), "admin");
    let metrics = state.metrics.clone();
    accepts.on_error = Box::new(move |kind| metrics.accept_error(kind));
    loop {
        let (stream, _) = accepts.next().await;
        let state = state.clone();
        let http = http.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let resp = handle(&req, &state);
                async move { Ok::<_, Infallible>(resp) }
            });
            let _ = http.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
