//! The request as the upstream gets it: the client's facts the proxy
//! needs, the URI and headers rewritten once, the upgrade asked for, and
//! each attempt's copy of the head.

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Uri, Version};
use hyper::body::Incoming;
use ipnet::IpNet;
use tokio::time::Instant;

use super::error::ProxyError;
use crate::admit::tunnels::{TunnelCap, TunnelLimits};
use crate::config::{HeaderRules, RouteConfig};
use crate::conn::info::ConnInfo;
use crate::rules::Facts;
use crate::telemetry::Metrics;
use crate::upstream::headers;
use crate::upstream::{Attempt, BodyRate, RequestBody, Server};

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

/// The path the upstream sees: its own base path, then the request path
/// (without the route prefix when `strip_prefix` is set).
/// `authority` is the one the request names: the server's, or the
/// client's host when it goes as HTTP/2's `:authority` (the server's own
/// client dials the server whatever it says).
pub(super) fn upstream_uri(
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
pub(super) fn requested_upgrade(
    req: &Request<Incoming>,
    allowed: &[String],
) -> Option<HeaderValue> {
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

/// The request's head as every attempt sends it, and what shapes each
/// attempt: rewritten once, then copied (or, for the only server, moved)
/// into the request to each server.
pub(super) struct Outgoing<'a> {
    pub(super) parts: http::request::Parts,
    route: &'a RouteConfig,
    host: Option<&'a str>,
    /// An HTTP/1.1 upgrade: it goes over HTTP/1.1 whatever the server.
    pub(super) upgrade: bool,
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
    pub(super) fn new(
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
    pub(super) fn to(
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
    pub(super) fn deadline(&self) -> Instant {
        let deadline = Instant::now() + self.route.response_timeout;
        self.grpc_deadline.map_or(deadline, |g| g.min(deadline))
    }
}
