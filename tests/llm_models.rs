//! `GET /v1/models` on an LLM route lists the names the route answers to
//! (its configured model names, then what its pass-through default
//! upstreams list), in the client's API's list shape: what Claude Code's
//! and Codex's model pickers show. Against the strict provider stand-ins,
//! which refuse a list request without their API's headers.

mod common;

use common::llm::*;
use common::provider::{Options, Provider, ProviderApi};
use common::{Weir, get_with};
use serde_json::Value;

const CLAUDE: &[(&str, &str)] = &[
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "sk-client"),
];
const CODEX: &[(&str, &str)] = &[("authorization", "Bearer sk-client")];

/// The stand-ins list one model, under this id.
const LISTED: &str = "emulated-model";

async fn list(weir: &Weir, headers: &[(&str, &str)]) -> (u16, Value) {
    let (status, _, body) = get_with(&weir.url("web", "/v1/models"), headers).await;
    let v = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status.as_u16(), v)
}

fn ids(list: &Value) -> Vec<&str> {
    list["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|m| m["id"].as_str()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_route_lists_its_own_model_names_not_its_upstreams_ids() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start(&llm_config(
        "anthropic",
        &[("up", up.base_url())],
        "[[route.models]]\nname = \"claude-fast\"\nupstreams = [\"up:emulated-model\"]\n\
         [[route.models]]\nname = \"claude-deep\"\nupstreams = [\"up\"]",
    ))
    .await;
    let (status, v) = list(&weir, CLAUDE).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(ids(&v), ["claude-fast", "claude-deep"], "{v}");
    assert!(
        v["data"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|m| m["type"] == "model")
    );
    assert_eq!(v["first_id"], "claude-fast", "{v}");
    assert_eq!(v["last_id"], "claude-deep", "{v}");
    // Nothing passes through, so no upstream is asked.
    assert!(up.journal().is_empty());
}

#[tokio::test]
async fn names_passed_through_add_what_the_default_upstream_lists_once() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start(&llm_config(
        "anthropic",
        &[("up", up.base_url())],
        "default_upstreams = [\"up\"]\n\
         [[route.models]]\nname = \"claude-fast\"\nupstreams = [\"up:emulated-model\"]\n\
         [[route.models]]\nname = \"emulated-model\"\nupstreams = [\"up\"]",
    ))
    .await;
    let (status, v) = list(&weir, CLAUDE).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(ids(&v), ["claude-fast", LISTED], "{v}");
    up.assert_all_accepted();
    assert_eq!(up.journal().len(), 1);
}

#[tokio::test]
async fn a_codex_route_lists_a_claude_upstreams_models_in_openais_shape() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start(&llm_config_with(
        "openai",
        &[("claude", up.base_url(), "protocol = \"anthropic\"".into())],
        "",
    ))
    .await;
    let (status, v) = list(&weir, CODEX).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "list", "{v}");
    assert_eq!(ids(&v), [LISTED], "{v}");
    assert_eq!(v["data"][0]["object"], "model", "{v}");
    // The list request was made in Anthropic's own terms: its version
    // header, the client's key moved to `x-api-key`.
    up.assert_all_accepted();
    let asked = up.journal();
    assert_eq!(asked.len(), 1);
}

#[tokio::test]
async fn a_default_upstream_that_cannot_list_leaves_the_configured_names() {
    let down = refusing().await;
    let weir = Weir::start(&llm_config(
        "anthropic",
        &[("down", down.clone())],
        "default_upstreams = [\"down\"]\n\
         [[route.models]]\nname = \"claude-fast\"\nupstreams = [\"down\"]",
    ))
    .await;
    let (status, v) = list(&weir, CLAUDE).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(ids(&v), ["claude-fast"], "{v}");

    // With no names of its own, nothing to list is the upstream's failure,
    // answered in the client's error shape.
    let weir = Weir::start(&llm_config("anthropic", &[("down", down)], "")).await;
    let (status, v) = list(&weir, CLAUDE).await;
    assert_eq!(status, 502, "{v}");
    assert_eq!(v["type"], "error", "{v}");
}

/// weir with one route of `kind` over `up`, a client `alice` who may use
/// `claude-*` only and a client `bob` who may use every model, and two
/// model names.
async fn two_clients(kind: &str, up: &MockLlm) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["alice", "bob"] {
        std::fs::write(dir.path().join(name), format!("tok-{name}\n")).expect("token");
    }
    let route = "[[route.models]]\nname = \"claude-fast\"\nupstreams = [\"up\"]\n\
                 [[route.models]]\nname = \"gpt-fast\"\nupstreams = [\"up\"]\n\
                 [[route.clients]]\nname = \"alice\"\ntoken_file = \"alice\"\nmodels = [\"claude-*\"]\n\
                 [[route.clients]]\nname = \"bob\"\ntoken_file = \"bob\"\n";
    let text = llm_config(kind, &[("up", up.url())], route);
    Weir::start_in(dir, &text).await
}

#[tokio::test]
async fn a_client_asking_for_a_model_it_may_not_use_is_refused_before_any_upstream() {
    let up = serving(&["hi"]).await;
    let weir = two_clients("anthropic", &up).await;
    let alice = [
        ("anthropic-version", "2023-06-01"),
        ("x-api-key", "tok-alice"),
    ];
    let bob = [
        ("anthropic-version", "2023-06-01"),
        ("x-api-key", "tok-bob"),
    ];

    let (status, _, body) = post(
        &weir,
        "/v1/messages",
        messages_body("gpt-fast", false),
        &alice,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "permission_error", "{body}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("gpt-fast"),
        "{body}"
    );
    assert!(up.seen().is_empty(), "refused before any upstream");

    let (status, _, body) = post(
        &weir,
        "/v1/messages",
        messages_body("claude-fast", false),
        &alice,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = post(
        &weir,
        "/v1/messages",
        messages_body("gpt-fast", false),
        &bob,
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Each client's list holds what it may use.
    let (status, v) = list(&weir, &alice).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(ids(&v), ["claude-fast"], "{v}");
    let (_, v) = list(&weir, &bob).await;
    assert_eq!(ids(&v), ["claude-fast", "gpt-fast"], "{v}");
}

#[tokio::test]
async fn a_codex_client_refused_a_model_reads_openais_permission_error() {
    let up = serving(&["hi"]).await;
    let weir = two_clients("openai", &up).await;
    let alice = [("authorization", "Bearer tok-alice")];
    let (status, _, body) = post(
        &weir,
        "/v1/responses",
        responses_body("gpt-fast", false),
        &alice,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "permission_denied", "{body}");
    assert!(up.seen().is_empty());
}
