//! What a route's rules change on a request, between routing and serving:
//! the request's facts that templates name ([`Facts`], with the request id
//! of [`request_id`]), header rules on the request to the upstream and on
//! the response to the client ([`headers`]), the path rewrite ([`path`]),
//! and the `redirect` route kind ([`redirect`]).
//!
//! A route without rules has `RouteConfig::rules == None` and none of
//! this runs for it: the lifecycle and the proxy test that one `Option`.
//! The templates were parsed and checked at load (`config::rules`); what
//! is rendered here is checked again as a header value, because a fact may
//! come from the client: a value that cannot be a header is skipped, never
//! written, so no rule can split a header (CR and LF never pass).

pub(crate) mod headers;
pub(crate) mod path;
pub(crate) mod redirect;
pub(crate) mod request_id;

use std::fmt::Write as _;
use std::net::SocketAddr;

use http::HeaderValue;

use crate::config::{Fact, Piece, RouteRules, Template};

/// The facts of one request a template may name, taken once when a route
/// with rules is matched.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// The Host as checked and normalised, with its port as sent.
    pub(crate) host: String,
    pub(crate) peer: SocketAddr,
    pub(crate) tls: bool,
    pub(crate) method: http::Method,
    /// The path as routed (normalised).
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    /// The request's id, when its route needs one.
    pub(crate) request_id: Option<HeaderValue>,
}

/// How the request came, as [`facts`] reads it.
pub(crate) struct Arrival<'a> {
    /// The Host as checked and normalised, with its port.
    pub(crate) host: &'a str,
    pub(crate) peer: SocketAddr,
    pub(crate) tls: bool,
    pub(crate) trusted_proxies: &'a [ipnet::IpNet],
}

/// The facts of a request on a route with rules, when they include header
/// rules (else `None`: nothing is taken), its id resolved when the rules
/// need one.
pub(crate) fn facts<B>(
    rules: &RouteRules,
    req: &http::Request<B>,
    routed: &str,
    arrival: &Arrival<'_>,
) -> Option<Facts> {
    let headers = rules.headers.as_ref()?;
    let request_id = headers.needs_request_id().then(|| {
        let name = headers
            .request_id_header
            .as_ref()
            .unwrap_or(&request_id::DEFAULT_HEADER);
        request_id::resolve(
            req.headers(),
            name,
            arrival.peer.ip(),
            arrival.trusted_proxies,
        )
    });
    Some(Facts {
        host: arrival.host.to_string(),
        peer: arrival.peer,
        tls: arrival.tls,
        method: req.method().clone(),
        path: routed.to_string(),
        query: req.uri().query().map(str::to_string),
        request_id,
    })
}

impl Facts {
    /// `template` with these facts filled in, as text.
    pub(crate) fn render(&self, template: &Template) -> String {
        let mut out = String::new();
        for piece in &template.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Fact(fact) => self.write(*fact, &mut out),
            }
        }
        out
    }

    /// `template` as a header value, or `None` when a fact made it one
    /// that no header can hold.
    pub(crate) fn header_value(&self, template: &Template) -> Option<HeaderValue> {
        HeaderValue::from_str(&self.render(template)).ok()
    }

    fn write(&self, fact: Fact, out: &mut String) {
        match fact {
            Fact::Host => out.push_str(&self.host),
            // Writing to a String cannot fail.
            Fact::ClientIp => {
                let _ = write!(out, "{}", self.peer.ip());
            }
            Fact::RemotePort => {
                let _ = write!(out, "{}", self.peer.port());
            }
            Fact::RequestId => {
                if let Some(id) = self.request_id.as_ref().and_then(|v| v.to_str().ok()) {
                    out.push_str(id);
                }
            }
            Fact::Scheme => out.push_str(if self.tls { "https" } else { "http" }),
            Fact::Method => out.push_str(self.method.as_str()),
            Fact::Path => out.push_str(&self.path),
            Fact::Query => out.push_str(self.query.as_deref().unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn facts() -> Facts {
        Facts {
            host: "example.com:8080".into(),
            peer: "[2001:db8::1]:4242".parse().expect("addr"),
            tls: true,
            method: http::Method::PATCH,
            path: "/a/b".into(),
            query: Some("x=1".into()),
            request_id: Some(HeaderValue::from_static("abc")),
        }
    }

    #[test]
    fn every_fact_renders() {
        let all: String = Fact::ALL
            .iter()
            .map(|f| format!("[{{{}}}]", f.name()))
            .collect();
        let t = Template::parse(&all, &Fact::ALL).expect("valid");
        assert_eq!(
            facts().render(&t),
            "[example.com:8080][2001:db8::1][abc][https][PATCH][/a/b][x=1][4242]"
        );
    }

    #[test]
    fn a_value_no_header_can_hold_is_refused_not_written() {
        let mut f = facts();
        f.path = "/a\r\nX-Injected: 1".into();
        let t = Template::parse("{path}", &Fact::ALL).expect("valid");
        assert!(f.header_value(&t).is_none());
        f.path = "/a\0b".into();
        assert!(f.header_value(&t).is_none(), "a NUL is not header text");
    }
}
