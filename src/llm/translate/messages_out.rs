//! An Anthropic Messages request → an OpenAI Responses or Chat
//! Completions request.

use serde_json::{Map, Value, json};

use super::{ToolNames, TranslateError, search, text_of};
use crate::wire::{anthropic, chat, openai, responses};

/// `thinking.budget_tokens` → a reasoning effort.
fn effort(budget: u64) -> &'static str {
    match budget {
        0..4096 => "low",
        4096..16384 => "medium",
        _ => "high",
    }
}

/// The reasoning effort of a request's thinking: from the budget of
/// `enabled` thinking, or `output_config.effort` for `adaptive` thinking
/// (Anthropic's default effort is high; its `max` is OpenAI's `high`).
fn thinking_effort(v: &Value) -> Option<&'static str> {
    match v["thinking"]["type"].as_str() {
        Some("enabled") => Some(effort(v["thinking"]["budget_tokens"].as_u64().unwrap_or(0))),
        Some("adaptive") => Some(match v["output_config"]["effort"].as_str() {
            Some("low") => "low",
            Some("medium") => "medium",
            _ => "high",
        }),
        _ => None,
    }
}

/// The Responses `reasoning` item a thinking block carries (one weir made
/// from an earlier answer's encrypted reasoning); `None` for any other
/// block, whose signature means nothing to OpenAI.
fn reasoning_item(block: &Value) -> Option<Value> {
    let (id, encrypted) = responses::reasoning_of_signature(block["signature"].as_str()?)?;
    let summary = match block["thinking"].as_str().filter(|t| !t.is_empty()) {
        Some(text) => json!([{"type": "summary_text", "text": text}]),
        None => json!([]),
    };
    Some(json!({"type": "reasoning", "id": id, "summary": summary, "encrypted_content": encrypted}))
}

/// A data URL (or the URL) of an Anthropic image block's source.
fn image_url(block: &Value) -> Option<String> {
    let src = &block["source"];
    match src["type"].as_str()? {
        "base64" => Some(format!(
            "data:{};base64,{}",
            src["media_type"].as_str()?,
            src["data"].as_str()?
        )),
        "url" => src["url"].as_str().map(str::to_string),
        _ => None,
    }
}

/// The text of a tool result (blocks or a string), marked when it is an
/// error (neither OpenAI API has an error flag on tool output).
fn tool_result_text(block: &Value) -> String {
    let text = text_of(&block["content"]);
    if block["is_error"] == true {
        format!("Error: {text}")
    } else {
        text
    }
}

/// The OpenAI part for an Anthropic `image` or `document` block, or None
/// when it has none (a URL document on Chat, which takes files inline
/// only; an unknown source). A plain-text document is its text; a PDF is
/// a file part with a data URL and a filename (OpenAI's file inputs:
/// platform.openai.com/docs/guides/pdf-files — `input_file` with
/// `file_data`+`filename` or `file_url` on Responses, a `file` part with
/// `file.file_data`+`file.filename` on Chat).
fn media_part(block: &Value, api: Api) -> Option<Value> {
    match block["type"].as_str()? {
        "image" => {
            let url = image_url(block)?;
            Some(match api {
                Api::Responses => json!({"type": "input_image", "image_url": url}),
                Api::Chat => json!({"type": "image_url", "image_url": {"url": url}}),
            })
        }
        "document" => {
            let src = &block["source"];
            let text_kind = match api {
                Api::Responses => "input_text",
                Api::Chat => "text",
            };
            match src["type"].as_str()? {
                "text" => Some(json!({"type": text_kind, "text": src["data"].as_str()?})),
                "content" => {
                    let text = text_of(&src["content"]);
                    Some(json!({"type": text_kind, "text": text}))
                }
                "base64" => {
                    let data = format!(
                        "data:{};base64,{}",
                        src["media_type"].as_str()?,
                        src["data"].as_str()?
                    );
                    let filename = block["title"].as_str().unwrap_or("document.pdf");
                    Some(match api {
                        Api::Responses => {
                            json!({"type": "input_file", "filename": filename, "file_data": data})
                        }
                        Api::Chat => {
                            json!({"type": "file", "file": {"filename": filename, "file_data": data}})
                        }
                    })
                }
                "url" if api == Api::Responses => {
                    Some(json!({"type": "input_file", "file_url": src["url"].as_str()?}))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The images and documents of a tool result, as `api`'s parts.
fn tool_result_media(block: &Value, api: Api) -> Vec<Value> {
    block["content"]
        .as_array()
        .map(|parts| parts.iter().filter_map(|p| media_part(p, api)).collect())
        .unwrap_or_default()
}

/// Content blocks of a message, whether given as a string or a list.
fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// Which OpenAI API a request is built for: they name a function the
/// same way but nest it differently.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    Responses,
    Chat,
}

/// `tools` (`input_schema` → function `parameters`; Anthropic's web
/// search → Responses' `web_search`, its `max_uses` → `max_tool_calls`)
/// and `tool_choice` (auto / any / tool / none;
/// `disable_parallel_tool_use`). A Chat Completions server cannot search:
/// a request that offers the search is not for it.
fn tools_and_choice(
    v: &Value,
    out: &mut Map<String, Value>,
    api: Api,
    names: &ToolNames,
) -> Result<(), TranslateError> {
    let function = |name: &Value, mut fields: Map<String, Value>| {
        fields.insert("name".into(), name.clone());
        match api {
            Api::Responses => {
                fields.insert("type".into(), "function".into());
                Value::Object(fields)
            }
            Api::Chat => json!({"type": "function", "function": fields}),
        }
    };
    let mut tools: Vec<Value> = Vec::new();
    for t in v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| anthropic::is_web_search_tool(t))
    {
        if api == Api::Chat {
            return Err(TranslateError::Unserved(
                "this upstream (OpenAI Chat Completions) cannot search the web: \
                 the request's `web_search` tool needs an Anthropic or OpenAI Responses upstream"
                    .into(),
            ));
        }
        let (tool, max_uses) = search::to_responses_tool(t)?;
        tools.push(tool);
        if let Some(n) = max_uses {
            out.insert("max_tool_calls".into(), n.into());
        }
    }
    let functions = v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t.get("input_schema").is_some())
        .map(|t| {
            let mut fields = Map::new();
            fields.insert(
                "description".into(),
                t["description"].as_str().unwrap_or("").into(),
            );
            fields.insert("parameters".into(), t["input_schema"].clone());
            if api == Api::Responses {
                // Responses makes function tools strict by default, which
                // turns optional properties into required ones; an
                // Anthropic schema is not written for that.
                fields.insert("strict".into(), false.into());
            }
            function(&names.short(&t["name"]), fields)
        });
    tools.extend(functions);
    if !tools.is_empty() {
        out.insert("tools".into(), tools.into());
    }
    if let Some(choice) = v.get("tool_choice").filter(|c| c.is_object()) {
        let mapped = match choice["type"].as_str() {
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => function(&names.short(&choice["name"]), Map::new()),
            _ => json!("auto"),
        };
        out.insert("tool_choice".into(), mapped);
        if choice["disable_parallel_tool_use"] == true {
            out.insert("parallel_tool_calls".into(), false.into());
        }
    }
    Ok(())
}

fn copy(from: &Value, key: &str, to: &mut Map<String, Value>, as_key: &str) {
    if let Some(x) = from.get(key).filter(|x| !x.is_null()) {
        to.insert(as_key.into(), x.clone());
    }
}

/// Messages → Responses.
pub fn to_responses(v: &Value, model: &str, names: &ToolNames) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let system = anthropic::system_text(&v["system"]);
    if !system.is_empty() {
        out.insert("instructions".into(), system.into());
    }
    let mut input = Vec::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        let mut parts = Vec::new();
        let flush = |parts: &mut Vec<Value>, input: &mut Vec<Value>| {
            if !parts.is_empty() {
                input.push(
                    json!({"type": "message", "role": role, "content": std::mem::take(parts)}),
                );
            }
        };
        for b in blocks(m) {
            match b["type"].as_str() {
                Some("text") => {
                    let kind = if role == "assistant" {
                        "output_text"
                    } else {
                        "input_text"
                    };
                    parts.push(json!({"type": kind, "text": b["text"]}));
                }
                Some("image" | "document") => match media_part(&b, Api::Responses) {
                    Some(p) => parts.push(p),
                    None => tracing::debug!("image or document without an equivalent dropped"),
                },
                Some("tool_use") => {
                    flush(&mut parts, &mut input);
                    input.push(json!({
                        "type": "function_call",
                        "call_id": b["id"],
                        "name": names.short(&b["name"]),
                        "arguments": b["input"].to_string(),
                    }));
                }
                // The search the model made (its results and the text's
                // citations carry Anthropic's encryption, which OpenAI
                // cannot read: they stay behind).
                Some("server_tool_use") => {
                    if let Some(call) = search::call_of_block(&b) {
                        flush(&mut parts, &mut input);
                        input.push(call);
                    }
                }
                Some("tool_result") => {
                    flush(&mut parts, &mut input);
                    let text = tool_result_text(&b);
                    let media = tool_result_media(&b, Api::Responses);
                    let output = if media.is_empty() {
                        Value::String(text)
                    } else {
                        let mut o = vec![json!({"type": "input_text", "text": text})];
                        o.extend(media);
                        Value::Array(o)
                    };
                    input.push(json!({
                        "type": "function_call_output",
                        "call_id": b["tool_use_id"],
                        "output": output,
                    }));
                }
                // Reasoning an OpenAI upstream gave goes back where it was
                // (before the calls it led to); other thinking carries
                // signatures no other API can check; the rest has no
                // equivalent.
                Some("thinking") if role == "assistant" => {
                    if let Some(item) = reasoning_item(&b) {
                        flush(&mut parts, &mut input);
                        input.push(item);
                    }
                }
                other => tracing::debug!(block = ?other, "content block dropped in translation"),
            }
        }
        flush(&mut parts, &mut input);
    }
    out.insert("input".into(), input.into());
    tools_and_choice(v, &mut out, Api::Responses, names)?;
    if let Some(n) = v["max_tokens"].as_u64() {
        out.insert(
            "max_output_tokens".into(),
            n.max(responses::MIN_MAX_OUTPUT_TOKENS).into(),
        );
    }
    copy(v, "temperature", &mut out, "temperature");
    copy(v, "top_p", &mut out, "top_p");
    copy(v, "stream", &mut out, "stream");
    if v.get("stop_sequences").is_some() {
        tracing::debug!("stop_sequences dropped: the Responses API has none");
    }
    if let Some(user) = v["metadata"]["user_id"].as_str() {
        out.insert("user".into(), openai::user(user).into());
    }
    let mut include = Vec::new();
    if let Some(e) = thinking_effort(v) {
        out.insert("reasoning".into(), json!({"effort": e, "summary": "auto"}));
        // The reasoning comes back encrypted, carried in the thinking
        // block's signature to the next turn.
        include.push(responses::INCLUDE_ENCRYPTED_REASONING);
    }
    let searches = v["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(anthropic::is_web_search_tool));
    if searches {
        // The pages found, which the client gets as the search's results.
        include.push(responses::INCLUDE_SEARCH_SOURCES);
    }
    if !include.is_empty() {
        out.insert("include".into(), json!(include));
    }
    if let Some(schema) = anthropic::output_schema(v) {
        out.insert("text".into(), responses::text_format(schema));
    }
    // Stateless, as an Anthropic client expects: nothing kept upstream.
    out.insert("store".into(), false.into());
    Ok(Value::Object(out))
}

/// Messages → Chat Completions.
pub fn to_chat(v: &Value, model: &str, names: &ToolNames) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let mut messages = Vec::new();
    let system = anthropic::system_text(&v["system"]);
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in v["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        let mut parts: Vec<Value> = Vec::new();
        let mut tool_calls = Vec::new();
        // Tool results become `tool` messages, which must directly follow
        // the assistant message that called the tools.
        let mut tool_messages = Vec::new();
        let mut tool_images = Vec::new();
        let mut reasoning = Vec::new();
        for b in blocks(m) {
            match b["type"].as_str() {
                Some("text") => parts.push(json!({"type": "text", "text": b["text"]})),
                // What a Chat server reasoned goes back to it; no other
                // thinking means anything to it.
                Some("thinking") if b["signature"] == chat::REASONING_SIGNATURE => {
                    if let Some(t) = b["thinking"].as_str() {
                        reasoning.push(t.to_string());
                    }
                }
                Some("image" | "document") => match media_part(&b, Api::Chat) {
                    Some(p) => parts.push(p),
                    None => tracing::debug!("image or document without an equivalent dropped"),
                },
                Some("tool_use") => tool_calls.push(json!({
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": names.short(&b["name"]), "arguments": b["input"].to_string()},
                })),
                Some("tool_result") => {
                    tool_messages.push(json!({
                        "role": "tool",
                        "tool_call_id": b["tool_use_id"],
                        "content": tool_result_text(&b),
                    }));
                    tool_images.extend(tool_result_media(&b, Api::Chat));
                }
                other => tracing::debug!(block = ?other, "content block dropped in translation"),
            }
        }
        messages.extend(tool_messages);
        if !tool_images.is_empty() {
            // A tool message holds text only: its images and files follow
            // as the user's.
            messages.push(json!({"role": "user", "content": tool_images}));
        }
        if role == "assistant" {
            let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { text.join("").into() }});
            if !tool_calls.is_empty() {
                msg["tool_calls"] = tool_calls.into();
            }
            if !reasoning.is_empty() {
                msg["reasoning_content"] = reasoning.concat().into();
            }
            if !msg["content"].is_null() || msg.get("tool_calls").is_some() {
                messages.push(msg);
            }
        } else if !parts.is_empty() {
            let all_text = parts.iter().all(|p| p["type"] == "text");
            let content = if all_text {
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("")
                    .into()
            } else {
                Value::Array(parts)
            };
            // Claude Code's per-turn instructions (a `system` turn, under
            // its beta) stay instructions, not words of the user's.
            let role = if role == "system" { "system" } else { "user" };
            messages.push(json!({"role": role, "content": content}));
        }
    }
    out.insert("messages".into(), messages.into());
    tools_and_choice(v, &mut out, Api::Chat, names)?;
    copy(v, "max_tokens", &mut out, "max_completion_tokens");
    copy(v, "temperature", &mut out, "temperature");
    copy(v, "top_p", &mut out, "top_p");
    copy(v, "stop_sequences", &mut out, "stop");
    if v["stream"] == true {
        out.insert("stream".into(), true.into());
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(user) = v["metadata"]["user_id"].as_str() {
        out.insert("user".into(), openai::user(user).into());
    }
    if let Some(e) = thinking_effort(v) {
        out.insert("reasoning_effort".into(), e.into());
    }
    if let Some(schema) = anthropic::output_schema(v) {
        out.insert("response_format".into(), chat::response_format(schema));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let responses =
            to_responses(&claude_code, "gpt-5", &ToolNames::default()).expect("translated");
        let chat = to_chat(&claude_code, "llama-3", &ToolNames::default()).expect("translated");
        for out in [&responses, &chat] {
            let user = out["user"].as_str().expect("user");
            assert!(user.len() <= 64, "{user}");
            assert_eq!(user, crate::wire::openai::user(&long_id));
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
        let url = json!({"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}});
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
}
