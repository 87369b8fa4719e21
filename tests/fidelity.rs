//! weir against upstreams as strict as the real providers: every
//! translation pair (Claude Code's Messages on Anthropic, Responses and
//! Chat upstreams; Codex's Responses on Responses, Anthropic and Chat; a
//! Chat client on Chat, Anthropic and Responses) pointed at the provider
//! emulator (tests/common/provider),
//! with requests shaped as the real agents send them, streamed and not,
//! and a two-turn tool round trip per pair whose second turn is built from
//! the first turn's answer as the client builds it. Every request weir
//! sends must be accepted by the emulator, and every answer must be well
//! formed for the client.
//!
//! Cases weir's translators fail today are `#[ignore]`d with the
//! emulator's exact refusal (issue 19); run them with `--ignored`.

mod common;

use common::llm::{events, llm_config_with, post};
use common::provider::*;
use common::*;
use serde_json::{Value, json};

const COMMAND: &str = "echo weir-fidelity";
const PRINTED: &str = "The command printed: weir-fidelity";

/// weir with one LLM route of `kind` over the emulators, in order, each
/// with its `protocol` and an upstream key of its own.
async fn weir_over(kind: &str, upstreams: &[(&Provider, &str)]) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut entries = Vec::new();
    for (n, (provider, protocol)) in upstreams.iter().enumerate() {
        let name = format!("up{n}");
        std::fs::write(dir.path().join(&name), format!("sk-upstream-{name}")).expect("key");
        let keys = format!("protocol = \"{protocol}\"\napi_key_file = \"{{dir}}/{name}\"\n");
        entries.push((name, provider.base_url(), keys));
    }
    let entries: Vec<(&str, String, String)> = entries
        .iter()
        .map(|(n, u, k)| (n.as_str(), u.clone(), k.clone()))
        .collect();
    Weir::start_in(dir, &llm_config_with(kind, &entries, "")).await
}

async fn emulator(api: ProviderApi) -> Provider {
    Provider::spawn(
        api,
        Options::default().script(Script::RoundTrip {
            command: COMMAND.into(),
        }),
    )
    .await
}

/// The real agents' API clients.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Client {
    /// Claude Code 2.1.x: Anthropic Messages.
    ClaudeCode,
    /// The Codex CLI: OpenAI Responses.
    Codex,
    /// A Chat Completions client (Cursor, aider, the OpenAI SDK).
    ChatApp,
}

/// One answer as the client reads it.
#[derive(Debug)]
struct Answer {
    /// The shell call: its id, and its arguments.
    call: Option<(String, Value)>,
    text: String,
    /// What the client sends back as the assistant's turn.
    replay: Vec<Value>,
}

/// Claude Code's `metadata.user_id`: a JSON string of ~150 characters.
fn claude_user_id() -> String {
    json!({
        "device_id": "5f2c1b7e9a4d4c3e8b1f0a6d2e7c9b4a5f2c1b7e9a4d4c3e8b1f0a6d2e7c9b4a",
        "account_uuid": "",
        "session_id": "0d9a7c42-3b1e-4f6a-9c8d-2e5b7a1f3c64",
    })
    .to_string()
}

/// Claude Code's Bash tool: `command` required, `timeout` and
/// `description` optional (an Anthropic-style schema).
fn bash_tool() -> Value {
    json!({
        "name": "Bash",
        "description": "Executes a given bash command and returns its output.",
        "input_schema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to execute"},
                "timeout": {"type": "number", "description": "Optional timeout in milliseconds"},
                "description": {"type": "string", "description": "What the command does"},
            },
            "required": ["command"],
            "additionalProperties": false,
        },
    })
}

/// An MCP tool whose name is over 64 characters, as Claude Code names
/// them (`mcp__<server>__<tool>`).
fn long_mcp_tool() -> Value {
    json!({
        "name": "mcp__weir-fidelity-documentation-server__search_the_documentation_index",
        "description": "Search the docs",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    })
}

fn claude_code_request(stream: bool, long_tool: bool) -> Value {
    let mut tools = vec![bash_tool()];
    if long_tool {
        tools.push(long_mcp_tool());
    }
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": stream,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328.4f1; cc_entrypoint=sdk-cli; cch=8c1d2;"},
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": format!("Run `{COMMAND}` and tell me what it printed.")},
        ]}],
        "tools": tools,
        "metadata": {"user_id": claude_user_id()},
        "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    })
}

/// Claude Code's quota probe: one token, no tools.
fn claude_code_probe() -> Value {
    json!({
        "model": "claude-haiku-4-5",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "quota"}],
        "metadata": {"user_id": claude_user_id()},
    })
}

const CLAUDE_HEADERS: &[(&str, &str)] = &[
    ("anthropic-version", "2023-06-01"),
    (
        "anthropic-beta",
        "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
    ),
    ("x-api-key", "sk-ant-client"),
    ("user-agent", "claude-cli/2.1.328 (external, sdk-cli)"),
];

/// Codex's shell tool (`command` as an argv, optional `workdir` and
/// `timeout_ms`, sent with `strict: false`) and its freeform apply_patch.
fn codex_tools() -> Value {
    json!([
        {"type": "function", "name": "shell", "description": "Runs a shell command and returns its output.",
         "strict": false,
         "parameters": {"type": "object", "properties": {
             "command": {"type": "array", "items": {"type": "string"}, "description": "The command to execute"},
             "workdir": {"type": "string"},
             "timeout_ms": {"type": "number"},
         }, "required": ["command"], "additionalProperties": false}},
        {"type": "custom", "name": "apply_patch", "description": "Use the `apply_patch` tool to edit files.",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?\nhunk: /(.|\\n)+/\n%import common.LF"}},
        // On every request, as Codex 0.171.0 sends it
        // (tests/fixtures/agents/codex-0.171.0).
        {"type": "web_search", "external_web_access": true, "search_content_types": ["text", "image"]},
    ])
}

fn codex_request(stream: bool) -> Value {
    json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI.",
        "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": format!("Run `{COMMAND}` and tell me what it printed.")},
            ]},
        ],
        "tools": codex_tools(),
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": stream,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199a5c1-7d3e-7b42-9a1f-5c6d8e2f4a10",
        "client_metadata": {"originator": "codex_exec"},
    })
}

const CODEX_HEADERS: &[(&str, &str)] = &[
    ("authorization", "Bearer sk-codex-client"),
    ("originator", "codex_exec"),
    ("session_id", "0199a5c1-7d3e-7b42-9a1f-5c6d8e2f4a10"),
];

fn chat_request(stream: bool) -> Value {
    let mut req = json!({
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": "You are a coding assistant."},
            {"role": "user", "content": format!("Run `{COMMAND}` and tell me what it printed.")},
        ],
        "tools": [{"type": "function", "function": {
            "name": "exec_command", "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        }}],
        "max_completion_tokens": 4096,
        "stream": stream,
    });
    if stream {
        req["stream_options"] = json!({"include_usage": true});
    }
    req
}

const CHAT_HEADERS: &[(&str, &str)] = &[("authorization", "Bearer sk-chat-client")];

impl Client {
    fn path(self) -> &'static str {
        match self {
            Client::ClaudeCode => "/v1/messages?beta=true",
            Client::Codex => "/v1/responses",
            Client::ChatApp => "/v1/chat/completions",
        }
    }

    fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Client::ClaudeCode => CLAUDE_HEADERS,
            Client::Codex => CODEX_HEADERS,
            Client::ChatApp => CHAT_HEADERS,
        }
    }

    fn first(self, stream: bool, long_tool: bool) -> Value {
        match self {
            Client::ClaudeCode => claude_code_request(stream, long_tool),
            Client::Codex => codex_request(stream),
            Client::ChatApp => chat_request(stream),
        }
    }

    /// The answer as the client reads it, checked to be well formed.
    fn read(self, body: &str, stream: bool) -> Answer {
        match (self, stream) {
            (Client::ClaudeCode, false) => claude_answer(&json_of(body)),
            (Client::ClaudeCode, true) => claude_answer(&claude_stream(body)),
            (Client::Codex, false) => codex_answer(json_of(body)["output"].clone()),
            (Client::Codex, true) => codex_answer(codex_stream(body)),
            (Client::ChatApp, false) => chat_answer(&json_of(body)["choices"][0]["message"]),
            (Client::ChatApp, true) => chat_answer(&chat_stream(body)),
        }
    }

    /// The next request: the first one, the answer replayed as the
    /// client replays it, and the tool's `output`.
    fn next(self, first: &Value, answer: &Answer, call_id: &str, output: &str) -> Value {
        let mut next = first.clone();
        match self {
            Client::ClaudeCode => {
                let messages = next["messages"].as_array_mut().expect("messages");
                messages.push(json!({"role": "assistant", "content": answer.replay}));
                messages.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": output},
                ]}));
            }
            Client::Codex => {
                let input = next["input"].as_array_mut().expect("input");
                input.extend(answer.replay.iter().cloned());
                input.push(
                    json!({"type": "function_call_output", "call_id": call_id, "output": output}),
                );
            }
            Client::ChatApp => {
                let messages = next["messages"].as_array_mut().expect("messages");
                messages.extend(answer.replay.iter().cloned());
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
        }
        next
    }
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn claude_answer(message: &Value) -> Answer {
    assert_eq!(message["type"], "message", "{message}");
    assert_eq!(message["role"], "assistant", "{message}");
    assert!(message["stop_reason"].is_string(), "{message}");
    assert!(message["usage"]["output_tokens"].is_u64(), "{message}");
    let content = message["content"].as_array().expect("content").clone();
    let call = content.iter().find(|b| b["type"] == "tool_use").map(|b| {
        (
            b["id"].as_str().expect("id").to_string(),
            b["input"].clone(),
        )
    });
    if call.is_some() {
        assert_eq!(message["stop_reason"], "tool_use", "{message}");
    }
    let text = content
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<String>();
    Answer {
        call,
        text,
        replay: content,
    }
}

/// A Messages stream assembled into its message, as the SDK does.
fn claude_stream(body: &str) -> Value {
    let ev = events(body);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{body}");
    assert_eq!(names.last(), Some(&"message_stop"), "{body}");
    assert!(!names.contains(&"error"), "{body}");
    let mut message = ev[0].1["message"].clone();
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial: Vec<String> = Vec::new();
    for (name, d) in &ev {
        let index = d["index"].as_u64().unwrap_or(0) as usize;
        match name.as_str() {
            "content_block_start" => {
                assert_eq!(index, blocks.len(), "{body}");
                blocks.push(d["content_block"].clone());
                partial.push(String::new());
            }
            "content_block_delta" => {
                let b = &mut blocks[index];
                let delta = &d["delta"];
                match delta["type"].as_str().expect("delta type") {
                    "text_delta" => append(&mut b["text"], &delta["text"]),
                    "thinking_delta" => append(&mut b["thinking"], &delta["thinking"]),
                    "signature_delta" => b["signature"] = delta["signature"].clone(),
                    "citations_delta" => {
                        let mut all = b["citations"].as_array().cloned().unwrap_or_default();
                        all.push(delta["citation"].clone());
                        b["citations"] = json!(all);
                    }
                    "input_json_delta" => {
                        partial[index].push_str(delta["partial_json"].as_str().expect("json"))
                    }
                    other => panic!("unknown delta {other}: {body}"),
                }
            }
            "content_block_stop"
                if matches!(
                    blocks[index]["type"].as_str(),
                    Some("tool_use" | "server_tool_use")
                ) =>
            {
                let input = if partial[index].is_empty() {
                    "{}"
                } else {
                    &partial[index]
                };
                blocks[index]["input"] = json_of(input);
            }
            "message_delta" => {
                message["stop_reason"] = d["delta"]["stop_reason"].clone();
                message["usage"]["output_tokens"] = d["usage"]["output_tokens"].clone();
            }
            _ => {}
        }
    }
    message["content"] = json!(blocks);
    message
}

fn append(to: &mut Value, piece: &Value) {
    let mut s = to.as_str().unwrap_or("").to_string();
    s.push_str(piece.as_str().expect("text"));
    *to = json!(s);
}

fn codex_answer(output: Value) -> Answer {
    let items = output.as_array().expect("output").clone();
    let call = items
        .iter()
        .find(|i| i["type"] == "function_call")
        .map(|i| {
            let args = json_of(i["arguments"].as_str().expect("arguments"));
            (i["call_id"].as_str().expect("call_id").to_string(), args)
        });
    let text = items
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect::<String>();
    Answer {
        call,
        text,
        replay: items.iter().map(codex_replay).collect(),
    }
}

/// An output item as Codex sends it back (openai/codex `ResponseItem`):
/// a `web_search_call` without its id, `output_text` without annotations.
fn codex_replay(item: &Value) -> Value {
    let mut item = item.clone();
    if item["type"] == "web_search_call" {
        item.as_object_mut().map(|m| m.remove("id"));
    }
    let parts = item.get_mut("content").and_then(Value::as_array_mut);
    for part in parts.into_iter().flatten() {
        if part["type"] == "output_text" {
            *part = json!({"type": "output_text", "text": part["text"]});
        }
    }
    item
}

/// A Responses stream read as Codex reads it: numbered events from
/// `response.created` to `response.completed`, the items from
/// `response.output_item.done`.
fn codex_stream(body: &str) -> Value {
    let ev = events(body);
    for (i, (name, d)) in ev.iter().enumerate() {
        assert_eq!(d["sequence_number"], i as u64, "{body}");
        assert_eq!(&d["type"], name, "{body}");
    }
    assert_eq!(ev.first().expect("events").0, "response.created", "{body}");
    let (last, done) = ev.last().expect("events");
    assert_eq!(last, "response.completed", "{body}");
    assert!(
        done["response"]["usage"]["output_tokens"].is_u64(),
        "{body}"
    );
    json!(
        ev.iter()
            .filter(|(n, _)| n == "response.output_item.done")
            .map(|(_, d)| d["item"].clone())
            .collect::<Vec<_>>()
    )
}

fn chat_answer(message: &Value) -> Answer {
    assert_eq!(message["role"], "assistant", "{message}");
    let call = message["tool_calls"][0].as_object().map(|c| {
        let args = json_of(c["function"]["arguments"].as_str().expect("arguments"));
        (c["id"].as_str().expect("id").to_string(), args)
    });
    let mut replay = json!({"role": "assistant", "content": message["content"]});
    if !message["tool_calls"].is_null() {
        replay["tool_calls"] = message["tool_calls"].clone();
    }
    Answer {
        call,
        text: message["content"].as_str().unwrap_or("").to_string(),
        replay: vec![replay],
    }
}

/// A Chat stream assembled into its message, as the SDK does.
fn chat_stream(body: &str) -> Value {
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    let mut content = String::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut finish = Value::Null;
    let mut usage = Value::Null;
    for data in body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk = json_of(data);
        assert!(chunk.get("error").is_none(), "{body}");
        if chunk["usage"].is_object() {
            usage = chunk["usage"].clone();
        }
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str() {
            content.push_str(t);
        }
        for piece in delta["tool_calls"].as_array().into_iter().flatten() {
            let at = piece["index"].as_u64().expect("index") as usize;
            if calls.len() <= at {
                calls.resize(
                    at + 1,
                    json!({"type": "function", "function": {"arguments": ""}}),
                );
            }
            let call = &mut calls[at];
            if piece["id"].is_string() {
                call["id"] = piece["id"].clone();
            }
            if piece["function"]["name"].is_string() {
                call["function"]["name"] = piece["function"]["name"].clone();
            }
            if piece["function"]["arguments"].is_string() {
                append(
                    &mut call["function"]["arguments"],
                    &piece["function"]["arguments"],
                );
            }
        }
    }
    assert!(finish.is_string(), "no finish_reason: {body}");
    assert!(usage["completion_tokens"].is_u64(), "no usage: {body}");
    let mut message = json!({"role": "assistant", "content": if content.is_empty() { Value::Null } else { json!(content) }});
    if !calls.is_empty() {
        assert_eq!(finish, "tool_calls", "{body}");
        message["tool_calls"] = json!(calls);
    }
    message
}

/// Run the shell call's command as the agent would, whichever of the
/// shell tools' argument shapes it came in.
fn run(args: &Value) -> String {
    let mut command = match (&args["command"], &args["cmd"]) {
        (Value::String(c), _) | (_, Value::String(c)) => {
            let mut sh = std::process::Command::new("sh");
            sh.args(["-c", c]);
            sh
        }
        (Value::Array(argv), _) => {
            let argv: Vec<&str> = argv.iter().map(|a| a.as_str().expect("arg")).collect();
            let mut c = std::process::Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        }
        _ => panic!("not a shell call: {args}"),
    };
    let out = command.output().expect("run the command");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Turn 1 (the emulator asks for the command), the command run, turn 2
/// (the emulator quotes its output): every request accepted by every
/// emulator, every answer well formed.
async fn round_trip(client: Client, weir: &Weir, first: Value, ups: &[&Provider]) {
    let stream = first["stream"] == true;
    let (status, _, body) = post(weir, client.path(), &first, client.headers()).await;
    assert_accepted(ups);
    assert_eq!(status, 200, "{body}");
    let answer = client.read(&body, stream);
    let (call_id, args) = answer
        .call
        .as_ref()
        .unwrap_or_else(|| panic!("no shell call: {body}"));
    let output = run(args);
    assert_eq!(output, "weir-fidelity\n");
    let second = client.next(&first, &answer, call_id, &output);
    let (status, _, body) = post(weir, client.path(), &second, client.headers()).await;
    assert_accepted(ups);
    assert_eq!(status, 200, "{body}");
    let answer = client.read(&body, stream);
    assert!(answer.call.is_none(), "{body}");
    assert!(answer.text.contains(PRINTED), "{body}");
}

fn assert_accepted(ups: &[&Provider]) {
    for up in ups {
        up.assert_all_accepted();
    }
}

async fn pair(client: Client, api: ProviderApi, kind: &str, protocol: &str, stream: bool) {
    let up = emulator(api).await;
    let weir = weir_over(kind, &[(&up, protocol)]).await;
    // A tool name over 64 characters where weir translates (Anthropic
    // itself takes none either).
    let long_tool = client == Client::ClaudeCode && api != ProviderApi::Anthropic;
    round_trip(client, &weir, client.first(stream, long_tool), &[&up]).await;
    assert_eq!(up.journal().len(), 2);
}

async fn probe(api: ProviderApi, protocol: &str) {
    let up = emulator(api).await;
    let weir = weir_over("anthropic", &[(&up, protocol)]).await;
    let (status, _, body) = post(&weir, "/v1/messages", &claude_code_probe(), CLAUDE_HEADERS).await;
    up.assert_all_accepted();
    assert_eq!(status, 200, "{body}");
    let answer = claude_answer(&json_of(&body));
    assert!(answer.call.is_none(), "{body}");
}

// ------------------------------------------------- Claude Code on each upstream

#[tokio::test]
async fn claude_code_on_anthropic_streamed() {
    pair(
        Client::ClaudeCode,
        ProviderApi::Anthropic,
        "anthropic",
        "anthropic",
        true,
    )
    .await;
}

#[tokio::test]
async fn claude_code_on_anthropic_whole() {
    pair(
        Client::ClaudeCode,
        ProviderApi::Anthropic,
        "anthropic",
        "anthropic",
        false,
    )
    .await;
}

#[tokio::test]
async fn claude_code_probe_on_anthropic() {
    probe(ProviderApi::Anthropic, "anthropic").await;
}

/// Claude Code's structured output (an optional property included) is
/// taken by a strict Responses API.
#[tokio::test]
async fn claude_code_structured_output_on_responses() {
    let up = emulator(ProviderApi::Responses).await;
    let weir = weir_over("anthropic", &[(&up, "openai_responses")]).await;
    let mut first = Client::ClaudeCode.first(true, false);
    first["output_config"]["format"] = json!({"type": "json_schema", "schema":
        {"type": "object", "properties": {"said": {"type": "string"}}, "additionalProperties": false}});
    round_trip(Client::ClaudeCode, &weir, first, &[&up]).await;
    assert_eq!(
        up.journal()[0].body["text"]["format"]["type"],
        "json_schema"
    );
}

#[tokio::test]
async fn claude_code_on_responses_streamed() {
    pair(
        Client::ClaudeCode,
        ProviderApi::Responses,
        "anthropic",
        "openai_responses",
        true,
    )
    .await;
}

#[tokio::test]
async fn claude_code_on_responses_whole() {
    pair(
        Client::ClaudeCode,
        ProviderApi::Responses,
        "anthropic",
        "openai_responses",
        false,
    )
    .await;
}

#[tokio::test]
async fn claude_code_probe_on_responses() {
    probe(ProviderApi::Responses, "openai_responses").await;
}

#[tokio::test]
async fn claude_code_on_chat_streamed() {
    pair(
        Client::ClaudeCode,
        ProviderApi::Chat,
        "anthropic",
        "openai_chat",
        true,
    )
    .await;
}

#[tokio::test]
async fn claude_code_on_chat_whole() {
    pair(
        Client::ClaudeCode,
        ProviderApi::Chat,
        "anthropic",
        "openai_chat",
        false,
    )
    .await;
}

#[tokio::test]
async fn claude_code_probe_on_chat() {
    probe(ProviderApi::Chat, "openai_chat").await;
}

// ------------------------------------------------- Codex on each upstream

#[tokio::test]
async fn codex_on_responses_streamed() {
    pair(
        Client::Codex,
        ProviderApi::Responses,
        "openai",
        "openai",
        true,
    )
    .await;
}

#[tokio::test]
async fn codex_on_responses_whole() {
    pair(
        Client::Codex,
        ProviderApi::Responses,
        "openai",
        "openai",
        false,
    )
    .await;
}

#[tokio::test]
async fn codex_on_anthropic_streamed() {
    pair(
        Client::Codex,
        ProviderApi::Anthropic,
        "openai",
        "anthropic",
        true,
    )
    .await;
}

/// Codex's `prompt_cache_key` becomes breakpoints on its stable prefix
/// (system, tools, the history before the newest turn), within the API's 4.
#[tokio::test]
async fn codex_on_anthropic_marks_its_prompt_for_caching() {
    let up = emulator(ProviderApi::Anthropic).await;
    let weir = weir_over("openai", &[(&up, "anthropic")]).await;
    round_trip(Client::Codex, &weir, codex_request(true), &[&up]).await;
    let journal = up.journal();
    let marks = |b: &Value| b.to_string().matches("\"cache_control\"").count();
    assert_eq!(marks(&journal[0].body), 2, "{}", journal[0].body);
    assert_eq!(marks(&journal[1].body), 3, "{}", journal[1].body);
    assert!(journal[1].body["system"][0]["cache_control"].is_object());
}

#[tokio::test]
async fn codex_on_anthropic_whole() {
    pair(
        Client::Codex,
        ProviderApi::Anthropic,
        "openai",
        "anthropic",
        false,
    )
    .await;
}

// ------------------------------------------------- A Chat client on Chat

#[tokio::test]
async fn chat_client_on_chat_streamed() {
    pair(Client::ChatApp, ProviderApi::Chat, "openai", "openai", true).await;
}

#[tokio::test]
async fn chat_client_on_chat_whole() {
    pair(
        Client::ChatApp,
        ProviderApi::Chat,
        "openai",
        "openai",
        false,
    )
    .await;
}

/// Newer Claude models' thinking: `{type: "adaptive"}` with
/// `output_config.effort`, as Claude Code sends it for them.
#[tokio::test]
async fn claude_code_with_adaptive_thinking_on_each_upstream() {
    for (api, protocol) in [
        (ProviderApi::Anthropic, "anthropic"),
        (ProviderApi::Responses, "openai_responses"),
        (ProviderApi::Chat, "openai_chat"),
    ] {
        let up = emulator(api).await;
        let weir = weir_over("anthropic", &[(&up, protocol)]).await;
        let mut first = claude_code_request(true, false);
        first["thinking"] = json!({"type": "adaptive"});
        first["output_config"] = json!({"effort": "high"});
        round_trip(Client::ClaudeCode, &weir, first, &[&up]).await;
    }
}

// ------------------------------------------------- A Chat client on Anthropic and Responses, Codex on Chat

#[tokio::test]
async fn chat_client_on_anthropic() {
    for stream in [true, false] {
        pair(
            Client::ChatApp,
            ProviderApi::Anthropic,
            "openai",
            "anthropic",
            stream,
        )
        .await;
    }
}

/// A Chat client asking for reasoning on Claude: the second turn
/// continues a tool call with no thinking block to send back.
#[tokio::test]
async fn chat_client_with_reasoning_on_anthropic() {
    let up = emulator(ProviderApi::Anthropic).await;
    let weir = weir_over("openai", &[(&up, "anthropic")]).await;
    let mut first = Client::ChatApp.first(true, false);
    first["reasoning_effort"] = json!("low");
    round_trip(Client::ChatApp, &weir, first, &[&up]).await;
}

#[tokio::test]
async fn chat_client_on_responses() {
    for stream in [true, false] {
        pair(
            Client::ChatApp,
            ProviderApi::Responses,
            "openai",
            "openai_responses",
            stream,
        )
        .await;
    }
}

#[tokio::test]
async fn codex_on_chat() {
    for stream in [true, false] {
        pair(
            Client::Codex,
            ProviderApi::Chat,
            "openai",
            "openai_chat",
            stream,
        )
        .await;
    }
}

// ------------------------------------------------- Shapes real servers send

async fn claude_code_on_shape(api: ProviderApi, protocol: &str, bend: fn(&mut Shape)) {
    let up = emulator(api).await;
    let mut shape = Shape::default();
    bend(&mut shape);
    up.set_shape(shape);
    let weir = weir_over("anthropic", &[(&up, protocol)]).await;
    round_trip(
        Client::ClaudeCode,
        &weir,
        claude_code_request(true, false),
        &[&up],
    )
    .await;
}

/// A Chat server that streams its reasoning as `reasoning_content`
/// (DeepSeek, Kimi, vLLM).
#[tokio::test]
async fn claude_code_on_a_chat_server_streaming_reasoning_content() {
    claude_code_on_shape(ProviderApi::Chat, "openai_chat", |s| {
        s.chat_reasoning_content = true
    })
    .await;
}

/// A DeepSeek-style server: it shows its reasoning and wants it back with
/// the tool-calling turn.
#[tokio::test]
async fn claude_code_on_a_chat_server_that_wants_its_reasoning_back() {
    claude_code_on_shape(ProviderApi::Chat, "openai_chat", |s| {
        s.chat_reasoning_content = true;
        s.chat_reasoning_required = true;
    })
    .await;
}

/// A Chat server whose tool call's id arrives after its first arguments.
#[tokio::test]
async fn claude_code_on_a_chat_server_sending_tool_ids_late() {
    claude_code_on_shape(ProviderApi::Chat, "openai_chat", |s| {
        s.chat_late_tool_id = true
    })
    .await;
}

/// A Chat server that puts usage on the finishing chunk.
#[tokio::test]
async fn claude_code_on_a_chat_server_with_usage_on_the_finish_chunk() {
    claude_code_on_shape(ProviderApi::Chat, "openai_chat", |s| {
        s.chat_usage_on_finish = true
    })
    .await;
}

/// A Responses server that sends no `output_item.added` and no
/// `content_part.added`.
#[tokio::test]
async fn claude_code_on_a_responses_server_without_added_events() {
    claude_code_on_shape(ProviderApi::Responses, "openai_responses", |s| {
        s.responses_no_added = true
    })
    .await;
}

// ------------------------------------------------- Failover mid-conversation

/// `client` on a route over an Anthropic emulator then a Responses one,
/// Anthropic failing conversation turn `failing` with a 529: the round
/// trip crosses protocols between its turns. Returns (Anthropic,
/// Responses).
async fn failover(
    client: Client,
    kind: &str,
    responses: &str,
    failing: usize,
) -> (Provider, Provider) {
    let claude = emulator(ProviderApi::Anthropic).await;
    let gpt = emulator(ProviderApi::Responses).await;
    claude.fail_turn(failing, Failure::new(529).with_message("Overloaded"));
    let weir = weir_over(kind, &[(&claude, "anthropic"), (&gpt, responses)]).await;
    round_trip(client, &weir, client.first(true, false), &[&claude, &gpt]).await;
    assert_eq!(claude.journal().len(), 2);
    assert_eq!(gpt.journal().len(), 1);
    (claude, gpt)
}

/// Turn 1 served by Anthropic (a signed thinking block), turn 2 by a
/// Responses upstream after Anthropic's 529: the history weir translates
/// carries Anthropic's thinking to a service that cannot verify it.
#[tokio::test]
async fn claude_code_fails_over_from_anthropic_to_responses_mid_conversation() {
    let (_, gpt) = failover(Client::ClaudeCode, "anthropic", "openai_responses", 2).await;
    assert_eq!(gpt.journal()[0].turn, 2);
}

/// Turn 1 served by a Responses upstream while Anthropic is overloaded,
/// turn 2 by Anthropic again: the thinking Claude Code replays was made
/// by weir from OpenAI's reasoning, and must not reach Anthropic as if
/// Anthropic had signed it.
#[tokio::test]
async fn claude_code_fails_over_from_responses_back_to_anthropic_mid_conversation() {
    let (_, gpt) = failover(Client::ClaudeCode, "anthropic", "openai_responses", 1).await;
    assert_eq!(gpt.journal()[0].turn, 1);
}

/// Codex, turn 1 on Anthropic, turn 2 on its own Responses upstream after
/// Anthropic's 529.
#[tokio::test]
async fn codex_fails_over_from_anthropic_to_responses_mid_conversation() {
    let (_, gpt) = failover(Client::Codex, "openai", "openai", 2).await;
    assert_eq!(gpt.journal()[0].turn, 2);
}

// ------------------------------------------------- web search across protocols

const QUERY: &str = "does weir keep serving under overload";

/// Claude Code's WebSearch tool, as it asks Anthropic's server tool: a
/// request offering only `web_search_20250305`.
fn claude_code_search(stream: bool) -> Value {
    let mut req = claude_code_request(stream, false);
    req["messages"] = json!([{"role": "user", "content": [
        {"type": "text", "text": format!("Perform a web search for the query: {QUERY}")},
    ]}]);
    req["tools"] = json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 8,
        "allowed_domains": ["weir.example"],
        "user_location": {"type": "approximate", "city": "Lyon", "country": "FR", "timezone": "Europe/Paris"}}]);
    req
}

fn codex_search(stream: bool) -> Value {
    let mut req = codex_request(stream);
    req["input"] = json!([{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": format!("Search the web: {QUERY}")},
    ]}]);
    req
}

async fn search_emulator(api: ProviderApi) -> Provider {
    Provider::spawn(
        api,
        Options::default().script(Script::Search {
            query: QUERY.into(),
        }),
    )
    .await
}

/// The first answer is a search with its page cited, in the client's own
/// shapes.
fn assert_searched(client: Client, answer: &Answer, body: &str) {
    assert!(answer.call.is_none(), "{body}");
    assert!(answer.text.contains(CITED), "{body}");
    let replay = json!(answer.replay);
    match client {
        Client::ClaudeCode => {
            let used = replay.as_array().expect("blocks").iter();
            let kinds: Vec<&str> = used.filter_map(|b| b["type"].as_str()).collect();
            let at = kinds
                .iter()
                .position(|k| *k == "server_tool_use")
                .expect(body);
            assert_eq!(kinds[at + 1], "web_search_tool_result", "{body}");
            let call = &replay[at];
            assert_eq!(call["name"], "web_search", "{body}");
            assert_eq!(call["input"]["query"], QUERY, "{body}");
            assert_eq!(replay[at + 1]["tool_use_id"], call["id"], "{body}");
            assert_eq!(replay[at + 1]["content"][0]["url"], SEARCH_URL, "{body}");
            let cited = replay
                .as_array()
                .expect("blocks")
                .iter()
                .find(|b| b["text"] == CITED);
            let citation = &cited.expect(body)["citations"][0];
            assert_eq!(citation["type"], "web_search_result_location", "{body}");
            assert_eq!(citation["url"], SEARCH_URL, "{body}");
        }
        Client::Codex => {
            let items = replay.as_array().expect("items");
            let call = items
                .iter()
                .find(|i| i["type"] == "web_search_call")
                .expect(body);
            assert_eq!(call["status"], "completed", "{body}");
            assert_eq!(call["action"]["query"], QUERY, "{body}");
            // The annotation is in the answer, not in what Codex sends back;
            // a stream announces it before the text is done.
            assert!(body.contains("url_citation"), "{body}");
            if body.contains("event: ") {
                assert!(
                    body.contains("response.output_text.annotation.added"),
                    "{body}"
                );
            }
            assert!(body.contains(SEARCH_URL), "{body}");
        }
        Client::ChatApp => unreachable!("Chat clients do not search"),
    }
}

/// Turn 1 searches; turn 2 sends the search back with a new question,
/// as the client replays it, and must be taken by the upstream.
async fn search_round_trip(client: Client, weir: &Weir, first: Value, ups: &[&Provider]) {
    let stream = first["stream"] == true;
    let (status, _, body) = post(weir, client.path(), &first, client.headers()).await;
    assert_accepted(ups);
    assert_eq!(status, 200, "{body}");
    let answer = client.read(&body, stream);
    assert_searched(client, &answer, &body);
    let mut second = first.clone();
    match client {
        Client::ClaudeCode => {
            let messages = second["messages"].as_array_mut().expect("messages");
            messages.push(json!({"role": "assistant", "content": answer.replay}));
            messages.push(json!({"role": "user", "content": "And what does that mean for me?"}));
        }
        _ => {
            let input = second["input"].as_array_mut().expect("input");
            input.extend(answer.replay.iter().cloned());
            input.push(json!({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "And what does that mean for me?"},
            ]}));
        }
    }
    let (status, _, body) = post(weir, client.path(), &second, client.headers()).await;
    assert_accepted(ups);
    assert_eq!(status, 200, "{body}");
    let answer = client.read(&body, stream);
    assert!(answer.text.contains(AFTER_SEARCH), "{body}");
}

async fn search_pair(client: Client, api: ProviderApi, kind: &str, protocol: &str, stream: bool) {
    let up = search_emulator(api).await;
    let weir = weir_over(kind, &[(&up, protocol)]).await;
    let first = match client {
        Client::ClaudeCode => claude_code_search(stream),
        _ => codex_search(stream),
    };
    search_round_trip(client, &weir, first, &[&up]).await;
    assert_eq!(up.journal().len(), 2);
}

#[tokio::test]
async fn claude_code_searches_on_anthropic() {
    for stream in [true, false] {
        search_pair(
            Client::ClaudeCode,
            ProviderApi::Anthropic,
            "anthropic",
            "anthropic",
            stream,
        )
        .await;
    }
}

/// Anthropic's search tool becomes OpenAI's (domains, location,
/// `max_uses` as `max_tool_calls`, the sources asked for); the search
/// comes back as Anthropic's blocks and citations; the second turn sends
/// it as a `web_search_call` item.
#[tokio::test]
async fn claude_code_searches_on_responses_streamed() {
    let up = search_emulator(ProviderApi::Responses).await;
    let weir = weir_over("anthropic", &[(&up, "openai_responses")]).await;
    search_round_trip(Client::ClaudeCode, &weir, claude_code_search(true), &[&up]).await;
    let sent = &up.journal()[0].body;
    assert_eq!(
        sent["tools"],
        json!([{"type": "web_search", "filters": {"allowed_domains": ["weir.example"]},
            "user_location": {"type": "approximate", "city": "Lyon", "country": "FR", "timezone": "Europe/Paris"}}]),
        "{sent}"
    );
    assert_eq!(sent["max_tool_calls"], 8, "{sent}");
    let include = sent["include"].as_array().expect("include");
    assert!(
        include.contains(&json!("web_search_call.action.sources")),
        "{sent}"
    );
    let again = &up.journal()[1].body;
    let call = again["input"]
        .as_array()
        .expect("input")
        .iter()
        .find(|i| i["type"] == "web_search_call");
    assert_eq!(
        call.expect("the search sent back")["action"]["query"],
        QUERY,
        "{again}"
    );
}

#[tokio::test]
async fn claude_code_searches_on_responses_whole() {
    search_pair(
        Client::ClaudeCode,
        ProviderApi::Responses,
        "anthropic",
        "openai_responses",
        false,
    )
    .await;
}

/// A Chat Completions server cannot search: Claude Code's search is
/// refused in Anthropic's shape, saying so, and nothing is sent.
#[tokio::test]
async fn claude_code_search_on_chat_is_refused_in_its_shape() {
    let up = search_emulator(ProviderApi::Chat).await;
    let weir = weir_over("anthropic", &[(&up, "openai_chat")]).await;
    let (status, _, body) = post(
        &weir,
        Client::ClaudeCode.path(),
        &claude_code_search(false),
        CLAUDE_HEADERS,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let error = json_of(&body);
    assert_eq!(error["type"], "error", "{body}");
    assert_eq!(error["error"]["type"], "invalid_request_error", "{body}");
    assert!(body.contains("cannot search the web"), "{body}");
    assert!(up.journal().is_empty());
}

/// ... and with an upstream after it that can search, the request goes
/// there.
#[tokio::test]
async fn claude_code_search_passes_a_chat_server_over_for_one_that_searches() {
    let chat = search_emulator(ProviderApi::Chat).await;
    let gpt = search_emulator(ProviderApi::Responses).await;
    let weir = weir_over(
        "anthropic",
        &[(&chat, "openai_chat"), (&gpt, "openai_responses")],
    )
    .await;
    search_round_trip(
        Client::ClaudeCode,
        &weir,
        claude_code_search(true),
        &[&chat, &gpt],
    )
    .await;
    assert!(chat.journal().is_empty());
    assert_eq!(gpt.journal().len(), 2);
}

#[tokio::test]
async fn codex_searches_on_responses() {
    for stream in [true, false] {
        search_pair(
            Client::Codex,
            ProviderApi::Responses,
            "openai",
            "openai",
            stream,
        )
        .await;
    }
}

/// Codex's `web_search` becomes Anthropic's server tool; Claude's search
/// comes back as a `web_search_call` and `url_citation`s; the second turn
/// (the call replayed without an id, the text without annotations) is
/// taken by Anthropic.
#[tokio::test]
async fn codex_searches_on_anthropic_streamed() {
    let up = search_emulator(ProviderApi::Anthropic).await;
    let weir = weir_over("openai", &[(&up, "anthropic")]).await;
    search_round_trip(Client::Codex, &weir, codex_search(true), &[&up]).await;
    let sent = &up.journal()[0].body;
    let tools = sent["tools"].as_array().expect("tools");
    assert!(
        tools
            .iter()
            .any(|t| t["type"] == "web_search_20250305" && t["name"] == "web_search"),
        "{sent}"
    );
}

#[tokio::test]
async fn codex_searches_on_anthropic_whole() {
    search_pair(
        Client::Codex,
        ProviderApi::Anthropic,
        "openai",
        "anthropic",
        false,
    )
    .await;
}

/// Codex offers its search on every request; on a Chat server, which
/// cannot search, it is left out and Codex works without it.
#[tokio::test]
async fn codex_on_chat_goes_without_its_search() {
    let up = search_emulator(ProviderApi::Chat).await;
    let weir = weir_over("openai", &[(&up, "openai_chat")]).await;
    let (status, _, body) = post(
        &weir,
        Client::Codex.path(),
        &codex_search(true),
        CODEX_HEADERS,
    )
    .await;
    up.assert_all_accepted();
    assert_eq!(status, 200, "{body}");
    let answer = Client::Codex.read(&body, true);
    assert!(answer.text.contains(NO_SEARCH), "{body}");
}

/// Turn 1 searches on a Responses upstream while Anthropic is overloaded;
/// turn 2 goes to Anthropic, which must not get weir's blocks of OpenAI's
/// search as if it had made them.
#[tokio::test]
async fn claude_code_search_fails_over_back_to_anthropic() {
    let claude = search_emulator(ProviderApi::Anthropic).await;
    let gpt = search_emulator(ProviderApi::Responses).await;
    claude.fail_turn(1, Failure::new(529).with_message("Overloaded"));
    let weir = weir_over(
        "anthropic",
        &[(&claude, "anthropic"), (&gpt, "openai_responses")],
    )
    .await;
    search_round_trip(
        Client::ClaudeCode,
        &weir,
        claude_code_search(true),
        &[&claude, &gpt],
    )
    .await;
    assert_eq!(gpt.journal().len(), 1);
    assert_eq!(claude.journal().len(), 2);
}

// ------------------------------------------------- documents on every pair

/// A one-page PDF's first bytes, base64 (what the upstream must receive).
const PDF: &str = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoK";

/// The client's first request with documents in its first user turn, as
/// each client sends them: Anthropic `document` blocks (a base64 PDF, a
/// plain-text source, a PDF by URL), Responses `input_file` parts (inline
/// and by URL), a Chat `file` part.
fn with_documents(client: Client, stream: bool) -> Value {
    let mut first = client.first(stream, false);
    match client {
        Client::ClaudeCode => {
            let content = first["messages"][0]["content"]
                .as_array_mut()
                .expect("blocks");
            content.extend([
                json!({"type": "document", "title": "spec.pdf",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}}),
                json!({"type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "Plain notes."}}),
                json!({"type": "document",
                    "source": {"type": "url", "url": "https://weir.example/spec.pdf"}}),
            ]);
        }
        Client::Codex => {
            let content = first["input"][0]["content"].as_array_mut().expect("parts");
            content.extend([
                json!({"type": "input_file", "filename": "spec.pdf",
                    "file_data": format!("data:application/pdf;base64,{PDF}")}),
                json!({"type": "input_file", "file_url": "https://weir.example/spec.pdf"}),
            ]);
        }
        Client::ChatApp => {
            let text = first["messages"][1]["content"].clone();
            first["messages"][1]["content"] = json!([
                {"type": "text", "text": text},
                {"type": "file", "file": {"filename": "spec.pdf",
                    "file_data": format!("data:application/pdf;base64,{PDF}")}},
            ]);
        }
    }
    first
}

/// Documents through `client` on one upstream, streamed and whole: every
/// request taken, and the PDF delivered (not dropped) on both turns.
async fn documents(client: Client, api: ProviderApi, kind: &str, protocol: &str) {
    for stream in [true, false] {
        let up = emulator(api).await;
        let weir = weir_over(kind, &[(&up, protocol)]).await;
        round_trip(client, &weir, with_documents(client, stream), &[&up]).await;
        for e in up.journal() {
            assert!(e.body.to_string().contains(PDF), "no PDF: {}", e.body);
        }
    }
}

#[tokio::test]
async fn claude_code_documents_on_every_upstream() {
    documents(
        Client::ClaudeCode,
        ProviderApi::Anthropic,
        "anthropic",
        "anthropic",
    )
    .await;
    documents(
        Client::ClaudeCode,
        ProviderApi::Responses,
        "anthropic",
        "openai_responses",
    )
    .await;
    documents(
        Client::ClaudeCode,
        ProviderApi::Chat,
        "anthropic",
        "openai_chat",
    )
    .await;
}

#[tokio::test]
async fn codex_documents_on_every_upstream() {
    documents(Client::Codex, ProviderApi::Responses, "openai", "openai").await;
    documents(Client::Codex, ProviderApi::Anthropic, "openai", "anthropic").await;
    documents(Client::Codex, ProviderApi::Chat, "openai", "openai_chat").await;
}

#[tokio::test]
async fn chat_client_documents_on_every_upstream() {
    documents(Client::ChatApp, ProviderApi::Chat, "openai", "openai_chat").await;
    documents(
        Client::ChatApp,
        ProviderApi::Anthropic,
        "openai",
        "anthropic",
    )
    .await;
    documents(
        Client::ChatApp,
        ProviderApi::Responses,
        "openai",
        "openai_responses",
    )
    .await;
}
