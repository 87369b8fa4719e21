//! Forwarding a request to its route's upstream and streaming the answer
//! back: URI and header rewriting, the response-head timeout, upgrades, and
//! the mapping of upstream failures to 502/504.

mod tunnel;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use ipnet::IpNet;

use crate::upstream::headers;
use crate::upstream::{
    Attempt, BodyRate, BodyTooLarge, BodyTooSlow, BodyUnreadable, Reclaim, RequestBody, SendError,
    Server, Upstream,
};

use std::sync::Arc;

use tokio::time::Instant;

use crate::admit::Admission;
use crate::config::{HashKey, RouteConfig};
use crate::conn::info::ConnInfo;
use crate::respond::{Counted, Guard, Payload, Rescue};
use crate::telemetry::{Metrics, UpstreamErrorKind};
use crate::upstream::balance::{self, AllOut, Outcome};

/// Facts about the client connection the proxy needs.
pub(crate) struct ClientSide<'a> {
    pub(crate) conn: &'a ConnInfo,
    pub(crate) trusted_proxies: &'a [IpNet],
    pub(crate) body_rate: Option<BodyRate>,
}

/// Why forwarding failed, and what the client is told.
#[derive(Debug)]
pub(crate) enum ProxyError {
    /// The upstream could not be reached or misbehaved.
    Upstream(UpstreamErrorKind),
    /// The client's body crossed the route's limit mid-stream.
    BodyTooLarge,
    /// The client sent its body slower than the minimum data rate.
    BodyTooSlow,
    /// The request could not be turned into an upstream request, or its
    /// body could not be read.
    BadRequest,
    /// Every server of the group is out; the first is back in this many
    /// seconds.
    NoServer { retry_after: u64 },
}

impl ProxyError {
    /// How the client is answered. A body failure leaves the rest of the
    /// body on the wire, so that connection cannot be reused.
    pub(crate) fn rescue(&self) -> Rescue {
        match self {
            ProxyError::Upstream(kind) => Rescue::upstream(*kind),
            ProxyError::BodyTooLarge => Rescue::status(StatusCode::PAYLOAD_TOO_LARGE).closing(),
            ProxyError::BodyTooSlow => Rescue::status(StatusCode::REQUEST_TIMEOUT)
                .closing()
                .counting(Counted::ConnectionClosed("body_rate")),
            ProxyError::BadRequest => Rescue::status(StatusCode::BAD_REQUEST).closing(),
            ProxyError::NoServer { retry_after } => Rescue::no_server(*retry_after),
        }
    }
}

/// The path the upstream sees: its own base path, then the request path
/// (without the route prefix when `strip_prefix` is set).
/// `authority` is the one the request names: the server's, or the
/// client's host when it goes as HTTP/2's `:authority` (the server's own
/// client dials the server whatever it says).
fn upstream_uri(
    route: &RouteConfig,
    up: &Server,
    authority: &http::uri::Authority,
    uri: &Uri,
) -> Result<Uri, ProxyError> {
    let stripping = route.strip_prefix && route.path != "/";
    // The common case, nothing to rewrite: the client's path and query are
    // reused as parsed (shared bytes), not rebuilt and parsed again.
    if up.base_path.is_empty()
        && !stripping
        && let Some(pq) = uri.path_and_query().filter(|pq| pq.path().starts_with('/'))
    {
        return Uri::builder()
            .scheme(up.scheme.clone())
            .authority(authority.clone())
            .path_and_query(pq.clone())
            .build()
            .map_err(|_| ProxyError::BadRequest);
    }
    let mut path = uri.path();
    if stripping {
        path = path
            .strip_prefix(route.path.trim_end_matches('/'))
            .unwrap_or(path);
    }
    let mut pq = String::with_capacity(
        up.base_path.len() + path.len() + 1 + uri.query().map_or(0, str::len),
    );
    pq.push_str(&up.base_path);
    if !path.starts_with('/') {
        pq.push('/');
    }
    pq.push_str(path);
    if let Some(q) = uri.query() {
        pq.push('?');
        pq.push_str(q);
    }
    Uri::builder()
        .scheme(up.scheme.clone())
        .authority(authority.clone())
        .path_and_query(pq)
        .build()
        .map_err(|_| ProxyError::BadRequest)
}

/// The protocol a client asks to switch to, if this is an HTTP/1.1 upgrade.
fn requested_upgrade(req: &Request<Incoming>) -> Option<HeaderValue> {
    if req.version() != Version::HTTP_11 {
        return None;
    }
    let connection_upgrade = req
        .headers()
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade.then(|| req.headers().get(header::UPGRADE).cloned())?
}

/// What forwarding tells the rest of the request's record that the
/// client's answer does not.
pub(crate) struct Report<'a> {
    pub(crate) metrics: &'a Metrics,
    pub(crate) route: &'a Arc<str>,
    /// The server the last attempt went to, for the access log.
    pub(crate) served_by: &'a mut Option<Arc<str>>,
}

impl Report<'_> {
    /// An attempt that failed before another server was tried: counted
    /// like a failure the client sees.
    fn passed_over(&self, kind: UpstreamErrorKind) {
        self.metrics.record_upstream_error(self.route, kind);
    }
}

/// Forward `req` to a server of `upstream` under the settings of its
/// `route`, and return the response, streaming.
pub(crate) async fn forward(
    mut req: Request<Incoming>,
    route: &RouteConfig,
    upstream: &Upstream,
    client: &ClientSide<'_>,
    host: Option<&str>,
    admission: &mut Option<Admission>,
    report: Report<'_>,
) -> Result<Response<Payload>, ProxyError> {
    let upgrade = requested_upgrade(&req);
    let client_upgrade = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));

    let (mut parts, body) = req.into_parts();
    // HTTP/2 clients always accept trailers; HTTP/1.1 clients say so with TE.
    let trailers = parts.version == Version::HTTP_2 || headers::accepts_trailers(&parts.headers);
    let client_version = parts.version;
    let h = &mut parts.headers;
    headers::clean_request(h);
    headers::set_forwarded(
        h,
        &headers::Forwarding {
            peer: client.conn.peer.ip(),
            peer_text: client.conn.peer_header(),
            tls: client.conn.tls,
            host,
            trusted_proxies: client.trusted_proxies,
        },
    );
    if trailers {
        h.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    if let Some(proto) = &upgrade {
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        h.insert(header::UPGRADE, proto.clone());
    }
    match (route.preserve_host, host.map(HeaderValue::from_str)) {
        (true, Some(Ok(v))) => {
            h.insert(header::HOST, v);
        }
        // Let the client fill in the server's authority.
        _ => {
            h.remove(header::HOST);
        }
    }

    // HTTP/2 names the host in `:authority`, which is the request URI's:
    // parsed once, and only for a server that may speak HTTP/2.
    let mut client_authority: Option<Option<http::uri::Authority>> = None;

    let body = RequestBody::new(body, route.max_request_body, client.body_rate);
    // Nothing to lose by sending a request without a body again.
    let bodyless = http_body::Body::is_end_stream(&body);
    // A gRPC client's deadline: no attempt waits past it.
    let grpc_deadline = headers::grpc_timeout(&parts.headers).map(|t| Instant::now() + t);
    let key = upstream
        .hash_key
        .as_ref()
        .and_then(|k| hash_key(k, &parts.headers, client.conn.peer.ip()));
    // The group as it is now: indices in `tried` stay valid if DNS changes
    // it meanwhile.
    let group = upstream.group.load_full();
    let retry = &upstream.retry;
    // A body several servers may be offered is shared, so a refused
    // attempt gives it back.
    let (mut attempt, mut reclaim) = if group.len() > 1 {
        retry.budget.request(Instant::now());
        let (shared, reclaim) = Attempt::shared(body);
        (shared, Some(reclaim))
    } else {
        (Attempt::Only(body), None)
    };
    // Sent once more after it reached a server: only an idempotent
    // request, and only once.
    let mut may_resend = retry.methods.contains(&parts.method);
    let mut tried: Vec<usize> = Vec::new();
    let mut last_failure = None;
    let resp = loop {
        let now = Instant::now();
        let mut pick = match group.pick(key, &tried, now) {
            Ok(pick) => pick,
            Err(AllOut { .. }) if let Some(failed) = last_failure => return Err(failed),
            Err(AllOut { until }) => {
                let wait = until.map_or(1, |u| {
                    u.saturating_duration_since(now).as_secs_f64().ceil() as u64
                });
                return Err(ProxyError::NoServer {
                    retry_after: wait.max(1),
                });
            }
        };
        let server = pick.target();
        server.metrics.picks.inc();
        *report.served_by = Some(server.label.clone());
        let (http, may_be_h2) = server.clients.get(upgrade.is_some());
        let authority = match may_be_h2 {
            true => client_authority
                .get_or_insert_with(|| {
                    host.filter(|_| route.preserve_host)
                        .and_then(|h| h.parse().ok())
                })
                .as_ref()
                .or(server.host.as_ref())
                .unwrap_or(&server.authority),
            false => &server.authority,
        };
        let mut attempt_req = Request::new(attempt);
        *attempt_req.method_mut() = parts.method.clone();
        *attempt_req.uri_mut() = upstream_uri(route, server, authority, &parts.uri)?;
        *attempt_req.version_mut() = Version::HTTP_11;
        *attempt_req.headers_mut() = if reclaim.is_some() {
            parts.headers.clone()
        } else {
            std::mem::take(&mut parts.headers)
        };
        if let Some(name) = &server.host
            && !attempt_req.headers().contains_key(header::HOST)
        {
            // Connected by address: the server still expects its name.
            if let Ok(v) = HeaderValue::from_str(name.as_str()) {
                attempt_req.headers_mut().insert(header::HOST, v);
            }
        }
        // Each attempt has the whole response timeout: a retry after a
        // timeout must not start with its time already spent; a gRPC
        // client's deadline bounds them all.
        let deadline = Instant::now() + route.response_timeout;
        let deadline = grpc_deadline.map_or(deadline, |g| g.min(deadline));
        let sent = http.request(attempt_req);
        let (failed, never_sent) = match tokio::time::timeout_at(deadline, sent).await {
            Err(_) => (
                ProxyError::Upstream(UpstreamErrorKind::ResponseTimeout),
                false,
            ),
            Ok(Err(e)) => (classify(&e), e.never_sent()),
            Ok(Ok(resp)) => {
                let latency = Instant::now().saturating_duration_since(pick.started());
                let outcome = if counts_as_failure(resp.status()) {
                    Outcome::Failed
                } else {
                    Outcome::Answered(latency)
                };
                let change = pick.finish(outcome, Instant::now());
                pick.target().changed(report.route, change);
                break (resp, pick);
            }
        };
        if matches!(failed, ProxyError::Upstream(_)) {
            let change = pick.finish(Outcome::Failed, Instant::now());
            pick.target().changed(report.route, change);
        }
        tried.push(pick.index());
        let ProxyError::Upstream(kind) = failed else {
            return Err(failed);
        };
        let Some(r) = &reclaim else {
            return Err(failed);
        };
        // Another server when none of the request left (the attempt gives
        // the body back unread), whatever the method; or when an
        // idempotent one got no answer and has its body whole to send.
        let resend_empty = || bodyless.then(|| (Attempt::Empty, Reclaim::empty()));
        let (reason, body) = if kind.before_sending() || never_sent {
            (
                "not_sent",
                r.take().map(Attempt::shared).or_else(resend_empty),
            )
        } else if may_resend {
            may_resend = false;
            let body = match r.take() {
                Some(b) => Some(Attempt::shared(b)),
                None => resend_empty(),
            };
            ("no_response", body)
        } else {
            ("", None)
        };
        let Some((shared, r)) = body else {
            return Err(failed);
        };
        if group.len() <= tried.len() || !retry.allowed(report.route, report.metrics) {
            return Err(failed);
        }
        report.metrics.upstream_retry(report.route, reason);
        tracing::debug!(route = %report.route, server = %pick.target().label, reason, "sending the request to another server");
        report.passed_over(kind);
        attempt = shared;
        reclaim = Some(r);
        last_failure = Some(failed);
    };

    let (mut response, pick) = resp;
    // The version is hop-by-hop (RFC 9110 §6.2): an HTTP/1.0 upstream's
    // answer goes to an HTTP/1.1 client as HTTP/1.1, keep-alive intact.
    *response.version_mut() = client_version;
    let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    let upstream_proto = response.headers().get(header::UPGRADE).cloned();
    headers::remove_hop_by_hop(response.headers_mut());
    if switching {
        let (Some(client_upgrade), Some(proto)) = (client_upgrade, upstream_proto) else {
            // A 101 nobody asked for cannot be relayed.
            return Err(ProxyError::Upstream(UpstreamErrorKind::Protocol));
        };
        client.conn.slot.state.upgraded();
        tunnel::spawn(
            client_upgrade,
            hyper::upgrade::on(&mut response),
            client.conn.slot.clone(),
            client.conn.shutdown.clone(),
            // The tunnel holds the request's admission until it closes.
            admission.take(),
        );
        let h = response.headers_mut();
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        h.insert(header::UPGRADE, proto);
    }
    Ok(if group.len() > 1 {
        // The request counts in flight on its server until the body ends.
        response.map(|b| Payload::Held(b, Guard::new(pick)))
    } else {
        response.map(Payload::Upstream)
    })
}

/// An answer that says the server, not the request, failed: the gateway
/// statuses (a 500 is the application's own error, and says nothing of
/// whether the server can take requests).
fn counts_as_failure(status: StatusCode) -> bool {
    matches!(status.as_u16(), 502..=504)
}

/// The request's hash key, when it has one.
fn hash_key(key: &HashKey, headers: &http::HeaderMap, peer: std::net::IpAddr) -> Option<u64> {
    match key {
        HashKey::Header(name) => headers.get(name).map(|v| balance::key(v.as_bytes())),
        HashKey::Cookie(name) => headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(n, _)| *n == name)
            .map(|(_, value)| balance::key(value.as_bytes())),
        HashKey::ClientIp => Some(match peer {
            std::net::IpAddr::V4(a) => balance::key(&a.octets()),
            std::net::IpAddr::V6(a) => balance::key(&a.octets()),
        }),
    }
}

/// Map a client error to what went wrong, by walking its causes.
fn classify(err: &SendError) -> ProxyError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut timed_out = false;
    let mut tls = false;
    while let Some(e) = source {
        if e.is::<BodyTooLarge>() {
            return ProxyError::BodyTooLarge;
        }
        if e.is::<BodyTooSlow>() {
            return ProxyError::BodyTooSlow;
        }
        if e.is::<BodyUnreadable>() {
            return ProxyError::BadRequest;
        }
        tls |= e.is::<rustls::Error>();
        // io::Error's `source()` skips the error it wraps; descend by hand.
        source = match e.downcast_ref::<std::io::Error>() {
            Some(io) => {
                timed_out |= io.kind() == std::io::ErrorKind::TimedOut;
                match io.get_ref() {
                    Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                    None => e.source(),
                }
            }
            None => e.source(),
        };
    }
    let kind = if err.is_connect() {
        if timed_out {
            UpstreamErrorKind::ConnectTimeout
        } else if tls {
            UpstreamErrorKind::Tls
        } else {
            UpstreamErrorKind::Connect
        }
    } else {
        UpstreamErrorKind::Protocol
    };
    ProxyError::Upstream(kind)
}
