//! What an LLM route reads for usage accounting: named client tokens
//! (`[[route.clients]]`, beside the unnamed ones of `client_tokens_file`
//! and `client_tokens_env`), token budgets (per route for every token, per
//! client to override), and prices per model (`[[route.prices]]`).

use super::*;

/// The largest token budget accepted (a budget is checked in integers:
/// far below where sums of them could overflow).
const MAX_TOKENS: u64 = 1 << 50;
/// The largest spend budget and the largest price per million tokens, in
/// currency units.
pub(super) const MAX_MONEY: f64 = 1_000_000.0;

/// A budget's keys in `t` (a route, a `[[route.clients]]` entry, a
/// team), in [`BUDGET_KEYS`]' order; a key set to 0 means no bound, and
/// `None` means not set here.
pub(super) fn budget_keys(t: &Section<'_, '_>) -> ([Option<Option<u64>>; 7], Option<u8>) {
    let limits = BUDGET_KEYS.map(|key| {
        if key.starts_with("spend_") {
            t.number(key, MAX_MONEY)
                .map(|n| (n > 0.0).then(|| money(n)))
        } else {
            t.uint_in(key, MAX_TOKENS).map(|n| (n > 0).then_some(n))
        }
    });
    // The soft limit, a percent of each bound.
    let warn_at = t.uint_in("warn_at", 99).map(|p| p as u8).filter(|p| *p > 0);
    (limits, warn_at)
}

/// The budget keys, in the order of [`Budget`]'s fields.
pub(super) const BUDGET_KEYS: [&str; 7] = [
    "tokens_per_minute",
    "tokens_per_day",
    "spend_per_day",
    "tokens_per_week",
    "spend_per_week",
    "tokens_per_month",
    "spend_per_month",
];

/// An amount of currency in weir's integer unit (10⁻¹²).
fn money(n: f64) -> u64 {
    (n * SPEND_UNIT).round() as u64
}

/// A price per million tokens as weir's integer unit per token (10⁻¹²
/// of the currency): `3.0` per million is 3,000,000 per token.
pub(super) fn per_token(n: f64) -> u64 {
    (n * 1e6).round() as u64
}

pub(super) fn budget(keys: ([Option<Option<u64>>; 7], Option<u8>), base: Budget) -> Budget {
    let ([m, d, s, tw, sw, tm, sm], warn_at) = keys;
    Budget {
        warn_at: warn_at.or(base.warn_at),
        tokens_per_minute: m.unwrap_or(base.tokens_per_minute),
        tokens_per_day: d.unwrap_or(base.tokens_per_day),
        spend_per_day: s.unwrap_or(base.spend_per_day),
        tokens_per_week: tw.unwrap_or(base.tokens_per_week),
        spend_per_week: sw.unwrap_or(base.spend_per_week),
        tokens_per_month: tm.unwrap_or(base.tokens_per_month),
        spend_per_month: sm.unwrap_or(base.spend_per_month),
    }
}

/// Every client token of the route: the named `[[route.clients]]` first,
/// then the unnamed tokens of `client_tokens_file`/`client_tokens_env`,
/// each named `token-` and the first 8 hex digits of its SHA-256 (stable
/// across reloads and reorderings, and no use to a guesser). The route's
/// budget applies to each token that does not set its own.
pub(super) fn client_tokens(t: &Section<'_, '_>) -> Option<Vec<ClientToken>> {
    let route_budget = budget(budget_keys(t), Budget::default());
    let unnamed = secrets::client_tokens(t);
    let mut out: Vec<ClientToken> = Vec::new();
    let mut ok = true;
    for c in t.tables("clients") {
        let name = c.string("name");
        let token = secrets::secret(&c, "token_env", "token_file", "the client token");
        let keys = budget_keys(&c);
        let models = allowed_models(&c);
        let Some(name) = name else {
            c.problem(
                "name",
                "missing",
                Some("add `name = \"alice\"` (used in metrics and usage records)".into()),
            );
            ok = false;
            continue;
        };
        let token = match token {
            Ok(Some((token, _))) => token,
            Ok(None) => {
                c.problem(
                    "token_env",
                    "a client needs its token",
                    Some("add `token_env = \"VARIABLE\"` or `token_file = \"path\"`".into()),
                );
                ok = false;
                continue;
            }
            Err(_) => {
                ok = false;
                continue;
            }
        };
        if !valid_name(&name.value) {
            name.problem(
                c.doc(),
                format!("`{}` is not a client name", name.value),
                Some("use letters, digits, `-`, `_` and `.` (at most 64), not starting with `token-`".into()),
            );
            ok = false;
            continue;
        }
        if let Some(twice) = out.iter().find(|o| o.name == name.value) {
            name.problem(
                c.doc(),
                format!("client `{}` is listed twice", twice.name),
                Some("give each client its own name".into()),
            );
            ok = false;
            continue;
        }
        if let Some(same) = out.iter().find(|o| o.token == token) {
            name.problem(
                c.doc(),
                format!("the same token as client `{}`", same.name),
                Some("give each client its own token".into()),
            );
            ok = false;
            continue;
        }
        out.push(ClientToken {
            name: name.value,
            token,
            budget: budget(keys, route_budget),
            models: match models {
                Some(models) => models,
                None => {
                    ok = false;
                    continue;
                }
            },
        });
    }
    let unnamed = unnamed?;
    if !unnamed.is_empty() && t.doc().token_id_key.borrow().is_none() {
        t.doc().warn(
            "unnamed client tokens are named with a key made at start: their names \
             (metrics, usage records) change at restart and differ between the instances \
             of a fleet; fix: set `server.token_id_key_file` (the same on every instance)"
                .into(),
        );
    }
    for token in unnamed {
        if out.iter().any(|o| o.token == token) {
            // Listed again in the file or the variable: one client.
            continue;
        }
        out.push(ClientToken {
            name: fingerprint(&token, t.doc().token_id_key.borrow().as_ref()),
            token,
            budget: route_budget,
            models: AllowedModels::default(),
        });
    }
    if out.is_empty() && !route_budget.is_unbounded() {
        let key = BUDGET_KEYS
            .into_iter()
            .find(|k| t.raw_present(*k))
            .unwrap_or("tokens_per_minute");
        t.problem(
            key,
            "a budget is counted per client token, and this route has none",
            Some("add `[[route.clients]]` or `client_tokens_file`".into()),
        );
        ok = false;
    }
    ok.then_some(out)
}

/// The most model patterns one client may list, and the longest.
const MAX_MODEL_PATTERNS: usize = 256;
const MAX_MODEL_PATTERN: usize = 256;

/// A client's `models`: the patterns of the model names it may ask for
/// (none = every model); `None` when one is not a usable pattern.
pub(super) fn allowed_models(c: &Section<'_, '_>) -> Option<AllowedModels> {
    let Some(list) = c.string_list("models") else {
        return (!c.raw_present("models")).then(AllowedModels::default);
    };
    let mut ok = true;
    if list.is_empty() {
        c.problem(
            "models",
            "an empty list would let this client use no model",
            Some(
                "list the models it may use (`[\"claude-*\"]`), or leave `models` out for all"
                    .into(),
            ),
        );
        ok = false;
    }
    if list.len() > MAX_MODEL_PATTERNS {
        c.problem(
            "models",
            format!("{} patterns; at most {MAX_MODEL_PATTERNS}", list.len()),
            Some("use `*` to cover a family of models (`gpt-5*`)".into()),
        );
        ok = false;
    }
    for pattern in &list {
        if pattern.value.is_empty() || pattern.value.len() > MAX_MODEL_PATTERN {
            pattern.problem(
                c.doc(),
                format!("`{}` is not a model pattern", pattern.value),
                Some(format!(
                    "a model name, or one with `*` for any characters, 1 to {MAX_MODEL_PATTERN} bytes"
                )),
            );
            ok = false;
        }
    }
    ok.then(|| AllowedModels(list.into_iter().map(|p| p.value).collect()))
}

/// A client name: what metrics and records show, so short and plain.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with("token-")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The name of an unnamed token: `token-` and the first 6 bytes, in hex,
/// of its HMAC-SHA256 under the deployment's key (`server.token_id_key_*`;
/// without one, a key made once per process). Keyed, so a name shown in
/// `/metrics` or a usage record cannot be used to test guesses of the
/// token; the same key on every instance gives a fleet the same names.
pub(crate) fn fingerprint(token: &Secret, key: Option<&Secret>) -> String {
    use aws_lc_rs::hmac;
    static PER_PROCESS: std::sync::LazyLock<[u8; 32]> = std::sync::LazyLock::new(|| {
        let mut k = [0u8; 32];
        // The system's random source failing leaves a zero key: names are
        // still keyed per deployment by nothing secret, as before.
        let _ = aws_lc_rs::rand::fill(&mut k);
        k
    });
    let key_bytes = key.map_or(&PER_PROCESS[..], |k| k.0.as_bytes());
    let tag = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, key_bytes),
        token.0.as_bytes(),
    );
    let head = tag.as_ref().get(..6).unwrap_or(tag.as_ref());
    let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
    format!("token-{hex}")
}

#[cfg(test)]
mod tests {
    use super::super::tests::problems;
    use super::*;

    fn llm(extra: &str, tables: &str) -> LlmSettings {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("tokens"),
            "tok-a\n# comment\ntok-b\ntok-a\n",
        )
        .expect("tokens");
        std::fs::write(dir.path().join("alice"), "tok-alice\n").expect("token");
        let c = parse(
            &dir.path().join("w.toml"),
            &format!(
                "[[listener]]\naddress = \"127.0.0.1:0\"\n\
                 [[route]]\nkind = \"anthropic\"\n{extra}\n\
                 [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n{tables}"
            ),
        )
        .expect("valid");
        let RouteKind::Llm(llm) = &c.routes[0].kind else {
            panic!("an LLM route");
        };
        (**llm).clone()
    }

    #[test]
    fn an_unnamed_token_is_named_by_a_keyed_hash_not_its_bare_digest() {
        let token = Secret("tok-a".into());
        let key = Secret("deployment-key".into());
        let name = fingerprint(&token, Some(&key));
        // The same key (every instance of a fleet): the same name.
        assert_eq!(
            name,
            fingerprint(&token, Some(&Secret("deployment-key".into())))
        );
        assert_eq!(name.len(), "token-".len() + 12, "{name}");
        // HMAC-SHA256("deployment-key", "tok-a"), first 6 bytes.
        assert_eq!(name, "token-0db85578b675");
        // Not sha256("tok-a") (what anyone can compute from a guess).
        assert!(!name.contains(&token.digest_hex(4)), "{name}");
        assert_ne!(name, fingerprint(&token, Some(&Secret("another".into()))));
        assert_ne!(
            name,
            fingerprint(&token, None),
            "no key: one made per process"
        );
        assert_eq!(fingerprint(&token, None), fingerprint(&token, None));
    }

    #[test]
    fn clients_are_named_and_budgeted_per_token() {
        let s = llm(
            "client_tokens_file = \"tokens\"\ntokens_per_minute = 1000\nspend_per_day = 2.5\n",
            "[[route.clients]]\nname = \"alice\"\ntoken_file = \"alice\"\n\
             tokens_per_day = 50000\nspend_per_day = 0\n",
        );
        let names: Vec<&str> = s.client_tokens.iter().map(|c| c.name.as_str()).collect();
        // Keyed by a key made for this process: the two, each its own.
        assert_eq!(names.len(), 3);
        assert_eq!(names[0], "alice");
        let per_process = |t: &str| fingerprint(&Secret(t.into()), None);
        assert_eq!(names[1..], [per_process("tok-a"), per_process("tok-b")]);
        assert_eq!(
            s.client_tokens[0].budget,
            Budget {
                tokens_per_minute: Some(1000),
                tokens_per_day: Some(50_000),
                ..Budget::default()
            },
            "a client's own keys override the route's, 0 lifts a bound"
        );
        assert_eq!(
            s.client_tokens[1].budget,
            Budget {
                tokens_per_minute: Some(1000),
                spend_per_day: Some(2_500_000_000_000),
                ..Budget::default()
            }
        );
        assert_eq!(s.default_max_tokens, 4096);
    }

    #[test]
    fn prices_are_exact_per_token_and_cached_tokens_default_to_input() {
        let s = llm(
            "",
            "[[route.prices]]\nmodel = \"claude\"\ninput = 3\noutput = 15.0\ncache_read = 0.3\ncache_write = 3.75\n\
             [[route.prices]]\nmodel = \"*\"\ninput = 0.15\noutput = 0.6\n",
        );
        assert_eq!(
            s.price("claude"),
            Some(Price {
                input: 3_000_000,
                output: 15_000_000,
                cache_read: 300_000,
                cache_write: 3_750_000
            })
        );
        assert_eq!(
            s.price("other"),
            Some(Price {
                input: 150_000,
                output: 600_000,
                cache_read: 150_000,
                cache_write: 150_000
            })
        );
    }

    #[test]
    fn every_client_and_price_problem_is_named() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"openai\"\ntokens_per_day = 10\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n\
             [[route.clients]]\nname = \"bad name\"\ntoken_env = \"PATH\"\n\
             [[route.clients]]\nname = \"nobody\"\n\
             [[route.prices]]\nmodel = \"m\"\ninput = -1\noutput = \"x\"\n\
             [[route.prices]]\ninput = 1\noutput = 1\n",
        );
        let joined = p.join("\n");
        for needle in [
            "route[0].clients[0].name: `bad name` is not a client name",
            "route[0].clients[1].token_env: a client needs its token",
            "route[0].prices[0].input: out of range",
            "route[0].prices[0].output: expected a number, found string",
            "route[0].prices[1].model: missing",
            "route[0].tokens_per_day: a budget is counted per client token",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
    }

    #[test]
    fn a_clients_model_list_is_kept_and_every_problem_in_it_named() {
        let s = llm(
            "",
            "[[route.clients]]\nname = \"alice\"\ntoken_file = \"alice\"\nmodels = [\"claude-*\", \"gpt-5\"]\n",
        );
        assert_eq!(s.client_tokens[0].models.0, ["claude-*", "gpt-5"]);
        assert!(s.client_tokens[0].models.allows("claude-opus-4-1"));
        assert!(!s.client_tokens[0].models.allows("gpt-5-mini"));
        let long = "m".repeat(257);
        let p = problems(&format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"openai\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n\
             [[route.clients]]\nname = \"a\"\ntoken_env = \"PATH\"\nmodels = []\n\
             [[route.clients]]\nname = \"b\"\ntoken_env = \"HOME\"\nmodels = [\"\", \"{long}\"]\n\
             [[route.clients]]\nname = \"c\"\ntoken_env = \"PWD\"\nmodels = 3\n",
        ));
        let joined = p.join("\n");
        for needle in [
            "route[0].clients[0].models: an empty list would let this client use no model",
            "route[0].clients[1].models[0]: `` is not a model pattern",
            "route[0].clients[1].models[1]: `mmm",
            "route[0].clients[2].models: expected a list of strings",
        ] {
            assert!(joined.contains(needle), "missing {needle:?} in:\n{joined}");
        }
    }
}
