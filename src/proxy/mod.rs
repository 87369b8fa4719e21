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
use crate::admit::tunnels::{CapTicket, TunnelCap, TunnelLimits};
use crate::config::{HashKey, HeaderRules, RouteConfig};
use crate::conn::info::ConnInfo;
use crate::respond::{Counted, Guard, Payload, Rescue};
use crate::rules::Facts;
use crate::telemetry::trace::{self, Trace};
use crate::telemetry::{Metrics, UpstreamErrorKind};
use crate::upstream::balance::{self, AllOut, Outcome};

/// Facts about the client connection the proxy needs.
pub(crate) struct ClientSide<'a> {
    pub(crate) conn: &'a ConnInfo,
    pub(crate) trusted_proxies: &'a [IpNet],
    pub(crate) body_rate: Option<BodyRate>,
    pub(crate) tunnel_limits: TunnelLimits,
    pub(crate) tunnel_cap: &'a Arc<TunnelCap>,
    /// For the tunnels, which outlive the request.
    pub(crate) metrics: &'a Arc<Metrics>,
    /// The route's header rules and the request's facts, if it has rules.
    pub(crate) rules: Option<(&'a HeaderRules, &'a Facts)>,
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
    /// An upgrade from a client at its `max_tunnels_per_ip`.
    TunnelCap,
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
            ProxyError::TunnelCap => Rescue::shed("tunnels_per_ip"),
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
    // `replace_prefix` strips the prefix and puts its own in place.
    let replacement = route
        .rules
        .as_ref()
        .and_then(|r| r.replace_prefix.as_deref());
    let stripping = (route.strip_prefix || replacement.is_some()) && route.path != "/";
    // The common case, nothing to rewrite: the client's path and query are
    // reused as parsed (shared bytes), not rebuilt and parsed again.
    if up.base_path.is_empty()
        && !stripping
        && replacement.is_none()
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
    let mut stripped = route.path == "/";
    if stripping && let Some(rest) = path.strip_prefix(route.path.trim_end_matches('/')) {
        path = rest;
        stripped = true;
    }
    let mut pq = String::with_capacity(
        up.base_path.len() + path.len() + 1 + uri.query().map_or(0, str::len),
    );
    pq.push_str(&up.base_path);
    match replacement.filter(|_| stripped) {
        // What is left of a prefix match is empty or starts with `/`:
        // `/api` goes as `/v2`, `/api/x` as `/v2/x`.
        Some(prefix) => pq.push_str(prefix),
        None if !path.starts_with('/') => pq.push('/'),
        None => {}
    }
    pq.push_str(path);
    if pq.is_empty() {
        pq.push('/');
    }
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

/// The protocol a client asks to switch to, if this is an HTTP/1.1 upgrade
/// to one the route allows (`upgrade_protocols`; `websocket` by default).
/// Protocols it does not allow are dropped from the list, and with none
/// left the request goes on as a plain one: a server may ignore Upgrade
/// (RFC 9110 §7.8), as nginx does unless told to pass it — and a client
/// offering `h2c` expects exactly that.
fn requested_upgrade(req: &Request<Incoming>, allowed: &[String]) -> Option<HeaderValue> {
    if req.version() != Version::HTTP_11 {
        return None;
    }
    if !weir_wire::fields::connection_upgrade(req.headers()) {
        return None;
    }
    let asked = req.headers().get(header::UPGRADE)?;
    let text = asked.to_str().ok()?;
    let is_allowed = |p: &&str| upgrade_allowed(p.trim(), allowed);
    let protocols = || text.split(',').filter(|p| !p.trim().is_empty());
    if protocols().all(|p| is_allowed(&p)) {
        return protocols().next().is_some().then(|| asked.clone());
    }
    let kept: Vec<&str> = protocols().filter(is_allowed).map(str::trim).collect();
    if kept.is_empty() {
        return None;
    }
    HeaderValue::from_str(&kept.join(", ")).ok()
}

/// Whether `protocol` (`name` or `name/version`) is one of `allowed`: by
/// name when the route lists the bare name, exactly when it lists a version.
fn upgrade_allowed(protocol: &str, allowed: &[String]) -> bool {
    let name = protocol.split('/').next().unwrap_or(protocol);
    allowed.iter().any(|a| {
        if a.contains('/') {
            a.eq_ignore_ascii_case(protocol)
        } else {
            a.eq_ignore_ascii_case(name)
        }
    })
}

/// What forwarding tells the rest of the request's record that the
/// client's answer does not.
pub(crate) struct Report<'a> {
    pub(crate) metrics: &'a Metrics,
    pub(crate) route: &'a Arc<str>,
    /// The server the last attempt went to, for the access log.
    pub(crate) served_by: &'a mut Option<Arc<str>>,
    /// The request's spans, when it is traced: one per attempt.
    pub(crate) trace: Option<&'a Trace>,
}

impl Report<'_> {
    /// An attempt that failed before another server was tried: counted
    /// like a failure the client sees.
    fn passed_over(&self, kind: UpstreamErrorKind) {
        self.metrics.record_upstream_error(self.route, kind);
    }
}

/// Forward `req` to a server of `upstream` under the settings of its
/// `route`, and return the response, streaming. In the order the request
/// travels: rewritten once for the upstream ([`Outgoing::new`]), sent to a
/// server of the group and to another when an attempt fails in a way that
/// allows it ([`send`]), its answer relayed ([`relay`]).
pub(crate) async fn forward(
    mut req: Request<Incoming>,
    route: &RouteConfig,
    upstream: &Upstream,
    client: &ClientSide<'_>,
    host: Option<&str>,
    admission: &mut Option<Admission>,
    mut report: Report<'_>,
) -> Result<Response<Payload>, ProxyError> {
    let upgrade = requested_upgrade(&req, &route.upgrade_protocols);
    // A tunnel's place under the per-address cap is taken before the
    // upgrade is asked for, so concurrent upgrades cannot overshoot it.
    let cap = match &upgrade {
        Some(_) => Some(
            client
                .tunnel_cap
                .take(client.conn.peer.ip())
                .ok_or(ProxyError::TunnelCap)?,
        ),
        None => None,
    };
    let client_upgrade = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));
    let client_version = req.version();
    let (out, body) = Outgoing::new(req, route, client, host, upgrade.as_ref());
    let answer = send(out, body, upstream, client.conn.peer.ip(), &mut report).await?;
    relay(
        answer,
        client_version,
        (client_upgrade, cap),
        client,
        admission,
    )
}

/// The request's head as every attempt sends it, and what shapes each
/// attempt: rewritten once, then copied (or, for the only server, moved)
/// into the request to each server.
struct Outgoing<'a> {
    parts: http::request::Parts,
    route: &'a RouteConfig,
    host: Option<&'a str>,
    /// An HTTP/1.1 upgrade: it goes over HTTP/1.1 whatever the server.
    upgrade: bool,
    /// A gRPC client's deadline: no attempt waits past it.
    grpc_deadline: Option<Instant>,
    /// HTTP/2 names the host in `:authority`, which is the request URI's:
    /// parsed once, and only for a server that may speak HTTP/2.
    client_authority: Option<Option<http::uri::Authority>>,
}

impl<'a> Outgoing<'a> {
    /// The client's request rewritten for the upstream: hop-by-hop headers
    /// dropped, the forwarding headers set, trailers and an upgrade asked
    /// for again (they are hop-by-hop too), the client's host kept only
    /// when the route preserves it. The body comes back beside it, bounded
    /// by the route's limit and the minimum data rate: the attempts decide
    /// how it is shared.
    fn new(
        req: Request<Incoming>,
        route: &'a RouteConfig,
        client: &ClientSide<'_>,
        host: Option<&'a str>,
        upgrade: Option<&HeaderValue>,
    ) -> (Self, RequestBody) {
        let (mut parts, body) = req.into_parts();
        // HTTP/2 clients always accept trailers; HTTP/1.1 clients say so with TE.
        let trailers =
            parts.version == Version::HTTP_2 || headers::accepts_trailers(&parts.headers);
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
        if let Some(proto) = upgrade {
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
        if let Some((rules, facts)) = client.rules {
            crate::rules::headers::to_upstream(h, rules, facts);
        }
        let body = RequestBody::new(body, route.max_request_body, client.body_rate);
        let grpc_deadline = headers::grpc_timeout(&parts.headers).map(|t| Instant::now() + t);
        let out = Outgoing {
            parts,
            route,
            host,
            upgrade: upgrade.is_some(),
            grpc_deadline,
            client_authority: None,
        };
        (out, body)
    }

    /// The request as it goes to `server`, with `body`. Its URI names the
    /// server, or the client's host as HTTP/2's `:authority` to a server
    /// that may speak it (`may_be_h2`); a server reached by address still
    /// gets its name as the host. The head is copied when another server
    /// may be sent it (`shared`), else moved.
    fn to(
        &mut self,
        server: &Server,
        may_be_h2: bool,
        body: Attempt,
        shared: bool,
    ) -> Result<Request<Attempt>, ProxyError> {
        let authority = match may_be_h2 {
            true => self
                .client_authority
                .get_or_insert_with(|| {
                    self.host
                        .filter(|_| self.route.preserve_host)
                        .and_then(|h| h.parse().ok())
                })
                .as_ref()
                .or(server.host.as_ref())
                .unwrap_or(&server.authority),
            false => &server.authority,
        };
        let mut req = Request::new(body);
        *req.method_mut() = self.parts.method.clone();
        *req.uri_mut() = upstream_uri(self.route, server, authority, &self.parts.uri)?;
        *req.version_mut() = Version::HTTP_11;
        *req.headers_mut() = if shared {
            self.parts.headers.clone()
        } else {
            std::mem::take(&mut self.parts.headers)
        };
        if let Some(name) = &server.host
            && !req.headers().contains_key(header::HOST)
        {
            // Connected by address: the server still expects its name.
            if let Ok(v) = HeaderValue::from_str(name.as_str()) {
                req.headers_mut().insert(header::HOST, v);
            }
        }
        Ok(req)
    }

    /// When an attempt sent now must have its answer's head. Each attempt
    /// has the whole response timeout: a retry after a timeout must not
    /// start with its time already spent; a gRPC client's deadline bounds
    /// them all.
    fn deadline(&self) -> Instant {
        let deadline = Instant::now() + self.route.response_timeout;
        self.grpc_deadline.map_or(deadline, |g| g.min(deadline))
    }
}

/// A server's answer, and the pick of the server that gave it.
struct Answer {
    response: Response<Incoming>,
    pick: balance::Pick<Server>,
    /// The group has several servers: the answer's body holds the pick,
    /// so the request counts in flight on its server until the body ends.
    held: bool,
}

/// Send the request to a server of the group, and to another while an
/// attempt fails in a way that allows it ([`Attempts::again`]). Any
/// answer ends the loop: a 502 from the server is relayed as it is,
/// though counted against the server.
async fn send(
    mut out: Outgoing<'_>,
    body: RequestBody,
    upstream: &Upstream,
    peer: std::net::IpAddr,
    report: &mut Report<'_>,
) -> Result<Answer, ProxyError> {
    let key = upstream
        .hash_key
        .as_ref()
        .and_then(|k| hash_key(k, &out.parts.headers, peer));
    let (mut attempts, mut body) = Attempts::new(body, upstream, &out.parts.method, key);
    loop {
        let mut pick = attempts.pick()?;
        let server = pick.target();
        server.metrics.picks.inc();
        *report.served_by = Some(server.label.clone());
        let (http, may_be_h2) = server.clients.get(out.upgrade);
        let mut req = out.to(server, may_be_h2, body, attempts.reclaim.is_some())?;
        if let Some(t) = report.trace {
            let name = req.method().as_str().to_string();
            t.attempt(name, |s| {
                trace::http::attempt(s, req.method(), req.uri(), &server.label);
            })
            .apply(req.headers_mut());
        }
        let sent = tokio::time::timeout_at(out.deadline(), http.request(req));
        let (failed, never_sent) = match sent.await {
            Err(_) => (
                ProxyError::Upstream(UpstreamErrorKind::ResponseTimeout),
                false,
            ),
            Ok(Err(e)) => (classify(&e), e.never_sent()),
            Ok(Ok(response)) => {
                if let Some(t) = report.trace {
                    t.attempt_edit(|s| trace::http::answer(s, response.status()));
                    t.answered();
                }
                let latency = Instant::now().saturating_duration_since(pick.started());
                let outcome = if counts_as_failure(response.status()) {
                    Outcome::Failed
                } else {
                    Outcome::Answered(latency)
                };
                let change = pick.finish(outcome, Instant::now());
                pick.target().changed(report.route, change);
                let held = attempts.group.len() > 1;
                return Ok(Answer {
                    response,
                    pick,
                    held,
                });
            }
        };
        if let Some(t) = report.trace {
            t.passed_over(failed_name(&failed));
        }
        body = attempts.again(&mut pick, failed, never_sent, report)?;
    }
}

/// An attempt's failure as its span names it (`error.type`).
fn failed_name(failed: &ProxyError) -> &'static str {
    match failed {
        ProxyError::Upstream(UpstreamErrorKind::Connect) => "connect",
        ProxyError::Upstream(UpstreamErrorKind::ConnectTimeout) => "connect_timeout",
        ProxyError::Upstream(UpstreamErrorKind::Tls) => "tls",
        ProxyError::Upstream(UpstreamErrorKind::ResponseTimeout) => "response_timeout",
        ProxyError::Upstream(_) => "protocol",
        ProxyError::BodyTooLarge => "body_too_large",
        ProxyError::BodyTooSlow => "body_too_slow",
        _ => "failed",
    }
}

/// One request's attempts at the servers of its group: what a failed
/// attempt leaves the next.
struct Attempts<'a> {
    /// The group as it was when the request came: indices in `tried` stay
    /// valid if DNS changes it meanwhile.
    group: Arc<balance::Group<Server>>,
    upstream: &'a Upstream,
    key: Option<u64>,
    /// The way back to a body several servers may be offered (none in a
    /// group of one).
    reclaim: Option<Reclaim>,
    /// Nothing to lose by sending a request without a body again.
    bodyless: bool,
    /// Sent once more after it reached a server: only an idempotent
    /// request, and only once.
    may_resend: bool,
    tried: Vec<usize>,
    last_failure: Option<ProxyError>,
}

impl<'a> Attempts<'a> {
    /// The attempts of a request with `body` at `upstream`, and the body
    /// of the first. A body several servers may be offered is shared, so
    /// a refused attempt gives it back; such a request counts toward the
    /// retry budget.
    fn new(
        body: RequestBody,
        upstream: &'a Upstream,
        method: &http::Method,
        key: Option<u64>,
    ) -> (Self, Attempt) {
        let bodyless = http_body::Body::is_end_stream(&body);
        let group = upstream.group.load_full();
        let retry = &upstream.retry;
        let (attempt, reclaim) = if group.len() > 1 {
            retry.budget.request(Instant::now());
            let (shared, reclaim) = Attempt::shared(body);
            (shared, Some(reclaim))
        } else {
            (Attempt::Only(body), None)
        };
        let attempts = Attempts {
            group,
            upstream,
            key,
            reclaim,
            bodyless,
            may_resend: retry.methods.contains(method),
            tried: Vec::new(),
            last_failure: None,
        };
        (attempts, attempt)
    }

    /// A server not tried yet. When none is left, the client is told the
    /// last attempt's failure if there was one, else when the first server
    /// is back.
    fn pick(&mut self) -> Result<balance::Pick<Server>, ProxyError> {
        let now = Instant::now();
        self.group
            .pick(self.key, &self.tried, now)
            .map_err(|AllOut { until }| {
                if let Some(failed) = self.last_failure.take() {
                    return failed;
                }
                let wait = until.map_or(1, |u| {
                    u.saturating_duration_since(now).as_secs_f64().ceil() as u64
                });
                ProxyError::NoServer {
                    retry_after: wait.max(1),
                }
            })
    }

    /// After a failed attempt at `pick`: the failure counted against the
    /// server (unless it was the request's own), and the body to offer the
    /// next server; or the error the client gets, when the request may not
    /// go again, no server is left or the retry budget is spent.
    fn again(
        &mut self,
        pick: &mut balance::Pick<Server>,
        failed: ProxyError,
        never_sent: bool,
        report: &Report<'_>,
    ) -> Result<Attempt, ProxyError> {
        if matches!(failed, ProxyError::Upstream(_)) {
            let change = pick.finish(Outcome::Failed, Instant::now());
            pick.target().changed(report.route, change);
        }
        self.tried.push(pick.index());
        let ProxyError::Upstream(kind) = failed else {
            return Err(failed);
        };
        let Some(slot) = &self.reclaim else {
            return Err(failed);
        };
        // Another server when none of the request left (the attempt gives
        // the body back unread), whatever the method; or when an
        // idempotent one got no answer and has its body whole to send.
        let resend_empty = || self.bodyless.then(|| (Attempt::Empty, Reclaim::empty()));
        let (reason, body) = if kind.before_sending() || never_sent {
            (
                "not_sent",
                slot.take().map(Attempt::shared).or_else(resend_empty),
            )
        } else if self.may_resend {
            self.may_resend = false;
            let body = match slot.take() {
                Some(b) => Some(Attempt::shared(b)),
                None => resend_empty(),
            };
            ("no_response", body)
        } else {
            ("", None)
        };
        let Some((attempt, reclaim)) = body else {
            return Err(failed);
        };
        let retry = &self.upstream.retry;
        if self.group.len() <= self.tried.len() || !retry.allowed(report.route, report.metrics) {
            return Err(failed);
        }
        report.metrics.upstream_retry(report.route, reason);
        tracing::debug!(route = %report.route, server = %pick.target().label, reason, "sending the request to another server");
        report.passed_over(kind);
        self.reclaim = Some(reclaim);
        self.last_failure = Some(failed);
        Ok(attempt)
    }
}

/// Relay the answer to the client. The version is hop-by-hop (RFC 9110
/// §6.2), so it becomes the client's: an HTTP/1.0 upstream's answer goes
/// to an HTTP/1.1 client as HTTP/1.1, keep-alive intact; the hop-by-hop
/// headers are dropped. A 101 the client asked for becomes a tunnel
/// between the two connections, which holds the request's admission until
/// it closes; one it did not ask for cannot be relayed.
fn relay(
    answer: Answer,
    client_version: Version,
    (client_upgrade, cap): (Option<hyper::upgrade::OnUpgrade>, Option<CapTicket>),
    client: &ClientSide<'_>,
    admission: &mut Option<Admission>,
) -> Result<Response<Payload>, ProxyError> {
    let Answer {
        mut response,
        pick,
        held,
    } = answer;
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
            tunnel::Holds {
                admission: admission.take(),
                _cap: cap,
            },
            client.tunnel_limits,
            client.metrics.clone(),
        );
        let h = response.headers_mut();
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        h.insert(header::UPGRADE, proto);
    }
    Ok(if held {
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
