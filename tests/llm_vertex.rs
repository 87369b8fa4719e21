//! Claude on Google Vertex AI as an upstream API (docs/decisions/081):
//! weir against the strict Vertex stand-in (tests/common/provider/vertex.rs),
//! which takes only access tokens its own token endpoint issued, and that
//! endpoint only JWT grants signed by the service account's key.
//!
//! Messages streamed and whole through Vertex's paths and body; an OpenAI
//! client translated to Vertex; count_tokens on Vertex's count-tokens
//! endpoint; Google's errors in the client's shape and their failover
//! (429 RESOURCE_EXHAUSTED with its RetryInfo, 503 UNAVAILABLE, 400
//! INVALID_ARGUMENT); tokens refreshed across their expiry under load; the
//! token endpoint down at start, then back; the metadata server.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::llm::{events, llm_config_with, post};
use common::provider::vertex::{GoogleAuth, Vertex, google_failure, resource_exhausted};
use common::provider::*;
use common::*;
use serde_json::{Value, json};

const MODEL_ID: &str = "claude-sonnet-4-5@20250929";

/// A Vertex project `test-project` in `us-east5` serving [`MODEL_ID`],
/// its tokens from `auth`.
async fn vertex(auth: &GoogleAuth) -> Provider {
    let v = Vertex::new(auth, "test-project", "us-east5", &[MODEL_ID]);
    Provider::spawn(
        ProviderApi::Anthropic,
        Options::default().vertex(v).script(Script::RoundTrip {
            command: "echo weir-vertex".into(),
        }),
    )
    .await
}

/// A Vertex upstream's keys, its credentials `credentials`.
fn vertex_keys(credentials: &str) -> String {
    format!(
        "protocol = \"vertex\"\nproject = \"test-project\"\nregion = \"us-east5\"\ncredentials = \"{credentials}\"\n"
    )
}

/// weir with one route of `kind` serving `claude-sonnet-4-5` from the
/// Vertex stand-in `vx` (as [`MODEL_ID`]), then each of `more` (name,
/// url, keys) in order; the service account key written to `{dir}/sa.json`.
async fn weir_over(
    kind: &str,
    auth: &GoogleAuth,
    vx: &Provider,
    more: &[(&str, String, String)],
) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("sa.json"), auth.key_json()).expect("key");
    let mut ups = vec![("vx", vx.base_url(), vertex_keys("file:{dir}/sa.json"))];
    ups.extend(more.iter().cloned());
    let mut order = vec![format!("\"vx:{MODEL_ID}\"")];
    order.extend(more.iter().map(|(n, _, _)| format!("\"{n}\"")));
    let models = format!(
        "served_by_header = true\n[[route.models]]\nname = \"claude-sonnet-4-5\"\nupstreams = [{}]\n",
        order.join(", ")
    );
    Weir::start_in(dir, &llm_config_with(kind, &ups, &models)).await
}

fn claude_request(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [{"role": "user", "content": "Run `echo weir-vertex` and tell me what it printed."}],
        "tools": [{"name": "Bash", "description": "Runs a command.",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}}],
    })
}

/// The route's one model, sent to Vertex as [`MODEL_ID`].
fn vertex_model() -> String {
    format!("[[route.models]]\nname = \"claude-sonnet-4-5\"\nupstreams = [\"vx:{MODEL_ID}\"]\n")
}

/// A Chat Completions request from an OpenAI client.
async fn chat(weir: &Weir, body: Value) -> (http::StatusCode, http::HeaderMap, String) {
    post(
        weir,
        "/v1/chat/completions",
        body,
        &[("authorization", "Bearer sk-client")],
    )
    .await
}

fn chat_hi() -> Value {
    json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]})
}

/// A streamed Claude Code request through weir: answered 200 by
/// `upstream` (`x-weir-upstream`); the names of its events.
async fn streamed_by(weir: &Weir, upstream: &str) -> Vec<String> {
    let (status, headers, body) =
        post(weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let served = headers.get("x-weir-upstream").map(|v| v.as_bytes());
    assert_eq!(served, Some(upstream.as_bytes()));
    events(&body).into_iter().map(|(n, _)| n).collect()
}

const CLAUDE_HEADERS: &[(&str, &str)] = &[
    ("x-api-key", "sk-ant-client"),
    ("anthropic-version", "2023-06-01"),
    ("anthropic-beta", "interleaved-thinking-2025-05-14"),
];

/// Every request Vertex got was weir's: a bearer token its endpoint
/// issued, no client key, the beta header kept, Vertex's body.
fn only_weirs_tokens(vx: &Provider, auth: &GoogleAuth) {
    vx.assert_all_accepted();
    let journal = vx.journal();
    assert!(!journal.is_empty(), "Vertex was asked");
    for e in &journal {
        let bearer = e.headers.get("authorization").and_then(|v| v.to_str().ok());
        assert!(
            bearer.is_some_and(|b| b.starts_with("Bearer ya29.test-")),
            "{e:?}"
        );
        assert!(e.headers.get("x-api-key").is_none(), "{e:?}");
    }
    assert!(auth.refused().is_empty(), "{:?}", auth.refused());
    assert_eq!(auth.state.bad_tokens.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_streamed_and_whole_go_to_vertex_paths_with_vertex_bodies() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let weir = weir_over("anthropic", &auth, &vx, &[]).await;
    let names = streamed_by(&weir, "vx").await;
    assert_eq!(
        names.first().map(String::as_str),
        Some("message_start"),
        "{names:?}"
    );
    assert_eq!(
        names.last().map(String::as_str),
        Some("message_stop"),
        "{names:?}"
    );
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["type"], "message", "{answer}");
    only_weirs_tokens(&vx, &auth);
    let journal = vx.journal();
    let base = "/v1/projects/test-project/locations/us-east5/publishers/anthropic/models";
    assert_eq!(
        journal[0].path,
        format!("{base}/{MODEL_ID}:streamRawPredict")
    );
    assert_eq!(journal[1].path, format!("{base}/{MODEL_ID}:rawPredict"));
    for e in &journal {
        assert!(e.body.get("model").is_none(), "{}", e.body);
        assert_eq!(e.body["anthropic_version"], "vertex-2023-10-16");
        let beta = e.headers.get("anthropic-beta").map(|v| v.as_bytes());
        assert_eq!(beta, Some(&b"interleaved-thinking-2025-05-14"[..]));
    }
    // One token served both: it is cached, not fetched per request.
    assert_eq!(auth.issued(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_client_is_translated_to_vertex() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let weir = weir_over("openai", &auth, &vx, &[]).await;
    let streamed = json!({"model": "claude-sonnet-4-5", "stream": true,
        "messages": [{"role": "user", "content": "Say hi."}]});
    let (status, _, body) = chat(&weir, streamed).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    let whole = json!({"model": "claude-sonnet-4-5", "input": "Say hi.", "stream": false});
    let (status, _, body) = post(
        &weir,
        "/v1/responses",
        whole,
        &[("authorization", "Bearer sk-client")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["object"], "response", "{answer}");
    only_weirs_tokens(&vx, &auth);
    assert!(
        vx.journal()
            .iter()
            .all(|e| e.headers.get("anthropic-version").is_none())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_goes_to_vertexs_count_tokens_endpoint() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let weir = weir_over("anthropic", &auth, &vx, &[]).await;
    let count = json!({"model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "How many tokens is this?"}]});
    let (status, _, body) = post(&weir, "/v1/messages/count_tokens", count, CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert!(v["input_tokens"].as_u64().is_some_and(|n| n > 0), "{v}");
    only_weirs_tokens(&vx, &auth);
    let e = &vx.journal()[0];
    assert!(
        e.path
            .ends_with("/publishers/anthropic/models/count-tokens:rawPredict"),
        "{}",
        e.path
    );
    assert_eq!(e.body["model"], MODEL_ID);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vertex_429_fails_over_to_anthropic_in_one_request_and_holds_for_its_retry_info() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let anthropic = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let ant = ("ant", anthropic.base_url(), String::new());
    let weir = weir_over("anthropic", &auth, &vx, &[ant]).await;
    vx.fail_next(1, resource_exhausted(Some(30)));
    let (status, headers, body) =
        post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        headers.get("x-weir-upstream").map(|v| v.as_bytes()),
        Some(&b"ant"[..])
    );
    assert_eq!(vx.journal().len(), 1);
    anthropic.assert_all_accepted();
    // Held for the RetryInfo's 30 s: the next request goes straight on.
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(vx.journal().len(), 1, "the rate-limited member is held");
    assert_eq!(anthropic.journal().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn googles_errors_reach_the_client_in_its_own_shape() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let weir = weir_over("anthropic", &auth, &vx, &[]).await;
    // 400 INVALID_ARGUMENT: relayed, as Anthropic's invalid_request_error.
    vx.fail_next(
        1,
        google_failure(400, "INVALID_ARGUMENT", "messages: too many images"),
    );
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        (v["type"].as_str(), v["error"]["type"].as_str()),
        (Some("error"), Some("invalid_request_error")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("too many images")),
        "{v}"
    );
    // 429 RESOURCE_EXHAUSTED with nowhere to go: a rate limit with its hint.
    vx.fail_next(1, resource_exhausted(Some(7)));
    let (status, headers, body) =
        post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"7"[..])
    );
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vertex_503_fails_over_and_openai_clients_get_googles_errors_in_openais_shape() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let anthropic = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let ant = ("ant", anthropic.base_url(), String::new());
    let weir = weir_over("anthropic", &auth, &vx, &[ant]).await;
    vx.fail_next(
        1,
        google_failure(503, "UNAVAILABLE", "The service is currently unavailable."),
    );
    let (status, headers, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        headers.get("x-weir-upstream").map(|v| v.as_bytes()),
        Some(&b"ant"[..])
    );
    let auth2 = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx2 = vertex(&auth2).await;
    let weir = weir_over("openai", &auth2, &vx2, &[]).await;
    vx2.fail_next(
        1,
        google_failure(400, "INVALID_ARGUMENT", "max_tokens: must be at most 64000"),
    );
    let (status, _, body) = chat(&weir, chat_hi()).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_tokens: must be at most")),
        "{v}"
    );
    assert!(
        v.get("type").is_none(),
        "OpenAI's envelope, not Anthropic's: {v}"
    );
    vx2.fail_next(
        1,
        google_failure(
            403,
            "PERMISSION_DENIED",
            "Permission denied on resource project test-project.",
        ),
    );
    let (status, _, body) = chat(&weir, chat_hi()).await;
    // weir's own credential refused: the client is not at fault, and none
    // of Google's answer reaches it.
    assert_eq!(status, 502, "{body}");
    assert!(!body.contains("test-project"), "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert!(v["error"]["message"].is_string(), "OpenAI's envelope: {v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_are_refreshed_across_their_expiry_under_load_with_no_401() {
    let auth = GoogleAuth::spawn(Duration::from_secs(2)).await;
    let vx = vertex(&auth).await;
    let weir = Arc::new(weir_over("anthropic", &auth, &vx, &[]).await);
    let auth = Arc::new(auth);
    let mut clients = Vec::new();
    for i in 0..4 {
        let (weir, auth) = (weir.clone(), auth.clone());
        clients.push(tokio::spawn(async move {
            let mut served = 0;
            // Until three tokens after the first have been issued: every
            // request crosses at least two expiries' worth of time.
            while auth.issued() < 4 {
                let (status, _, body) = post(
                    &weir,
                    "/v1/messages",
                    claude_request(i % 2 == 0),
                    CLAUDE_HEADERS,
                )
                .await;
                assert_eq!(status, 200, "{body}");
                served += 1;
            }
            served
        }));
    }
    let mut served = 0;
    for c in clients {
        served += tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .expect("four tokens within 30 s")
            .expect("client");
    }
    assert!(served > 8, "{served}");
    only_weirs_tokens(&vx, &auth);
    // More than one token was used: the requests crossed expiries.
    let tokens: std::collections::HashSet<String> = vx
        .journal()
        .iter()
        .filter_map(|e| {
            e.headers
                .get("authorization")?
                .to_str()
                .ok()
                .map(str::to_string)
        })
        .collect();
    assert!(tokens.len() >= 3, "{tokens:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_down_at_start_is_a_503_in_the_routes_shape_then_recovers() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    auth.set_down(true);
    let vx = vertex(&auth).await;
    let weir = weir_over("anthropic", &auth, &vx, &[]).await;
    let (status, headers, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 503, "{body}");
    assert!(headers.contains_key("retry-after"));
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "overloaded_error", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no access token for upstream `vx`") && message.contains("503"),
        "{message}"
    );
    assert!(vx.journal().is_empty(), "nothing is sent without a token");
    auth.set_down(false);
    let back = eventually_async(Duration::from_secs(10), || async {
        let (status, _, _) =
            post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
        status == 200
    })
    .await;
    assert!(back, "served once the token endpoint is back");
    only_weirs_tokens(&vx, &auth);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_server_gives_the_machines_token() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let credentials = format!("metadata:{}", auth.metadata_url());
    let config = llm_config_with(
        "anthropic",
        &[("vx", vx.base_url(), vertex_keys(&credentials))],
        &vertex_model(),
    );
    let weir = Weir::start(&config).await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    only_weirs_tokens(&vx, &auth);
    assert_eq!(auth.issued(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_account_no_longer_has_is_refused_by_the_token_endpoint_and_answered_503() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    // Another key pair's private key, with this account's email and token
    // URI: what a deleted (or rotated-away) key looks like to Google.
    let other = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let mut stale: Value = serde_json::from_str(&other.key_json()).expect("json");
    let own: Value = serde_json::from_str(&auth.key_json()).expect("json");
    stale["client_email"] = own["client_email"].clone();
    stale["token_uri"] = own["token_uri"].clone();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("sa.json"), stale.to_string()).expect("key");
    let config = llm_config_with(
        "openai",
        &[("vx", vx.base_url(), vertex_keys("file:{dir}/sa.json"))],
        &vertex_model(),
    );
    let weir = Weir::start_in(dir, &config).await;
    let (status, _, body) = chat(&weir, chat_hi()).await;
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("invalid_grant: Invalid JWT Signature."),
        "{v}"
    );
    assert_eq!(auth.refused(), ["Invalid JWT Signature."]);
    assert!(vx.journal().is_empty());
}

/// The real binary's log: each failed fetch is a warn line naming the
/// upstream, the account and the token endpoint's answer; the first
/// success after failures an info line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_token_fetch_is_logged_and_so_is_the_recovery() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    auth.set_down(true);
    let vx = vertex(&auth).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("sa.json");
    std::fs::write(&key, auth.key_json()).expect("key");
    let credentials = format!("file:{}", key.display());
    let config = llm_config_with(
        "anthropic",
        &[("vx", vx.base_url(), vertex_keys(&credentials))],
        &vertex_model(),
    )
    .replacen("[log]\n", "[log]\nformat = \"json\"\n", 1);
    let mut weir = common::process::Proc::run(&common::process::write_config(&dir, &config));
    let failed = tokio::task::block_in_place(|| {
        weir.wait_for(|l| l.contains("cannot fetch the upstream's credential"))
    });
    for part in [
        "\"level\":\"WARN\"",
        "llm/vx google service account weir-gateway@test-project.iam.gserviceaccount.com",
        "answered 503 Service Unavailable: temporarily_unavailable",
    ] {
        assert!(failed.contains(part), "{part:?} not in {failed}");
    }
    auth.set_down(false);
    let back = tokio::task::block_in_place(|| {
        weir.wait_for(|l| l.contains("credential fetched again after failures"))
    });
    assert!(back.contains("\"level\":\"INFO\""), "{back}");
    assert_eq!(auth.issued(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_529_fails_over_to_vertex_within_one_request() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let anthropic = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    anthropic.fail_next(1, Failure::new(529));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("sa.json"), auth.key_json()).expect("key");
    let models = format!(
        "served_by_header = true\n[[route.models]]\nname = \"claude-sonnet-4-5\"\nupstreams = [\"ant\", \"vx:{MODEL_ID}\"]\n"
    );
    let ups = [
        ("ant", anthropic.base_url(), String::new()),
        ("vx", vx.base_url(), vertex_keys("file:{dir}/sa.json")),
    ];
    let weir = Weir::start_in(dir, &llm_config_with("anthropic", &ups, &models)).await;
    let names = streamed_by(&weir, "vx").await;
    assert_eq!(
        names.last().map(String::as_str),
        Some("message_stop"),
        "{names:?}"
    );
    assert_eq!(anthropic.journal().len(), 1);
    only_weirs_tokens(&vx, &auth);
}

/// The stand-in itself, asked directly: it refuses what Vertex refuses,
/// so the tests above passing means weir sent what Vertex takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_in_refuses_what_vertex_refuses() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let token_url = format!(
        "{}/computeMetadata/v1/instance/service-accounts/default/token",
        auth.metadata_url()
    );
    let (status, _, _) = get_with(&token_url, &[]).await;
    assert_eq!(status, 403, "the metadata server wants Metadata-Flavor");
    let (status, _, body) = get_with(&token_url, &[("metadata-flavor", "Google")]).await;
    assert_eq!(status, 200, "{body}");
    let token: Value = serde_json::from_str(&body).expect("json");
    let bearer = format!(
        "Bearer {}",
        token["access_token"].as_str().unwrap_or_default()
    );
    let headers = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let base = format!(
        "{}/v1/projects/test-project/locations/us-east5/publishers/anthropic/models",
        vx.base_url()
    );
    let good = json!({"anthropic_version": "vertex-2023-10-16", "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}]});
    let mut with_model = good.clone();
    with_model["model"] = MODEL_ID.into();
    let mut no_version = good.clone();
    no_version
        .as_object_mut()
        .expect("object")
        .remove("anthropic_version");
    let mut streamed = good.clone();
    streamed["stream"] = true.into();
    let cases = [
        (format!("{base}/{MODEL_ID}:rawPredict"), good.clone(), 200),
        (format!("{base}/{MODEL_ID}:rawPredict"), with_model, 400),
        (format!("{base}/{MODEL_ID}:rawPredict"), no_version, 400),
        (format!("{base}/{MODEL_ID}:rawPredict"), streamed, 400),
        (
            format!("{base}/claude-unknown@1:rawPredict"),
            good.clone(),
            404,
        ),
        (
            format!(
                "{}/v1/projects/other/locations/us-east5/publishers/anthropic/models/{MODEL_ID}:rawPredict",
                vx.base_url()
            ),
            good.clone(),
            404,
        ),
    ];
    for (url, body, want) in cases {
        let (status, _, answer) = post_json(&url, body.to_string(), &headers).await;
        assert_eq!(status.as_u16(), want, "{url}: {answer}");
    }
    let no_token = [("content-type", "application/json")];
    let url = format!("{base}/{MODEL_ID}:rawPredict");
    let (status, _, answer) = post_json(&url, good.to_string(), &no_token).await;
    assert_eq!(status, 401, "{answer}");
    let v: Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(
        v["error"]["status"], "UNAUTHENTICATED",
        "Google's envelope: {v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_before_its_time_is_replaced_at_once() {
    let auth = GoogleAuth::spawn(Duration::from_secs(3600)).await;
    let vx = vertex(&auth).await;
    let weir = weir_over("anthropic", &auth, &vx, &[]).await;
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    auth.revoke_all();
    // Refused with weir's own token: 502, nothing of Google's answer.
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 502, "{body}");
    // The refusal asked for a new token, well before the old one's
    // refresh (55 minutes away).
    let back = eventually_async(Duration::from_secs(5), || async {
        let (status, _, _) =
            post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
        status == 200
    })
    .await;
    assert!(back, "served with a new token");
    assert_eq!(auth.issued(), 2);
}
