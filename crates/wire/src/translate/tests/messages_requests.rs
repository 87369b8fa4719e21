use serde_json::{Value, json};

use crate::translate::ToolNames;
use crate::translate::messages_chat::request as to_chat;
use crate::translate::messages_responses::request as to_responses;
use crate::{chat, responses};

#[test]
fn a_system_turn_among_the_messages_stays_a_system_message_on_chat() {
    let r = json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "go"},
        {"role": "system", "content": [{"type": "text", "text": "Be brief from here on."}]},
        {"role": "user", "content": "and?"},
    ]});
    let out = to_chat(&r, "m", &ToolNames::default()).expect("translated");
    assert_eq!(
        out["messages"][1],
        json!({"role": "system", "content": "Be brief from here on."})
    );
}

/// Every block type and tool shape Claude Code sends.
fn request() -> Value {
    json!({
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Use tools."}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this image?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "no such file"}], "is_error": true},
                {"type": "text", "text": "Try b.txt"},
            ]},
        ],
        "tools": [{"name": "read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "temperature": 0.2,
        "stop_sequences": ["END"],
        "stream": true,
        "metadata": {"user_id": "u-1"},
        "thinking": {"type": "enabled", "budget_tokens": 8000},
        "top_k": 5,
    })
}

#[test]
fn messages_to_responses_golden() {
    let out = to_responses(&request(), "gpt-5", &ToolNames::default()).expect("translated");
    assert_eq!(
        out,
        json!({
            "model": "gpt-5",
            "instructions": "You are terse.\nUse tools.",
            "input": [
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "What is in this image?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBOR"},
                    {"type": "input_image", "image_url": "https://example.com/a.png"},
                ]},
                {"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": "Let me look."},
                ]},
                {"type": "function_call", "call_id": "toolu_1", "name": "read", "arguments": "{\"path\":\"a.txt\"}"},
                {"type": "function_call_output", "call_id": "toolu_1", "output": "Error: no such file"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Try b.txt"}]},
            ],
            "tools": [{"type": "function", "name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": false}],
            "tool_choice": "required",
            "parallel_tool_calls": false,
            "max_output_tokens": 1024,
            "temperature": 0.2,
            "stream": true,
            "user": "u-1",
            "reasoning": {"effort": "medium", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "store": false,
        })
    );
}

/// Claude Code's first system block carries a per-request nonce; at the
/// front of `instructions` or the system message it would defeat the
/// upstream's prefix cache on every request.
#[test]
fn the_billing_block_never_reaches_another_vendor() {
    let mut v = request();
    v["system"] = json!([
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328; cc_entrypoint=sdk-cli; cch=8f3a1;"},
        {"type": "text", "text": "You are terse."},
    ]);
    let responses = to_responses(&v, "gpt-5", &ToolNames::default()).expect("translated");
    assert_eq!(responses["instructions"], "You are terse.");
    let chat = to_chat(&v, "llama-3", &ToolNames::default()).expect("translated");
    assert_eq!(
        chat["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
}

/// What OpenAI refuses (LLM-PROTOCOLS §6): a `user` over 64 characters
/// (Claude Code's `metadata.user_id` is ~150), `max_output_tokens`
/// under 16 (Claude Code's quota probe sends `max_tokens: 1`).
#[test]
fn requests_keep_within_what_openai_accepts() {
    let mut claude_code = request();
    let long_id = format!(
        r#"{{"device_id":"{}","account_uuid":"{}","session_id":"{}"}}"#,
        "d".repeat(64),
        "a".repeat(36),
        "s".repeat(36)
    );
    claude_code["metadata"]["user_id"] = long_id.clone().into();
    claude_code["max_tokens"] = 1.into();
    let responses = to_responses(&claude_code, "gpt-5", &ToolNames::default()).expect("translated");
    let chat = to_chat(&claude_code, "llama-3", &ToolNames::default()).expect("translated");
    for out in [&responses, &chat] {
        let user = out["user"].as_str().expect("user");
        assert!(user.len() <= 64, "{user}");
        assert_eq!(user, crate::openai::user(&long_id));
    }
    assert_eq!(responses["max_output_tokens"], 16);
    assert_eq!(
        responses["tool_choice"], "required",
        "strict is a tool's, never tool_choice's"
    );
    let mut named = request();
    named["tool_choice"] = json!({"type": "tool", "name": "read"});
    let out = to_responses(&named, "gpt-5", &ToolNames::default()).expect("translated");
    assert_eq!(
        out["tool_choice"],
        json!({"type": "function", "name": "read"})
    );
}

#[test]
fn messages_to_chat_golden() {
    let out = to_chat(&request(), "llama-3", &ToolNames::default()).expect("translated");
    assert_eq!(
        out,
        json!({
            "model": "llama-3",
            "messages": [
                {"role": "system", "content": "You are terse.\nUse tools."},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in this image?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ]},
                {"role": "assistant", "content": "Let me look.", "tool_calls": [
                    {"id": "toolu_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: no such file"},
                {"role": "user", "content": "Try b.txt"},
            ],
            "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
            "tool_choice": "required",
            "parallel_tool_calls": false,
            "max_completion_tokens": 1024,
            "temperature": 0.2,
            "stop": ["END"],
            "stream": true,
            "stream_options": {"include_usage": true},
            "user": "u-1",
            "reasoning_effort": "medium",
        })
    );
}

#[test]
fn tool_choice_and_thinking_budgets_map() {
    let mut r = request();
    r["tool_choice"] = json!({"type": "tool", "name": "read"});
    r["thinking"]["budget_tokens"] = 1024.into();
    let out = to_responses(&r, "m", &ToolNames::default()).expect("translated");
    assert_eq!(
        out["tool_choice"],
        json!({"type": "function", "name": "read"})
    );
    assert_eq!(out["reasoning"]["effort"], "low");
    r["tool_choice"] = json!({"type": "none"});
    r["thinking"] = json!({"type": "disabled"});
    let out = to_chat(&r, "m", &ToolNames::default()).expect("translated");
    assert_eq!(out["tool_choice"], "none");
    assert!(out.get("reasoning_effort").is_none());
    r["thinking"] = json!({"type": "enabled", "budget_tokens": 32000});
    assert_eq!(
        to_chat(&r, "m", &ToolNames::default()).expect("translated")["reasoning_effort"],
        "high"
    );
}

#[test]
fn a_tool_result_with_an_image_keeps_it() {
    let r = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "text", "text": "screenshot"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAA"}},
        ]},
    ]}]});
    let out = to_responses(&r, "m", &ToolNames::default()).expect("translated");
    assert_eq!(
        out["input"][0]["output"],
        json!([{"type": "input_text", "text": "screenshot"}, {"type": "input_image", "image_url": "data:image/jpeg;base64,AAA"}])
    );
    let out = to_chat(&r, "m", &ToolNames::default()).expect("translated");
    assert_eq!(out["messages"][0]["content"], "screenshot");
    assert_eq!(
        out["messages"][1],
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAA"}}]})
    );
}

#[test]
fn documents_become_file_inputs() {
    let pdf = json!({"type": "document", "title": "spec.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0"}});
    let url =
        json!({"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}});
    let txt = json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain words"}});
    let r = json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [pdf, url, txt]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "here"}, pdf]}]},
    ]});
    let out = to_responses(&r, "m", &ToolNames::default()).expect("translated");
    assert_eq!(
        out["input"][0]["content"],
        json!([
            {"type": "input_file", "filename": "spec.pdf", "file_data": "data:application/pdf;base64,JVBERi0"},
            {"type": "input_file", "file_url": "https://example.com/a.pdf"},
            {"type": "input_text", "text": "plain words"},
        ])
    );
    assert_eq!(
        out["input"][2]["output"],
        json!([
            {"type": "input_text", "text": "here"},
            {"type": "input_file", "filename": "spec.pdf", "file_data": "data:application/pdf;base64,JVBERi0"},
        ])
    );
    let out = to_chat(&r, "m", &ToolNames::default()).expect("translated");
    let file = json!({"type": "file", "file": {"filename": "spec.pdf", "file_data": "data:application/pdf;base64,JVBERi0"}});
    // Chat takes no file by URL: that one alone is left out.
    assert_eq!(
        out["messages"][0]["content"],
        json!([file, {"type": "text", "text": "plain words"}])
    );
    assert_eq!(out["messages"][2]["content"], "here");
    assert_eq!(
        out["messages"][3],
        json!({"role": "user", "content": [file]})
    );
}

#[test]
fn structured_output_maps_to_text_format_and_response_format() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false});
    for r in [
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "output_config": {"format": {"type": "json_schema", "schema": schema}}}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "output_format": {"type": "json_schema", "schema": schema}}),
    ] {
        let out = to_responses(&r, "m", &ToolNames::default()).expect("translated");
        assert_eq!(
            out["text"],
            json!({"format": {"type": "json_schema", "name": "output", "schema": schema, "strict": false}})
        );
        let out = to_chat(&r, "m", &ToolNames::default()).expect("translated");
        assert_eq!(
            out["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": false}})
        );
    }
}

/// A thinking block carrying a Responses reasoning item goes back as
/// that item, where it was (before the call it led to); thinking that
/// only Anthropic (or nobody) can check is left out, and only a Chat
/// server's own reasoning goes back to a Chat server.
#[test]
fn reasoning_goes_back_to_the_upstream_that_gave_it() {
    let sig = responses::reasoning_signature("rs_7", "gAAAAB.enc");
    let r = json!({"model": "m", "max_tokens": 100, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should list.", "signature": sig},
            {"type": "thinking", "thinking": "signed by Anthropic", "signature": "EqQBCkYIBxgCKkA"},
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
            {"type": "thinking", "thinking": "from DeepSeek", "signature": chat::REASONING_SIGNATURE},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
    ]});
    let out = to_responses(&r, "gpt-5", &ToolNames::default()).expect("translated");
    assert_eq!(
        out["input"][1],
        json!({"type": "reasoning", "id": "rs_7", "summary": [{"type": "summary_text", "text": "I should list."}], "encrypted_content": "gAAAAB.enc"})
    );
    assert_eq!(out["input"][2]["type"], "message");
    assert_eq!(out["input"][3]["type"], "function_call");
    assert_eq!(out["input"].as_array().map(Vec::len), Some(5), "{out}");
    let out = to_chat(&r, "deepseek-reasoner", &ToolNames::default()).expect("translated");
    assert_eq!(out["messages"][1]["reasoning_content"], "from DeepSeek");
    assert_eq!(out["messages"][1]["tool_calls"][0]["id"], "t1");
}

/// Adaptive thinking's effort is OpenAI's reasoning effort; thinking
/// asks for the reasoning back encrypted, with nothing stored.
#[test]
fn adaptive_thinking_maps_to_an_effort() {
    let mut r = json!({"model": "m", "max_tokens": 100, "messages": [],
        "thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}});
    let out = to_responses(&r, "gpt-5", &ToolNames::default()).expect("translated");
    assert_eq!(out["reasoning"]["effort"], "low");
    assert_eq!(out["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(out["store"], false);
    r["output_config"]["effort"] = "max".into();
    assert_eq!(
        to_chat(&r, "m", &ToolNames::default()).expect("translated")["reasoning_effort"],
        "high"
    );
    r["thinking"] = json!({"type": "disabled"});
    let out = to_responses(&r, "gpt-5", &ToolNames::default()).expect("translated");
    assert!(out.get("include").is_none() && out.get("reasoning").is_none());
}
