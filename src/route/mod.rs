//! Route selection: which configured route serves a request.
//!
//! Selection works like nginx's server/location pair, which operators know:
//! the host picks a group first (exact name, then the longest matching
//! `*.suffix`, then routes without a host), and only inside that group does
//! the longest path prefix win. A host that has its own routes never falls
//! through to the catch-all group, so adding a catch-all cannot change what
//! an existing site serves. Prefixes match on segment boundaries: `/api`
//! matches `/api` and `/api/x`, never `/apix`.

pub(crate) mod normal;

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderMap;

use crate::access::RouteAccess;
use crate::admit::Gate;
use crate::admit::rate::RateLimit;
use crate::config::{HostPattern, RouteConfig};
use crate::llm::LlmRoute;
use crate::respond::ErrorShape;
use crate::statics::StaticSite;
use crate::telemetry::RouteMetrics;
use crate::upstream::Upstream;

/// A route ready to serve: its config plus whatever was built from it.
pub(crate) struct Route<T = Target> {
    pub(crate) config: RouteConfig,
    /// The route name, shared cheaply with logs and metrics.
    pub(crate) name: Arc<str>,
    pub(crate) target: T,
    /// The route's own bound on requests in flight (long-lived: the same
    /// gate across snapshots while the route exists).
    pub(crate) gate: Gate,
    /// The per-client rate limit, if any (long-lived like the gate).
    pub(crate) rate: Option<Arc<RateLimit>>,
    /// Its request metrics, resolved when the table is built.
    pub(crate) metrics: Arc<RouteMetrics>,
    /// Its address rules and basic auth, if it has any.
    pub(crate) access: Option<Arc<RouteAccess>>,
}

/// What a route does with the requests it matches: one variant per route
/// kind, each served by its own module. The lifecycle's serve phase is one
/// `match` on it.
pub(crate) enum Target {
    /// Forward to an upstream and stream the answer back.
    Proxy(Arc<Upstream>),
    /// An LLM API route: model routing, failover, streaming relay.
    Llm(Arc<LlmRoute>),
    /// Files from a directory.
    Static(Arc<StaticSite>),
    /// Answer every request with a redirect (`crate::rules::redirect`).
    Redirect(Arc<crate::config::RedirectRoute>),
}

impl Target {
    /// What this kind has the lifecycle check before it serves, and what
    /// it checks itself once it knows more.
    pub(crate) fn at_entry(&self) -> AtEntry {
        match self {
            Target::Proxy(_) | Target::Static(_) | Target::Redirect(_) => AtEntry {
                rate_by_address: true,
                refuse_declared_body: true,
            },
            // With client tokens, many agents may share one egress address:
            // the limit counts tokens, once the token is checked. The body
            // limit waits for the token too, so a client without one learns
            // nothing from a 413.
            Target::Llm(llm) => AtEntry {
                rate_by_address: llm.settings.client_tokens.is_empty(),
                refuse_declared_body: false,
            },
        }
    }

    /// Where requests go, for the access log.
    pub(crate) fn label(&self) -> Option<&Arc<str>> {
        match self {
            Target::Proxy(upstream) => Some(&upstream.label),
            // Which upstream serves is decided per request.
            Target::Llm(_) | Target::Static(_) | Target::Redirect(_) => None,
        }
    }

    /// How errors weir generates on this route are written: a route kind
    /// answers in its own protocol.
    pub(crate) fn error_shape(&self, request_headers: &HeaderMap) -> ErrorShape {
        match self {
            Target::Proxy(_) | Target::Static(_) | Target::Redirect(_) => {
                ErrorShape::for_plain_route(request_headers)
            }
            Target::Llm(llm) => ErrorShape::Llm(llm.settings.protocol),
        }
    }
}

/// The checks a route kind leaves to the lifecycle's route-policy phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AtEntry {
    /// Count the route's rate limit by the client's address before serving.
    pub(crate) rate_by_address: bool,
    /// Refuse a declared body over `max_request_body` before reading it.
    pub(crate) refuse_declared_body: bool,
}

/// Indexes of routes, longest path prefix first.
type Group = Vec<usize>;

pub(crate) struct Router<T = Target> {
    routes: Vec<Arc<Route<T>>>,
    exact: HashMap<String, Group>,
    /// (suffix with leading dot, group), longest suffix first.
    wildcard: Vec<(String, Group)>,
    any: Group,
}

impl<T> Router<T> {
    pub(crate) fn new(routes: Vec<Route<T>>) -> Self {
        let routes: Vec<Arc<Route<T>>> = routes.into_iter().map(Arc::new).collect();
        let mut exact: HashMap<String, Group> = HashMap::new();
        let mut wildcard: HashMap<String, Group> = HashMap::new();
        let mut any = Group::new();
        for (i, r) in routes.iter().enumerate() {
            if r.config.hosts.is_empty() {
                any.push(i);
            }
            for h in &r.config.hosts {
                match h {
                    HostPattern::Exact(name) => exact.entry(name.clone()).or_default().push(i),
                    HostPattern::Wildcard(suffix) => {
                        wildcard.entry(suffix.clone()).or_default().push(i)
                    }
                }
            }
        }
        let by_prefix_len =
            |g: &mut Group| g.sort_by_key(|&i| std::cmp::Reverse(routes[i].config.path.len()));
        exact.values_mut().for_each(by_prefix_len);
        by_prefix_len(&mut any);
        let mut wildcard: Vec<(String, Group)> = wildcard.into_iter().collect();
        wildcard.iter_mut().for_each(|(_, g)| by_prefix_len(g));
        wildcard.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        Router {
            routes,
            exact,
            wildcard,
            any,
        }
    }

    /// Every route, in config order.
    pub(crate) fn routes(&self) -> &[Arc<Route<T>>] {
        &self.routes
    }

    /// The group of routes a host selects, if any.
    fn group(&self, host: &str) -> Option<&Group> {
        if let Some(g) = self.exact.get(host) {
            return Some(g);
        }
        if let Some((_, g)) = self
            .wildcard
            .iter()
            .find(|(suffix, _)| host.len() > suffix.len() && host.ends_with(suffix.as_str()))
        {
            return Some(g);
        }
        (!self.any.is_empty()).then_some(&self.any)
    }

    /// Find the route for a normalised (lower-case, port-free) host and a path.
    pub(crate) fn find(&self, host: &str, path: &str) -> Option<&Arc<Route<T>>> {
        let group = self.group(host)?;
        group
            .iter()
            .map(|&i| &self.routes[i])
            .find(|r| prefix_matches(&r.config.path, path))
    }

    /// Whether any route accepts this host (used to validate redirect targets).
    pub(crate) fn knows_host(&self, host: &str) -> bool {
        self.group(host).is_some()
    }
}

/// Segment-aware prefix match.
pub(crate) fn prefix_matches(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn router(toml_routes: &str) -> Router<()> {
        let text = format!("[[listener]]\naddress = \"127.0.0.1:0\"\n{toml_routes}");
        let config = crate::config::Config::parse(Path::new("t.toml"), &text).expect("valid");
        Router::new(
            config
                .routes
                .into_iter()
                .map(|c| Route {
                    metrics: crate::telemetry::Metrics::new()
                        .route_metrics(&c.name.as_str().into()),
                    name: c.name.as_str().into(),
                    gate: Gate::new(c.max_concurrent_requests),
                    config: c,
                    target: (),
                    rate: None,
                    access: None,
                })
                .collect(),
        )
    }

    fn name(r: &Router<()>, host: &str, path: &str) -> Option<String> {
        r.find(host, path).map(|r| r.name.to_string())
    }

    #[test]
    fn host_groups_then_longest_prefix() {
        let r = router(
            "[[route]]\nname = \"any\"\nupstream = \"http://a\"\n\
             [[route]]\nname = \"any-api\"\npath = \"/api\"\nupstream = \"http://a\"\n\
             [[route]]\nname = \"ex\"\nhost = \"example.com\"\nupstream = \"http://a\"\n\
             [[route]]\nname = \"ex-api\"\nhost = \"example.com\"\npath = \"/api/\"\nupstream = \"http://a\"\n\
             [[route]]\nname = \"wild\"\nhost = \"*.example.com\"\npath = \"/w\"\nupstream = \"http://a\"\n\
             [[route]]\nname = \"wild-deep\"\nhost = \"*.b.example.com\"\nupstream = \"http://a\"\n",
        );
        assert_eq!(name(&r, "example.com", "/api/x").as_deref(), Some("ex-api"));
        assert_eq!(
            name(&r, "example.com", "/api").as_deref(),
            Some("ex"),
            "/api/ does not match /api"
        );
        assert_eq!(name(&r, "other.org", "/api").as_deref(), Some("any-api"));
        assert_eq!(
            name(&r, "other.org", "/apix").as_deref(),
            Some("any"),
            "segment boundary"
        );
        assert_eq!(name(&r, "a.example.com", "/w/1").as_deref(), Some("wild"));
        assert_eq!(
            name(&r, "a.example.com", "/x"),
            None,
            "a host group never falls through"
        );
        assert_eq!(
            name(&r, "c.b.example.com", "/x").as_deref(),
            Some("wild-deep")
        );
    }

    #[test]
    fn no_catch_all_means_unknown_hosts_miss() {
        let r = router("[[route]]\nhost = \"example.com\"\nupstream = \"http://a\"\n");
        assert!(r.find("evil.test", "/").is_none());
        assert!(!r.knows_host("evil.test"));
        assert!(r.knows_host("example.com"));
    }
}
