//! The official Anthropic and OpenAI Python SDKs against weir's LLM
//! routes, the way Claude Code and Codex use them: what the SDK returns or
//! raises is what is asserted. The SDKs live in a virtual environment
//! under the target directory, made on first use (`.ci/run` makes it up
//! front); tests/sdk/clients.py holds the client side.

mod common;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use common::llm::*;
use common::*;
use serde_json::Value;

const WORDS: &[&str] = &["Hello", " there", "."];
const SDKS: &[&str] = &["anthropic==2.14.0", "openai==3.57.0"];

/// The venv's python, made once per machine (and checked once per run).
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    static MAKING: Mutex<()> = Mutex::new(());
    PYTHON
        .get_or_init(|| {
            let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
            let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sdk-venv");
            let python = venv.join("bin/python");
            let ready = || {
                std::process::Command::new(&python)
                    .args(["-c", "import anthropic, openai"])
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !ready() {
                let made = std::process::Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .status()
                    .expect("python3 is needed for the SDK tests");
                assert!(made.success(), "python3 -m venv failed");
                let pip = std::process::Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet"])
                    .args(SDKS)
                    .status()
                    .expect("pip");
                assert!(pip.success(), "installing {SDKS:?} from PyPI failed");
                assert!(ready(), "the SDKs do not import after installing");
            }
            python
        })
        .clone()
}

/// Run a scenario of tests/sdk/clients.py against `weir`.
async fn sdk(weir: &Weir, scenario: &str, model: &str, key: &str, retries: u32) -> Value {
    let python = python();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/clients.py");
    let url = format!("http://{}", weir.addr("web"));
    let (scenario, model, key) = (scenario.to_string(), model.to_string(), key.to_string());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(&scenario)
            .env("WEIR_URL", url)
            .env("MODEL", model)
            .env("API_KEY", key)
            .env("MAX_RETRIES", retries.to_string())
            .output()
            .expect("run python")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON from the SDK ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_style_requests_fail_over_without_sdk_retries() {
    let bad = mock(|seen| error(seen, 529, "overloaded_error", "Overloaded")).await;
    let good = serving(WORDS).await;
    let (dir, tokens) = client_tokens("team-token\n");
    let weir = Weir::start_in(
        dir,
        &llm_config(
            "anthropic",
            &[("bad", bad.url()), ("good", good.url())],
            tokens,
        ),
    )
    .await;
    // max_retries = 0: any success is weir's failover, not the SDK's retry.
    let r = sdk(
        &weir,
        "anthropic_create",
        "claude-sonnet-4-5",
        "team-token",
        0,
    )
    .await;
    assert_eq!(r["text"], "Hello there.", "{r}");
    assert_eq!(r["stop_reason"], "end_turn");

    let r = sdk(
        &weir,
        "anthropic_stream",
        "claude-sonnet-4-5",
        "team-token",
        0,
    )
    .await;
    assert_eq!(r["text"], "Hello there.", "{r}");
    assert_eq!(r["stop_reason"], "end_turn");
    assert_eq!(r["output_tokens"], 3);

    let r = sdk(&weir, "anthropic_auth_token", "m", "team-token", 0).await;
    assert_eq!(r["text"], "Hello there.", "ANTHROPIC_AUTH_TOKEN style: {r}");

    let r = sdk(&weir, "anthropic_create", "m", "wrong-token", 0).await;
    assert_eq!(r["raised"], "AuthenticationError", "{r}");
    assert_eq!(r["body"]["error"]["type"], "authentication_error");
    assert_eq!(
        bad.seen().len(),
        3,
        "each request tried the bad upstream once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_sdk_sees_a_cut_stream_as_an_error() {
    let up = mock(|_| cut_after_content(Api::Messages, WORDS)).await;
    let weir = weir_over("anthropic", &up, "").await;
    let r = sdk(&weir, "anthropic_stream_partial", "m", "k", 0).await;
    assert_eq!(
        r["text"], "Hello",
        "the content before the cut arrived: {r}"
    );
    assert_eq!(r["raised"], "APIStatusError", "not a clean end: {r}");
    assert_eq!(r["body"]["error"]["type"], "api_error");
}

#[tokio::test(flavor = "multi_thread")]
async fn count_tokens_answers_or_says_not_supported() {
    let up = serving(WORDS).await;
    let weir = weir_over("anthropic", &up, "").await;
    let r = sdk(&weir, "anthropic_count_tokens", "m", "k", 0).await;
    assert_eq!(r["input_tokens"], 12, "{r}");

    let without = mock(|seen| error(seen, 404, "not_found_error", "Not Found")).await;
    let weir = weir_over("anthropic", &without, "").await;
    let r = sdk(&weir, "anthropic_count_tokens", "m", "k", 0).await;
    assert_eq!(r["status"], 501, "{r}");
    assert_eq!(r["body"]["error"]["type"], "not_supported");
}

#[tokio::test(flavor = "multi_thread")]
async fn sdks_see_weirs_shed_and_the_upstreams_rate_limit_as_retryable() {
    // Long enough (~30 s) to outlast a Python SDK's start on a loaded
    // machine; the stream is dropped as soon as the SDK has been shed.
    let slow = mock(|seen| success(seen, &["a", "b", "c", "d", "e"], Duration::from_secs(3))).await;
    let weir = weir_over("anthropic", &slow, "max_concurrent_requests = 1").await;
    let held = open_stream(&weir, "/v1/messages", messages_body("m", true), &[]).await;
    let r = sdk(&weir, "anthropic_create", "m", "k", 0).await;
    assert_eq!(r["raised"], "ServiceUnavailableError", "{r}");
    assert_eq!(r["status"], 503);
    assert_eq!(r["body"]["error"]["type"], "overloaded_error");
    assert_eq!(r["headers"]["x-should-retry"], "true");
    assert_eq!(r["headers"]["retry-after"], "1");
    drop(held);

    let limited = mock(|seen| {
        error(
            seen,
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
        )
        .with_header("retry-after", "7")
        .with_header("anthropic-ratelimit-requests-remaining", "0")
    })
    .await;
    let weir = weir_over("openai", &limited, "").await;
    let r = sdk(&weir, "openai_responses", "m", "k", 0).await;
    assert_eq!(r["raised"], "RateLimitError", "{r}");
    assert_eq!(
        r["headers"]["retry-after"], "7",
        "the upstream's hint, unchanged"
    );
    assert_eq!(r["headers"]["anthropic-ratelimit-requests-remaining"], "0");
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_style_requests_stream_and_fail_over_past_a_failed_preamble() {
    // response.created, then an error: the case no other gateway fails over on.
    let bad = mock(|_| {
        let events = stream_events(Api::Responses, "m", &[]);
        sse_reply(vec![
            Step::Send(events[0].clone()),
            Step::Send(Bytes::from_static(
                b"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"overloaded\",\"param\":null,\"sequence_number\":1}\n\n",
            )),
        ])
    })
    .await;
    let good = serving(WORDS).await;
    let weir = failover_pair("openai", &bad, &good).await;
    let r = sdk(&weir, "openai_responses_stream", "gpt-5-codex", "k", 0).await;
    assert_eq!(r["text"], "Hello there.", "{r}");
    let events: Vec<&str> = r["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(events.first(), Some(&"response.created"));
    assert!(events.contains(&"response.output_item.added"), "{events:?}");
    assert_eq!(events.last(), Some(&"response.completed"));
    assert!(!events.contains(&"error"));

    let r = sdk(&weir, "openai_responses", "gpt-5-codex", "k", 0).await;
    assert_eq!(r["text"], "Hello there.", "{r}");
    let r = sdk(&weir, "openai_chat", "gpt-5-codex", "k", 0).await;
    assert_eq!(r["text"], "Hello there.", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_sdk_sees_a_cut_chat_stream_as_an_error() {
    let up = mock(|_| cut_after_content(Api::Chat, WORDS)).await;
    let weir = weir_over("openai", &up, "").await;
    let r = sdk(&weir, "openai_chat_stream_partial", "m", "k", 0).await;
    assert_eq!(r["raised"], "APIError", "not a clean end: {r}");
    assert_eq!(r["text"], "Hello there.", "{r}");
}

/// A translated route of `kind` over one upstream speaking `protocol`.
fn translated(kind: &str, url: String, protocol: &str) -> String {
    format!(
        "{}protocol = \"{protocol}\"\n",
        llm_config(kind, &[("up", url)], "")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_sdk_runs_a_tool_loop_on_openai_upstreams() {
    for protocol in ["openai_responses", "openai_chat"] {
        let up = mock(agent).await;
        let weir = Weir::start(&translated("anthropic", up.url(), protocol)).await;
        let r = sdk(
            &weir,
            "anthropic_tool_round_trip",
            "claude-sonnet-4-5",
            "k",
            0,
        )
        .await;
        assert_eq!(r["stop_reason"], "tool_use", "{protocol}: {r}");
        assert_eq!(r["tool"], AGENT_TOOL, "{protocol}: {r}");
        assert_eq!(
            r["input"],
            serde_json::json!({"path": "notes.txt"}),
            "{protocol}: {r}"
        );
        assert_eq!(
            r["answer"], "The file says: hello from notes",
            "{protocol}: {r}"
        );
        assert_eq!(r["final_stop_reason"], "end_turn", "{protocol}: {r}");
        let seen = up.seen();
        assert_eq!(seen.len(), 2);
        let second = seen[1].json();
        match protocol {
            "openai_chat" => assert_eq!(
                second["messages"]
                    .as_array()
                    .map(|m| m.iter().any(|m| m["role"] == "tool")),
                Some(true),
                "{second}"
            ),
            _ => assert_eq!(
                second["input"]
                    .as_array()
                    .map(|i| i.iter().any(|i| i["type"] == "function_call_output")),
                Some(true),
                "{second}"
            ),
        }
    }
}

/// Codex's streamed tool loop through the OpenAI SDK's `responses`, on an
/// Anthropic upstream and on a Chat Completions upstream.
#[tokio::test(flavor = "multi_thread")]
async fn the_openai_sdk_runs_a_tool_loop_on_anthropic_and_chat_upstreams() {
    for protocol in ["anthropic", "openai_chat"] {
        let up = mock(agent).await;
        let weir = Weir::start(&translated("openai", up.url(), protocol)).await;
        let r = sdk(&weir, "openai_tool_round_trip", "gpt-5-codex", "k", 0).await;
        assert_eq!(r["first_status"], "completed", "{protocol}: {r}");
        assert_eq!(r["tool"], AGENT_TOOL, "{protocol}: {r}");
        assert_eq!(
            r["arguments"],
            serde_json::json!({"path": "notes.txt"}),
            "{protocol}: {r}"
        );
        assert_eq!(
            r["answer"], "The file says: hello from notes",
            "{protocol}: {r}"
        );
        assert_eq!(r["status"], "completed", "{protocol}: {r}");
        let events: Vec<&str> = r["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(events.first(), Some(&"response.created"), "{r}");
        assert_eq!(events.last(), Some(&"response.completed"), "{r}");
        let second = up.seen()[1].json();
        let messages = &second["messages"];
        if protocol == "anthropic" {
            assert_eq!(messages[1]["content"][0]["type"], "tool_use", "{second}");
            assert_eq!(messages[2]["content"][0]["type"], "tool_result", "{second}");
        } else {
            assert_eq!(messages[1]["tool_calls"][0]["id"], "call_agent", "{second}");
            assert_eq!(messages[2]["role"], "tool", "{second}");
        }
    }
}

/// The OpenAI SDK's `chat.completions.create`, whole and streamed (through
/// its streaming helper), with a tool round trip, on an Anthropic upstream
/// and on a Responses upstream.
#[tokio::test(flavor = "multi_thread")]
async fn the_openai_sdks_chat_completions_run_a_tool_loop_on_anthropic_and_responses_upstreams() {
    for protocol in ["anthropic", "openai_responses"] {
        let up = mock(agent).await;
        let weir = Weir::start(&translated("openai", up.url(), protocol)).await;
        let r = sdk(&weir, "openai_chat_tool_round_trip", "gpt-4o", "k", 0).await;
        for mode in ["whole", "stream"] {
            let r = &r[mode];
            assert_eq!(r["finish_reason"], "tool_calls", "{protocol} {mode}: {r}");
            assert_eq!(r["tool"], AGENT_TOOL, "{protocol} {mode}: {r}");
            assert_eq!(
                r["arguments"],
                serde_json::json!({"path": "notes.txt"}),
                "{protocol} {mode}: {r}"
            );
            assert_eq!(r["prompt_tokens"], 20, "{protocol} {mode}: {r}");
            assert_eq!(
                r["answer"], "The file says: hello from notes",
                "{protocol} {mode}: {r}"
            );
            assert_eq!(r["final_finish_reason"], "stop", "{protocol} {mode}: {r}");
        }
        let paths: Vec<String> = up.seen().iter().map(|s| s.path.clone()).collect();
        let want = if protocol == "anthropic" {
            "/v1/messages"
        } else {
            "/v1/responses"
        };
        assert!(paths.iter().all(|p| p == want), "{protocol}: {paths:?}");
        assert_eq!(paths.len(), 4);
    }
}

/// The OpenAI SDK's `responses.create`, whole, on a Chat Completions
/// upstream (the streamed tool loop is above).
#[tokio::test(flavor = "multi_thread")]
async fn the_openai_sdks_responses_run_on_a_chat_upstream() {
    let up = serving(WORDS).await;
    let weir = Weir::start(&translated("openai", up.url(), "openai_chat")).await;
    let r = sdk(&weir, "openai_responses", "gpt-5-codex", "k", 0).await;
    assert_eq!(r["text"], "Hello there.", "{r}");
    assert_eq!(r["status"], "completed", "{r}");
}
