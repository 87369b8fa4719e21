//! Tenants on one LLM route, end to end against the strict provider
//! emulator: bodies an upstream could read differently from weir are
//! refused before they are sent.

mod common;

use common::llm::*;
use common::provider::{Options, Provider, ProviderApi};
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
