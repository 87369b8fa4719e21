//! What a proxy route's upstream group reads: one `upstream` URL or a
//! `servers` list (each a URL, or a table with a weight and a backup
//! flag), the balancing policy and its hash key, and when a failing
//! server is taken out.

use super::reader::Item;
use super::*;

/// The most a server's weight can be: shares finer than a thousandth
/// mean nothing, and the hash ring's size grows with the weights.
const MAX_WEIGHT: u64 = 1_000;

pub(super) fn group(t: &Section<'_, '_>) -> Option<UpstreamGroup> {
    // Every key is asked for before any early return (see
    // `Section::keys_read_by`).
    let upstream = t.string("upstream");
    let servers = t.strings_or_tables("servers");
    let rules = balancing(
        t,
        Policy::P2cEwma,
        parse_hash_key,
        "\"header:<name>\", \"cookie:<name>\" or \"client_ip\"",
        "header:x-session-id",
    );
    let check = t.table("health_check").map(|c| health_check(&c));
    let retry = retry(t);
    let http = http_version(t);

    let mut ok = rules.is_some();
    // Read on after a problem here: the other keys' problems are
    // reported in the same run.
    let servers = match (upstream, servers) {
        (Some(u), None) => server_url(t, &u).map(|target| {
            vec![Member {
                target,
                weight: 1,
                backup: false,
            }]
        }),
        (None, Some(items)) => servers_of(t, items, server_url),
        (Some(_), Some(_)) => {
            t.problem(
                "servers",
                "a route takes `upstream` or `servers`, not both",
                Some("move the `upstream` URL into `servers`".into()),
            );
            None
        }
        (None, None) => {
            t.problem(
                "upstream",
                "missing",
                Some(
                    "add `upstream = \"http://127.0.0.1:3000\"`, or `servers = [\"http://10.0.0.1:8080\", \"http://10.0.0.2:8080\"]`"
                        .into(),
                ),
            );
            None
        }
    };
    let health_check = match check {
        None => None,
        Some(Some(c)) => Some(c),
        Some(None) => {
            ok = false;
            None
        }
    };
    let unix = servers
        .as_ref()
        .is_some_and(|s| s.iter().any(|m| m.target.socket.is_some()));
    if unix && http == Some(UpstreamHttp::Http2) {
        t.problem(
            "http_version",
            "HTTP/2 over a unix socket is not supported: weir speaks HTTP/1.1 over it",
            Some("remove `http_version`, or reach the server over TCP".into()),
        );
        ok = false;
    }
    let servers = servers.filter(|_| ok)?;
    let (policy, hash_key, ejection) = rules?;
    Some(UpstreamGroup {
        servers,
        policy,
        hash_key,
        ejection,
        health_check,
        retry: retry?,
        http: http?,
    })
}

/// The keys that say how a group balances and when a member is taken out
/// (`balance`, `hash_key`, `eject_*`, `max_ejected_percent`,
/// `slow_start`), shared by proxy routes and LLM upstreams: the policy
/// (`default` when unset), the hash key `parse` reads (`keys` names the
/// forms it takes, `example` is one), and the ejection rule.
pub(super) fn balancing<K>(
    t: &Section<'_, '_>,
    default: Policy,
    parse: impl Fn(&str) -> Option<K>,
    keys: &str,
    example: &str,
) -> Option<(Policy, Option<K>, Ejection)> {
    let balance = t.string("balance");
    let hash_key = t.string("hash_key");
    let defaults = Ejection::default();
    let after = t.uint_in("eject_after", 1_000);
    let base = timer(t, "eject_base");
    let max = timer(t, "eject_max");
    let max_share = t.uint_in("max_ejected_percent", 100);
    let slow_start = t.duration_in("slow_start", TIMER_OR_ZERO);
    let mut ok = true;
    let policy = match &balance {
        None => default,
        Some(b) => match Policy::from_name(&b.value) {
            Some(p) => p,
            None => {
                b.problem(
                    t.doc(),
                    format!("unknown balancing policy `{}`", b.value),
                    Some(format!(
                        "use {}",
                        super::names(Policy::ALL.map(Policy::name))
                    )),
                );
                ok = false;
                default
            }
        },
    };
    let hash_key = match &hash_key {
        None => None,
        Some(k) => match parse(&k.value) {
            Some(key) => Some(key),
            None => {
                k.problem(
                    t.doc(),
                    format!("`{}` is not a hash key", k.value),
                    Some(format!("use {keys}")),
                );
                ok = false;
                None
            }
        },
    };
    match (policy, &hash_key) {
        (Policy::Hash, None) if ok => {
            t.problem(
                "hash_key",
                "`balance = \"hash\"` needs a key to hash",
                Some(format!("add `hash_key = \"{example}\"` (or {keys})")),
            );
            ok = false;
        }
        (p, Some(_)) if p != Policy::Hash => {
            t.problem(
                "hash_key",
                format!(
                    "`hash_key` is read only with `balance = \"hash\"`, not `{}`",
                    p.name()
                ),
                Some("set `balance = \"hash\"` or remove `hash_key`".into()),
            );
            ok = false;
        }
        _ => {}
    }
    let ejection = Ejection {
        after: after.map_or(defaults.after, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        base: base.unwrap_or(defaults.base),
        max: max.unwrap_or(defaults.max),
        max_share: max_share.map_or(defaults.max_share, |n| u8::try_from(n).unwrap_or(100)),
        slow_start: slow_start.unwrap_or(defaults.slow_start),
    };
    if after == Some(0) {
        t.problem(
            "eject_after",
            "a server cannot be taken out after 0 failures",
            Some("use 1 or more".into()),
        );
        ok = false;
    }
    if ejection.base > ejection.max {
        t.problem(
            "eject_base",
            format!(
                "`eject_base` ({}) is longer than `eject_max` ({})",
                reader::duration_text(ejection.base),
                reader::duration_text(ejection.max)
            ),
            Some("make `eject_max` at least `eject_base`".into()),
        );
        ok = false;
    }
    ok.then_some((policy, hash_key, ejection))
}

/// `http_version`: which HTTP versions weir speaks to the upstream (a
/// proxy route's group, or one LLM upstream). `None` when it is set to
/// something else (reported).
pub(super) fn http_version(t: &Section<'_, '_>) -> Option<UpstreamHttp> {
    let Some(v) = t.string("http_version") else {
        return Some(UpstreamHttp::default());
    };
    let found = UpstreamHttp::from_name(&v.value);
    if found.is_none() {
        v.problem(
            t.doc(),
            format!("unknown HTTP version `{}`", v.value),
            Some(format!(
                "use {}",
                super::names(UpstreamHttp::ALL.map(UpstreamHttp::name))
            )),
        );
    }
    found
}

/// The `servers` list: URLs, or tables with `url`, `weight`, `backup`.
/// Each URL is read by `parse`: a proxy route's may name a unix socket,
/// an LLM upstream's may not.
pub(super) fn servers_of<T: PartialEq + std::fmt::Display>(
    t: &Section<'_, '_>,
    items: Vec<Item<'_, '_>>,
    parse: impl Fn(&Section<'_, '_>, &At<String>) -> Option<T>,
) -> Option<Vec<Member<T>>> {
    let mut ok = true;
    let mut out: Vec<Member<T>> = Vec::new();
    for item in items {
        let (url, weight, backup, at) = match item {
            Item::String(url) => {
                let at = (url.key.clone(), Some(url.span.clone()));
                (parse(t, &url), 1, false, at)
            }
            Item::Table(s) => {
                let url = s.string("url");
                let weight = s.uint_in("weight", MAX_WEIGHT);
                let backup = s.bool("backup").unwrap_or(false);
                if weight == Some(0) {
                    s.problem(
                        "weight",
                        "a weight of 0 never sends a request",
                        Some("use 1 to 1000, or `backup = true`".into()),
                    );
                    ok = false;
                }
                let uri = match &url {
                    Some(u) => parse(&s, u),
                    None => {
                        s.problem(
                            "url",
                            "missing",
                            Some("add `url = \"http://10.0.0.1:8080\"`".into()),
                        );
                        None
                    }
                };
                let weight = weight.map_or(1, |w| u32::try_from(w).unwrap_or(1));
                (uri, weight, backup, (s.path().to_string(), None))
            }
        };
        let Some(url) = url else {
            ok = false;
            continue;
        };
        if out.iter().any(|m| m.target == url) {
            t.doc().report(
                at.1,
                &at.0,
                format!("`{url}` is listed twice"),
                Some("list each server once; give it a `weight` for a larger share".into()),
            );
            ok = false;
            continue;
        }
        out.push(Member {
            target: url,
            weight,
            backup,
        });
    }
    if ok && out.is_empty() {
        t.problem(
            "servers",
            "an empty group serves nothing",
            Some("list at least one server URL".into()),
        );
        return None;
    }
    if ok && out.iter().all(|m| m.backup) {
        t.problem(
            "servers",
            "every server is a backup: backups serve only when no primary is in",
            Some("remove `backup = true` from at least one server".into()),
        );
        return None;
    }
    ok.then_some(out)
}

/// `retry_methods` and the retry budget.
fn retry(t: &Section<'_, '_>) -> Option<Retry> {
    let defaults = Retry::default();
    let methods = t.string_list("retry_methods");
    let percent = t.uint_in("retry_budget_percent", 1_000);
    let min_per_second = t.uint_in("retry_budget_min_per_second", 100_000);
    let window = timer(t, "retry_budget_window");
    let mut ok = true;
    let methods = match methods {
        None => defaults.methods,
        Some(list) => {
            let mut out = Vec::new();
            for m in list {
                let upper = m.value.to_ascii_uppercase();
                match http::Method::from_bytes(upper.as_bytes()) {
                    Ok(method) if method != http::Method::POST && method != http::Method::PATCH => {
                        out.push(method)
                    }
                    Ok(_) => {
                        m.problem(
                            t.doc(),
                            format!("`{}` is not idempotent: a retry could do it twice", m.value),
                            Some("list only methods your servers make idempotent, like \"GET\" or \"PUT\"".into()),
                        );
                        ok = false;
                    }
                    Err(_) => {
                        m.problem(
                            t.doc(),
                            format!("`{}` is not an HTTP method", m.value),
                            None,
                        );
                        ok = false;
                    }
                }
            }
            out
        }
    };
    let budget = RetryBudget {
        percent: percent.map_or(defaults.budget.percent, |n| n as u32),
        min_per_second: min_per_second.map_or(defaults.budget.min_per_second, |n| n as u32),
        window: window.unwrap_or(defaults.budget.window),
    };
    ok.then_some(Retry { methods, budget })
}

/// `[route.health_check]`.
fn health_check(c: &Section<'_, '_>) -> Option<HealthCheck> {
    let path = c.string("path");
    let interval = timer(c, "interval").unwrap_or(Duration::from_secs(5));
    let timeout = timer(c, "timeout").unwrap_or(Duration::from_secs(2));
    let rise = c.uint_in("rise", 100).unwrap_or(2);
    let fall = c.uint_in("fall", 100).unwrap_or(3);
    let expect = c.uint_list("expect_status", 599);
    let mut ok = true;
    let path = match path {
        Some(p)
            if p.value.starts_with('/') && p.value.parse::<http::uri::PathAndQuery>().is_ok() =>
        {
            p.value
        }
        Some(p) => {
            p.problem(
                c.doc(),
                format!("`{}` is not a path", p.value),
                Some("write it like \"/healthz\"".into()),
            );
            return None;
        }
        None => {
            c.problem("path", "missing", Some("add `path = \"/healthz\"`".into()));
            return None;
        }
    };
    for (key, n) in [("rise", rise), ("fall", fall)] {
        if n == 0 {
            c.problem(
                key,
                format!("`{key}` must be at least 1"),
                Some(format!("use `{key} = 1` or more")),
            );
            ok = false;
        }
    }
    if timeout > interval {
        c.problem(
            "timeout",
            "a check's `timeout` is longer than its `interval`",
            Some("make `timeout` at most `interval`".into()),
        );
        ok = false;
    }
    let mut expect_status = Vec::new();
    for s in expect.into_iter().flatten() {
        if s.value < 100 {
            c.doc().report(
                Some(s.span.clone()),
                &s.key,
                "not an HTTP status".into(),
                Some("use 100 to 599".into()),
            );
            ok = false;
        } else {
            expect_status.push(s.value as u16);
        }
    }
    ok.then_some(HealthCheck {
        path,
        interval,
        timeout,
        rise: rise as u32,
        fall: fall as u32,
        expect_status,
    })
}

fn parse_hash_key(text: &str) -> Option<HashKey> {
    if text == "client_ip" {
        return Some(HashKey::ClientIp);
    }
    let (kind, name) = text.split_once(':')?;
    match kind {
        "header" => http::HeaderName::from_bytes(name.trim().as_bytes())
            .ok()
            .map(HashKey::Header),
        "cookie" if !name.trim().is_empty() => Some(HashKey::Cookie(name.trim().to_string())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;

    const LISTENER: &str = "[[listener]]\naddress = \"127.0.0.1:0\"\n";

    #[test]
    fn servers_are_read_as_urls_or_tables_and_one_upstream_is_a_group_of_one() {
        let c = parse(
            Path::new("w.toml"),
            &format!(
                "{LISTENER}[[route]]\npath = \"/a\"\nservers = [\"http://127.0.0.1:1\", \
                 {{ url = \"http://127.0.0.1:2\", weight = 3 }}, \
                 {{ url = \"http://127.0.0.1:3\", backup = true }}]\n\
                 balance = \"hash\"\nhash_key = \"cookie:sid\"\nslow_start = \"30s\"\n\
                 [[route]]\npath = \"/b\"\nupstream = \"http://127.0.0.1:4\"\nhttp_version = \"2\"\n"
            ),
        )
        .expect("valid");
        let RouteKind::Proxy { upstream } = &c.routes[0].kind else {
            panic!("a proxy route");
        };
        let shape: Vec<(String, u32, bool)> = upstream
            .servers
            .iter()
            .map(|m| (m.target.to_string(), m.weight, m.backup))
            .collect();
        assert_eq!(
            shape,
            [
                ("http://127.0.0.1:1/".to_string(), 1, false),
                ("http://127.0.0.1:2/".to_string(), 3, false),
                ("http://127.0.0.1:3/".to_string(), 1, true),
            ]
        );
        assert_eq!(upstream.policy, Policy::Hash);
        assert_eq!(upstream.hash_key, Some(HashKey::Cookie("sid".into())));
        assert_eq!(upstream.ejection.slow_start, Duration::from_secs(30));
        let RouteKind::Proxy { upstream } = &c.routes[1].kind else {
            panic!("a proxy route");
        };
        assert_eq!(upstream.policy, Policy::P2cEwma);
        assert_eq!(upstream.http, UpstreamHttp::Http2);
        assert_eq!(
            UpstreamGroup {
                http: UpstreamHttp::Http1,
                ..(**upstream).clone()
            },
            UpstreamGroup::one("http://127.0.0.1:4".parse().expect("uri"))
        );
    }

    #[test]
    fn a_unix_socket_server_is_read_in_both_spellings_relative_to_the_config() {
        let c = parse(
            Path::new("/etc/weir/w.toml"),
            &format!(
                "{LISTENER}[[route]]\npath = \"/a\"\nupstream = \"unix:/run/app.sock\"\n\
                 [[route]]\npath = \"/b\"\nservers = [\"unix//run/b.sock\", \"unix:b2.sock\", \
                 {{ url = \"unix:/run/c.sock\", backup = true }}, \"http://127.0.0.1:1\"]\n"
            ),
        )
        .expect("valid");
        let servers = |i: usize| -> Vec<String> {
            let RouteKind::Proxy { upstream } = &c.routes[i].kind else {
                panic!("a proxy route");
            };
            upstream
                .servers
                .iter()
                .map(|m| m.target.to_string())
                .collect()
        };
        assert_eq!(servers(0), ["unix:/run/app.sock"]);
        assert_eq!(
            servers(1),
            [
                "unix:/run/b.sock",
                "unix:/etc/weir/b2.sock",
                "unix:/run/c.sock",
                "http://127.0.0.1:1/"
            ]
        );
    }

    #[test]
    fn unix_socket_problems_are_named() {
        let long = "x".repeat(120);
        let p = problems(&format!(
            "{LISTENER}[[route]]\npath = \"/a\"\nupstream = \"https://unix:/run/app.sock:\"\n\
             [[route]]\npath = \"/b\"\nservers = [\"unix://run/app.sock\", \"unix:\", \"http://unix:/run/app.sock:\", \"unix:/{long}\"]\n\
             [[route]]\npath = \"/c\"\nupstream = \"unix:/run/app.sock\"\nhttp_version = \"2\"\n\
             [[route]]\npath = \"/d\"\nservers = [\"unix:/run/a.sock\", \"unix:/run/a.sock\"]\n\
             [[route]]\npath = \"/e\"\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"unix:/run/llm.sock\"\n\
             [[route.upstreams]]\nname = \"b\"\nservers = [\"unix:/run/llm.sock\"]\n"
        ));
        let joined = p.join("\n");
        for needle in [
            "route[0].upstream: `https://unix:/run/app.sock:`: TLS over a unix socket is not supported",
            "route[1].servers[0]: `unix://run/app.sock` does not name a socket path (fix: write it like \"unix:/run/app.sock\")",
            "route[1].servers[1]: `unix:` does not name a socket path",
            "route[1].servers[2]: `http://unix:/run/app.sock:` is nginx's spelling of a unix socket",
            "route[1].servers[3]: the socket path /xxx",
            "route[2].http_version: HTTP/2 over a unix socket is not supported",
            "route[3].servers[1]: `unix:/run/a.sock` is listed twice",
            "route[4].upstreams[0].url: `unix:/run/llm.sock`: unix-socket upstreams are for proxy routes only",
            "route[4].upstreams[1].servers[0]: `unix:/run/llm.sock`: unix-socket upstreams are for proxy routes only",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
    }

    #[test]
    fn every_group_problem_is_named() {
        let p = problems(&format!(
            "{LISTENER}[[route]]\npath = \"/a\"\nupstream = \"http://127.0.0.1:1\"\nservers = [\"http://127.0.0.1:2\"]\nhttp_version = \"h3\"\n\
             [[route]]\npath = \"/b\"\nservers = [\"http://127.0.0.1:1\", \"http://127.0.0.1:1\", 7, {{ weight = 0 }}]\n\
             balance = \"fastest\"\nhash_key = \"header:x\"\n\
             [[route]]\npath = \"/c\"\nservers = [{{ url = \"http://127.0.0.1:1\", backup = true }}]\n\
             [[route]]\npath = \"/d\"\nservers = [\"http://127.0.0.1:1\"]\nbalance = \"hash\"\n\
             eject_after = 0\neject_base = \"10m\"\neject_max = \"1m\"\n\
             [[route]]\npath = \"/e\"\nservers = [\"http://127.0.0.1:1\"]\nbalance = \"hash\"\nhash_key = \"body\"\n\
             [[route]]\npath = \"/f\"\nkind = \"anthropic\"\nbalance = \"round_robin\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n\
             [[route]]\npath = \"/g\"\nservers = [\"http://127.0.0.1:1\"]\n\
             [route.health_check]\npath = \"healthz\"\n\
             [[route]]\npath = \"/h\"\nservers = [\"http://127.0.0.1:1\"]\n\
             [route.health_check]\npath = \"/ok\"\ninterval = \"1s\"\ntimeout = \"2s\"\nfall = 0\nexpect_status = [42]\n"
        ));
        let joined = p.join("\n");
        for needle in [
            "route[0].servers: a route takes `upstream` or `servers`, not both",
            "route[0].http_version: unknown HTTP version `h3` (fix: use \"auto\", \"1.1\" or \"2\")",
            "route[1].servers[1]: `http://127.0.0.1:1/` is listed twice",
            "route[1].servers[2]: expected a string or a table, found integer",
            "route[1].servers[3].weight: a weight of 0 never sends a request",
            "route[1].servers[3].url: missing",
            "unknown balancing policy `fastest`",
            "route[2].servers: every server is a backup",
            "route[3].hash_key: `balance = \"hash\"` needs a key to hash",
            "route[3].eject_after: a server cannot be taken out after 0 failures",
            "route[3].eject_base: `eject_base` (10m) is longer than `eject_max` (1m)",
            "route[4].hash_key: `body` is not a hash key",
            "route[5].balance: `balance` does not apply to anthropic routes",
            "route[6].health_check.path: `healthz` is not a path",
            "route[7].health_check.timeout: a check's `timeout` is longer than its `interval`",
            "route[7].health_check.fall: `fall` must be at least 1",
            "route[7].health_check.expect_status[0]: not an HTTP status",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
    }

    #[test]
    fn retry_keys_are_read_and_a_non_idempotent_method_is_refused() {
        let c = parse(
            Path::new("w.toml"),
            &format!(
                "{LISTENER}[upstream]\nnameservers = [\"127.0.0.1:5353\", \"10.0.0.2\"]\nresolve_interval = \"5s\"\n\
                 [[route]]\npath = \"/a\"\nservers = [\"http://127.0.0.1:1\"]\n\
                 retry_methods = [\"get\", \"PUT\"]\nretry_budget_percent = 50\nretry_budget_window = \"1m\"\n"
            ),
        )
        .expect("valid");
        assert_eq!(
            c.upstream.nameservers,
            [
                "127.0.0.1:5353".parse().expect("addr"),
                "10.0.0.2:53".parse().expect("addr")
            ]
        );
        assert_eq!(c.upstream.resolve_interval, Duration::from_secs(5));
        let RouteKind::Proxy { upstream } = &c.routes[0].kind else {
            panic!("a proxy route");
        };
        assert_eq!(
            upstream.retry.methods,
            [http::Method::GET, http::Method::PUT]
        );
        assert_eq!(
            upstream.retry.budget,
            RetryBudget {
                percent: 50,
                min_per_second: 10,
                window: Duration::from_secs(60)
            }
        );
        let p = problems(&format!(
            "{LISTENER}[upstream]\nnameservers = [\"dns.example\"]\n\
             [[route]]\npath = \"/a\"\nservers = [\"http://127.0.0.1:1\"]\nretry_methods = [\"POST\", \"G T\"]\n"
        ))
        .join("\n");
        for needle in [
            "upstream.nameservers[0]: `dns.example` is not an IP address",
            "route[0].retry_methods[0]: `POST` is not idempotent",
            "route[0].retry_methods[1]: `G T` is not an HTTP method",
        ] {
            assert!(p.contains(needle), "missing {needle:?} in:\n{p}");
        }
    }
}
