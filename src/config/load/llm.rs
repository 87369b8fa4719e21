//! What LLM routes (`kind = "anthropic"` or `"openai"`) read:
//! `[[route.upstreams]]`, `[[route.models]]` and their timeouts and limits.

use super::*;
use weir_wire::Api;
use weir_wire::openai::{MaxTokensField, Reasoning};

mod upstream_api;
use upstream_api::upstream_api;

pub(super) fn llm_settings(t: &Section<'_, '_>, protocol: Protocol) -> Option<LlmSettings> {
    let mut ok = true;
    let sections = t.tables("upstreams");
    if sections.is_empty() {
        t.problem(
            "upstreams",
            "an LLM route needs at least one upstream",
            Some(format!(
                "add `[[route.upstreams]]` with `name` and `url = \"{}\"`",
                protocol.default_base_url()
            )),
        );
    }
    let mut upstreams: Vec<LlmUpstreamConfig> = Vec::new();
    for u in sections {
        match upstream(&u, protocol, &upstreams) {
            Some(upstream) => upstreams.push(upstream),
            None => ok = false,
        }
    }
    let choices = |list: Vec<At<String>>| -> Option<Vec<Choice>> {
        let mut out = Vec::new();
        let mut good = true;
        for entry in list {
            let (name, model) = match entry.value.split_once(':') {
                Some((n, m)) => (n, Some(m.to_string())),
                None => (entry.value.as_str(), None),
            };
            match upstreams.iter().position(|u| u.name == name) {
                Some(upstream)
                    if !super::azure::deployment_fits(&upstreams[upstream], model.as_deref()) =>
                {
                    entry.problem(
                        t.doc(),
                        format!(
                            "`{}` cannot be an Azure OpenAI deployment name",
                            model.unwrap_or_default()
                        ),
                        Some("a deployment is named by 1 to 64 letters, digits, `-`, `_` and `.`: write `upstream:deployment`".into()),
                    );
                    good = false;
                }
                Some(upstream) => out.push(Choice { upstream, model }),
                None => {
                    entry.problem(
                        t.doc(),
                        format!("no upstream named `{name}` in this route"),
                        Some(format!(
                            "use one of: {}",
                            upstreams
                                .iter()
                                .map(|u| u.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )),
                    );
                    good = false;
                }
            }
        }
        good.then_some(out)
    };
    let mut models = Vec::new();
    for m in t.tables("models") {
        let name = m.string("name");
        let list = m.string_list("upstreams");
        let Some(name) = name else {
            m.problem(
                "name",
                "missing",
                Some("add `name = \"claude-sonnet-4-5\"`".into()),
            );
            ok = false;
            continue;
        };
        if models.iter().any(|(n, _)| *n == name.value) {
            name.problem(
                t.doc(),
                format!("model `{}` is listed twice", name.value),
                Some("keep one `[[route.models]]` entry per model".into()),
            );
            ok = false;
        }
        let Some(list) = list.filter(|l| !l.is_empty()) else {
            m.problem(
                "upstreams",
                "a model needs at least one upstream",
                Some("add `upstreams = [\"primary\", \"backup:other-model-id\"]`".into()),
            );
            ok = false;
            continue;
        };
        match choices(list) {
            Some(c) => models.push((name.value, c)),
            None => ok = false,
        }
    }
    let default_upstreams = match t.string_list("default_upstreams") {
        Some(list) => choices(list).unwrap_or_else(|| {
            ok = false;
            Vec::new()
        }),
        None if models.is_empty() => (0..upstreams.len())
            .map(|upstream| Choice {
                upstream,
                model: None,
            })
            .collect(),
        None => Vec::new(),
    };
    let client_tokens = super::usage::client_tokens(t);
    let prices = super::prices::prices(t);
    let default_max_tokens = t
        .uint_in("default_max_tokens", 1 << 30)
        .unwrap_or(defaults::LLM_DEFAULT_MAX_TOKENS);
    let max_concurrent_per_token = t
        .uint_in("max_concurrent_per_token", MAX_SEMAPHORE_PERMITS)
        .unwrap_or(0) as usize;
    let first_byte_timeout =
        timer(t, "first_byte_timeout").unwrap_or(defaults::LLM_FIRST_BYTE_TIMEOUT);
    let first_token_timeout =
        timer(t, "first_token_timeout").unwrap_or(defaults::LLM_FIRST_TOKEN_TIMEOUT);
    let stream_idle_timeout =
        timer(t, "stream_idle_timeout").unwrap_or(defaults::LLM_STREAM_IDLE_TIMEOUT);
    let sse_keepalive = timer(t, "sse_keepalive").unwrap_or(defaults::LLM_SSE_KEEPALIVE);
    let failover_on = match t.uint_list("failover_on", 599) {
        Some(list) => list.into_iter().map(|s| s.value as u16).collect(),
        None => defaults::LLM_FAILOVER_ON.to_vec(),
    };
    let served_by_header = t.bool("served_by_header").unwrap_or(false);
    let runtime_keys = t.bool("runtime_keys").unwrap_or(false);
    let idp_tokens = t.bool("idp_tokens").unwrap_or(false);
    if failover_on.contains(&400) && upstreams.iter().any(|u| u.api.is_azure()) {
        t.problem(
            "failover_on",
            "400 on a route with an Azure OpenAI upstream: Azure answers a prompt its content filter refused with 400, and weir never sends a refused prompt on to another upstream",
            Some("remove 400 from `failover_on`".into()),
        );
        ok = false;
    }
    let settings = LlmSettings {
        protocol,
        upstreams,
        models,
        default_upstreams,
        client_tokens: client_tokens?,
        prices: prices?,
        default_max_tokens,
        max_concurrent_per_token,
        first_byte_timeout,
        first_token_timeout,
        stream_idle_timeout,
        sse_keepalive,
        failover_on,
        served_by_header,
        runtime_keys,
        idp_tokens,
    };
    ok.then_some(settings)
}

/// One `[[route.upstreams]]` entry; `before` are the entries already read.
fn upstream(
    u: &Section<'_, '_>,
    protocol: Protocol,
    before: &[LlmUpstreamConfig],
) -> Option<LlmUpstreamConfig> {
    let name = u.string("name");
    let url = u.string("url");
    let servers = u.strings_or_tables("servers");
    let credential = secrets::secret(u, "api_key_env", "api_key_file", "the API key");
    let keys = u.string_list("keys");
    let rules = super::group::balancing(
        u,
        Policy::LeastInFlight,
        |k| (k == "conversation").then_some(()),
        "\"conversation\"",
        "conversation",
    );
    let connect_timeout = timer(u, "connect_timeout").unwrap_or(defaults::CONNECT_TIMEOUT);
    let api = upstream_api(u, protocol);
    let azure = super::azure::surface(u, api);
    let on_bedrock = api == Some(UpstreamApi::Bedrock);
    let vertex = super::vertex::settings(u, api);
    let entra = super::entra::credentials(u, api);
    let http = super::group::http_version(u);
    let reasoning = named(
        u,
        "reasoning",
        Reasoning::ALL.map(Reasoning::name),
        Reasoning::from_name,
    );
    let max_tokens_field = named(
        u,
        "max_tokens_field",
        MaxTokensField::ALL.map(MaxTokensField::name),
        MaxTokensField::from_name,
    );
    let Some(name) = name else {
        u.problem("name", "missing", Some("add `name = \"primary\"`".into()));
        return None;
    };
    let mut ok = true;
    if name.value.is_empty() || name.value.contains(':') {
        name.problem(
            u.doc(),
            "an upstream name must be non-empty and cannot contain `:`",
            Some("`:` separates an upstream from a model id in `upstreams` lists".into()),
        );
        ok = false;
    }
    if before.iter().any(|x| x.name == name.value) {
        name.problem(
            u.doc(),
            format!("upstream `{}` is defined twice in this route", name.value),
            Some("give each upstream a distinct `name`".into()),
        );
        ok = false;
    }
    let servers = match (url, servers) {
        (Some(url), None) => upstream_uri(u, &url).map(|target| {
            vec![Member {
                target,
                weight: 1,
                backup: false,
            }]
        }),
        (None, Some(items)) => super::group::servers_of(u, items, upstream_uri),
        (None, None) if on_bedrock => super::bedrock::default_server(u),
        (Some(_), Some(_)) => {
            u.problem(
                "servers",
                "an upstream takes `url` or `servers`, not both",
                Some("move the `url` into `servers`".into()),
            );
            None
        }
        (None, None) if api == Some(UpstreamApi::Vertex) => {
            super::vertex::default_url(vertex.as_ref())
                .and_then(|url| url.parse::<http::Uri>().ok())
                .map(|target| {
                    vec![Member {
                        target,
                        weight: 1,
                        backup: false,
                    }]
                })
        }
        (None, None) => {
            u.problem(
                "url",
                "missing",
                Some("add `url = \"https://...\"`, or `servers = [\"http://10.0.0.1:8000\", \"http://10.0.0.2:8000\"]`".into()),
            );
            None
        }
    };
    // Neither `api_key_env`, `api_key_file` nor `keys`: the client's own
    // credential is passed through.
    let keys = match (credential, keys) {
        _ if api == Some(UpstreamApi::Vertex) => super::vertex::keys(u),
        _ if api.is_some_and(UpstreamApi::is_azure) && u.raw_present("credentials") => {
            super::entra::keys(u)
        }
        (Ok(Some(_)), Some(_)) | (Err(_), Some(_)) => {
            u.problem(
                "keys",
                "an upstream takes `keys` or `api_key_env`/`api_key_file`, not both",
                Some("move the single key into `keys` as \"env:NAME\" or \"file:PATH\"".into()),
            );
            None
        }
        (Ok(None), Some(items)) => secrets::key_list(u, items).ok(),
        (Ok(Some((key, at))), None) => Some(vec![ApiKey {
            credential: Credential::Key(key),
            source: match at.key.rsplit('.').next() {
                Some("api_key_file") => format!("file:{}", at.value),
                _ => format!("env:{}", at.value),
            },
        }]),
        (Ok(None), None) if on_bedrock => super::bedrock::aws_key(u).map(|k| vec![k]),
        (Ok(None), None) => Some(vec![ApiKey {
            credential: Credential::Passthrough,
            source: "passthrough".into(),
        }]),
        (Err(secrets::Reported), None) => None,
    };
    let members = servers.as_ref().map_or(0, Vec::len) * keys.as_ref().map_or(0, Vec::len);
    if let Some((Policy::Hash, _, _)) = rules
        && members == 1
    {
        u.problem(
            "balance",
            "`balance = \"hash\"` on an upstream of one endpoint and one key: there is nothing to choose",
            Some("list more `servers` or `keys`, or remove `balance` and `hash_key`".into()),
        );
        ok = false;
    }
    if reasoning.is_none() || max_tokens_field.is_none() {
        ok = false;
    }
    let (reasoning, max_tokens_field) = (reasoning.flatten(), max_tokens_field.flatten());
    if let Some(api) = api
        && !api
            .apis()
            .iter()
            .any(|a| matches!(a, Api::Responses | Api::Chat))
    {
        for (key, set) in [
            ("reasoning", reasoning.is_some()),
            ("max_tokens_field", max_tokens_field.is_some()),
        ] {
            if set {
                u.problem(
                    key,
                    "only an OpenAI-API upstream (`protocol = \"openai_responses\"`, \"openai_chat\" or \"openai\") reads it",
                    Some(format!("remove `{key}`")),
                );
                ok = false;
            }
        }
    }
    if let (Some(servers), Some(Some(_))) = (&servers, &azure) {
        ok &= super::azure::servers(u, servers);
    }
    let bedrock = super::bedrock::settings(u, api, servers.as_deref());
    ok &= bedrock.is_some();
    match (servers, keys, api, rules, http, (azure, vertex)) {
        (
            Some(servers),
            Some(keys),
            Some(api),
            Some((policy, hash_key, ejection)),
            Some(http),
            (Some(azure), Some(vertex)),
        ) if ok && entra.is_some() => {
            let host = servers
                .first()
                .and_then(|s| s.target.host())
                .unwrap_or_default();
            let accepts = Accepts {
                reasoning: reasoning.unwrap_or(Reasoning::Auto),
                max_tokens: max_tokens_field.unwrap_or_else(|| MaxTokensField::for_host(host)),
            };
            Some(LlmUpstreamConfig {
                name: name.value,
                servers,
                keys,
                policy,
                hash_conversation: hash_key.is_some(),
                ejection,
                connect_timeout,
                api,
                accepts,
                http,
                azure,
                entra: entra.flatten(),
                bedrock: bedrock.flatten(),
                vertex,
            })
        }
        _ => None,
    }
}

/// A key whose value is one of `names`: `Some(None)` when unset,
/// `None` when set to something else (reported).
fn named<T, const N: usize>(
    u: &Section<'_, '_>,
    key: &'static str,
    names: [&str; N],
    parse: impl Fn(&str) -> Option<T>,
) -> Option<Option<T>> {
    let Some(v) = u.string(key) else {
        return Some(None);
    };
    match parse(&v.value) {
        Some(t) => Some(Some(t)),
        None => {
            v.problem(
                u.doc(),
                format!("unknown {key} `{}`", v.value),
                Some(format!("use {}", super::names(names))),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;
    use crate::config::Accepts;

    #[test]
    fn llm_routes_are_validated_with_every_problem_named() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"a\"\nkind = \"anthropic\"\nupstream = \"http://x\"\n\
             [[route.upstreams]]\nname = \"one\"\nurl = \"http://127.0.0.1:1\"\n\
             api_key_env = \"WEIR_TEST_SURELY_UNSET_VARIABLE\"\n\
             [[route.upstreams]]\nname = \"two\"\nurl = \"ftp://x\"\nhttp_version = \"1.0\"\n\
             [[route.models]]\nname = \"m\"\nupstreams = [\"one\", \"three:id\"]\n\
             [[route]]\nname = \"b\"\nkind = \"gemini\"\n\
             [[route]]\nname = \"c\"\nupstream = \"http://x\"\nsse_keepalive = \"1s\"\n",
        );
        let joined = p.join("\n");
        for needle in [
            "route[0].upstream: `upstream` does not apply to anthropic routes",
            "WEIR_TEST_SURELY_UNSET_VARIABLE` is not set",
            "must start with http:// or https://",
            "route[0].upstreams[1].http_version: unknown HTTP version `1.0`",
            "no upstream named `three`",
            "unknown route kind `gemini`",
            "route[2].sse_keepalive: `sse_keepalive` does not apply to proxy routes",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
    }

    #[test]
    fn what_an_openai_upstream_accepts_is_read_checked_and_defaulted_by_host() {
        let c = parse(
            Path::new("w.toml"),
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"openai\"\nurl = \"https://api.openai.com\"\nprotocol = \"openai_chat\"\n\
             [[route.upstreams]]\nname = \"ollama\"\nurl = \"http://127.0.0.1:11434\"\nprotocol = \"openai_chat\"\n\
             [[route.upstreams]]\nname = \"set\"\nurl = \"http://127.0.0.1:1\"\nprotocol = \"openai_responses\"\n\
             reasoning = \"no\"\nmax_tokens_field = \"max_tokens\"\n",
        )
        .expect("valid");
        let RouteKind::Llm(llm) = &c.routes[0].kind else {
            panic!("an LLM route");
        };
        let accepts: Vec<Accepts> = llm.upstreams.iter().map(|u| u.accepts).collect();
        assert_eq!(
            accepts,
            [
                Accepts {
                    reasoning: Reasoning::Auto,
                    max_tokens: MaxTokensField::MaxCompletionTokens
                },
                Accepts {
                    reasoning: Reasoning::Auto,
                    max_tokens: MaxTokensField::Both
                },
                Accepts {
                    reasoning: Reasoning::No,
                    max_tokens: MaxTokensField::MaxTokens
                },
            ]
        );

        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\nreasoning = \"yes\"\n\
             [[route.upstreams]]\nname = \"b\"\nurl = \"http://127.0.0.1:1\"\nprotocol = \"openai_chat\"\n\
             reasoning = \"maybe\"\nmax_tokens_field = \"tokens\"\n",
        );
        let joined = p.join("\n");
        for needle in [
            "route[0].upstreams[0].reasoning: only an OpenAI-API upstream",
            "unknown reasoning `maybe`",
            "use \"auto\", \"yes\" or \"no\"",
            "unknown max_tokens_field `tokens`",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
    }

    #[test]
    fn an_llm_route_defaults_to_all_upstreams_and_32_mib() {
        let c = parse(
            Path::new("w.toml"),
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"openai\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n\
             [[route.upstreams]]\nname = \"b\"\nurl = \"http://127.0.0.1:2/base\"\n",
        )
        .expect("valid");
        let r = &c.routes[0];
        assert_eq!(r.max_request_body, Some(defaults::LLM_MAX_REQUEST_BODY));
        let RouteKind::Llm(llm) = &r.kind else {
            panic!("an LLM route");
        };
        assert_eq!(llm.protocol, Protocol::OpenAi);
        let order: Vec<usize> = llm
            .choices("anything")
            .expect("default")
            .iter()
            .map(|c| c.upstream)
            .collect();
        assert_eq!(order, vec![0, 1]);
        assert_eq!(llm.failover_on, defaults::LLM_FAILOVER_ON);
        assert!(llm.upstreams.iter().all(|u| {
            u.keys
                .iter()
                .all(|k| k.credential == Credential::Passthrough)
        }));
    }

    #[test]
    fn an_upstream_reads_servers_keys_and_its_balancing() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("k2"), "key-two\n").expect("key");
        // A variable every test environment has (weir forbids `set_var`).
        let path = std::env::var("PATH").expect("PATH").trim().to_string();
        let c = parse(
            &dir.path().join("w.toml"),
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"a\"\n\
             servers = [\"http://127.0.0.1:1\", { url = \"http://127.0.0.1:2\", weight = 3 }]\n\
             keys = [\"env:PATH\", \"file:k2\"]\n\
             balance = \"hash\"\nhash_key = \"conversation\"\n\
             [[route.upstreams]]\nname = \"b\"\nurl = \"http://127.0.0.1:3\"\n",
        )
        .expect("valid");
        let RouteKind::Llm(llm) = &c.routes[0].kind else {
            panic!("an LLM route");
        };
        let a = &llm.upstreams[0];
        let weights: Vec<u32> = a.servers.iter().map(|m| m.weight).collect();
        assert_eq!(weights, [1, 3]);
        let keys: Vec<(&str, &Credential)> = a
            .keys
            .iter()
            .map(|k| (k.source.as_str(), &k.credential))
            .collect();
        assert_eq!(
            keys,
            [
                ("env:PATH", &Credential::Key(Secret(path))),
                ("file:k2", &Credential::Key(Secret("key-two".into()))),
            ]
        );
        assert_eq!((a.policy, a.hash_conversation), (Policy::Hash, true));
        let b = &llm.upstreams[1];
        assert_eq!(b.policy, Policy::LeastInFlight, "the LLM default");
        assert_eq!(b.servers.len(), 1);
        assert_eq!(b.keys[0].credential, Credential::Passthrough);
    }

    #[test]
    fn every_upstream_group_problem_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("k"), "same").expect("key");
        std::fs::write(dir.path().join("k-again"), "same").expect("key");
        let doc = "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\nkeys = []\n\
             [[route.upstreams]]\nname = \"b\"\nurl = \"http://127.0.0.1:1\"\n\
             keys = [\"file:k\", \"file:k-again\", \"file:k\", \"ANTHROPIC_KEY\"]\n\
             [[route.upstreams]]\nname = \"c\"\nurl = \"http://127.0.0.1:1\"\n\
             servers = [\"http://127.0.0.1:2\"]\napi_key_file = \"k\"\nkeys = [\"file:k\"]\n\
             [[route.upstreams]]\nname = \"d\"\nurl = \"http://127.0.0.1:1\"\n\
             balance = \"hash\"\nhash_key = \"conversation\"\n\
             [[route.upstreams]]\nname = \"e\"\nservers = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\"]\n\
             hash_key = \"conversation\"\n\
             [[route.upstreams]]\nname = \"f\"\nservers = [\"http://127.0.0.1:1\", \"http://127.0.0.1:1\"]\n\
             balance = \"hash\"\nhash_key = \"client_ip\"\n\
             [[route.upstreams]]\nname = \"g\"\nservers = []\n";
        let path = dir.path().join("w.toml");
        let p: Vec<String> = match parse(&path, doc) {
            Ok(_) => panic!("invalid"),
            Err(p) => p.0.iter().map(ToString::to_string).collect(),
        };
        let joined = p.join("\n");
        for needle in [
            "upstreams[0].keys: an empty list of keys",
            "upstreams[1].keys[1]: the same key as `file:k` earlier in the list",
            "upstreams[1].keys[2]: the same key as `file:k` earlier in the list",
            "upstreams[1].keys[3]: `ANTHROPIC_KEY` does not say where the key is",
            "fix: write each key as \"env:VARIABLE\" or \"file:path/to/key\"",
            "upstreams[2].servers: an upstream takes `url` or `servers`, not both",
            "upstreams[2].keys: an upstream takes `keys` or `api_key_env`/`api_key_file`, not both",
            "upstreams[3].balance: `balance = \"hash\"` on an upstream of one endpoint and one key",
            "upstreams[4].hash_key: `hash_key` is read only with `balance = \"hash\"`, not `least_in_flight`",
            "upstreams[5].servers[1]: `http://127.0.0.1:1/` is listed twice",
            "upstreams[5].hash_key: `client_ip` is not a hash key (fix: use \"conversation\")",
            "upstreams[6].servers: an empty group serves nothing",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
        assert!(
            p.iter().all(|l| l.contains("w.toml:")),
            "each with its file and line: {joined}"
        );
    }

    #[test]
    fn an_upstream_or_model_without_a_name_reports_only_that() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"openai\"\n\
             [[route.upstreams]]\nurl = \"http://127.0.0.1:1\"\nconnect_timeout = \"1s\"\n\
             [[route.models]]\nupstreams = [\"a\"]\n",
        );
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(
            p[0].contains("route[0].upstreams[0].name: missing"),
            "{}",
            p[0]
        );
        assert!(
            p[1].contains("route[0].models[0].name: missing"),
            "{}",
            p[1]
        );
    }
}
