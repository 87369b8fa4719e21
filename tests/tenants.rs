//! Tenants on one LLM route, end to end against the strict provider
//! emulator: a rate limit one client's own credential earns holds that
//! credential only; bodies an upstream could read differently from weir
//! are refused before they are sent.

mod common;

use common::llm::*;
use common::provider::{Failure, Options, Provider, ProviderApi};
use serde_json::Value;

/// An Anthropic route over `up` with no key of weir's: each client sends
/// its own.
async fn passthrough(up: &Provider) -> common::Weir {
    common::Weir::start(&llm_config("anthropic", &[("up", up.base_url())], "")).await
}

fn as_client(key: &str) -> [(&str, &str); 2] {
    [("anthropic-version", "2023-06-01"), ("x-api-key", key)]
}

/// A Messages request with `extra` top-level text spliced in after the
/// model (the JSON a client wrote, not one a serializer would).
fn body_with(extra: &str) -> String {
    format!(
        r#"{{"model":"claude-sonnet-4-5","max_tokens":64{extra},"messages":[{{"role":"user","content":"hi"}}]}}"#
    )
}

#[tokio::test]
async fn a_body_an_upstream_could_read_differently_is_refused_unsent() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = passthrough(&up).await;
    for (extra, says) in [
        (r#","MODEL":"claude-opus-4-1""#, "`model` only in case"),
        (r#","max_to\u212aens":64000"#, "`max_tokens` only in case"),
        (r#","Stream":true"#, "`stream` only in case"),
        (
            r#","temperature":1,"temperature":0"#,
            "a top-level key twice",
        ),
        (r#","max_tokens":64000"#, "a top-level key twice"),
        (
            r#","max_tokens_":1,"max_output_tokens":"64000""#,
            "`max_output_tokens` must be a whole number",
        ),
    ] {
        let (status, _, text) =
            post(&weir, "/v1/messages", body_with(extra), &as_client("sk-a")).await;
        assert_eq!(status, 400, "{extra}: {text}");
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["type"], "error", "{text}");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{text}");
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{extra}: {message}");
    }
    assert!(
        up.journal().is_empty(),
        "nothing reached the provider: {:?}",
        up.journal()
    );
    // The same body without the ambiguity is served.
    let (status, _, text) = post(&weir, "/v1/messages", body_with(""), &as_client("sk-a")).await;
    assert_eq!(status, 200, "{text}");
    up.assert_all_accepted();
}

#[tokio::test]
async fn one_credentials_rate_limit_holds_that_credential_only() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    up.fail_key("sk-a", Failure::new(429).with_header("retry-after", "20"));
    let weir = passthrough(&up).await;
    let (status, headers, text) =
        post(&weir, "/v1/messages", body_with(""), &as_client("sk-a")).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(headers["retry-after"], "20", "the provider's own answer");
    // Another client's credential is sent to the same member at once.
    let started = std::time::Instant::now();
    let (status, _, text) = post(&weir, "/v1/messages", body_with(""), &as_client("sk-b")).await;
    assert_eq!(status, 200, "the other tenant is served: {text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(up.journal().len(), 2);
    // The limited credential is answered by weir for the rest of its hold,
    // without being sent again.
    let (status, headers, text) =
        post(&weir, "/v1/messages", body_with(""), &as_client("sk-a")).await;
    assert_eq!(status, 429, "{text}");
    let wait: u64 = headers["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("secs");
    assert!((19..=20).contains(&wait), "{wait}");
    assert!(text.contains("cooling down"), "{text}");
    assert_eq!(up.journal().len(), 2, "held, not sent");
    let (status, _, _) = post(&weir, "/v1/messages", body_with(""), &as_client("sk-b")).await;
    assert_eq!(status, 200);
    assert_eq!(up.journal().len(), 3);
}

/// With `[cluster]`, the fleet shares a credential's hold as that
/// credential's: the other instance answers the limited credential at
/// once and still sends every other one; Redis holds the credential's
/// hash, never the credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_shares_a_credentials_hold_as_that_credentials() {
    use common::fleet::{TOKEN, fleet, llm_config};
    let Some(redis) = common::redis::Redis::start_if_available() else {
        return;
    };
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    up.fail_key("sk-a", Failure::new(429).with_header("retry-after", "20"));
    let fleet = fleet(2, &redis, &llm_config(&up.base_url(), "", "")).await;
    let ask = |m: usize, key: &'static str| {
        let url = fleet[m].url("/v1/messages");
        async move {
            let bearer = format!("Bearer {key}");
            let headers = [
                ("anthropic-version", "2023-06-01"),
                ("x-api-key", TOKEN),
                ("authorization", bearer.as_str()),
            ];
            let (status, _, text) = common::post_json(&url, body_with(""), &headers).await;
            (status.as_u16(), text)
        }
    };
    assert_eq!(ask(0, "sk-a").await.0, 429);
    let heard = fleet[1]
        .metric_becomes(
            "weir_cluster_holds_received_total{via=\"announce\"}",
            1,
            std::time::Duration::from_secs(2),
        )
        .await;
    assert!(heard, "the other instance heard of the hold");
    let (status, text) = ask(1, "sk-a").await;
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("cooling down"), "answered by weir: {text}");
    assert_eq!(up.journal().len(), 1, "the held credential was not sent");
    for m in 0..2 {
        let (status, text) = ask(m, "sk-b").await;
        assert_eq!(
            status, 200,
            "instance {m} serves another credential: {text}"
        );
    }
    assert_eq!(up.journal().len(), 3);
    let count = |pattern: &str| {
        redis.int(&format!(
            "EVAL_RO \"local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do \
             if string.find(k, '{pattern}') then n = n + 1 end end return n\" 0"
        ))
    };
    assert_eq!(
        count("hold:.*#%x+$"),
        1,
        "the credential's hold, by its hash"
    );
    assert_eq!(count("sk%-a"), 0, "the credential itself is never stored");
}
