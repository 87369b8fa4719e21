//! A route's rules as its config holds them, parsed once at load: header
//! rules (for the request to the upstream and the response to the client),
//! the path rewrite, and a redirect route's target. Values name request
//! facts with `{name}` placeholders ([`Template`]); what a placeholder
//! becomes is decided per request by `crate::rules`, which renders them.

use http::StatusCode;
use http::header::HeaderName;

/// A request fact a template may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fact {
    /// The Host as checked and normalised, with its port as sent.
    Host,
    ClientIp,
    RequestId,
    /// `http` or `https`: how the client reached weir.
    Scheme,
    Method,
    /// The path as routed (normalised), without the query.
    Path,
    /// The query without its `?`; empty when there is none.
    Query,
    RemotePort,
}

impl Fact {
    pub(crate) const ALL: [Fact; 8] = [
        Fact::Host,
        Fact::ClientIp,
        Fact::RequestId,
        Fact::Scheme,
        Fact::Method,
        Fact::Path,
        Fact::Query,
        Fact::RemotePort,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Fact::Host => "host",
            Fact::ClientIp => "client_ip",
            Fact::RequestId => "request_id",
            Fact::Scheme => "scheme",
            Fact::Method => "method",
            Fact::Path => "path",
            Fact::Query => "query",
            Fact::RemotePort => "remote_port",
        }
    }
}

/// A piece of a template: text as written, or a fact filled in per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(String),
    Fact(Fact),
}

/// A value with `{fact}` placeholders; `{{` and `}}` are literal braces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pub(crate) pieces: Vec<Piece>,
}

impl Template {
    /// Parse `text`, allowing only the facts in `allowed`. The error is the
    /// problem's message.
    pub(crate) fn parse(text: &str, allowed: &[Fact]) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(i) = rest.find(['{', '}']) {
            literal.push_str(&rest[..i]);
            let tail = &rest[i..];
            if let Some(after) = tail.strip_prefix("{{").or_else(|| tail.strip_prefix("}}")) {
                literal.push_str(&tail[..1]);
                rest = after;
                continue;
            }
            if tail.starts_with('}') {
                return Err("a `}` without its `{` (write `}}` for a brace)".into());
            }
            let Some(end) = tail.find('}') else {
                return Err("a `{` without its `}` (write `{{` for a brace)".into());
            };
            let name = &tail[1..end];
            let Some(fact) = allowed.iter().copied().find(|f| f.name() == name) else {
                return Err(format!("unknown placeholder `{{{name}}}`"));
            };
            if !literal.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut literal)));
            }
            pieces.push(Piece::Fact(fact));
            rest = &tail[end + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Template { pieces })
    }

    /// Whether the template names `fact`.
    pub(crate) fn names(&self, fact: Fact) -> bool {
        self.pieces.contains(&Piece::Fact(fact))
    }

    /// The placeholders `allowed` lists, as a fix names them.
    pub(crate) fn placeholders(allowed: &[Fact]) -> String {
        let names: Vec<String> = allowed
            .iter()
            .map(|f| format!("{{{}}}", f.name()))
            .collect();
        names.join(", ")
    }
}

/// What a header rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderAction {
    /// Remove every field of the name.
    Remove,
    /// Replace every field of the name with this one.
    Set,
    /// Append a field, keeping those already there.
    Add,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderRule {
    pub(crate) action: HeaderAction,
    pub(crate) name: HeaderName,
    /// `None` for [`HeaderAction::Remove`].
    pub(crate) value: Option<Template>,
}

/// A route's header rules and its request id, in the order they apply:
/// removes, then sets, then adds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct HeaderRules {
    /// On the request to the upstream (proxy routes only), after weir's
    /// own forwarding headers.
    pub(crate) request: Vec<HeaderRule>,
    /// On every response of the route, weir's own errors included.
    pub(crate) response: Vec<HeaderRule>,
    /// The header the request's id is sent upstream in, and trusted in
    /// from a trusted proxy; `None`: no id unless a rule names one (it is
    /// then trusted in from `X-Request-Id`).
    pub(crate) request_id_header: Option<HeaderName>,
}

impl HeaderRules {
    /// Whether a request on this route needs an id: one is sent upstream,
    /// or a rule names it.
    pub(crate) fn needs_request_id(&self) -> bool {
        self.request_id_header.is_some()
            || self
                .request
                .iter()
                .chain(&self.response)
                .any(|r| r.value.as_ref().is_some_and(|v| v.names(Fact::RequestId)))
    }
}

/// A proxy route's path rewrite, applied to the path as routed.
#[derive(Debug, Clone)]
pub(crate) struct Rewrite {
    /// The path matched against (anchored by the operator with `^…$` as
    /// needed); the first match is replaced.
    pub(crate) regex: regex::Regex,
    /// The replacement, with `$1`, `${name}` for captures; starts with `/`.
    pub(crate) to: String,
}

/// A `redirect` route: every request is answered with a redirect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RedirectRoute {
    /// The `Location`, with `{host}`, `{path}`, `{query}`, `{scheme}`.
    pub(crate) to: Template,
    pub(crate) status: StatusCode,
    /// Append the request's query when the target writes none of its own
    /// (no `?`, no `{query}`).
    pub(crate) keep_query: bool,
}

/// What a route's rules change on its requests; a route without any has
/// `None` and pays one branch for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RouteRules {
    pub(crate) headers: Option<HeaderRules>,
    pub(crate) rewrite: Option<Rewrite>,
    /// Put in place of the matched route prefix (`strip_prefix`, then this
    /// in front); starts with `/`.
    pub(crate) replace_prefix: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_split_into_text_and_facts_with_escaped_braces() {
        let t = Template::parse("a{host}{{b}}{path}", &Fact::ALL).expect("valid");
        assert_eq!(
            t.pieces,
            [
                Piece::Text("a".into()),
                Piece::Fact(Fact::Host),
                Piece::Text("{b}".into()),
                Piece::Fact(Fact::Path),
            ]
        );
        assert!(t.names(Fact::Host) && !t.names(Fact::RequestId));
        assert_eq!(
            Template::parse("{nope}", &Fact::ALL).unwrap_err(),
            "unknown placeholder `{nope}`"
        );
        assert!(Template::parse("{host", &Fact::ALL).is_err());
        assert!(Template::parse("host}", &Fact::ALL).is_err());
        assert!(Template::parse("{client_ip}", &[Fact::Host]).is_err());
    }
}
