//! Protocol translation through weir: Claude Code's requests (Anthropic
//! Messages) served by OpenAI Responses and Chat Completions upstreams,
//! Codex's (OpenAI Responses) by Anthropic and Chat Completions upstreams,
//! and Chat Completions clients' by Anthropic and Responses upstreams — streamed and
//! not, with tools, errors, failover across protocols, and the endpoints
//! answered locally. The upstreams are scripted mock providers on port 0;
//! the SDK side is in tests/llm_sdk.rs.

mod common;

use common::llm::*;
use common::*;
use serde_json::{Value, json};

const WORDS: &[&str] = &["Hello", " there", "."];

/// An LLM route of `kind` over `(name, url, protocol)` upstreams, each
/// with the key `sk-upstream-<name>` unless `passthrough`, plus `extra`
/// route keys; the keys are written into the weir's directory.
async fn start(kind: &str, upstreams: &[(&str, String, &str)], passthrough: bool) -> Weir {
    start_with(kind, upstreams, passthrough, "").await
}

async fn start_with(
    kind: &str,
    upstreams: &[(&str, String, &str)],
    passthrough: bool,
    extra: &str,
) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut entries = Vec::new();
    for (name, url, protocol) in upstreams {
        let mut keys = format!("protocol = \"{protocol}\"\n");
        if !passthrough {
            std::fs::write(
                dir.path().join(format!("key-{name}")),
                format!("sk-upstream-{name}"),
            )
            .expect("key");
            keys.push_str(&format!("api_key_file = \"{{dir}}/key-{name}\"\n"));
        }
        entries.push((*name, url.clone(), keys));
    }
    Weir::start_in(dir, &llm_config_with(kind, &entries, extra)).await
}

fn claude_request(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4",
        "max_tokens": 256,
        "stream": stream,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Say hello"}],
    })
}

const CLAUDE_HEADERS: &[(&str, &str)] = &[
    ("anthropic-version", "2023-06-01"),
    ("anthropic-beta", "interleaved-thinking-2025-05-14"),
    ("x-api-key", "sk-ant-client"),
];

#[tokio::test]
async fn claude_code_streams_from_a_responses_upstream() {
    let up = serving(WORDS).await;
    let weir = start("anthropic", &[("gpt", up.url(), "openai_responses")], true).await;
    let (status, headers, body) = post(
        &weir,
        "/v1/messages?beta=true",
        &claude_request(true),
        CLAUDE_HEADERS,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        headers["content-type"]
            .to_str()
            .expect("ct")
            .starts_with("text/event-stream")
    );
    let ev = events(&body);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let text: String = ev
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello there.");
    assert_eq!(ev[0].1["message"]["model"], "claude-sonnet-4");
    let delta = ev
        .iter()
        .find(|(n, _)| n == "message_delta")
        .expect("message_delta");
    assert_eq!(delta.1["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta.1["usage"]["output_tokens"], 3);

    // What the upstream got: the Responses API, the client's key as a
    // Bearer token, no Anthropic headers, no `?beta=true`.
    let seen = &up.seen()[0];
    assert_eq!(seen.path, "/v1/responses");
    assert_eq!(seen.headers["authorization"], "Bearer sk-ant-client");
    assert!(!seen.headers.contains_key("x-api-key"));
    assert!(!seen.headers.contains_key("anthropic-version"));
    assert!(!seen.headers.contains_key("anthropic-beta"));
    let sent = seen.json();
    assert_eq!(sent["instructions"], "Be brief.");
    assert_eq!(sent["max_output_tokens"], 256);
    assert_eq!(
        sent["input"][0]["content"][0],
        json!({"type": "input_text", "text": "Say hello"})
    );
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn claude_code_gets_one_message_from_a_chat_upstream() {
    let up = serving(WORDS).await;
    let weir = start("anthropic", &[("local", up.url(), "openai_chat")], false).await;
    let (status, _, body) = post(
        &weir,
        "/v1/messages",
        &claude_request(false),
        CLAUDE_HEADERS,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let m: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(m["type"], "message");
    assert_eq!(
        m["content"],
        json!([{"type": "text", "text": "Hello there."}])
    );
    assert_eq!(m["stop_reason"], "end_turn");
    assert_eq!(m["usage"]["input_tokens"], 12);
    let seen = &up.seen()[0];
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.headers["authorization"], "Bearer sk-upstream-local");
    assert_eq!(
        seen.json()["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(seen.json()["max_completion_tokens"], 256);
}

#[tokio::test]
async fn a_chat_tool_call_streams_as_a_tool_use_block() {
    let up = mock(agent).await;
    let weir = start("anthropic", &[("local", up.url(), "openai_chat")], false).await;
    let mut req = claude_request(true);
    req["tools"] = json!([{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]);
    let (status, _, body) = post(&weir, "/v1/messages", &req, CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let ev = events(&body);
    let start = ev
        .iter()
        .find(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use")
        .expect("tool_use");
    assert_eq!(start.1["content_block"]["name"], "read_file");
    let args: String = ev
        .iter()
        .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).expect("args"),
        json!({"path": "notes.txt"})
    );
    let delta = ev
        .iter()
        .find(|(n, _)| n == "message_delta")
        .expect("message_delta");
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
    assert_eq!(
        up.seen()[0].json()["tools"][0]["function"]["name"],
        "read_file"
    );
    assert_eq!(up.seen()[0].json()["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn codex_streams_from_an_anthropic_upstream() {
    let up = serving(WORDS).await;
    let weir = start("openai", &[("claude", up.url(), "anthropic")], true).await;
    let req = json!({"model": "gpt-5-codex", "instructions": "Be brief.", "input": "Say hello", "stream": true, "store": false});
    let (status, _, body) = post(
        &weir,
        "/v1/responses",
        &req,
        &[("authorization", "Bearer sk-ant-codex")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let ev = events(&body);
    assert_eq!(ev[0].0, "response.created");
    assert_eq!(ev.last().expect("events").0, "response.completed");
    for (i, (_, d)) in ev.iter().enumerate() {
        assert_eq!(d["sequence_number"], i as u64, "{body}");
    }
    let added = ev
        .iter()
        .position(|(n, _)| n == "response.output_item.added")
        .expect("added");
    let first_delta = ev
        .iter()
        .position(|(n, _)| n == "response.output_text.delta")
        .expect("delta");
    assert!(
        added < first_delta,
        "output_item.added comes before any delta"
    );
    let done = &ev.last().expect("done").1["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], "Hello there.");
    assert_eq!(done["usage"]["output_tokens"], 3);

    let seen = &up.seen()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers["x-api-key"], "sk-ant-codex");
    assert!(!seen.headers.contains_key("authorization"));
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert_eq!(seen.json()["system"], "Be brief.");
    // No max_output_tokens from Codex and no reasoning: room for the
    // answer, not a flat 8,192.
    assert_eq!(seen.json()["max_tokens"], 16384);
}

#[tokio::test]
async fn errors_keep_their_status_in_the_clients_envelope() {
    let up = mock(|seen| {
        error(
            seen,
            429,
            "rate_limit_error",
            "Rate limit reached for requests",
        )
        .with_header("retry-after", "7")
    })
    .await;
    let weir = start("anthropic", &[("gpt", up.url(), "openai_responses")], false).await;
    let (status, headers, body) =
        post(&weir, "/v1/messages", &claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers["retry-after"], "7");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert_eq!(v["error"]["message"], "Rate limit reached for requests");

    let overflow = mock(|_| json_reply(400, br#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#))
    .await;
    let weir = start(
        "anthropic",
        &[("local", overflow.url(), "openai_chat")],
        false,
    )
    .await;
    let (status, _, body) = post(
        &weir,
        "/v1/messages",
        &claude_request(false),
        CLAUDE_HEADERS,
    )
    .await;
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        v["error"]["message"],
        "prompt is too long: 131072 tokens > 128000 maximum"
    );

    let overloaded = mock(|seen| error(seen, 529, "overloaded_error", "Overloaded")).await;
    let weir = start(
        "openai",
        &[("claude", overloaded.url(), "anthropic")],
        false,
    )
    .await;
    let req = json!({"model": "m", "input": "hi"});
    let (status, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
    assert_eq!(status, 529, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "overloaded");
}

/// A translated Responses stream keeps the answer for `response.completed`;
/// an upstream that streams on past the most it may keep gets the stream
/// ended with an in-band error, and the request counted as an upstream
/// error, instead of growing without limit.
#[tokio::test]
async fn a_translated_stream_that_never_ends_is_ended_at_its_bound() {
    let piece: &'static str = Box::leak("x".repeat(512 * 1024).into_boxed_str());
    // 12 MiB of text, past the 8 MiB bound, then the stream stays open.
    let words: Vec<&str> = vec![piece; 24];
    let upstream_events = stream_events(Api::Messages, "m", &words);
    let mut body: Vec<Step> = upstream_events[..2 + words.len()]
        .iter()
        .cloned()
        .map(Step::Send)
        .collect();
    body.push(Step::Wait(std::time::Duration::from_secs(3600)));
    let reply = sse_reply(body);
    let up = mock(move |_| reply.clone()).await;
    let weir = start("openai", &[("claude", up.url(), "anthropic")], true).await;
    let req = json!({"model": "gpt-5-codex", "input": "Say hello", "stream": true, "store": false});
    let (status, _, text) = post(
        &weir,
        "/v1/responses",
        &req,
        &[("authorization", "Bearer sk-ant-codex")],
    )
    .await;
    assert_eq!(status, 200);
    let ev = events(&text);
    let (name, last) = ev.last().expect("events");
    assert_eq!(name, "response.failed", "ended in band");
    let message = last["response"]["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("longer than the gateway keeps"), "{last}");
    let deltas = ev
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .count();
    assert!(
        (16..24).contains(&deltas),
        "{deltas} pieces of 512 KiB relayed before the bound"
    );
    assert!(
        eventually_metric(
            &weir,
            "weir_llm_requests_total{route=\"llm\",model=\"default\",upstream=\"claude\",outcome=\"upstream_error\"}",
            1
        )
        .await
    );
}

const FAILED_OVER: &str =
    "weir_llm_failovers_total{route=\"llm\",model=\"default\",reason=\"status_5xx\"}";

/// A route of `kind` over an Anthropic upstream answering 529, then a
/// Responses upstream serving [`WORDS`].
async fn overloaded_claude_then_gpt(kind: &str) -> (MockLlm, MockLlm, Weir) {
    let busy = mock(|seen| error(seen, 529, "overloaded_error", "Overloaded")).await;
    let gpt = serving(WORDS).await;
    let weir = start(
        kind,
        &[
            ("claude", busy.url(), "anthropic"),
            ("gpt", gpt.url(), "openai_responses"),
        ],
        false,
    )
    .await;
    (busy, gpt, weir)
}

#[tokio::test]
async fn a_529_from_anthropic_fails_over_to_a_responses_upstream_in_one_stream() {
    let (busy, gpt, weir) = overloaded_claude_then_gpt("anthropic").await;
    let (status, _, body) =
        post(&weir, "/v1/messages", &claude_request(true), CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let ev = events(&body);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "message_start").count(), 1);
    assert_eq!(names.last(), Some(&"message_stop"));
    assert!(!names.contains(&"error"), "{body}");
    assert_eq!(busy.seen().len(), 1);
    assert_eq!(busy.seen()[0].headers["x-api-key"], "sk-upstream-claude");
    assert_eq!(
        gpt.seen()[0].headers["authorization"],
        "Bearer sk-upstream-gpt"
    );
    assert_eq!(metric(&weir, FAILED_OVER).await, Some(1));
}

#[tokio::test]
async fn count_tokens_and_models_are_answered_by_weir_on_translated_routes() {
    let up = serving(WORDS).await;
    let weir = start_with(
        "anthropic",
        &[("gpt", up.url(), "openai_responses")],
        false,
        "[[route.models]]\nname = \"claude-sonnet-4\"\nupstreams = [\"gpt:gpt-5\"]\n\
         [[route.models]]\nname = \"claude-haiku-4\"\nupstreams = [\"gpt:gpt-5-mini\"]",
    )
    .await;
    let (status, _, body) = post(
        &weir,
        "/v1/messages/count_tokens",
        &claude_request(false),
        CLAUDE_HEADERS,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let n = serde_json::from_str::<Value>(&body).expect("json")["input_tokens"]
        .as_u64()
        .expect("count");
    assert!((3..50).contains(&n), "{n}");
    assert!(up.seen().is_empty(), "counted locally");

    // The route's own model names in Anthropic's list format, not the
    // upstream's ids (which it was never asked for).
    let (status, _, body) = get(&h1_client(), &weir.url("web", "/v1/models")).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    let data = v["data"].as_array().expect("data");
    let ids: Vec<&str> = data.iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["claude-sonnet-4", "claude-haiku-4"], "{body}");
    assert!(data.iter().all(|m| m["type"] == "model"), "{body}");
    assert_eq!(v["first_id"], "claude-sonnet-4", "{body}");
    assert_eq!(v["last_id"], "claude-haiku-4", "{body}");
    assert!(up.seen().is_empty());
}

/// The chunks of a Chat Completions stream, which must end in
/// `data: [DONE]`.
fn chat_chunks(body: &str) -> Vec<Value> {
    let data: Vec<&str> = body
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

/// What a Chat client makes of an answer, streamed or whole, as the SDKs
/// assemble it: (text, tool calls, finish reason, usage).
fn chat_answer(body: &str, stream: bool) -> (String, Vec<Value>, String, Value) {
    if !stream {
        let v: Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["object"], "chat.completion", "{body}");
        let m = &v["choices"][0]["message"];
        let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
        return (
            m["content"].as_str().unwrap_or("").to_string(),
            calls,
            v["choices"][0]["finish_reason"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            v["usage"].clone(),
        );
    }
    let mut text = String::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut finish = String::new();
    let mut usage = Value::Null;
    for c in chat_chunks(body) {
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        if c["usage"].is_object() {
            usage = c["usage"].clone();
        }
        let Some(choice) = c["choices"].get(0) else {
            continue;
        };
        let d = &choice["delta"];
        text.push_str(d["content"].as_str().unwrap_or(""));
        for t in d["tool_calls"].as_array().into_iter().flatten() {
            let i = t["index"].as_u64().expect("index") as usize;
            if i == calls.len() {
                calls.push(json!({"id": t["id"], "type": "function", "function": {"name": t["function"]["name"], "arguments": ""}}));
            }
            let args = calls[i]["function"]["arguments"]
                .as_str()
                .unwrap_or("")
                .to_string()
                + t["function"]["arguments"].as_str().unwrap_or("");
            calls[i]["function"]["arguments"] = args.into();
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_string();
        }
    }
    (text, calls, finish, usage)
}

/// A Chat Completions client's tool round trip through weir, as the client
/// does it: the first answer calls the tool, the second request carries
/// the call and its result back, the second answer reads the result.
async fn chat_tool_round_trip(weir: &Weir, stream: bool) {
    let mut req = json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is in notes.txt?"},
        ],
        "tools": [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
        "stream": stream,
    });
    if stream {
        req["stream_options"] = json!({"include_usage": true});
    }
    let (status, _, body) = post(weir, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(status, 200, "{body}");
    let (_, calls, finish, usage) = chat_answer(&body, stream);
    assert_eq!(finish, "tool_calls", "{body}");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["function"]["name"], "read_file");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().expect("args"))
            .expect("json");
    assert_eq!(args, json!({"path": "notes.txt"}));
    assert_eq!(usage["prompt_tokens"], 20, "{body}");
    assert_eq!(usage["completion_tokens"], 8, "{body}");

    let messages = req["messages"].as_array_mut().expect("messages");
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
    messages.push(json!({"role": "tool", "tool_call_id": calls[0]["id"], "content": "buy milk"}));
    let (status, _, body) = post(weir, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(status, 200, "{body}");
    let (text, calls, finish, _) = chat_answer(&body, stream);
    assert_eq!(text, "The file says: buy milk", "{body}");
    assert!(calls.is_empty());
    assert_eq!(finish, "stop");
}

#[tokio::test]
async fn a_chat_client_does_a_tool_round_trip_on_an_anthropic_upstream() {
    for stream in [true, false] {
        let up = mock(agent).await;
        let weir = start("openai", &[("claude", up.url(), "anthropic")], false).await;
        chat_tool_round_trip(&weir, stream).await;
        let seen = up.seen();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].path, "/v1/messages");
        assert_eq!(seen[0].headers["x-api-key"], "sk-upstream-claude");
        assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
        let first = seen[0].json();
        assert_eq!(first["system"], "Be brief.");
        assert_eq!(first["tools"][0]["name"], "read_file");
        assert_eq!(first["max_tokens"], 8192);
        assert_eq!(first["stream"] == true, stream);
        let second = seen[1].json();
        assert_eq!(second["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(
            second["messages"][2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "toolu_agent", "content": "buy milk"})
        );
    }
}

#[tokio::test]
async fn a_chat_client_does_a_tool_round_trip_on_a_responses_upstream() {
    for stream in [true, false] {
        let up = mock(agent).await;
        let weir = start("openai", &[("gpt", up.url(), "openai_responses")], false).await;
        chat_tool_round_trip(&weir, stream).await;
        let seen = up.seen();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].path, "/v1/responses");
        assert_eq!(seen[0].headers["authorization"], "Bearer sk-upstream-gpt");
        let first = seen[0].json();
        assert_eq!(first["instructions"], "Be brief.");
        assert_eq!(first["tools"][0]["name"], "read_file");
        assert!(first.get("max_output_tokens").is_none(), "{first}");
        let second = seen[1].json();
        assert_eq!(second["input"][1]["type"], "function_call");
        assert_eq!(
            second["input"][2],
            json!({"type": "function_call_output", "call_id": "call_agent", "output": "buy milk"})
        );
    }
}

/// A Chat client that did not ask for the usage chunk gets none (no chunk
/// without a choice), and the upstream's error reaches it in OpenAI's
/// envelope with its status.
#[tokio::test]
async fn a_chat_client_gets_no_usage_chunk_unasked_and_errors_in_its_envelope() {
    let up = serving(WORDS).await;
    let weir = start("openai", &[("claude", up.url(), "anthropic")], false).await;
    let req =
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let (status, _, body) = post(&weir, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(status, 200, "{body}");
    let chunks = chat_chunks(&body);
    assert!(chunks.iter().all(|c| c["choices"][0].is_object()), "{body}");
    let (text, _, finish, _) = chat_answer(&body, true);
    assert_eq!((text.as_str(), finish.as_str()), ("Hello there.", "stop"));

    let busy = mock(|seen| error(seen, 529, "overloaded_error", "Overloaded")).await;
    let weir = start("openai", &[("claude", busy.url(), "anthropic")], false).await;
    let (status, _, body) = post(&weir, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(status, 529, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["message"], "Overloaded");
    assert_eq!(v["error"]["code"], "overloaded");

    let limited = mock(|seen| error(seen, 429, "rate_limit_exceeded", "Slow down")).await;
    let weir = start(
        "openai",
        &[("gpt", limited.url(), "openai_responses")],
        false,
    )
    .await;
    let (status, _, body) = post(&weir, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(status, 429, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["message"], "Slow down");
}

/// Codex's tool round trip on a Chat Completions upstream.
#[tokio::test]
async fn codex_does_a_tool_round_trip_on_a_chat_upstream() {
    for stream in [true, false] {
        let up = mock(agent).await;
        let weir = start("openai", &[("local", up.url(), "openai_chat")], false).await;
        let mut req = json!({
            "model": "gpt-5-codex", "instructions": "Be brief.", "stream": stream, "store": false,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is in notes.txt?"}]}],
            "tools": [{"type": "function", "name": "read_file", "description": "Read a file", "parameters": {"type": "object"}, "strict": false}],
        });
        let (status, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
        assert_eq!(status, 200, "{body}");
        let response = if stream {
            let ev = events(&body);
            for (i, (_, d)) in ev.iter().enumerate() {
                assert_eq!(d["sequence_number"], i as u64, "{body}");
            }
            let (name, last) = ev.last().expect("terminal").clone();
            assert_eq!(name, "response.completed", "{body}");
            last["response"].clone()
        } else {
            serde_json::from_str(&body).expect("json")
        };
        assert_eq!(response["status"], "completed", "{body}");
        let call = response["output"]
            .as_array()
            .expect("output")
            .iter()
            .find(|i| i["type"] == "function_call")
            .expect("a function call")
            .clone();
        assert_eq!(call["name"], "read_file");
        let args: Value =
            serde_json::from_str(call["arguments"].as_str().expect("args")).expect("json");
        assert_eq!(args, json!({"path": "notes.txt"}));
        assert_eq!(response["usage"]["input_tokens"], 20);
        assert_eq!(response["usage"]["output_tokens"], 8);

        let input = req["input"].as_array_mut().expect("input");
        input.push(json!({"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]}));
        input.push(json!({"type": "function_call_output", "call_id": call["call_id"], "output": "buy milk"}));
        let (status, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
        assert_eq!(status, 200, "{body}");
        let text: String = if stream {
            events(&body)
                .iter()
                .filter(|(n, _)| n == "response.output_text.delta")
                .filter_map(|(_, d)| d["delta"].as_str().map(str::to_string))
                .collect()
        } else {
            let v: Value = serde_json::from_str(&body).expect("json");
            v["output"][0]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(text, "The file says: buy milk", "{body}");

        let seen = up.seen();
        assert_eq!(seen[0].path, "/v1/chat/completions");
        assert_eq!(seen[0].headers["authorization"], "Bearer sk-upstream-local");
        let first = seen[0].json();
        assert_eq!(
            first["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(first["tools"][0]["function"]["name"], "read_file");
        assert!(first.get("max_completion_tokens").is_none(), "{first}");
        let second = seen[1].json();
        assert_eq!(second["messages"][2]["tool_calls"][0]["id"], "call_agent");
        assert_eq!(
            second["messages"][3],
            json!({"role": "tool", "tool_call_id": "call_agent", "content": "buy milk"})
        );
    }
}

/// A context overflow from a Chat upstream reaches Codex with the code it
/// compacts on, as an answer and inside a stream.
#[tokio::test]
async fn a_chat_upstreams_overflow_reaches_codex_as_context_length_exceeded() {
    let overflow = mock(|_| json_reply(400, br#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}"#)).await;
    let weir = start("openai", &[("local", overflow.url(), "openai_chat")], false).await;
    let req = json!({"model": "m", "input": "hi"});
    let (status, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "context_length_exceeded", "{body}");

    let in_stream = mock(|_| {
        sse_reply(vec![Step::Send(bytes::Bytes::from_static(
            b"data: {\"error\":{\"message\":\"context too long\",\"code\":\"context_length_exceeded\"}}\n\n",
        ))])
    })
    .await;
    let weir = start(
        "openai",
        &[("local", in_stream.url(), "openai_chat")],
        false,
    )
    .await;
    let req = json!({"model": "m", "input": "hi", "stream": true});
    let (_, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
    let ev = events(&body);
    let (name, last) = ev.last().expect("terminal");
    assert_eq!(name, "response.failed", "{body}");
    assert_eq!(last["response"]["error"]["code"], "context_length_exceeded");
}

#[tokio::test]
async fn a_translated_stream_is_cancelled_upstream_and_cut_streams_end_in_the_clients_error() {
    use std::time::Duration;
    // The client reads the first event and goes: the Responses request
    // upstream is closed under it.
    let up = trickling().await;
    let weir = start("anthropic", &[("gpt", up.url(), "openai_responses")], false).await;
    leave_after_first_event(&weir, "/v1/messages", claude_request(true)).await;
    assert!(
        eventually(Duration::from_secs(3), || up.abandoned() == 1).await,
        "the translated stream's upstream request was cancelled"
    );

    // An Anthropic upstream cut after content: Codex gets the error and
    // its terminal response.failed, in sequence.
    let cut = mock(|seen| cut_after_content(Api::of(seen).expect("api"), WORDS)).await;
    let weir = start("openai", &[("claude", cut.url(), "anthropic")], false).await;
    let req = json!({"model": "m", "input": "hi", "stream": true});
    let (status, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
    assert_eq!(status, 200);
    let ev = events(&body);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names[names.len() - 2..],
        ["error", "response.failed"],
        "{body}"
    );
    for (i, (_, d)) in ev.iter().enumerate() {
        assert_eq!(d["sequence_number"], i as u64, "{body}");
    }
}

/// A translator that fails anyway (a panic no fuzzing found) ends the
/// client's stream in its own API: Codex gets `error` and its terminal
/// `response.failed` after the content it already had, not a silent cut.
#[tokio::test]
async fn a_failing_translator_still_ends_the_stream_in_the_clients_api() {
    let up = mock(|seen| {
        let events = stream_events(Api::of(seen).expect("api"), "m", WORDS);
        let fail = bytes::Bytes::from(format!(
            "event: {}\ndata: {{}}\n\n",
            weir_wire::translate::FAIL_EVENT
        ));
        sse_reply(
            events[..4]
                .iter()
                .cloned()
                .chain([fail])
                .chain(events[4..].iter().cloned())
                .map(Step::Send)
                .collect(),
        )
    })
    .await;
    let weir = start("openai", &[("claude", up.url(), "anthropic")], false).await;
    let req = json!({"model": "m", "input": "hi", "stream": true});
    let (status, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
    assert_eq!(status, 200);
    let ev = events(&body);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"response.output_text.delta"), "{body}");
    assert_eq!(
        names[names.len() - 2..],
        ["error", "response.failed"],
        "{body}"
    );
    assert!(!names.contains(&"response.completed"), "{body}");
    for (i, (_, d)) in ev.iter().enumerate() {
        assert_eq!(d["sequence_number"], i as u64, "{body}");
    }
}

/// A whole (non-streamed) answer's usage is counted as a stream's is, on
/// a native upstream and on a translated one: each upstream's usage in
/// its own API's terms (the Chat upstream's `prompt_tokens` include the
/// cached input; the count excludes it, as Anthropic's does).
#[tokio::test]
async fn whole_answers_count_their_usage_native_and_translated() {
    let input = "weir_llm_tokens_total{route=\"llm\",model=\"default\",kind=\"input\"}";
    let output = "weir_llm_tokens_total{route=\"llm\",model=\"default\",kind=\"output\"}";
    let cached = "weir_llm_tokens_total{route=\"llm\",model=\"default\",kind=\"cache_read\"}";

    let native = serving(WORDS).await;
    let weir = start("anthropic", &[("claude", native.url(), "anthropic")], false).await;
    let (status, _, body) = post(
        &weir,
        "/v1/messages",
        &claude_request(false),
        CLAUDE_HEADERS,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).expect("json")["usage"]["input_tokens"],
        12,
        "relayed as it came: {body}"
    );
    assert_eq!(metric(&weir, input).await, Some(12));
    assert_eq!(metric(&weir, output).await, Some(3));

    let chat = mock(|_| {
        json_reply(200, br#"{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":30}}}"#)
    })
    .await;
    let weir = start("openai", &[("claude", chat.url(), "openai_chat")], false).await;
    let req = json!({"model": "m", "input": "hi"});
    let (status, _, body) = post(&weir, "/v1/responses", &req, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(metric(&weir, input).await, Some(20));
    assert_eq!(metric(&weir, cached).await, Some(30));
    assert_eq!(metric(&weir, output).await, Some(7));
    // Each request's tokens as a histogram (gen_ai.client.token.usage):
    // its input whole, cached included (50 tokens: above 16, up to 64).
    let bucket = |kind: &str, le: &str| {
        format!(
            "weir_llm_request_tokens_bucket{{le=\"{le}\",route=\"llm\",model=\"default\",kind=\"{kind}\"}}"
        )
    };
    assert_eq!(metric(&weir, &bucket("input", "16.0")).await, Some(0));
    assert_eq!(metric(&weir, &bucket("input", "64.0")).await, Some(1));
    assert_eq!(metric(&weir, &bucket("output", "4.0")).await, Some(0));
    assert_eq!(metric(&weir, &bucket("output", "16.0")).await, Some(1));
}

/// A Chat client's stream fails over across protocols like any other: a
/// 529 from Anthropic, then a Responses upstream; one stream of chunks
/// ending in `[DONE]`, and the failover counted.
#[tokio::test]
async fn a_chat_client_fails_over_from_anthropic_to_a_responses_upstream() {
    let (busy, gpt, weir) = overloaded_claude_then_gpt("openai").await;
    let req =
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let (status, _, body) = post(&weir, "/v1/chat/completions", &req, &[]).await;
    assert_eq!(status, 200, "{body}");
    let (text, _, finish, _) = chat_answer(&body, true);
    assert_eq!((text.as_str(), finish.as_str()), ("Hello there.", "stop"));
    assert_eq!(busy.seen()[0].path, "/v1/messages");
    assert_eq!(gpt.seen()[0].path, "/v1/responses");
    assert_eq!(metric(&weir, FAILED_OVER).await, Some(1));
}

/// Claude Code's plain request through a fresh weir over `upstreams`.
async fn claude_through(
    upstreams: &[(&str, String, &str)],
) -> (http::StatusCode, http::HeaderMap, String) {
    let weir = start("anthropic", upstreams, false).await;
    post(
        &weir,
        "/v1/messages",
        &claude_request(false),
        CLAUDE_HEADERS,
    )
    .await
}

#[tokio::test]
async fn a_refused_translation_moves_on_and_never_hides_an_earlier_rate_limit() {
    let limited = mock(|seen| {
        error(seen, 429, "rate_limit_error", "slow down").with_header("retry-after", "9")
    })
    .await;
    let strict = mock(|_| {
        json_reply(
            400,
            br#"{"error":{"message":"Unsupported parameter: 'temperature'","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}"#,
        )
    })
    .await;
    let (status, headers, body) = claude_through(&[
        ("claude", limited.url(), "anthropic"),
        ("gpt", strict.url(), "openai_responses"),
    ])
    .await;
    assert_eq!(
        status, 429,
        "the rate limit, not the translation's 400: {body}"
    );
    assert_eq!(headers["retry-after"], "9");
    assert_eq!(strict.seen().len(), 1, "the translated upstream was tried");

    // A refused translation moves on to an upstream that takes the
    // client's request as it is; alone, it is relayed in the client's
    // envelope.
    let good = serving(WORDS).await;
    let (status, _, body) = claude_through(&[
        ("gpt", strict.url(), "openai_responses"),
        ("claude", good.url(), "anthropic"),
    ])
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(good.seen().len(), 1);
    let (status, _, body) = claude_through(&[("gpt", strict.url(), "openai_responses")]).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert_eq!(
        v["error"]["message"],
        "Unsupported parameter: 'temperature'"
    );
}

#[tokio::test]
async fn a_translated_request_carries_only_what_the_upstreams_model_takes() {
    let mut request = claude_request(false);
    request["temperature"] = 0.3.into();
    request["thinking"] = json!({"type": "enabled", "budget_tokens": 2048});
    let sent = |up: &MockLlm| up.seen().last().expect("a request").json();

    let gpt = serving(WORDS).await;
    let weir = start(
        "anthropic",
        &[("gpt", gpt.url(), "openai_responses")],
        false,
    )
    .await;
    for (model, reasoning) in [("gpt-5", true), ("gpt-4.1", false)] {
        request["model"] = model.into();
        let (status, _, body) = post(&weir, "/v1/messages", &request, CLAUDE_HEADERS).await;
        assert_eq!(status, 200, "{body}");
        let sent = sent(&gpt);
        assert_eq!(sent["model"], model);
        assert_eq!(
            sent.get("reasoning").is_some(),
            reasoning,
            "{model}: {sent}"
        );
        assert_eq!(
            sent.get("temperature").is_none(),
            reasoning,
            "{model}: {sent}"
        );
    }

    // A local server on the Chat API: told it reasons, and given the
    // limit in both fields (Ollama reads only `max_tokens`).
    let local = serving(WORDS).await;
    let keys = "protocol = \"openai_chat\"\nreasoning = \"yes\"".to_string();
    let weir = Weir::start(&llm_config_with(
        "anthropic",
        &[("local", local.url(), keys)],
        "",
    ))
    .await;
    request["model"] = "qwen3:8b".into();
    let (status, _, body) = post(&weir, "/v1/messages", &request, CLAUDE_HEADERS).await;
    assert_eq!(status, 200, "{body}");
    let sent = sent(&local);
    assert_eq!(
        (&sent["max_tokens"], &sent["max_completion_tokens"]),
        (&json!(256), &json!(256))
    );
    assert_eq!(
        sent["reasoning_effort"], "low",
        "2,048 tokens of thinking: {sent}"
    );
    assert!(sent.get("temperature").is_none(), "{sent}");
}
