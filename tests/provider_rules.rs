//! The provider emulator's rules, each shown to bite: a request that
//! breaks the rule is refused in the API's own envelope with the real
//! status, type, code and param, and the same request fixed is accepted.
//! Also its scripts (the tool round trip, scripted failures), its stream
//! formats and shapes, and its journal. All over real HTTP to the
//! emulator on port 0; weir is not involved (tests/fidelity.rs puts weir
//! in front of it).

mod common;

use common::llm::events;
use common::provider::*;
use common::*;
use serde_json::{Value, json};

const ANTHROPIC: &[(&str, &str)] = &[
    ("x-api-key", "sk-ant-test"),
    ("anthropic-version", "2023-06-01"),
];
const OPENAI: &[(&str, &str)] = &[("authorization", "Bearer sk-test")];

fn headers(api: ProviderApi) -> &'static [(&'static str, &'static str)] {
    match api {
        ProviderApi::Anthropic => ANTHROPIC,
        _ => OPENAI,
    }
}

fn path(api: ProviderApi) -> &'static str {
    match api {
        ProviderApi::Anthropic => "/v1/messages",
        ProviderApi::Responses => "/v1/responses",
        ProviderApi::Chat => "/v1/chat/completions",
    }
}

async fn spawn(api: ProviderApi) -> Provider {
    Provider::spawn(api, Options::default()).await
}

/// POST `body` to the emulator's API path; the status and the body as
/// JSON (or as a string when it is an event stream).
async fn ask(p: &Provider, body: &Value) -> (u16, Value) {
    ask_at(p, path(p.api()), body, headers(p.api())).await
}

async fn ask_at(p: &Provider, at: &str, body: &Value, h: &[(&str, &str)]) -> (u16, Value) {
    let (status, _, text) = post_json(&format!("{}{at}", p.base_url()), body.to_string(), h).await;
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status.as_u16(), v)
}

/// `bad` is refused with `status` and an error body holding every one of
/// `want` (message fragments, codes, params), in the API's envelope.
async fn refused(p: &Provider, bad: &Value, status: u16, want: &[&str]) {
    let (got, body) = ask(p, bad).await;
    assert_error(p.api(), got, &body, status, want);
}

fn assert_error(api: ProviderApi, got: u16, body: &Value, status: u16, want: &[&str]) {
    assert_eq!(got, status, "{body}");
    match api {
        ProviderApi::Anthropic => {
            assert_eq!(body["type"], "error", "{body}");
            assert!(body["error"]["type"].is_string(), "{body}");
        }
        _ => {
            let e = &body["error"];
            for k in ["message", "type", "param", "code"] {
                assert!(e.get(k).is_some(), "{k} missing: {body}");
            }
        }
    }
    let text = body.to_string();
    for w in want {
        assert!(text.contains(w), "{w:?} not in {body}");
    }
}

async fn accepted(p: &Provider, good: &Value) -> Value {
    let (got, body) = ask(p, good).await;
    assert_eq!(got, 200, "{body}");
    body
}

fn with(mut base: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().expect("object") {
        if v.is_null() {
            base.as_object_mut().expect("object").remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

fn claude(extra: Value) -> Value {
    with(
        json!({"model": "claude-sonnet-4", "max_tokens": 4096,
               "messages": [{"role": "user", "content": "hi"}]}),
        extra,
    )
}

fn codex(extra: Value) -> Value {
    with(json!({"model": "gpt-5-codex", "input": "hi"}), extra)
}

fn chat(extra: Value) -> Value {
    with(
        json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}),
        extra,
    )
}

fn bash_tool() -> Value {
    json!({"name": "Bash", "description": "Run a command",
           "input_schema": {"type": "object",
               "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
               "required": ["command"]}})
}

fn codex_shell() -> Value {
    json!({"type": "function", "name": "shell", "description": "Runs a shell command", "strict": false,
           "parameters": {"type": "object",
               "properties": {"command": {"type": "array", "items": {"type": "string"}},
                              "workdir": {"type": "string"}},
               "required": ["command"], "additionalProperties": false}})
}

fn chat_shell() -> Value {
    json!({"type": "function", "function": {"name": "exec_command", "description": "Run",
           "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}})
}

/// The emulator is an independent reading of the providers' rules: it
/// must not use weir's own wire or LLM code, or it would agree with weir
/// by construction.
#[test]
fn the_emulator_imports_nothing_from_weir() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/provider");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).expect("provider dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("source");
        assert!(
            !text.contains("weir::"),
            "{} uses weir's code",
            path.display()
        );
        read += 1;
    }
    assert!(read >= 5, "read {read} files in {}", dir.display());
}

// ---------------------------------------------------------------- Anthropic

#[tokio::test]
async fn anthropic_wants_a_key_and_a_version() {
    let p = spawn(ProviderApi::Anthropic).await;
    let (s, b) = ask_at(
        &p,
        "/v1/messages",
        &claude(json!({})),
        &[("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_error(
        p.api(),
        s,
        &b,
        401,
        &["authentication_error", "x-api-key header is required"],
    );
    let (s, b) = ask_at(
        &p,
        "/v1/messages",
        &claude(json!({})),
        &[("x-api-key", "k")],
    )
    .await;
    assert_error(
        p.api(),
        s,
        &b,
        400,
        &["invalid_request_error", "anthropic-version"],
    );
    let bearer = [
        ("authorization", "Bearer oat"),
        ("anthropic-version", "2023-06-01"),
    ];
    let (s, b) = ask_at(&p, "/v1/messages", &claude(json!({})), &bearer).await;
    assert_eq!(s, 200, "{b}");
    accepted(&p, &claude(json!({}))).await;
}

/// Claude Code 2.1.x's request shape: every field it sends is documented
/// and accepted; one more is refused.
#[tokio::test]
async fn anthropic_refuses_unknown_parameters_and_takes_claude_codes() {
    let p = spawn(ProviderApi::Anthropic).await;
    refused(
        &p,
        &claude(json!({"user": "me"})),
        400,
        &["user: Extra inputs are not permitted"],
    )
    .await;
    let full = claude(json!({
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=1"},
                   {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "metadata": {"user_id": "u".repeat(150)},
        "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "tools": [bash_tool()], "tool_choice": {"type": "auto"},
        "stream": true, "temperature": 1, "top_p": 0.99, "stop_sequences": ["\n\nHuman:"],
        "service_tier": "auto", "container": null, "mcp_servers": [],
    }));
    let (s, b) = ask_at(&p, "/v1/messages?beta=true", &full, ANTHROPIC).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(p.rejections().len(), 1);
}

#[tokio::test]
async fn anthropic_takes_at_most_4_cache_breakpoints() {
    let p = spawn(ProviderApi::Anthropic).await;
    let eph = json!({"type": "ephemeral"});
    let block = json!({"type": "text", "text": "x", "cache_control": eph});
    let four = json!({"system": [block, block], "messages": [{"role": "user", "content": [block, block]}]});
    accepted(&p, &claude(four)).await;
    let five = json!({"system": [block, block, block], "messages": [{"role": "user", "content": [block, block]}]});
    refused(
        &p,
        &claude(five),
        400,
        &["A maximum of 4 blocks with cache_control may be provided. Found 5."],
    )
    .await;
}

#[tokio::test]
async fn responses_text_format_needs_a_name_and_a_strict_schema_unless_not_strict() {
    let p = spawn(ProviderApi::Responses).await;
    let loose = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    refused(
        &p,
        &codex(json!({"text": {"format": {"type": "json_schema", "schema": loose}}})),
        400,
        &["text.format.name"],
    )
    .await;
    refused(
        &p,
        &codex(json!({"text": {"format": {"type": "json_schema", "name": "o", "schema": loose, "strict": true}}})),
        400,
        &["Invalid schema for response_format 'o'"],
    )
    .await;
    accepted(
        &p,
        &codex(json!({"text": {"format": {"type": "json_schema", "name": "o", "schema": loose, "strict": false}}})),
    )
    .await;
}

#[tokio::test]
async fn anthropic_max_tokens_is_required_and_positive() {
    let p = spawn(ProviderApi::Anthropic).await;
    refused(
        &p,
        &claude(json!({"max_tokens": null})),
        400,
        &["max_tokens: Field required"],
    )
    .await;
    refused(
        &p,
        &claude(json!({"max_tokens": 0})),
        400,
        &["greater than or equal to 1"],
    )
    .await;
    accepted(&p, &claude(json!({"max_tokens": 1}))).await;
}

#[tokio::test]
async fn anthropic_thinking_budget_is_at_least_1024_and_under_max_tokens() {
    let p = spawn(ProviderApi::Anthropic).await;
    let enabled = |b: u64, max: u64| {
        claude(json!({"max_tokens": max, "thinking": {"type": "enabled", "budget_tokens": b}}))
    };
    refused(
        &p,
        &enabled(1000, 4096),
        400,
        &["budget_tokens: Input should be greater than or equal to 1024"],
    )
    .await;
    refused(
        &p,
        &enabled(4096, 4096),
        400,
        &["`max_tokens` must be greater than `thinking.budget_tokens`"],
    )
    .await;
    refused(
        &p,
        &claude(json!({"thinking": {"type": "on"}})),
        400,
        &["does not match any of the expected tags"],
    )
    .await;
    refused(
        &p,
        &claude(json!({"temperature": 0.2, "thinking": {"type": "adaptive"}})),
        400,
        &["`temperature` may only be set to 1"],
    )
    .await;
    refused(
        &p,
        &claude(json!({"thinking": {"type": "adaptive"}, "tool_choice": {"type": "any"}})),
        400,
        &["Thinking may not be enabled when tool_choice forces tool use."],
    )
    .await;
    accepted(
        &p,
        &claude(json!({"thinking": {"type": "adaptive"}, "tool_choice": {"type": "auto"}})),
    )
    .await;
    accepted(&p, &enabled(1024, 4096)).await;
    accepted(
        &p,
        &claude(json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}})),
    )
    .await;
}

/// Turn 1 of a Claude Code round trip with thinking on: the emulator's
/// own answer (a signed thinking block and a Bash call).
async fn claude_turn_one(p: &Provider) -> (Value, Vec<Value>) {
    let req = claude(
        json!({"thinking": {"type": "enabled", "budget_tokens": 1024}, "tools": [bash_tool()]}),
    );
    let answer = accepted(p, &req).await;
    assert_eq!(answer["stop_reason"], "tool_use", "{answer}");
    let content = answer["content"].as_array().expect("content").clone();
    (req, content)
}

fn claude_turn_two(req: &Value, assistant: Vec<Value>, tool_use_id: &str) -> Value {
    let mut messages = req["messages"].as_array().expect("messages").clone();
    messages.push(json!({"role": "assistant", "content": assistant}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_use_id, "content": "weir-fidelity\n"}]}));
    with(req.clone(), json!({"messages": messages}))
}

#[tokio::test]
async fn anthropic_thinking_signatures_must_be_its_own() {
    let p = spawn(ProviderApi::Anthropic).await;
    let (req, content) = claude_turn_one(&p).await;
    assert_eq!(content[0]["type"], "thinking");
    let call = content[1]["id"].as_str().expect("id").to_string();

    let mut forged = content.clone();
    forged[0]["signature"] = json!("RXJyb3I=.Zm9yZ2Vk");
    refused(
        &p,
        &claude_turn_two(&req, forged, &call),
        400,
        &["messages.1.content.0: Invalid `signature` in `thinking` block"],
    )
    .await;
    let mut changed = content.clone();
    changed[0]["thinking"] = json!("Something else.");
    refused(
        &p,
        &claude_turn_two(&req, changed, &call),
        400,
        &["Invalid `signature`"],
    )
    .await;
    let mut unsigned = content.clone();
    unsigned[0]
        .as_object_mut()
        .expect("block")
        .remove("signature");
    refused(
        &p,
        &claude_turn_two(&req, unsigned, &call),
        400,
        &["signature: Field required"],
    )
    .await;
    let redacted = vec![
        json!({"type": "redacted_thinking", "data": "made-up"}),
        content[1].clone(),
    ];
    refused(
        &p,
        &claude_turn_two(&req, redacted, &call),
        400,
        &["Invalid `data` in `redacted_thinking` block"],
    )
    .await;

    let answer = accepted(&p, &claude_turn_two(&req, content, &call)).await;
    assert_eq!(
        answer["content"][1]["text"], "The command printed: weir-fidelity",
        "{answer}"
    );
}

#[tokio::test]
async fn anthropic_tool_use_continuation_with_thinking_on_starts_with_thinking() {
    let p = spawn(ProviderApi::Anthropic).await;
    let (req, content) = claude_turn_one(&p).await;
    let call = content[1]["id"].as_str().expect("id").to_string();
    let bare = vec![content[1].clone()];
    refused(
        &p,
        &claude_turn_two(&req, bare.clone(), &call),
        400,
        &["messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`"],
    )
    .await;
    // Without thinking the same history is fine.
    let off = with(
        claude_turn_two(&req, bare, &call),
        json!({"thinking": null}),
    );
    accepted(&p, &off).await;
    accepted(&p, &claude_turn_two(&req, content, &call)).await;
}

#[tokio::test]
async fn anthropic_tool_results_answer_the_previous_turns_tool_uses() {
    let p = spawn(ProviderApi::Anthropic).await;
    let (req, content) = claude_turn_one(&p).await;
    let call = content[1]["id"].as_str().expect("id").to_string();
    refused(
        &p,
        &claude_turn_two(&req, content.clone(), "toolu_other"),
        400,
        &["unexpected `tool_use_id` found in `tool_result` blocks: toolu_other"],
    )
    .await;
    let mut unanswered = claude_turn_two(&req, content.clone(), &call);
    unanswered["messages"][2] = json!({"role": "user", "content": "go on"});
    refused(
        &p,
        &unanswered,
        400,
        &["`tool_use` ids were found without `tool_result` blocks immediately after"],
    )
    .await;
    // Consecutive user messages are merged into one turn: a tool result
    // and a text in two user messages still answer the call.
    let mut split = claude_turn_two(&req, content, &call);
    split["messages"]
        .as_array_mut()
        .expect("m")
        .push(json!({"role": "user", "content": "and then?"}));
    accepted(&p, &split).await;
}

#[tokio::test]
async fn anthropic_tool_names_roles_and_empty_text() {
    let p = spawn(ProviderApi::Anthropic).await;
    let named = |name: String| {
        claude(json!({"tools": [{"name": name, "input_schema": {"type": "object"}}]}))
    };
    refused(
        &p,
        &named("t".repeat(65)),
        400,
        &["tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"],
    )
    .await;
    refused(
        &p,
        &named("mcp__a.b".into()),
        400,
        &["should match pattern"],
    )
    .await;
    refused(
        &p,
        &claude(json!({"tools": [{"name": "x"}]})),
        400,
        &["tools.0.custom.input_schema: Field required"],
    )
    .await;
    accepted(&p, &named("t".repeat(64))).await;
    refused(
        &p,
        &claude(json!({"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]})),
        400,
        &["Unexpected role \\\"system\\\""],
    )
    .await;
    // Claude Code 2.1.x puts per-turn instructions among the turns under
    // its beta; the API takes them then.
    let system_turn = claude(
        json!({"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]}),
    );
    let (got, body) = ask_at(
        &p,
        "/v1/messages",
        &system_turn,
        &[
            ("x-api-key", "k"),
            ("anthropic-version", "2023-06-01"),
            (
                "anthropic-beta",
                "context-1m-2025-08-07,per-turn-control-2026-07-01",
            ),
        ],
    )
    .await;
    assert_eq!(got, 200, "{body}");
    refused(
        &p,
        &claude(json!({"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]})),
        400,
        &["text content blocks must be non-empty"],
    )
    .await;
    refused(
        &p,
        &claude(json!({"messages": [{"role": "user", "content": ""}]})),
        400,
        &["must have non-empty content"],
    )
    .await;
    accepted(&p, &claude(json!({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}))).await;
}

#[tokio::test]
async fn broken_bodies_get_the_apis_envelope() {
    for api in [
        ProviderApi::Anthropic,
        ProviderApi::Responses,
        ProviderApi::Chat,
    ] {
        let p = Provider::spawn(
            api,
            Options {
                max_body: 1024,
                ..Options::default()
            },
        )
        .await;
        let url = format!("{}{}", p.base_url(), path(api));
        let (s, _, b) = post_json(&url, "{not json", headers(api)).await;
        let b: Value = serde_json::from_str(&b).expect("json");
        assert_error(api, s.as_u16(), &b, 400, &["invalid_request_error"]);
        let mut plain = vec![("content-type", "text/plain")];
        plain.extend_from_slice(headers(api));
        let (s, _, b) = split(send(http::Method::POST, &url, &plain, "{}").await).await;
        let b: Value = serde_json::from_str(&b).expect("json");
        assert_error(api, s.as_u16(), &b, 400, &["invalid_request_error"]);
        let (s, _, b) = post_json(
            &url,
            format!("{{\"x\":\"{}\"}}", "a".repeat(2000)),
            headers(api),
        )
        .await;
        let b: Value = serde_json::from_str(&b).expect("json");
        let want = if api == ProviderApi::Anthropic {
            "request_too_large"
        } else {
            "Request too large"
        };
        assert_error(api, s.as_u16(), &b, 413, &[want]);
        assert_eq!(p.rejections().len(), 3);
    }
}

/// The agents list models at start: each API answers in its own list
/// shape, behind its credentials; other paths are 404.
#[tokio::test]
async fn models_are_listed_and_other_paths_are_not_found() {
    for api in [
        ProviderApi::Anthropic,
        ProviderApi::Responses,
        ProviderApi::Chat,
    ] {
        let p = spawn(api).await;
        let url = format!("{}/v1/models", p.base_url());
        let (s, _, b) = get_with(&url, headers(api)).await;
        assert_eq!(s, 200, "{b}");
        let list: Value = serde_json::from_str(&b).expect("json");
        assert!(list["data"][0]["id"].is_string(), "{b}");
        let (s, _, b) = get_with(&url, &[]).await;
        assert_eq!(s, 401, "{b}");
        let (s, b) = ask_at(&p, "/v1/complete", &json!({}), headers(api)).await;
        assert_error(api, s, &b, 404, &[]);
        assert_eq!(p.rejections().len(), 2);
    }
}

#[tokio::test]
async fn anthropic_count_tokens_takes_the_prompt_without_max_tokens() {
    let p = spawn(ProviderApi::Anthropic).await;
    let body = claude(json!({"max_tokens": null, "tools": [bash_tool()]}));
    let (s, b) = ask_at(&p, "/v1/messages/count_tokens?beta=true", &body, ANTHROPIC).await;
    assert_eq!(s, 200, "{b}");
    assert!(b["input_tokens"].as_u64().expect("n") > 0);
    let (s, b) = ask_at(
        &p,
        "/v1/messages/count_tokens",
        &claude(json!({})),
        ANTHROPIC,
    )
    .await;
    assert_error(
        p.api(),
        s,
        &b,
        400,
        &["max_tokens: Extra inputs are not permitted"],
    );
}

// ---------------------------------------------------------------- Responses

#[tokio::test]
async fn responses_wants_a_bearer_key() {
    let p = spawn(ProviderApi::Responses).await;
    let (s, b) = ask_at(
        &p,
        "/v1/responses",
        &codex(json!({})),
        &[("x-api-key", "k")],
    )
    .await;
    assert_error(p.api(), s, &b, 401, &["invalid_api_key", "Bearer"]);
    accepted(&p, &codex(json!({}))).await;
}

/// Codex's request shape is accepted; an unknown parameter is not.
#[tokio::test]
async fn responses_refuses_unknown_parameters_and_takes_codexs() {
    let p = spawn(ProviderApi::Responses).await;
    refused(
        &p,
        &codex(json!({"max_tokens": 64})),
        400,
        &[
            "Unknown parameter: 'max_tokens'.",
            "unknown_parameter",
            "\"param\":\"max_tokens\"",
        ],
    )
    .await;
    let full = codex(json!({
        "instructions": "You are Codex.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "tools": [codex_shell(), {"type": "custom", "name": "apply_patch", "description": "Patch",
                  "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}],
        "tool_choice": "auto", "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false, "stream": true, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199-session", "client_metadata": {"x": "y"},
        "text": {"verbosity": "medium"}, "safety_identifier": "s", "user": "u",
        "max_output_tokens": 16, "service_tier": "auto", "prompt_cache_retention": "24h",
        "metadata": {"k": "v"}, "truncation": "auto",
    }));
    accepted(&p, &full).await;
    assert_eq!(p.rejections().len(), 1);
}

#[tokio::test]
async fn responses_limits_user_max_output_tokens_and_names() {
    let p = spawn(ProviderApi::Responses).await;
    refused(
        &p,
        &codex(json!({"user": "u".repeat(150)})),
        400,
        &["Invalid 'user': string too long. Expected a string with maximum length 64, but got a string with length 150 instead.", "string_above_max_length"],
    )
    .await;
    accepted(&p, &codex(json!({"user": "u".repeat(64)}))).await;
    refused(
        &p,
        &codex(json!({"max_output_tokens": 1})),
        400,
        &[
            "Expected a value >= 16, but got 1 instead.",
            "integer_below_min_value",
        ],
    )
    .await;
    accepted(&p, &codex(json!({"max_output_tokens": 16}))).await;
    let named = |name: String| {
        codex(
            json!({"tools": [{"type": "function", "name": name, "strict": false, "parameters": {"type": "object"}}]}),
        )
    };
    refused(
        &p,
        &named("f".repeat(65)),
        400,
        &["tools[0].name", "string_above_max_length"],
    )
    .await;
    refused(
        &p,
        &named("a.b".into()),
        400,
        &["string does not match pattern"],
    )
    .await;
    accepted(&p, &named("f".repeat(64))).await;
    refused(
        &p,
        &codex(json!({"include": ["reasoning.everything"]})),
        400,
        &["invalid_value", "include[0]"],
    )
    .await;
}

fn call_history(call_id: &str, answers: &str) -> Value {
    json!([
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run it"}]},
        {"type": "function_call", "call_id": call_id, "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
        {"type": "function_call_output", "call_id": answers, "output": "a.txt"},
    ])
}

#[tokio::test]
async fn responses_call_outputs_answer_earlier_calls_with_short_ids() {
    let p = spawn(ProviderApi::Responses).await;
    let tools = json!([codex_shell()]);
    refused(
        &p,
        &codex(json!({"tools": tools, "input": call_history("call_1", "call_2")})),
        400,
        &["No tool call found for function call output with call_id call_2."],
    )
    .await;
    let long = "c".repeat(65);
    refused(
        &p,
        &codex(json!({"tools": tools, "input": call_history(&long, &long)})),
        400,
        &["input[1].call_id", "string_above_max_length"],
    )
    .await;
    let custom = json!([
        {"type": "custom_tool_call_output", "call_id": "call_9", "output": "done"},
    ]);
    refused(
        &p,
        &codex(json!({"input": custom})),
        400,
        &["No tool call found for custom tool call output with call_id call_9."],
    )
    .await;
    let answer = accepted(
        &p,
        &codex(json!({"tools": tools, "input": call_history("call_1", "call_1")})),
    )
    .await;
    assert_eq!(
        answer["output"][1]["content"][0]["text"], "The command printed: a.txt",
        "{answer}"
    );
}

#[tokio::test]
async fn responses_reasoning_state_must_be_its_own() {
    let p = spawn(ProviderApi::Responses).await;
    let req = codex(json!({
        "tools": [codex_shell()], "store": false,
        "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "low", "summary": "auto"},
    }));
    let answer = accepted(&p, &req).await;
    let output = answer["output"].as_array().expect("output").clone();
    assert_eq!(output[0]["type"], "reasoning", "{answer}");
    assert!(output[0]["encrypted_content"].is_string(), "{answer}");
    assert_eq!(output[1]["type"], "function_call", "{answer}");
    assert_eq!(
        output[1]["arguments"],
        "{\"command\":[\"bash\",\"-lc\",\"echo weir-fidelity\"]}"
    );
    let next = |reasoning: Value| {
        let mut input = vec![
            json!({"type": "message", "role": "user", "content": "hi"}),
            reasoning,
            output[1].clone(),
        ];
        input.push(json!({"type": "function_call_output", "call_id": output[1]["call_id"], "output": "weir-fidelity"}));
        with(req.clone(), json!({"input": input}))
    };
    let mut forged = output[0].clone();
    forged["encrypted_content"] = json!("gAAAAAB-made-up");
    refused(
        &p,
        &next(forged),
        400,
        &["could not be verified", "invalid_encrypted_content"],
    )
    .await;
    let mut bare = output[0].clone();
    bare.as_object_mut()
        .expect("item")
        .remove("encrypted_content");
    refused(
        &p,
        &next(bare),
        404,
        &["not found. Items are not persisted when `store` is set to false"],
    )
    .await;
    let answer = accepted(&p, &next(output[0].clone())).await;
    assert_eq!(
        answer["output"][1]["content"][0]["text"],
        "The command printed: weir-fidelity"
    );

    // Not asked for: no encrypted state.
    let answer = accepted(&p, &codex(json!({"tools": [codex_shell()]}))).await;
    assert!(
        answer["output"][0].get("encrypted_content").is_none(),
        "{answer}"
    );
}

#[tokio::test]
async fn responses_reasoning_and_temperature_follow_the_model() {
    let reasoning = spawn(ProviderApi::Responses).await;
    refused(
        &reasoning,
        &codex(json!({"temperature": 0.2})),
        400,
        &[
            "Unsupported parameter: 'temperature' is not supported with this model.",
            "unsupported_parameter",
        ],
    )
    .await;
    refused(&reasoning, &codex(json!({"top_p": 0.5})), 400, &["'top_p'"]).await;
    accepted(
        &reasoning,
        &codex(json!({"temperature": 1, "reasoning": {"effort": "high"}})),
    )
    .await;
    let plain = Provider::spawn(
        ProviderApi::Responses,
        Options::default().reasoning_model(false),
    )
    .await;
    refused(
        &plain,
        &codex(json!({"reasoning": {"effort": "low"}})),
        400,
        &["'reasoning.effort'", "unsupported_parameter"],
    )
    .await;
    let answer = accepted(&plain, &codex(json!({"temperature": 0.2}))).await;
    assert_eq!(
        answer["output"][0]["type"], "message",
        "a plain model does not reason: {answer}"
    );
}

/// Function tools are strict unless `strict: false`: an Anthropic-style
/// schema (an optional property, no `additionalProperties`) is refused.
#[tokio::test]
async fn responses_function_tools_are_strict_by_default() {
    let p = spawn(ProviderApi::Responses).await;
    let schema = bash_tool()["input_schema"].clone();
    let tool = |strict: Value, parameters: Value| {
        codex(
            json!({"tools": [with(json!({"type": "function", "name": "Bash", "parameters": parameters}), json!({"strict": strict}))]}),
        )
    };
    refused(
        &p,
        &tool(Value::Null, schema.clone()),
        400,
        &["Invalid schema for function 'Bash': In context=(), 'additionalProperties' is required to be supplied and to be false.", "invalid_function_parameters", "tools[0].parameters"],
    )
    .await;
    let mut closed = schema.clone();
    closed["additionalProperties"] = json!(false);
    refused(&p, &tool(json!(true), closed.clone()), 400, &["'required' is required to be supplied and to be an array including every key in properties. Missing 'timeout'."]).await;
    let nested = json!({"type": "object", "additionalProperties": false, "required": ["o"],
        "properties": {"o": {"type": "object", "properties": {"x": {"type": "string"}}}}});
    refused(
        &p,
        &tool(Value::Null, nested),
        400,
        &["In context=('properties', 'o'), 'additionalProperties'"],
    )
    .await;
    accepted(&p, &tool(json!(false), schema)).await;
    closed["required"] = json!(["command", "timeout"]);
    accepted(&p, &tool(Value::Null, closed)).await;
}

// ---------------------------------------------------------------- Chat

#[tokio::test]
async fn chat_rules() {
    let p = spawn(ProviderApi::Chat).await;
    let (s, b) = ask_at(&p, "/v1/chat/completions", &chat(json!({})), &[]).await;
    assert_error(p.api(), s, &b, 401, &["invalid_api_key"]);
    refused(
        &p,
        &chat(json!({"thinking": {}})),
        400,
        &["Unknown parameter: 'thinking'.", "unknown_parameter"],
    )
    .await;
    refused(
        &p,
        &chat(json!({"user": "u".repeat(65)})),
        400,
        &["string_above_max_length", "\"param\":\"user\""],
    )
    .await;
    refused(
        &p,
        &chat(json!({"stream_options": {"include_usage": true}})),
        400,
        &["only allowed when 'stream' is enabled"],
    )
    .await;
    accepted(
        &p,
        &chat(json!({"stream": true, "stream_options": {"include_usage": true}})),
    )
    .await;
    refused(
        &p,
        &chat(json!({"temperature": 0.3})),
        400,
        &["unsupported_value"],
    )
    .await;
    accepted(
        &p,
        &chat(json!({"max_tokens": 64, "max_completion_tokens": 64, "reasoning_effort": "low"})),
    )
    .await;
    let named = |name: String| {
        chat(
            json!({"tools": [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}]}),
        )
    };
    refused(
        &p,
        &named("n".repeat(65)),
        400,
        &["tools[0].function.name", "string_above_max_length"],
    )
    .await;
    accepted(&p, &named("n".repeat(64))).await;
    let plain = Provider::spawn(ProviderApi::Chat, Options::default().reasoning_model(false)).await;
    refused(
        &plain,
        &chat(json!({"reasoning_effort": "low"})),
        400,
        &["unsupported_parameter"],
    )
    .await;
}

#[tokio::test]
async fn chat_tool_messages_answer_earlier_tool_calls() {
    let p = spawn(ProviderApi::Chat).await;
    let history = |answers: &str| {
        chat(json!({"tools": [chat_shell()], "messages": [
            {"role": "user", "content": "run"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": answers, "content": "a.txt"},
        ]}))
    };
    refused(&p, &history("call_2"), 400, &["messages with role 'tool' must be a response to a preceeding message with 'tool_calls'", "messages.[2].role"]).await;
    let mut unanswered = history("call_1");
    unanswered["messages"][2] = json!({"role": "user", "content": "go on"});
    refused(
        &p,
        &unanswered,
        400,
        &["did not have response messages: call_1"],
    )
    .await;
    let answer = accepted(&p, &history("call_1")).await;
    assert_eq!(
        answer["choices"][0]["message"]["content"], "The command printed: a.txt",
        "{answer}"
    );
}

/// DeepSeek's thinking mode: the reasoning of a tool-calling turn must
/// come back with it.
#[tokio::test]
async fn a_deepseek_style_server_wants_its_reasoning_back() {
    let p = spawn(ProviderApi::Chat).await;
    p.set_shape(Shape {
        chat_reasoning_content: true,
        chat_reasoning_required: true,
        ..Shape::default()
    });
    let first = chat(json!({"tools": [chat_shell()]}));
    let answer = accepted(&p, &first).await;
    let message = answer["choices"][0]["message"].clone();
    assert!(message["reasoning_content"].is_string(), "{answer}");
    let next = |assistant: Value| {
        let mut req = first.clone();
        let call = assistant["tool_calls"][0]["id"].clone();
        let messages = req["messages"].as_array_mut().expect("messages");
        messages.push(assistant);
        messages.push(json!({"role": "tool", "tool_call_id": call, "content": "a.txt"}));
        req
    };
    let mut bare = message.clone();
    bare.as_object_mut()
        .expect("message")
        .remove("reasoning_content");
    refused(
        &p,
        &next(bare),
        400,
        &["Missing `reasoning_content` field in the assistant message at message index 1"],
    )
    .await;
    accepted(&p, &next(message)).await;
}

// ---------------------------------------------------------------- Scripts, streams, journal

/// The round trip finds each agent's shell tool by its schema, whatever
/// its name, and asks for the command in that tool's own argument shape.
#[tokio::test]
async fn the_round_trip_calls_each_agents_shell_tool() {
    let p = spawn(ProviderApi::Responses).await;
    p.set_script(Script::RoundTrip {
        command: "ls -la".into(),
    });
    let exec = json!({"type": "function", "name": "exec_command", "strict": false,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}});
    let shell_command = json!({"type": "function", "name": "run_it", "strict": false,
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}});
    for (tool, args) in [
        (codex_shell(), json!({"command": ["bash", "-lc", "ls -la"]})),
        (exec, json!({"cmd": "ls -la"})),
        (shell_command, json!({"command": "ls -la"})),
    ] {
        let name = tool["name"].clone();
        let answer = accepted(&p, &codex(json!({"tools": [tool]}))).await;
        let call = answer["output"]
            .as_array()
            .expect("o")
            .iter()
            .find(|i| i["type"] == "function_call")
            .expect("call")
            .clone();
        assert_eq!(call["name"], name);
        assert_eq!(
            serde_json::from_str::<Value>(call["arguments"].as_str().expect("a")).expect("json"),
            args
        );
    }
    // No tools (a title or quota probe): a short text.
    let answer = accepted(&p, &codex(json!({}))).await;
    assert_eq!(
        answer["output"].as_array().expect("o").last().expect("m")["type"],
        "message"
    );
    p.set_script(Script::Text("Fixed.".into()));
    let answer = accepted(&p, &codex(json!({"tools": [codex_shell()]}))).await;
    assert_eq!(answer["output"][1]["content"][0]["text"], "Fixed.");
}

#[tokio::test]
async fn scripted_failures_by_turn_and_for_the_next_requests() {
    let p = spawn(ProviderApi::Anthropic).await;
    p.fail_next(2, Failure::new(529).with_header("retry-after", "3"));
    p.fail_turn(2, Failure::new(429).with_message("slow down"));
    for _ in 0..2 {
        let (s, hdrs, b) = post_json(
            &format!("{}/v1/messages", p.base_url()),
            claude(json!({})).to_string(),
            ANTHROPIC,
        )
        .await;
        assert_eq!(s, 529);
        assert_eq!(hdrs["retry-after"], "3");
        assert!(b.contains("overloaded_error"), "{b}");
    }
    accepted(&p, &claude(json!({}))).await;
    let (req, content) = claude_turn_one(&p).await;
    let two = with(
        claude_turn_two(
            &req,
            content.clone(),
            content[1]["id"].as_str().expect("id"),
        ),
        json!({"thinking": null}),
    );
    let (s, b) = ask(&p, &two).await;
    assert_error(p.api(), s, &b, 429, &["rate_limit_error", "slow down"]);
    // A refused request is refused, not failed: the rules come first.
    refused(&p, &claude(json!({"max_tokens": 0})), 400, &["max_tokens"]).await;
    let verdicts: Vec<Verdict> = p.journal().into_iter().map(|e| e.verdict).collect();
    assert_eq!(
        verdicts,
        [
            Verdict::Failed { status: 529 },
            Verdict::Failed { status: 529 },
            Verdict::Accepted,
            Verdict::Accepted,
            Verdict::Failed { status: 429 },
            Verdict::Rejected {
                status: 400,
                message: "max_tokens: Input should be greater than or equal to 1".into()
            },
        ]
    );
    assert_eq!(p.journal()[4].turn, 2);
    assert_eq!(p.journal()[0].path, "/v1/messages");
    assert_eq!(p.journal()[0].headers["x-api-key"], "sk-ant-test");
}

#[tokio::test]
#[should_panic(expected = "Responses emulator refused 1 request(s)")]
async fn the_journal_reports_what_it_refused() {
    let p = spawn(ProviderApi::Responses).await;
    refused(&p, &codex(json!({"user": "u".repeat(70)})), 400, &["user"]).await;
    p.assert_all_accepted();
}

fn sse_text(v: &Value) -> &str {
    v.as_str().expect("an event stream")
}

#[tokio::test]
async fn anthropic_streams_signed_thinking_text_and_tool_use() {
    let p = spawn(ProviderApi::Anthropic).await;
    let req = claude(json!({"stream": true, "tools": [bash_tool()],
        "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}}));
    let (_, body) = accepted_raw(&p, &req).await;
    let ev = events(sse_text(&body));
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start");
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    assert!(
        !ev.iter()
            .any(|(_, d)| d["delta"]["type"] == "thinking_delta"),
        "omitted thinking has no text"
    );
    let signature = ev
        .iter()
        .find_map(|(_, d)| d["delta"]["signature"].as_str())
        .expect("signature");
    let args: String = ev
        .iter()
        .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).expect("args"),
        json!({"command": "echo weir-fidelity"})
    );
    let delta = &ev[ev.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert!(delta["usage"]["output_tokens"].as_u64().expect("usage") > 0);
    // The omitted thinking, sent back empty with its signature, is valid.
    let tool_use = ev
        .iter()
        .find(|(_, d)| d["content_block"]["type"] == "tool_use")
        .expect("tool_use")
        .1["content_block"]
        .clone();
    let mut call = tool_use.clone();
    call["input"] = json!({"command": "echo weir-fidelity"});
    let assistant = vec![
        json!({"type": "thinking", "thinking": "", "signature": signature}),
        call,
    ];
    let id = tool_use["id"].as_str().expect("id");
    accepted(&p, &claude_turn_two(&req, assistant, id)).await;
}

async fn accepted_raw(p: &Provider, body: &Value) -> (u16, Value) {
    let (s, b) = ask(p, body).await;
    assert_eq!(s, 200, "{b}");
    (s, b)
}

#[tokio::test]
async fn responses_streams_number_every_event_and_can_skip_the_added_events() {
    let p = spawn(ProviderApi::Responses).await;
    let req = codex(
        json!({"stream": true, "tools": [codex_shell()], "reasoning": {"summary": "auto"}, "include": ["reasoning.encrypted_content"]}),
    );
    for skip in [false, true] {
        p.set_shape(Shape {
            responses_no_added: skip,
            ..Shape::default()
        });
        let (_, body) = accepted_raw(&p, &req).await;
        let ev = events(sse_text(&body));
        for (i, (name, d)) in ev.iter().enumerate() {
            assert_eq!(d["sequence_number"], i as u64);
            assert_eq!(&d["type"], name);
        }
        let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..2], ["response.created", "response.in_progress"]);
        assert_eq!(names.last(), Some(&"response.completed"));
        assert_eq!(
            names.contains(&"response.output_item.added"),
            !skip,
            "{names:?}"
        );
        assert!(names.contains(&"response.reasoning_summary_text.delta"));
        let done = &ev.last().expect("completed").1["response"];
        assert!(done["output"][0]["encrypted_content"].is_string());
        assert!(done["usage"]["output_tokens"].as_u64().expect("usage") > 0);
    }
    p.set_shape(Shape {
        responses_no_added: true,
        ..Shape::default()
    });
    let (_, body) = accepted_raw(&p, &codex(json!({"stream": true}))).await;
    let names: Vec<String> = events(sse_text(&body))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(
        !names.iter().any(|n| n == "response.content_part.added"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "response.output_text.delta"),
        "{names:?}"
    );
}

#[tokio::test]
async fn chat_streams_in_each_shape() {
    let p = spawn(ProviderApi::Chat).await;
    let req = chat(
        json!({"stream": true, "tools": [chat_shell()], "stream_options": {"include_usage": true}}),
    );
    let chunks = |body: &Value| -> Vec<Value> {
        let text = sse_text(body);
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        text.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).expect("chunk"))
            .collect()
    };
    // OpenAI's own: the id on the first tool chunk, usage alone at the end.
    let (_, body) = accepted_raw(&p, &req).await;
    let c = chunks(&body);
    assert!(
        c[1]["choices"][0]["delta"]["tool_calls"][0]["id"].is_string(),
        "{c:?}"
    );
    let last = c.last().expect("usage");
    assert_eq!(last["choices"], json!([]));
    assert!(last["usage"]["completion_tokens"].as_u64().expect("u") > 0);
    assert_eq!(c[c.len() - 2]["choices"][0]["finish_reason"], "tool_calls");
    assert!(
        !c.iter()
            .any(|c| c["choices"][0]["delta"]["reasoning_content"].is_string())
    );

    p.set_shape(Shape {
        chat_reasoning_content: true,
        chat_late_tool_id: true,
        chat_usage_on_finish: true,
        ..Shape::default()
    });
    let (_, body) = accepted_raw(&p, &req).await;
    let c = chunks(&body);
    assert!(
        c.iter()
            .any(|c| c["choices"][0]["delta"]["reasoning_content"].is_string()),
        "{c:?}"
    );
    let tool_chunks: Vec<&Value> = c
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert!(tool_chunks[0]["id"].is_null() && tool_chunks[0]["function"]["name"] == "exec_command");
    assert!(tool_chunks[1]["id"].is_string(), "{tool_chunks:?}");
    let last = c.last().expect("finish");
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert!(last["usage"]["total_tokens"].is_u64(), "{last}");
}

// ------------------------------------------------- web search

fn claude_search_tool() -> Value {
    json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3})
}

async fn search_spawn(api: ProviderApi) -> Provider {
    Provider::spawn(
        api,
        Options::default().script(Script::Search {
            query: "weir".into(),
        }),
    )
    .await
}

#[tokio::test]
async fn anthropic_knows_its_server_tools_and_the_search_tools_fields() {
    let p = spawn(ProviderApi::Anthropic).await;
    accepted(&p, &claude(json!({"tools": [claude_search_tool()]}))).await;
    let mut located = claude_search_tool();
    located["allowed_domains"] = json!(["docs.rs"]);
    located["user_location"] = json!({"type": "approximate", "city": "Lyon", "country": "FR"});
    accepted(&p, &claude(json!({"tools": [located.clone()]}))).await;
    refused(
        &p,
        &claude(json!({"tools": [{"type": "web_search_20990101", "name": "web_search"}]})),
        400,
        &["Input tag 'web_search_20990101'", "'web_search_20250305'"],
    )
    .await;
    let mut unknown = claude_search_tool();
    unknown["search_context_size"] = json!("high");
    refused(
        &p,
        &claude(json!({"tools": [unknown]})),
        400,
        &["tools.0.web_search_20250305.search_context_size: Extra inputs are not permitted"],
    )
    .await;
    let mut renamed = claude_search_tool();
    renamed["name"] = json!("search");
    refused(
        &p,
        &claude(json!({"tools": [renamed]})),
        400,
        &["'web_search'"],
    )
    .await;
    let mut both = located;
    both["blocked_domains"] = json!(["example.com"]);
    refused(
        &p,
        &claude(json!({"tools": [both]})),
        400,
        &["both allowed_domains and blocked_domains"],
    )
    .await;
    let mut zero = claude_search_tool();
    zero["max_uses"] = json!(0);
    refused(&p, &claude(json!({"tools": [zero]})), 400, &["max_uses"]).await;
}

/// The scripted search on Anthropic: the call, its results and the cited
/// text, whole and streamed; sent back as issued they are taken, changed
/// or made up they are refused.
#[tokio::test]
async fn anthropic_search_blocks_go_back_only_as_it_issued_them() {
    let p = search_spawn(ProviderApi::Anthropic).await;
    let first = claude(json!({"tools": [claude_search_tool()]}));
    let answer = accepted(&p, &first).await;
    let content = answer["content"].as_array().expect("content").clone();
    let kinds: Vec<&str> = content.iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["server_tool_use", "web_search_tool_result", "text"],
        "{answer}"
    );
    assert_eq!(answer["usage"]["server_tool_use"]["web_search_requests"], 1);
    assert_eq!(content[2]["citations"][0]["url"], SEARCH_URL);
    let again = |blocks: Vec<Value>| {
        let mut req = first.clone();
        let m = req["messages"].as_array_mut().expect("messages");
        m.push(json!({"role": "assistant", "content": blocks}));
        m.push(json!({"role": "user", "content": "thanks"}));
        req
    };
    let second = accepted(&p, &again(content.clone())).await;
    assert_eq!(second["content"][0]["text"], AFTER_SEARCH, "{second}");

    let mut forged = content.clone();
    forged[1]["content"][0]["encrypted_content"] = json!("weir.w1");
    refused(&p, &again(forged), 400, &["Invalid `encrypted_content`"]).await;
    let mut moved = content.clone();
    moved[1]["content"][0]["url"] = json!("https://elsewhere.example");
    refused(&p, &again(moved), 400, &["Invalid `encrypted_content`"]).await;
    let mut cited = content.clone();
    cited[2]["citations"][0]["encrypted_index"] = json!("weir.w1");
    refused(&p, &again(cited), 400, &["Invalid `encrypted_index`"]).await;
    let mut renamed = content.clone();
    renamed[0]["id"] = json!("srvtoolu_weir_ws_1");
    renamed[1]["tool_use_id"] = json!("srvtoolu_weir_ws_1");
    refused(&p, &again(renamed), 400, &["server_tool_use.id"]).await;
    let orphan = vec![content[1].clone(), content[2].clone()];
    refused(
        &p,
        &again(orphan),
        400,
        &["without a preceding `server_tool_use`"],
    )
    .await;
    let mut as_user = first.clone();
    as_user["messages"] = json!([{"role": "user", "content": [content[1].clone()]}]);
    refused(
        &p,
        &as_user,
        400,
        &["Input tag 'web_search_tool_result'", "user message"],
    )
    .await;

    let (_, streamed) = accepted_raw(&p, &with(first, json!({"stream": true}))).await;
    let ev = events(sse_text(&streamed));
    let deltas: Vec<&str> = ev
        .iter()
        .filter_map(|(_, d)| d["delta"]["type"].as_str())
        .collect();
    assert!(deltas.contains(&"citations_delta"), "{streamed}");
    let result = ev
        .iter()
        .find(|(_, d)| d["content_block"]["type"] == "web_search_tool_result")
        .expect("the results' block");
    assert_eq!(result.1["content_block"]["content"][0]["url"], SEARCH_URL);
}

#[tokio::test]
async fn responses_search_tool_fields_and_search_calls_sent_back() {
    let p = search_spawn(ProviderApi::Responses).await;
    let codexs = json!({"type": "web_search", "external_web_access": true,
        "search_content_types": ["text", "image"]});
    accepted(&p, &codex(json!({"tools": [codexs]}))).await;
    let located = json!({"type": "web_search", "filters": {"allowed_domains": ["docs.rs"]},
        "user_location": {"type": "approximate", "city": "Lyon"}, "search_context_size": "low"});
    accepted(&p, &codex(json!({"tools": [located]}))).await;
    refused(
        &p,
        &codex(
            json!({"tools": [{"type": "web_search", "filters": {"blocked_domains": ["x.com"]}}]}),
        ),
        400,
        &["unknown_parameter", "tools[0].filters.blocked_domains"],
    )
    .await;
    refused(
        &p,
        &codex(json!({"tools": [{"type": "web_search", "max_uses": 3}]})),
        400,
        &["unknown_parameter", "tools[0].max_uses"],
    )
    .await;
    refused(
        &p,
        &codex(json!({"tools": [{"type": "web_search", "search_context_size": "huge"}]})),
        400,
        &["invalid_value", "tools[0].search_context_size"],
    )
    .await;

    // The scripted search: the call, and the text with its citation.
    let first = codex(json!({"tools": [{"type": "web_search"}],
        "include": ["web_search_call.action.sources"]}));
    let answer = accepted(&p, &first).await;
    let output = answer["output"].as_array().expect("output").clone();
    let call = output
        .iter()
        .find(|i| i["type"] == "web_search_call")
        .expect("a search");
    assert_eq!(call["action"]["sources"][0]["url"], SEARCH_URL);
    let message = output
        .iter()
        .find(|i| i["type"] == "message")
        .expect("text");
    assert_eq!(
        message["content"][0]["annotations"][0]["type"],
        "url_citation"
    );

    let again = |item: Value| {
        codex(json!({"tools": [{"type": "web_search"}], "input": [
            {"type": "message", "role": "user", "content": "search"},
            item,
            {"type": "message", "role": "user", "content": "thanks"},
        ]}))
    };
    // As Codex sends it back: no id.
    let replay = json!({"type": "web_search_call", "status": "completed",
        "action": {"type": "search", "query": "weir"}});
    let second = accepted(&p, &again(replay.clone())).await;
    assert!(second.to_string().contains(AFTER_SEARCH), "{second}");
    accepted(&p, &again(call.clone())).await;
    let mut unknown = replay.clone();
    unknown["results"] = json!([]);
    refused(
        &p,
        &again(unknown),
        400,
        &["unknown_parameter", "input[1].results"],
    )
    .await;
    let mut no_action = replay.clone();
    no_action["action"] = json!({"type": "browse"});
    refused(
        &p,
        &again(no_action),
        400,
        &["invalid_value", "input[1].action.type"],
    )
    .await;
    let mut no_status = replay;
    no_status.as_object_mut().expect("item").remove("status");
    refused(
        &p,
        &again(no_status),
        400,
        &["missing_required_parameter", "input[1].status"],
    )
    .await;

    let (_, streamed) = accepted_raw(&p, &with(first, json!({"stream": true}))).await;
    let names: Vec<String> = events(sse_text(&streamed))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for name in [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_text.annotation.added",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
}

/// Chat Completions has function and custom tools only.
#[tokio::test]
async fn chat_has_no_search_tool() {
    let p = spawn(ProviderApi::Chat).await;
    refused(
        &p,
        &chat(json!({"tools": [{"type": "web_search"}]})),
        400,
        &["invalid_value", "tools[0].type", "'function' and 'custom'"],
    )
    .await;
}

// ------------------------------------------------- content parts and documents

const PDF_URL: &str = "data:application/pdf;base64,JVBERi0xLjQK";

#[tokio::test]
async fn responses_content_parts_are_the_apis_own() {
    let p = spawn(ProviderApi::Responses).await;
    let user = |parts: Value| {
        codex(json!({"input": [{"type": "message", "role": "user", "content": parts}]}))
    };
    accepted(
        &p,
        &user(json!([
            {"type": "input_text", "text": "read these"},
            {"type": "input_image", "image_url": "data:image/png;base64,QUJD"},
            {"type": "input_file", "filename": "a.pdf", "file_data": PDF_URL},
            {"type": "input_file", "file_id": "file-abc"},
            {"type": "input_file", "file_url": "https://weir.example/a.pdf"},
        ])),
    )
    .await;
    refused(
        &p,
        &user(json!([{"type": "document", "text": "x"}])),
        400,
        &[
            "invalid_value",
            "input[0].content[0].type",
            "'input_text', 'input_image', and 'input_file'",
        ],
    )
    .await;
    refused(
        &p,
        &user(json!([{"type": "input_file", "file_data": PDF_URL}])),
        400,
        &["missing_required_parameter", "input[0].content[0].filename"],
    )
    .await;
    for two_or_none in [
        json!({"type": "input_file", "filename": "a.pdf", "file_data": PDF_URL, "file_url": "https://weir.example/a.pdf"}),
        json!({"type": "input_file", "filename": "a.pdf"}),
    ] {
        refused(
            &p,
            &user(json!([two_or_none])),
            400,
            &[
                "invalid_value",
                "exactly one of 'file_data', 'file_id' or 'file_url'",
            ],
        )
        .await;
    }
    refused(
        &p,
        &user(json!([{"type": "input_image", "detail": "high"}])),
        400,
        &["invalid_value", "'image_url' or 'file_id'"],
    )
    .await;
    let assistant = codex(json!({"input": [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "hello"}]},
    ]}));
    refused(
        &p,
        &assistant,
        400,
        &[
            "invalid_value",
            "input[1].content[0].type",
            "'output_text' and 'refusal'",
        ],
    )
    .await;
}

#[tokio::test]
async fn chat_content_parts_are_the_apis_own() {
    let p = spawn(ProviderApi::Chat).await;
    let user = |parts: Value| chat(json!({"messages": [{"role": "user", "content": parts}]}));
    accepted(
        &p,
        &user(json!([
            {"type": "text", "text": "read these"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}},
            {"type": "file", "file": {"file_id": "file-abc"}},
        ])),
    )
    .await;
    refused(
        &p,
        &user(json!([{"type": "input_file", "file_url": "https://weir.example/a.pdf"}])),
        400,
        &["invalid_value", "messages[0].content[0].type", "'file'"],
    )
    .await;
    refused(
        &p,
        &user(json!([{"type": "file", "file": {"file_data": PDF_URL}}])),
        400,
        &[
            "missing_required_parameter",
            "messages[0].content[0].file.filename",
        ],
    )
    .await;
    refused(
        &p,
        &user(json!([{"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL, "file_id": "file-abc"}}])),
        400,
        &["invalid_value", "exactly one of 'file_data' or 'file_id'"],
    )
    .await;
    let system = chat(json!({"messages": [
        {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://weir.example/a.png"}}]},
        {"role": "user", "content": "hi"},
    ]}));
    refused(
        &p,
        &system,
        400,
        &["invalid_value", "messages[0].content[0].type"],
    )
    .await;
}

#[tokio::test]
async fn anthropic_documents_have_a_known_source() {
    let p = spawn(ProviderApi::Anthropic).await;
    let user = |block: Value| {
        claude(
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "read"}, block]}]}),
        )
    };
    for good in [
        json!({"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}),
        json!({"type": "text", "media_type": "text/plain", "data": "notes"}),
        json!({"type": "url", "url": "https://weir.example/a.pdf"}),
    ] {
        accepted(&p, &user(json!({"type": "document", "source": good}))).await;
    }
    refused(
        &p,
        &user(json!({"type": "document", "source": {"type": "base64", "media_type": "text/plain", "data": "bm90ZXM="}})),
        400,
        &["document.source"],
    )
    .await;
    refused(
        &p,
        &user(json!({"type": "document", "source": {"type": "file_url", "url": "https://weir.example/a.pdf"}})),
        400,
        &["Input tag 'file_url'"],
    )
    .await;
}
