//! Claude Code's Messages request → a Chat Completions request.

use serde_json::{Map, Value, json};

use crate::anthropic::{self, block};
use crate::translate::shared::blocks::{
    OpenAiApi, blocks, copy, media_part, thinking_effort, tool_result_media, tool_result_text,
    tools_and_choice,
};
use crate::translate::{ToolNames, TranslateError};
use crate::{chat, openai, type_of};

/// Messages → Chat Completions.
pub(in crate::translate) fn request(
    v: &Value,
    model: &str,
    names: &ToolNames,
) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let mut messages = Vec::new();
    let system = anthropic::system_text(&v["system"]);
    if !system.is_empty() {
        messages.push(json!({"role": chat::role::SYSTEM, "content": system}));
    }
    for m in v["messages"].as_array().into_iter().flatten() {
        message(m, names, &mut messages);
    }
    out.insert("messages".into(), messages.into());
    tools_and_choice(v, &mut out, OpenAiApi::Chat, names)?;
    options(v, &mut out);
    Ok(Value::Object(out))
}

/// One message → its Chat messages: the tool results it gives first (as
/// `tool` messages, their media as the user's), then its own turn.
fn message(m: &Value, names: &ToolNames, messages: &mut Vec<Value>) {
    let role = m["role"].as_str().unwrap_or(anthropic::role::USER);
    let mut parts: Vec<Value> = Vec::new();
    let mut tool_calls = Vec::new();
    // Tool results become `tool` messages, which must directly follow
    // the assistant message that called the tools.
    let mut tool_messages = Vec::new();
    let mut tool_images = Vec::new();
    let mut reasoning = Vec::new();
    for b in blocks(m) {
        match type_of(&b) {
            Some(block::TEXT) => parts.push(json!({"type": chat::part::TEXT, "text": b["text"]})),
            // What a Chat server reasoned goes back to it; no other
            // thinking means anything to it.
            Some(block::THINKING) if b["signature"] == chat::REASONING_SIGNATURE => {
                if let Some(t) = b["thinking"].as_str() {
                    reasoning.push(t.to_string());
                }
            }
            Some(block::IMAGE | block::DOCUMENT) => match media_part(&b, OpenAiApi::Chat) {
                Some(p) => parts.push(p),
                None => tracing::debug!("image or document without an equivalent dropped"),
            },
            Some(block::TOOL_USE) => tool_calls.push(json!({
                "id": b["id"],
                "type": chat::FUNCTION,
                "function": {"name": names.short(&b["name"]), "arguments": b["input"].to_string()},
            })),
            Some(block::TOOL_RESULT) => {
                tool_messages.push(json!({
                    "role": chat::role::TOOL,
                    "tool_call_id": b["tool_use_id"],
                    "content": tool_result_text(&b),
                }));
                tool_images.extend(tool_result_media(&b, OpenAiApi::Chat));
            }
            other => tracing::debug!(block = ?other, "content block dropped in translation"),
        }
    }
    messages.extend(tool_messages);
    if !tool_images.is_empty() {
        // A tool message holds text only: its images and files follow
        // as the user's.
        messages.push(json!({"role": chat::role::USER, "content": tool_images}));
    }
    push_turn(role, parts, tool_calls, reasoning, messages);
}

/// A message's own turn: an assistant's text, calls and reasoning, or a
/// user's (or system turn's) content, as one Chat message.
fn push_turn(
    role: &str,
    parts: Vec<Value>,
    tool_calls: Vec<Value>,
    reasoning: Vec<String>,
    messages: &mut Vec<Value>,
) {
    if role == anthropic::role::ASSISTANT {
        let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        let mut msg = json!({"role": chat::role::ASSISTANT, "content": if text.is_empty() { Value::Null } else { text.join("").into() }});
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
        let all_text = parts.iter().all(|p| type_of(p) == Some(chat::part::TEXT));
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
        let role = if role == chat::role::SYSTEM {
            chat::role::SYSTEM
        } else {
            chat::role::USER
        };
        messages.push(json!({"role": role, "content": content}));
    }
}

/// The limit, sampling, stop sequences, stream, user, reasoning effort
/// and the output format.
fn options(v: &Value, out: &mut Map<String, Value>) {
    copy(v, "max_tokens", out, "max_completion_tokens");
    copy(v, "temperature", out, "temperature");
    copy(v, "top_p", out, "top_p");
    copy(v, "stop_sequences", out, "stop");
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
}
