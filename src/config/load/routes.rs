//! `[[route]]` tables: what every route reads (match, limits, response
//! headers), its kind, and proxy routes; LLM routes are in [`super::llm`].

use std::collections::HashMap;
use std::sync::Arc;

use super::*;

/// HSTS `max-age`: up to two years (hstspreload.org asks for at least one;
/// browsers cap what they keep).
const HSTS_MAX_AGE: RangeInclusive<Duration> = Duration::ZERO..=Duration::from_secs(2 * 31_557_600);

pub(super) fn routes(
    top: &Section<'_, '_>,
    cluster: bool,
    server_pages: Option<&Arc<ErrorPages>>,
) -> Vec<RouteConfig> {
    let sections = top.tables("route");
    if !top.raw_present("route") {
        top.problem(
            "route",
            "no route is configured: every request would get 404",
            Some("add a `[[route]]` table with `upstream = \"http://127.0.0.1:3000\"`".into()),
        );
    }
    let mut out: Vec<RouteConfig> = Vec::new();
    let mut seen_match: HashMap<(Option<HostPattern>, String), String> = HashMap::new();
    let mut seen_name: HashMap<String, String> = HashMap::new();
    for t in sections {
        let name = t.string("name").map(|n| n.value);
        let hosts: Vec<HostPattern> = t
            .string_list("host")
            .unwrap_or_default()
            .into_iter()
            .filter_map(|h| host_pattern(&t, &h))
            .collect();
        let path = match t.string("path") {
            Some(p) if !p.value.starts_with('/') => {
                p.problem(
                    t.doc(),
                    "a route path must start with `/`",
                    Some(format!("write \"/{}\"", p.value)),
                );
                None
            }
            Some(p) => Some(p.value),
            None => Some("/".to_string()),
        };
        let kind = route_kind(&t);
        let connect_timeout = timer(&t, "connect_timeout").unwrap_or(defaults::CONNECT_TIMEOUT);
        let max_request_body = t.size_in("max_request_body", MAX_SIZE).or(match kind {
            Some(Kind {
                kind: RouteKind::Llm(_),
                ..
            }) => Some(defaults::LLM_MAX_REQUEST_BODY),
            _ => None,
        });
        let strip_prefix = t.bool("strip_prefix").unwrap_or(false);
        let max_concurrent_requests = t
            .uint_in("max_concurrent_requests", MAX_SEMAPHORE_PERMITS)
            .unwrap_or(0) as usize;
        let rate_limit = super::rate::rate_limit(&t);
        let shared_limits = limit_scope(&t, cluster);
        let headers = response_headers(&t);
        let upgrade_protocols = upgrade_protocols(&t);
        let llm = matches!(&kind, Some(k) if matches!(k.kind, RouteKind::Llm(_)));
        let (access, error_pages) = (
            access::access(&t, llm),
            access::error_pages(&t, llm, server_pages),
        );
        let response_rules = rules::response_headers(&t);
        let (Some(path), Some(kind)) = (path, kind) else {
            continue;
        };
        if strip_prefix && kind.rules.replace_prefix.is_some() {
            t.problem(
                "replace_prefix",
                "`replace_prefix` already removes the matched prefix",
                Some("remove `strip_prefix`".into()),
            );
        }
        let route_rules = with_response_rules(kind.rules, response_rules);
        let name = name.unwrap_or_else(|| match hosts.first() {
            Some(h) => format!("{h}{path}"),
            None => format!("*{path}"),
        });
        if let Some(first) = seen_name.get(&name) {
            t.problem(
                "name",
                format!("route name `{name}` is already used by {first}"),
                Some("give each route a distinct `name`".into()),
            );
        } else {
            seen_name.insert(name.clone(), t.path().to_string());
        }
        let keys: Vec<Option<HostPattern>> = if hosts.is_empty() {
            vec![None]
        } else {
            hosts.iter().cloned().map(Some).collect()
        };
        for k in keys {
            let display = k.as_ref().map_or("any host".to_string(), |h| h.to_string());
            if let Some(first) = seen_match.insert((k, path.clone()), t.path().to_string()) {
                t.problem(
                    "path",
                    format!("{display} with path `{path}` is already routed by {first}"),
                    Some("remove one of the two routes or change its host or path".into()),
                );
            }
        }
        out.push(RouteConfig {
            name,
            hosts,
            path,
            kind: kind.kind,
            connect_timeout,
            response_timeout: kind.response_timeout,
            max_request_body,
            preserve_host: kind.preserve_host,
            raw_path: kind.raw_path,
            strip_prefix,
            max_concurrent_requests,
            rate_limit,
            shared_limits,
            headers,
            upgrade_protocols,
            compress: kind.compress,
            access,
            error_pages,
            rules: route_rules,
        });
    }
    out
}

/// A route's rules with its response header rules, or `None` when it
/// has no rule at all.
fn with_response_rules(
    mut rules: RouteRules,
    response: Vec<HeaderRule>,
) -> Option<Arc<RouteRules>> {
    if !response.is_empty() {
        rules.headers.get_or_insert_default().response = response;
    }
    let any = rules.headers.is_some() || rules.rewrite.is_some() || rules.replace_prefix.is_some();
    any.then(|| Arc::new(rules))
}

/// The `Upgrade` protocols a route tunnels: `["websocket"]` unless set.
/// A protocol is a token (RFC 9110 §5.6.2), optionally with `/version`.
fn upgrade_protocols(t: &Section<'_, '_>) -> Vec<String> {
    let Some(list) = t.string_list("upgrade_protocols") else {
        return vec!["websocket".to_string()];
    };
    let mut out = Vec::with_capacity(list.len());
    for p in list {
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        };
        let valid = match p.value.split_once('/') {
            Some((name, version)) => token(name) && token(version),
            None => token(&p.value),
        };
        if valid {
            out.push(p.value.to_ascii_lowercase());
        } else {
            p.problem(
                t.doc(),
                format!("`{}` is not an upgrade protocol token", p.value),
                Some("write a protocol name such as \"websocket\"".into()),
            );
        }
    }
    out
}

/// Whether the route's rate limit and per-token concurrency are the
/// fleet's: by default whenever there is a `[cluster]`.
fn limit_scope(t: &Section<'_, '_>, cluster: bool) -> bool {
    let Some(scope) = t.string("limit_scope") else {
        return cluster;
    };
    match scope.value.as_str() {
        "local" => false,
        "cluster" if cluster => true,
        "cluster" => {
            scope.problem(
                t.doc(),
                "there is no `[cluster]` to share the limits through",
                Some("add a `[cluster]` table with the Redis `url`, or remove the key".into()),
            );
            false
        }
        other => {
            scope.problem(
                t.doc(),
                format!("`{other}` is not a limit scope"),
                Some("use \"cluster\" or \"local\"".into()),
            );
            false
        }
    }
}

/// HSTS and the `Server` header a route sets.
fn response_headers(t: &Section<'_, '_>) -> ResponseHeaders {
    let mut h = ResponseHeaders::default();
    let age = t.duration_in("hsts_max_age", HSTS_MAX_AGE);
    let include_subdomains = t.bool("hsts_include_subdomains");
    let preload = t.bool("hsts_preload");
    if let Some(age) = age {
        let mut v = format!("max-age={}", age.as_secs());
        if include_subdomains.unwrap_or(false) {
            v.push_str("; includeSubDomains");
        }
        if preload.unwrap_or(false) {
            v.push_str("; preload");
        }
        h.hsts = http::HeaderValue::from_str(&v).ok();
    } else if !t.raw_present("hsts_max_age") {
        for (key, set) in [
            ("hsts_include_subdomains", include_subdomains),
            ("hsts_preload", preload),
        ] {
            if set.is_some() {
                t.problem(
                    key,
                    "needs `hsts_max_age`",
                    Some("add `hsts_max_age = \"365d\"`".into()),
                );
            }
        }
    }
    if let Some(s) = t.string("server_header") {
        h.server = match s.value.as_str() {
            "pass" => ServerHeader::Pass,
            "remove" => ServerHeader::Remove,
            other => match http::HeaderValue::from_str(other) {
                Ok(v) => ServerHeader::Set(v),
                Err(_) => {
                    s.problem(
                        t.doc(),
                        format!("`{other}` is not a valid header value"),
                        Some("use \"pass\", \"remove\" or a printable value".into()),
                    );
                    ServerHeader::Pass
                }
            },
        };
    }
    h
}

/// What a route's kind decides.
struct Kind {
    kind: RouteKind,
    response_timeout: Duration,
    preserve_host: bool,
    raw_path: bool,
    compress: Option<Arc<Compression>>,
    /// What a proxy route's rules read (request headers, rewrite).
    rules: RouteRules,
}

/// The route's kind and its kind-specific settings. A key only the other
/// kind reads is refused by name; which keys those are is learnt from the
/// other kind's reader, so no list repeats them.
fn route_kind(t: &Section<'_, '_>) -> Option<Kind> {
    let proxy_keys = || {
        Section::keys_read_by(|s| {
            proxy(s);
        })
    };
    let llm_keys = || {
        Section::keys_read_by(|s| {
            llm::llm_settings(s, Protocol::Anthropic);
        })
    };
    let static_keys = || {
        Section::keys_read_by(|s| {
            statics::static_settings(s);
        })
    };
    let kind = t.string("kind");
    let redirect_keys = || {
        Section::keys_read_by(|s| {
            rules::redirect(s);
        })
    };
    if kind.as_ref().is_some_and(|k| k.value == "static") {
        let others = [proxy_keys(), llm_keys(), redirect_keys()].concat();
        return static_kind(t, others);
    }
    let redirecting = t.raw_present("redirect");
    let protocol = match kind.as_ref().map(|k| k.value.as_str()) {
        None | Some("proxy") => None,
        Some(other) if Protocol::from_name(other).is_some() => Protocol::from_name(other),
        Some(other) => {
            let kinds = Protocol::ALL.map(Protocol::name);
            t.problem(
                "kind",
                format!("unknown route kind `{other}`"),
                Some(format!(
                    "use \"proxy\" (the default), \"static\", {}",
                    super::names(kinds)
                )),
            );
            // Which kind's keys apply is unknown: take any kind's (asking
            // for a key accepts it); other keys are still unknown.
            for key in proxy_keys()
                .into_iter()
                .chain(llm_keys())
                .chain(static_keys())
                .chain(redirect_keys())
            {
                t.raw_present(key);
            }
            return None;
        }
    };
    let (read, other_keys, fix) = match protocol {
        None if redirecting => (
            rules::redirect(t).map(|r| Kind {
                kind: RouteKind::Redirect(Arc::new(r)),
                response_timeout: defaults::RESPONSE_TIMEOUT,
                preserve_host: true,
                raw_path: false,
                compress: None,
                rules: RouteRules::default(),
            }),
            [proxy_keys(), llm_keys(), static_keys()].concat(),
            "a redirect route answers every request itself: remove the key, or `redirect`",
        ),
        None => (
            proxy(t),
            llm_keys(),
            "set `kind = \"anthropic\"` or `kind = \"openai\"` for an LLM route, or remove the key",
        ),
        Some(protocol) => (
            llm::llm_settings(t, protocol).map(|s| Kind {
                kind: RouteKind::Llm(Arc::new(s)),
                response_timeout: defaults::RESPONSE_TIMEOUT,
                preserve_host: true,
                raw_path: false,
                compress: None,
                rules: RouteRules::default(),
            }),
            proxy_keys(),
            "remove the key; LLM routes take `[[route.upstreams]]`",
        ),
    };
    let kind_name = match (&kind, redirecting) {
        (None, true) => "redirect",
        (k, _) => k.as_ref().map_or("proxy", |k| k.value.as_str()),
    };
    not_of_this_kind(t, kind_name, other_keys, fix);
    if protocol.is_some() || !redirecting {
        let fix = "add `redirect = \"https://…\"` for a redirect route, or remove the key";
        not_of_this_kind(t, kind_name, redirect_keys(), fix);
    }
    if !redirecting {
        for key in static_keys() {
            not_of_this_kind(
                t,
                kind_name,
                [key],
                "set `kind = \"static\"` for a route that serves files, or remove the key",
            );
        }
    }
    read
}

/// A key of another kind set on this route: an error that names the kind.
fn not_of_this_kind(
    t: &Section<'_, '_>,
    kind_name: &str,
    keys: impl IntoIterator<Item = &'static str>,
    fix: &str,
) {
    for key in keys {
        if t.other_kinds_key_present(key) {
            t.problem(
                key,
                format!("`{key}` does not apply to {kind_name} routes"),
                Some(fix.into()),
            );
        }
    }
}

/// A static route: its own keys; every proxy and LLM key is refused.
fn static_kind(
    t: &Section<'_, '_>,
    other_keys: impl IntoIterator<Item = &'static str>,
) -> Option<Kind> {
    let read = statics::static_settings(t);
    // Files are compressed on the fly as proxied bodies are (a sibling
    // `precompressed` on disk wins: it comes with its Content-Encoding).
    let compress = compress::compress(t);
    not_of_this_kind(
        t,
        "static",
        other_keys.into_iter().filter(|k| *k != "compress"),
        "remove the key; a static route serves `root`",
    );
    let compress = compress.ok()?;
    read.map(|s| Kind {
        kind: RouteKind::Static(Arc::new(s)),
        response_timeout: defaults::RESPONSE_TIMEOUT,
        preserve_host: true,
        raw_path: false,
        compress,
        rules: RouteRules::default(),
    })
}

/// The keys only proxy routes read.
fn proxy(t: &Section<'_, '_>) -> Option<Kind> {
    let upstream = group::group(t);
    let response_timeout = timer(t, "response_timeout").unwrap_or(defaults::RESPONSE_TIMEOUT);
    let preserve_host = t.bool("preserve_host").unwrap_or(true);
    let raw_path = t.bool("raw_path").unwrap_or(false);
    let compress = compress::compress(t).ok()?;
    let rules = rules::proxy_rules(t);
    if raw_path && rules.rewrite.is_some() {
        t.problem(
            "rewrite_regex",
            "a rewrite changes the routed path, and `raw_path` forwards the client's untouched",
            Some("remove `raw_path`, or the rewrite".into()),
        );
    }
    upstream.map(|upstream| Kind {
        kind: RouteKind::Proxy {
            upstream: Box::new(upstream),
        },
        response_timeout,
        preserve_host,
        raw_path,
        compress,
        rules,
    })
}

fn host_pattern(t: &Section<'_, '_>, h: &At<String>) -> Option<HostPattern> {
    let lower = h.value.to_ascii_lowercase();
    let (wildcard, name) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !valid {
        h.problem(
            t.doc(),
            format!("`{}` is not a host name or `*.domain` pattern", h.value),
            Some("write a name like \"example.com\" or \"*.example.com\", without a port".into()),
        );
        return None;
    }
    Some(if wildcard {
        HostPattern::Wildcard(format!(".{name}"))
    } else {
        HostPattern::Exact(name.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};
    use super::*;

    #[test]
    fn duplicate_routes_and_addresses_are_rejected() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:80\"\n[[listener]]\naddress = \"127.0.0.1:80\"\n\
             [[route]]\nupstream = \"http://a\"\n[[route]]\nupstream = \"http://b\"\npath = \"/\"\n",
        );
        assert!(
            p.iter()
                .any(|l| l.contains("listener[1].address") && l.contains("already used")),
            "{p:#?}"
        );
        assert!(
            p.iter().any(|l| l.contains("already routed by route[0]")),
            "{p:#?}"
        );
    }

    #[test]
    fn hsts_max_age_is_bounded_at_two_years() {
        let c = parse(
            Path::new("w.toml"),
            &format!("{MINIMAL}hsts_max_age = \"2y\"\nhsts_preload = true\n"),
        )
        .expect("two years is valid");
        let hsts = c.routes[0].headers.hsts.as_ref().expect("hsts");
        assert_eq!(hsts, "max-age=63115200; preload");
        let p = problems(&format!(
            "{MINIMAL}hsts_max_age = \"3y\"\nhsts_preload = true\n"
        ));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("route[0].hsts_max_age: `3y` is longer than the longest allowed, 2years (fix: use a duration from \"0s\" to \"2years\")"),
            "{}",
            p[0]
        );
    }

    #[test]
    fn keys_of_the_other_kind_are_refused_by_name_and_unknown_kinds_alone() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"a\"\nkind = \"anthropic\"\nupstream = \"http://x\"\npreserve_host = false\n\
             [[route.upstreams]]\nname = \"one\"\nurl = \"http://127.0.0.1:1\"\n\
             [[route]]\nname = \"b\"\nkind = \"gemini\"\nupstream = \"http://x\"\nsse_keepalive = \"1s\"\nupstraem = 1\n\
             [[route]]\nname = \"c\"\npath = \"/c\"\nupstream = \"http://x\"\nmodels = []\nfailover_on = [500]\n",
        );
        assert_eq!(
            p,
            [
                "w.toml:6:12: route[0].upstream: `upstream` does not apply to anthropic routes \
                 (fix: remove the key; LLM routes take `[[route.upstreams]]`)",
                "w.toml:7:17: route[0].preserve_host: `preserve_host` does not apply to anthropic routes \
                 (fix: remove the key; LLM routes take `[[route.upstreams]]`)",
                "w.toml:13:8: route[1].kind: unknown route kind `gemini` \
                 (fix: use \"proxy\" (the default), \"static\", \"anthropic\", \"openai\" or \"bedrock\")",
                "w.toml:16:1: route[1].upstraem: unknown key (fix: did you mean `upstream`?)",
                "w.toml:21:10: route[2].models: `models` does not apply to proxy routes \
                 (fix: set `kind = \"anthropic\"` or `kind = \"openai\"` for an LLM route, or remove the key)",
                "w.toml:22:15: route[2].failover_on: `failover_on` does not apply to proxy routes \
                 (fix: set `kind = \"anthropic\"` or `kind = \"openai\"` for an LLM route, or remove the key)",
            ]
        );
    }
}
