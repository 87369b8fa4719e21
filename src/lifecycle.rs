//! The request lifecycle, phase by phase, in the order a request travels:
//!
//! 1. **accept** — the connection's listener, peer and TLS state ([`ConnInfo`]).
//! 2. **redirect** — a redirecting listener answers 308 to HTTPS and stops.
//! 3. **route** — host + path select a route, or 404.
//! 4. **route policy** — a declared body over the route limit gets 413 before
//!    a byte of it is read.
//! 5. **proxy** — forward upstream, stream the answer back; failures become
//!    502/504, a body that crosses the limit mid-stream 413.
//! 6. **respond** — the body is wrapped so the access log and metrics are
//!    written when it ends.
//!
//! Every response weir generates itself goes through
//! [`crate::respond::error_response`].

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use ipnet::IpNet;

use tokio::sync::watch;

use crate::admit::{Admitter, Gate, Shed};
use crate::config::{Config, RedirectSettings};
use crate::listen::registry::{CloseReason, Slot};
use crate::proxy::{self, BodyRate, ClientSide, ProxyError, Upstream};
use crate::respond::{
    ErrorShape, InFlight, Payload, Recorded, RequestRecord, ResponseBody, error_response,
};
use crate::route::{Route, Router, normalise_host};
use crate::telemetry::Metrics;

/// What is known about the connection a request arrived on.
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub tls: bool,
    /// Set on listeners that only redirect to HTTPS.
    pub redirect: Option<RedirectSettings>,
    /// The connection's place under the cap; an upgraded tunnel keeps it.
    pub slot: Arc<Slot>,
    pub shutdown: watch::Receiver<bool>,
}

/// Everything a request needs from the configuration, built once.
pub struct Gateway {
    router: Router<Upstream>,
    trusted_proxies: Vec<IpNet>,
    access_log: bool,
    metrics: Arc<Metrics>,
    max_requests_per_connection: u64,
    body_rate: Option<BodyRate>,
    admitter: Admitter,
}

impl Gateway {
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Self, String> {
        let tls = proxy::upstream::client_tls(&config.upstream)?;
        let routes = config
            .routes
            .iter()
            .map(|r| Route {
                name: r.name.as_str().into(),
                upstream: Upstream::new(r, &config.upstream, &tls),
                gate: Gate::new(r.max_concurrent_requests),
                config: r.clone(),
            })
            .collect();
        Ok(Gateway {
            admitter: Admitter::new(
                config.server.max_concurrent_requests,
                metrics.in_flight_gauge(),
                metrics.admission_hold_histogram(),
            ),
            router: Router::new(routes),
            trusted_proxies: config.server.trusted_proxies.clone(),
            access_log: config.log.access_log,
            metrics,
            max_requests_per_connection: config.connections.max_requests,
            body_rate: (config.connections.min_body_rate > 0).then_some(BodyRate {
                min_bytes_per_second: config.connections.min_body_rate,
                period: config.connections.body_rate_period,
            }),
        })
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub async fn handle(&self, req: Request<Incoming>, conn: &ConnInfo) -> Response<ResponseBody> {
        let start = Instant::now();
        let conn_state = &conn.slot.state;
        let nth_request = conn_state.request_started();
        let in_flight = InFlight::new(conn_state.clone());
        let last_on_connection =
            self.max_requests_per_connection > 0 && nth_request >= self.max_requests_per_connection;
        let http1 = req.version() <= http::Version::HTTP_11;
        // The Host as the client wrote it (HTTP/2 carries it as :authority).
        // Cloning a parsed header value shares its bytes; no allocation.
        let host_sent: Option<HeaderValue> =
            req.headers().get(header::HOST).cloned().or_else(|| {
                req.uri()
                    .authority()
                    .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            });
        let host_str = host_sent.as_ref().and_then(|h| h.to_str().ok());
        let host = host_str.and_then(normalise_host);
        let shape = ErrorShape::for_plain_route(req.headers());
        let mut record = RequestRecord {
            start,
            client: conn.peer.ip(),
            host: host_sent.clone(),
            method: req.method().clone(),
            path: req.uri().path_and_query().cloned(),
            status: 0,
            route: None,
            upstream: None,
            metrics: self.metrics.clone(),
            access_log: self.access_log,
            in_flight: Some(in_flight),
            admission: None,
        };

        let mut resp = self
            .respond(req, conn, host.as_deref(), host_str, shape, &mut record)
            .await;
        if last_on_connection {
            // The per-connection request cap: finish this one, then close
            // (Connection: close on HTTP/1.1, GOAWAY on HTTP/2).
            conn_state.close(CloseReason::MaxRequests);
            if http1 {
                resp = close(resp);
            }
        }
        record.status = resp.status().as_u16();
        resp.map(|body| Recorded::new(body, Some(record)))
    }

    async fn respond(
        &self,
        req: Request<Incoming>,
        conn: &ConnInfo,
        host: Option<&str>,
        host_sent: Option<&str>,
        shape: ErrorShape,
        record: &mut RequestRecord,
    ) -> Response<Payload> {
        let Some(host) = host else {
            return close(error_response(shape, StatusCode::BAD_REQUEST));
        };

        // A reverse proxy is not a forward proxy: no CONNECT tunnels.
        if req.method() == http::Method::CONNECT {
            return error_response(shape, StatusCode::METHOD_NOT_ALLOWED);
        }

        // Phase: redirect.
        if let Some(redirect) = conn.redirect {
            return self.redirect_to_https(&req, host, redirect, shape);
        }

        // Phase: admit — the process-wide gate, before any routing work,
        // so unknown-route floods are bounded too.
        match self.admitter.admit() {
            Ok(a) => record.admission = Some(a),
            Err(shed) => return self.shed(shape, shed, None),
        }

        // Phase: route.
        let Some(route) = self.router.find(host, req.uri().path()) else {
            return error_response(shape, StatusCode::NOT_FOUND);
        };
        record.route = Some(route.name.clone());
        record.upstream = Some(route.upstream.label.clone());

        // Phase: route policy — the route's own gate.
        if let Some(admission) = &mut record.admission
            && let Err(shed) = admission.enter_route(&route.gate)
        {
            record.admission = None;
            return self.shed(shape, shed, Some(&route.name));
        }

        // Phase: route policy — refuse a declared body over the limit unread.
        if let Some(limit) = route.config.max_request_body
            && declared_length(&req).is_some_and(|len| len > limit)
        {
            return close(error_response(shape, StatusCode::PAYLOAD_TOO_LARGE));
        }

        // Phase: proxy.
        let client = ClientSide {
            conn,
            trusted_proxies: &self.trusted_proxies,
            body_rate: self.body_rate,
        };
        match proxy::forward(req, route, &client, host_sent, &mut record.admission).await {
            Ok(resp) => resp,
            Err(e) => {
                if let ProxyError::Upstream(kind) = &e {
                    self.metrics.record_upstream_error(&route.name, *kind);
                    tracing::warn!(route = %route.name, upstream = %route.upstream.label, ?kind, "upstream request failed");
                }
                let resp = error_response(shape, e.status());
                match e {
                    // The rest of the body is still on the wire: the
                    // connection cannot be reused.
                    ProxyError::BodyTooLarge | ProxyError::BadRequest => close(resp),
                    ProxyError::BodyTooSlow => {
                        self.metrics.connection_closed("body_rate");
                        close(resp)
                    }
                    ProxyError::Upstream(_) => resp,
                }
            }
        }
    }

    /// 503 + Retry-After for a full gate. The counter is the operator's
    /// signal; the log line is debug only, so a shed storm cannot flood logs.
    fn shed(&self, shape: ErrorShape, shed: Shed, route: Option<&Arc<str>>) -> Response<Payload> {
        self.metrics.request_shed(shed.label(), route);
        tracing::debug!(
            gate = shed.label(),
            route = route.map_or("-", |r| &**r),
            "request shed"
        );
        error_response(shape, StatusCode::SERVICE_UNAVAILABLE)
    }

    /// 308 to the same host and path over HTTPS — only for hosts some route
    /// serves, so the listener cannot be used as an open redirector.
    fn redirect_to_https(
        &self,
        req: &Request<Incoming>,
        host: &str,
        redirect: RedirectSettings,
        shape: ErrorShape,
    ) -> Response<Payload> {
        if !self.router.knows_host(host) {
            return error_response(shape, StatusCode::NOT_FOUND);
        }
        let pq = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
        let location = if redirect.https_port == 443 {
            format!("https://{host}{pq}")
        } else {
            format!("https://{host}:{}{pq}", redirect.https_port)
        };
        let Ok(location) = HeaderValue::from_str(&location) else {
            return error_response(shape, StatusCode::BAD_REQUEST);
        };
        let mut resp = Response::new(Payload::empty());
        *resp.status_mut() = StatusCode::PERMANENT_REDIRECT;
        resp.headers_mut().insert(header::LOCATION, location);
        resp
    }
}

/// The body length a request declares, if any.
fn declared_length<B>(req: &Request<B>) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Ask hyper to close the connection after this response (HTTP/1.1).
fn close(mut resp: Response<Payload>) -> Response<Payload> {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}
