//! Azure OpenAI as an upstream API (docs/decisions/078): weir against the
//! strict Azure stand-in (tests/common/provider/azure.rs), which checks
//! the `api-key`, the surface's paths and `api-version`, and the
//! deployments, then the Responses or Chat rules themselves.
//!
//! Codex's Responses relayed natively on the v1 API; an Anthropic client
//! translated to Azure Responses (streamed and whole) and to a dated
//! deployment path; weir's key in `api-key` and the client's credential
//! never sent; a 429 failing over and holding the member; a content
//! filter refusal answered in the client's shape and never failed over;
//! weir's key refused by Azure answered 502.

mod common;

use common::llm::{assert_whole_messages_stream, events, llm_config_with, post};
use common::provider::azure::{Azure, content_filter, rate_limited, rate_limited_ms_only};
use common::provider::*;
use common::*;
use serde_json::{Value, json};

/// An Azure resource (v1 unless `version`) over a Responses or Chat
/// emulator, with the key `azure-key-{name}` and one deployment,
/// `my-gpt5`.
async fn resource(api: ProviderApi, name: &str, version: Option<&str>) -> Provider {
    let key = format!("azure-key-{name}");
    let azure = match version {
        None => Azure::v1(&key, &["my-gpt5"]),
        Some(v) => Azure::dated(&key, v, &["my-gpt5"]),
    };
    Provider::spawn(
        api,
        Options::default().azure(azure).script(Script::RoundTrip {
            command: "echo weir-azure".into(),
        }),
    )
    .await
}

/// weir with one LLM route of `kind` serving `gpt-5` from the upstreams
/// in order (each `(name, provider, keys)`, sending the deployment
/// `my-gpt5`), each with its key file `azure-key-{name}`.
async fn weir_over(kind: &str, ups: &[(&str, &Provider, &str)]) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut entries = Vec::new();
    for (name, p, keys) in ups {
        std::fs::write(dir.path().join(name), format!("azure-key-{name}\n")).expect("key");
        let keys = format!("{keys}\napi_key_file = \"{{dir}}/{name}\"\n");
        entries.push((*name, p.base_url(), keys));
    }
    let order: Vec<String> = ups
        .iter()
        .map(|(n, _, _)| format!("\"{n}:my-gpt5\""))
        .collect();
    let models = format!(
        "[[route.models]]\nname = \"gpt-5\"\nupstreams = [{}]\n",
        order.join(", ")
    );
    Weir::start_in(dir, &llm_config_with(kind, &entries, &models)).await
}

fn codex_request(stream: bool) -> Value {
    json!({
        "model": "gpt-5",
        "instructions": "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI.",
        "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Run `echo weir-azure` and tell me what it printed."},
        ]}],
        "tools": [{"type": "function", "name": "shell", "strict": false,
            "description": "Runs a shell command and returns its output.",
            "parameters": {"type": "object", "properties": {
                "command": {"type": "array", "items": {"type": "string"}}},
                "required": ["command"], "additionalProperties": false}}],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": stream,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199a5c1-7d3e-7b42-9a1f-5c6d8e2f4a10",
    })
}

const CODEX_HEADERS: &[(&str, &str)] = &[
    ("authorization", "Bearer sk-codex-client"),
    ("originator", "codex_exec"),
];

fn claude_request(stream: bool) -> Value {
    json!({
        "model": "gpt-5",
        "max_tokens": 1024,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [{"role": "user", "content": "Run `echo weir-azure` and tell me what it printed."}],
        "tools": [{"name": "Bash", "description": "Runs a command.",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}}],
    })
}

const CLAUDE_HEADERS: &[(&str, &str)] = &[
    ("x-api-key", "sk-ant-client"),
    ("anthropic-version", "2023-06-01"),
];

/// Every request the resource got carried its key (`azure-key-{name}`,
/// weir's, or the client's own passed through) in `api-key`, and no
/// `Authorization` or `x-api-key`: with weir's key, the client's
/// credential never reaches Azure.
fn only_the_key_in_api_key(p: &Provider, name: &str) {
    let journal = p.journal();
    assert!(!journal.is_empty(), "{name} was asked");
    for e in journal {
        let key = e.headers.get("api-key").and_then(|v| v.to_str().ok());
        assert_eq!(key, Some(format!("azure-key-{name}").as_str()), "{e:?}");
        assert!(e.headers.get("authorization").is_none(), "{e:?}");
        assert!(e.headers.get("x-api-key").is_none(), "{e:?}");
    }
}

fn event_types(body: &str) -> Vec<String> {
    events(body).into_iter().map(|(name, _)| name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_responses_are_relayed_natively_on_the_v1_api() {
    let az = resource(ProviderApi::Responses, "az", None).await;
    let weir = weir_over("openai", &[("az", &az, "protocol = \"azure\"")]).await;
    let (status, _, body) = post(&weir, "/v1/responses", codex_request(true), CODEX_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let types = event_types(&body);
    assert_eq!(
        types.first().map(String::as_str),
        Some("response.created"),
        "{types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("response.completed"),
        "{types:?}"
    );
    assert!(
        types.iter().any(|t| t == "response.output_item.added"),
        "{types:?}"
    );
    az.assert_all_accepted();
    let sent = &az.journal()[0];
    assert_eq!(sent.path, "/openai/v1/responses");
    assert_eq!(
        sent.body["model"], "my-gpt5",
        "the deployment stands for the model"
    );
    only_the_key_in_api_key(&az, "az");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_client_is_translated_to_azure_responses_streamed_and_whole() {
    let az = resource(ProviderApi::Responses, "az", None).await;
    let weir = weir_over(
        "anthropic",
        &[("az", &az, "protocol = \"azure_responses\"")],
    )
    .await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert_whole_messages_stream(&body);

    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let whole: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(whole["type"], "message", "{whole}");
    assert_eq!(
        whole["model"], "gpt-5",
        "the client's model, not the deployment"
    );
    assert!(
        !whole["content"].as_array().expect("content").is_empty(),
        "{whole}"
    );

    az.assert_all_accepted();
    assert_eq!(az.journal().len(), 2);
    for e in az.journal() {
        assert_eq!(e.path, "/openai/v1/responses");
        assert!(e.headers.get("anthropic-version").is_none(), "{e:?}");
    }
    only_the_key_in_api_key(&az, "az");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_path_carries_the_api_version() {
    let az = resource(ProviderApi::Chat, "az", Some("2024-10-21")).await;
    let keys = "protocol = \"azure_chat\"\napi_version = \"2024-10-21\"";
    let weir = weir_over("anthropic", &[("az", &az, keys)]).await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let types = event_types(&body);
    assert_eq!(
        types.last().map(String::as_str),
        Some("message_stop"),
        "{types:?}"
    );
    let (status, _, body) =
        post(&weir, "/v1/messages", claude_request(false), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    az.assert_all_accepted();
    for e in az.journal() {
        assert_eq!(
            e.path,
            "/openai/deployments/my-gpt5/chat/completions?api-version=2024-10-21"
        );
    }
    only_the_key_in_api_key(&az, "az");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_on_a_dated_version_goes_to_its_responses_path() {
    let az = resource(ProviderApi::Responses, "az", Some("2025-04-01-preview")).await;
    let keys = "protocol = \"azure\"\napi_version = \"2025-04-01-preview\"";
    let weir = weir_over("openai", &[("az", &az, keys)]).await;
    let (status, _, body) = post(&weir, "/v1/responses", codex_request(true), CODEX_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    az.assert_all_accepted();
    let sent = &az.journal()[0];
    assert_eq!(
        sent.path,
        "/openai/responses?api-version=2025-04-01-preview"
    );
    assert_eq!(sent.body["model"], "my-gpt5");
}

/// Without a key of weir's, the client's own credential is Azure's: an
/// Anthropic client's `x-api-key` arrives as `api-key`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_own_key_passes_through_as_api_key() {
    let az = resource(ProviderApi::Responses, "az", None).await;
    let models = "[[route.models]]\nname = \"gpt-5\"\nupstreams = [\"az:my-gpt5\"]\n";
    let keys = "protocol = \"azure_responses\"".to_string();
    let config = llm_config_with("anthropic", &[("az", az.base_url(), keys)], models);
    let weir = Weir::start(&config).await;
    let headers = [
        ("x-api-key", "azure-key-az"),
        ("anthropic-version", "2023-06-01"),
    ];
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(false), &headers).await;
    assert_eq!(status, 200, "{body}");
    az.assert_all_accepted();
    only_the_key_in_api_key(&az, "az");
}

/// A Chat Completions client on an `azure` upstream: its own API, at the
/// v1 path, the deployment spliced in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_client_is_relayed_natively_to_azure_chat() {
    let az = resource(ProviderApi::Chat, "az", None).await;
    let weir = weir_over("openai", &[("az", &az, "protocol = \"azure\"")]).await;
    let chat = json!({"model": "gpt-5", "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Say hi."}]});
    let (status, _, body) = post(&weir, "/v1/chat/completions", chat, CODEX_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    az.assert_all_accepted();
    assert_eq!(az.journal()[0].path, "/openai/v1/chat/completions");
    assert_eq!(az.journal()[0].body["model"], "my-gpt5");
    only_the_key_in_api_key(&az, "az");
}

/// Azure's model list names base models, not deployments: the route
/// lists the models it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_list_is_the_routes_not_azures() {
    let az = resource(ProviderApi::Responses, "az", None).await;
    let weir = weir_over("openai", &[("az", &az, "protocol = \"azure\"")]).await;
    let (status, _, body) = get_with(&weir.url("web", "/v1/models"), CODEX_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let list: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(list["data"][0]["id"], "gpt-5", "{list}");
    assert!(az.journal().is_empty(), "{:?}", az.journal());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_resource_fails_over_and_is_held_out() {
    let first = resource(ProviderApi::Responses, "first", None).await;
    let second = resource(ProviderApi::Responses, "second", None).await;
    first.fail_next(1, rate_limited(30));
    let weir = weir_over(
        "openai",
        &[
            ("first", &first, "protocol = \"azure\""),
            ("second", &second, "protocol = \"azure\""),
        ],
    )
    .await;
    for round in 0..2 {
        let (status, _, body) =
            post(&weir, "/v1/responses", codex_request(true), CODEX_HEADERS).await;
        assert_eq!(status, 200, "round {round}: {body}");
        assert_eq!(
            event_types(&body).last().map(String::as_str),
            Some("response.completed")
        );
    }
    // The 429's hint holds the first resource out: the second request
    // goes straight to the second.
    assert_eq!(first.journal().len(), 1, "{:?}", first.journal());
    assert_eq!(second.journal().len(), 2);
    second.assert_all_accepted();
    only_the_key_in_api_key(&first, "first");
}

/// Azure's own hint, `x-ms-retry-after-ms`, alone on a 429: the member is
/// held for it (the next request is answered 429 by weir, not sent), and
/// the client is told it in `retry-after`, the header every SDK reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azures_own_retry_hint_holds_the_member_and_reaches_the_client() {
    let az = resource(ProviderApi::Responses, "az", None).await;
    az.fail_next(1, rate_limited_ms_only(20_500));
    let weir = weir_over("openai", &[("az", &az, "protocol = \"azure\"")]).await;
    let (status, headers, body) =
        post(&weir, "/v1/responses", codex_request(false), CODEX_HEADERS).await;
    assert_eq!(status, 429, "{body}");
    let retry = |h: &http::HeaderMap| {
        h.get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
    };
    assert_eq!(retry(&headers), Some(21), "{headers:?}");
    let (status, headers, body) =
        post(&weir, "/v1/responses", codex_request(false), CODEX_HEADERS).await;
    assert_eq!(status, 429, "held, not sent: {body}");
    assert!(
        retry(&headers).is_some_and(|s| (19..=21).contains(&s)),
        "{headers:?}"
    );
    assert_eq!(az.journal().len(), 1, "{:?}", az.journal());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_the_content_filter_refused_is_the_clients_answer_in_its_shape() {
    let az = resource(ProviderApi::Responses, "az", None).await;
    let backup = resource(ProviderApi::Responses, "backup", None).await;
    az.fail_next(2, content_filter());
    let ups = [
        ("az", &az, "protocol = \"azure_responses\""),
        ("backup", &backup, "protocol = \"azure_responses\""),
    ];
    // Codex, native: Azure's own error, relayed.
    let weir = weir_over("openai", &ups).await;
    let (status, _, body) = post(&weir, "/v1/responses", codex_request(true), CODEX_HEADERS).await;
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(error["error"]["code"], "content_filter", "{error}");
    drop(weir);
    // Claude Code, translated: the same refusal as an Anthropic error.
    let weir = weir_over("anthropic", &ups).await;
    let (status, _, body) = post(&weir, "/v1/messages", claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("content management policy"), "{error}");
    // Neither refusal went on to the backup.
    assert_eq!(az.journal().len(), 2);
    assert!(backup.journal().is_empty(), "{:?}", backup.journal());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weirs_key_refused_by_azure_is_a_502_that_shows_nothing_of_azures_answer() {
    let az = resource(ProviderApi::Responses, "az", None).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("key"), "not-the-resource-key").expect("key");
    let keys = "protocol = \"azure\"\napi_key_file = \"{dir}/key\"".to_string();
    let config = llm_config_with("openai", &[("az", az.base_url(), keys)], "");
    let weir = Weir::start_in(dir, &config).await;
    let (status, _, body) = post(&weir, "/v1/responses", codex_request(false), CODEX_HEADERS).await;
    assert_eq!(status, 502, "{body}");
    assert!(!body.contains("subscription key"), "{body}");
    assert!(matches!(
        az.journal()[0].verdict,
        Verdict::Rejected { status: 401, .. }
    ));
}

/// A request to the stand-in and the status Azure answers it with.
type Case<'a> = (&'a Provider, &'a str, &'a str, Vec<(&'a str, &'a str)>, u16);

/// The stand-in is as strict as Azure: a test that passes against it
/// says something.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_in_refuses_what_azure_refuses() {
    let v1 = resource(ProviderApi::Responses, "az", None).await;
    let dated = resource(ProviderApi::Chat, "az", Some("2024-10-21")).await;
    let body = json!({"model": "my-gpt5", "input": "hi"}).to_string();
    let chat =
        json!({"model": "my-gpt5", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let key = ("api-key", "azure-key-az");
    let cases: Vec<Case> = vec![
        (&v1, "/openai/v1/responses", body.as_str(), vec![key], 200),
        (&v1, "/openai/v1/responses", body.as_str(), vec![], 401),
        (
            &v1,
            "/openai/v1/responses",
            body.as_str(),
            vec![("api-key", "wrong")],
            401,
        ),
        (
            &v1,
            "/openai/v1/responses",
            body.as_str(),
            vec![key, ("authorization", "Bearer azure-key-az")],
            401,
        ),
        (
            &v1,
            "/openai/v1/responses?api-version=2024-10-21",
            body.as_str(),
            vec![key],
            400,
        ),
        (&v1, "/v1/responses", body.as_str(), vec![key], 404),
        (
            &dated,
            "/openai/deployments/my-gpt5/chat/completions",
            chat.as_str(),
            vec![key],
            404,
        ),
        (
            &dated,
            "/openai/deployments/other/chat/completions?api-version=2024-10-21",
            chat.as_str(),
            vec![key],
            404,
        ),
        (
            &dated,
            "/openai/deployments/my-gpt5/chat/completions?api-version=2024-10-21",
            chat.as_str(),
            vec![key],
            200,
        ),
    ];
    for (p, path, body, headers, want) in cases {
        let url = format!("{}{path}", p.base_url());
        let (status, _, answer) = post_json(&url, body.to_string(), &headers).await;
        assert_eq!(status.as_u16(), want, "{path} {headers:?}: {answer}");
    }
    let unknown = json!({"model": "gpt-5", "input": "hi"}).to_string();
    let url = format!("{}/openai/v1/responses", v1.base_url());
    let (status, _, answer) = post_json(&url, unknown, &[key]).await;
    assert_eq!(status, 404, "an unknown deployment: {answer}");
    assert!(answer.contains("DeploymentNotFound"), "{answer}");
}
