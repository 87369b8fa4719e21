//! What a span says about HTTP, by the OpenTelemetry semantic
//! conventions: the server span of a request, the client span of an
//! attempt upstream, and the coding agents' hint headers.

use std::net::IpAddr;

use super::{Span, Trace, Tracer};

/// The most of a client's text (path, user agent, hint header) a span
/// carries: a head may be far longer, and one client must not make every
/// span that large.
const MAX_FIELD: usize = 1024;
const MAX_PATH: usize = 4096;

/// Headers the coding agents send about who asks, each as an attribute:
/// Claude Code's session, agent, parent agent and request class, Codex's
/// session.
const HINTS: &[(&str, &str)] = &[
    ("x-claude-code-session-id", "claude_code.session.id"),
    ("x-claude-code-agent-id", "claude_code.agent.id"),
    (
        "x-claude-code-parent-agent-id",
        "claude_code.parent_agent.id",
    ),
    ("x-claude-code-request-class", "claude_code.request.class"),
    ("session_id", "codex.session.id"),
];

/// The trace of a request just arrived, when it is sampled, with its
/// server span's request attributes.
pub(crate) fn begin<B>(
    tracer: &std::sync::Arc<Tracer>,
    req: &http::Request<B>,
    client: IpAddr,
    tls: bool,
) -> Option<Box<Trace>> {
    let trace = tracer.begin(req.headers())?;
    trace.server(|s| {
        let method = req.method().as_str();
        s.name = method.to_string();
        s.set("http.request.method", method);
        s.set("url.path", bounded(req.uri().path(), MAX_PATH));
        s.set("url.scheme", if tls { "https" } else { "http" });
        s.set("network.protocol.version", version(req.version()));
        s.set("client.address", client.to_string());
        if let Some(host) = host(req) {
            let (name, port) = split_port(host);
            s.set("server.address", bounded(name, MAX_FIELD));
            if let Some(port) = port {
                s.set("server.port", u64::from(port));
            }
        }
        let h = req.headers();
        if let Some(ua) = h
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
        {
            s.set("user_agent.original", bounded(ua, MAX_FIELD));
        }
        for (header, key) in HINTS {
            if let Some(v) = h.get(*header).and_then(|v| v.to_str().ok()) {
                s.set(key, bounded(v, MAX_FIELD));
                if header.ends_with("session-id") || *header == "session_id" {
                    s.set("session.id", bounded(v, MAX_FIELD));
                }
            }
        }
    });
    Some(trace)
}

/// The route a request took: the span's name and `weir.route`.
pub(crate) fn routed(span: &mut Span, route: &str) {
    let method = span.get("http.request.method").and_then(|v| match v {
        super::Value::Str(m) => Some(m.clone()),
        _ => None,
    });
    span.name = format!("{} {route}", method.unwrap_or_default());
    span.set("weir.route", route);
}

/// The admission decision, as `weir.admission` (`admitted`, `shed`,
/// `rate_limited`) and, when refused, why.
pub(crate) fn admission(span: &mut Span, decision: &'static str, reason: Option<&str>) {
    span.set("weir.admission", decision);
    if let Some(reason) = reason {
        span.set("weir.admission.reason", reason);
    }
}

/// An attempt's client span: the server it went to and the URL asked.
pub(crate) fn attempt(span: &mut Span, method: &http::Method, uri: &http::Uri, server: &str) {
    span.set("http.request.method", method.as_str());
    span.set("url.full", bounded(&uri.to_string(), MAX_PATH));
    if let Some(host) = uri.host() {
        span.set("server.address", host);
    }
    let port = uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    });
    if let Some(port) = port {
        span.set("server.port", u64::from(port));
    }
    span.set("weir.upstream.server", server);
}

/// An attempt's answer: its status, an error from 400 up (the client
/// span conventions).
pub(crate) fn answer(span: &mut Span, status: http::StatusCode) {
    span.set("http.response.status_code", status.as_u16());
    if status.as_u16() >= 400 {
        span.set("error.type", status.as_u16().to_string());
        span.error(format!("answered {status}"));
    }
}

fn version(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// The Host the client named: the URI's authority, or the Host header.
fn host<B>(req: &http::Request<B>) -> Option<&str> {
    req.uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| req.headers().get(http::header::HOST)?.to_str().ok())
}

fn split_port(host: &str) -> (&str, Option<u16>) {
    match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && !port.contains(']') => (name, port.parse().ok()),
        _ => (host, None),
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(crate) fn bounded(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
