//! Forwarding a request to its route's upstream and streaming the answer
//! back: the attempts at the group's servers, the response-head timeout,
//! the relay and upgrades. The request as the upstream gets it is
//! `outgoing`; why forwarding failed and how the client is told, `error`;
//! an upgraded connection's tunnel, `tunnel`.

mod error;
mod outgoing;
mod tunnel;

pub(crate) use error::ProxyError;
use error::{classify, failed_name};
pub(crate) use outgoing::ClientSide;
use outgoing::{Outgoing, requested_upgrade};

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper::body::Incoming;
use tokio::time::Instant;

use crate::admit::Admission;
use crate::admit::tunnels::CapTicket;
use crate::config::{HashKey, RouteConfig};
use crate::respond::{Guard, Payload};
use crate::telemetry::trace::{self, Trace};
use crate::telemetry::{Metrics, UpstreamErrorKind};
use crate::upstream::balance::{self, AllOut, Outcome};
use crate::upstream::headers;
use crate::upstream::{Attempt, Reclaim, RequestBody, Server, Upstream};

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
