//! A Chat Completions client (Cursor, Cline, aider, every OpenAI SDK
//! user) on an Anthropic upstream: a Chat Completions request → a
//! Messages request, and the Messages answer → a chat completion, whole or
//! as `chat.completion.chunk`s ended by `data: [DONE]`.
//!
//! This is also the Chat client's half of Chat → Responses, which goes
//! through Messages (see `shared::compose`).

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::anthropic::{self, block, stop, tool_choice};
use crate::chat::{self, finish, part};
use crate::translate::TranslateError;
use crate::translate::shared::blocks::{
    DEFAULT_MAX_TOKENS, budget, document_block, image_block, push, text_of,
};
use crate::translate::shared::errors;
use crate::{Usage, openai, sse, type_of};

/// A Chat Completions `finish_reason` for an Anthropic `stop_reason`.
fn finish_reason(stop_reason: Option<&str>) -> &'static str {
    match stop_reason {
        Some(stop::MAX_TOKENS | stop::MODEL_CONTEXT_WINDOW_EXCEEDED) => finish::LENGTH,
        Some(stop::TOOL_USE) => finish::TOOL_CALLS,
        Some(stop::REFUSAL) => finish::CONTENT_FILTER,
        _ => finish::STOP,
    }
}

/// Content parts of a user or tool message → Anthropic blocks (text,
/// images, files as documents; audio has no equivalent here). Empty text
/// is left out: Anthropic refuses an empty text block.
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![json!({"type": block::TEXT, "text": s})],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match type_of(p) {
                Some(part::TEXT) => p["text"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(|t| json!({"type": block::TEXT, "text": t})),
                Some(part::IMAGE_URL) => p["image_url"]["url"]
                    .as_str()
                    .or(p["image_url"].as_str())
                    .map(image_block),
                Some(part::FILE) => document_block(
                    p["file"]["file_data"].as_str(),
                    p["file"]["filename"].as_str(),
                    None,
                ),
                other => {
                    tracing::debug!(part = ?other, "content part dropped in translation");
                    None
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Chat Completions → Messages.
pub(in crate::translate) fn request(v: &Value, model: &str) -> Result<Value, TranslateError> {
    if v["n"].as_u64().is_some_and(|n| n > 1) {
        return Err(TranslateError::Invalid(
            "`n` above 1 cannot be translated: the upstream answers one choice".into(),
        ));
    }
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let Some(items) = v["messages"].as_array() else {
        return Err(TranslateError::Invalid("`messages` must be a list".into()));
    };
    let (system, messages) = system_and_messages(items);
    if !system.is_empty() {
        out.insert("system".into(), system.join("\n\n").into());
    }
    out.insert("messages".into(), messages.into());
    let tools = tools(v);
    let has_tools = !tools.is_empty();
    if has_tools {
        out.insert("tools".into(), tools.into());
        if let Some(c) = tool_choice(v) {
            out.insert("tool_choice".into(), c);
        }
    }
    limits_and_sampling(v, items, &mut out);
    let stop: Vec<Value> = match &v["stop"] {
        Value::String(s) => vec![s.as_str().into()],
        Value::Array(a) => a.iter().filter(|s| s.is_string()).cloned().collect(),
        _ => Vec::new(),
    };
    if !stop.is_empty() {
        out.insert("stop_sequences".into(), stop.into());
    }
    if v["stream"] == true {
        out.insert("stream".into(), true.into());
    }
    if let Some(user) = v["user"].as_str().or(v["safety_identifier"].as_str()) {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    if let Some(schema) = chat::output_schema(v) {
        out.insert(
            "output_config".into(),
            json!({"format": anthropic::output_format(schema)}),
        );
    } else if v
        .get("response_format")
        .is_some_and(|f| f["type"] != chat::format::TEXT)
    {
        // JSON mode (`json_object`) has no schema to give Anthropic.
        tracing::debug!("response_format dropped: the Messages API has no equivalent");
    }
    Ok(Value::Object(out))
}

/// The system prompt's parts and the alternating Messages turns of a
/// Chat request's messages.
fn system_and_messages(items: &[Value]) -> (Vec<String>, Vec<Value>) {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in items {
        match m["role"].as_str() {
            // Anthropic has one system prompt: every system or developer
            // message joins it, wherever it stood.
            Some(chat::role::SYSTEM | chat::role::DEVELOPER) => {
                let text = text_of(&m["content"]);
                if !text.is_empty() {
                    system.push(text);
                }
            }
            Some(chat::role::ASSISTANT) => assistant_turn(m, &mut messages),
            Some(chat::role::TOOL) => {
                let content = match &m["content"] {
                    Value::String(s) => json!(s),
                    other => Value::Array(blocks(other)),
                };
                push(
                    &mut messages,
                    anthropic::role::USER,
                    json!({"type": block::TOOL_RESULT, "tool_use_id": m["tool_call_id"], "content": content}),
                );
            }
            _ => {
                for b in blocks(&m["content"]) {
                    push(&mut messages, anthropic::role::USER, b);
                }
            }
        }
    }
    (system, messages)
}

/// An assistant message: its text (or refusal), then its tool calls.
fn assistant_turn(m: &Value, messages: &mut Vec<Value>) {
    let text = match &m["content"] {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p["refusal"].as_str()))
            .collect::<Vec<_>>()
            .join(""),
        other => other.as_str().unwrap_or("").to_string(),
    };
    if !text.is_empty() {
        push(
            messages,
            anthropic::role::ASSISTANT,
            json!({"type": block::TEXT, "text": text}),
        );
    }
    for call in m["tool_calls"].as_array().into_iter().flatten() {
        let f = &call["function"];
        let input = openai::arguments_object(&f["arguments"]);
        push(
            messages,
            anthropic::role::ASSISTANT,
            json!({"type": block::TOOL_USE, "id": call["id"], "name": f["name"], "input": input}),
        );
    }
}

/// The request's function tools as Anthropic's.
fn tools(v: &Value) -> Vec<Value> {
    v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| type_of(t) == Some(chat::FUNCTION))
        .map(|t| {
            let f = &t["function"];
            json!({
                "name": f["name"],
                "description": f["description"].as_str().unwrap_or(""),
                "input_schema": if f["parameters"].is_object() { f["parameters"].clone() } else { json!({"type": "object", "properties": {}}) },
            })
        })
        .collect()
}

/// `tool_choice` and `parallel_tool_calls` → Anthropic's `tool_choice`
/// (sent only with tools).
fn tool_choice(v: &Value) -> Option<Value> {
    let mut choice = match &v["tool_choice"] {
        Value::String(s) if s == openai::tool_choice::REQUIRED => {
            Some(json!({"type": tool_choice::ANY}))
        }
        Value::String(s) if s == openai::tool_choice::NONE => {
            Some(json!({"type": tool_choice::NONE}))
        }
        Value::String(s) if s == openai::tool_choice::AUTO => {
            Some(json!({"type": tool_choice::AUTO}))
        }
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some(chat::FUNCTION) => {
            Some(json!({"type": tool_choice::TOOL, "name": v["tool_choice"]["function"]["name"]}))
        }
        _ => None,
    };
    if v["parallel_tool_calls"] == false {
        let c = choice.get_or_insert_with(|| json!({"type": tool_choice::AUTO}));
        c["disable_parallel_tool_use"] = true.into();
    }
    choice
}

/// `max_tokens`, and thinking (from `reasoning_effort`) or the sampling
/// parameters (thinking takes none).
fn limits_and_sampling(v: &Value, items: &[Value], out: &mut Map<String, Value>) {
    let mut max = chat::max_tokens(v).unwrap_or(DEFAULT_MAX_TOKENS);
    // With thinking on, Anthropic wants a tool-use continuation's last
    // assistant turn to open with its signed thinking block, which a Chat
    // client never has to send back: such a turn goes without thinking.
    let continues_tool_use = items
        .iter()
        .rev()
        .find(|m| m["role"] == chat::role::ASSISTANT)
        .is_some_and(|m| m["tool_calls"].as_array().is_some_and(|c| !c.is_empty()));
    // Thinking also takes no tool choice that forces a tool; the client's
    // choice is kept and the thinking left out.
    let forces_tool = out
        .get("tool_choice")
        .is_some_and(|c| matches!(type_of(c), Some(tool_choice::ANY | tool_choice::TOOL)));
    let thinking = v["reasoning_effort"]
        .as_str()
        .and_then(budget)
        .filter(|_| !continues_tool_use && !forces_tool);
    if let Some(b) = thinking {
        // The budget must be below max_tokens, and thinking takes no
        // sampling parameters.
        max = max.max(b.saturating_add(1024));
        out.insert(
            "thinking".into(),
            json!({"type": anthropic::thinking::ENABLED, "budget_tokens": b}),
        );
    } else {
        // OpenAI's temperature runs to 2, Anthropic's to 1.
        if let Some(t) = v["temperature"].as_f64() {
            out.insert("temperature".into(), t.clamp(0.0, 1.0).into());
        }
        if let Some(p) = v.get("top_p").filter(|p| p.is_number()) {
            out.insert("top_p".into(), p.clone());
        }
    }
    out.insert("max_tokens".into(), max.into());
}

/// A whole Messages object → a chat completion.
pub(in crate::translate) fn whole(v: &Value, model: &str) -> Option<Value> {
    let content = v["content"].as_array()?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for b in content {
        match type_of(b) {
            Some(block::TEXT) => text.push_str(b["text"].as_str().unwrap_or("")),
            Some(block::THINKING) => reasoning.push_str(b["thinking"].as_str().unwrap_or("")),
            Some(block::TOOL_USE) => calls.push(json!({
                "id": b["id"], "type": chat::FUNCTION,
                "function": {"name": b["name"], "arguments": b["input"].to_string()},
            })),
            _ => {}
        }
    }
    let mut message = json!({
        "role": chat::role::ASSISTANT,
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { text.into() },
        "refusal": null,
    });
    if !reasoning.is_empty() {
        // The field DeepSeek, vLLM and others use for a model's reasoning.
        message["reasoning_content"] = reasoning.into();
    }
    if !calls.is_empty() {
        message["tool_calls"] = calls.into();
    }
    Some(json!({
        "id": format!("chatcmpl-{}", v["id"].as_str().unwrap_or("translated")),
        "object": "chat.completion",
        "created": now(),
        "model": model,
        "choices": [{
            "index": 0, "message": message, "logprobs": null,
            "finish_reason": finish_reason(v["stop_reason"].as_str()),
        }],
        "usage": chat::usage_value(anthropic::usage(&v["usage"]).unwrap_or_default()),
    }))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A Messages stream → chat completion chunks.
pub struct Stream {
    model: String,
    id: String,
    created: u64,
    /// The client asked for a usage chunk (`stream_options.include_usage`).
    usage_chunk: bool,
    /// The `tool_calls[].index` of the open tool block, if one is open.
    tool: Option<u64>,
    tools_seen: u64,
    stop_reason: Option<String>,
    usage: Usage,
    finished: bool,
}

impl Stream {
    pub fn new(model: &str) -> Self {
        Stream {
            model: model.to_string(),
            id: "chatcmpl-translated".into(),
            created: now(),
            usage_chunk: false,
            tool: None,
            tools_seen: 0,
            stop_reason: None,
            usage: Usage::default(),
            finished: false,
        }
    }

    pub fn include_usage(&mut self, on: bool) {
        self.usage_chunk = on;
    }

    fn emit(&self, delta: Value, finish: Option<&str>, out: &mut Vec<Bytes>) {
        let choice =
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
        out.push(sse::data(&chat::chunk(
            &self.id,
            self.created,
            &self.model,
            choice,
        )));
    }

    pub fn event(&mut self, name: Option<&str>, data: &str, out: &mut Vec<Bytes>) {
        if self.finished {
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let kind = name.or(type_of(&v)).unwrap_or("");
        match kind {
            anthropic::event::MESSAGE_START => {
                let (id, usage) = anthropic::message_started(&v);
                if let Some(id) = id {
                    self.id = format!("chatcmpl-{id}");
                }
                self.usage = usage;
                self.emit(
                    json!({"role": chat::role::ASSISTANT, "content": ""}),
                    None,
                    out,
                );
            }
            anthropic::event::CONTENT_BLOCK_START => {
                let started = &v["content_block"];
                self.tool = None;
                if type_of(started) == Some(block::TOOL_USE) {
                    let index = self.tools_seen;
                    self.tools_seen = self.tools_seen.saturating_add(1);
                    self.tool = Some(index);
                    self.emit(
                        json!({"tool_calls": [{"index": index, "id": started["id"], "type": chat::FUNCTION,
                            "function": {"name": started["name"], "arguments": ""}}]}),
                        None,
                        out,
                    );
                }
            }
            anthropic::event::CONTENT_BLOCK_DELTA => {
                let d = &v["delta"];
                let delta = match (type_of(d), self.tool) {
                    (Some(anthropic::delta::TEXT), _) => d["text"].as_str().map(|t| json!({"content": t})),
                    (Some(anthropic::delta::THINKING), _) => d["thinking"]
                        .as_str()
                        .map(|t| json!({"reasoning_content": t})),
                    (Some(anthropic::delta::INPUT_JSON), Some(index)) => d["partial_json"].as_str().map(
                        |a| json!({"tool_calls": [{"index": index, "function": {"arguments": a}}]}),
                    ),
                    _ => None,
                };
                if let Some(delta) = delta {
                    self.emit(delta, None, out);
                }
            }
            anthropic::event::CONTENT_BLOCK_STOP => self.tool = None,
            anthropic::event::MESSAGE_DELTA => {
                if let Some(r) = v["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(r.to_string());
                }
                anthropic::update_usage(&mut self.usage, &v["usage"]);
            }
            anthropic::event::MESSAGE_STOP => self.finish(out),
            anthropic::event::ERROR => {
                out.push(errors::chat_chunk(&v));
                self.finished = true;
            }
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) {
        self.finished = true;
        let finish = finish_reason(self.stop_reason.as_deref());
        let usage = chat::usage_value(self.usage);
        let choice = json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]);
        let mut last = chat::chunk(&self.id, self.created, &self.model, choice);
        if self.usage_chunk {
            out.push(sse::data(&last));
            let mut u = chat::chunk(&self.id, self.created, &self.model, json!([]));
            u["usage"] = usage;
            out.push(sse::data(&u));
        } else {
            // Not asked for a usage chunk: usage rides on the last chunk
            // (where the SDKs read an optional `usage`), so weir still
            // accounts the tokens without a chunk with no choices, which
            // a client that did not ask for one may index into.
            last["usage"] = usage;
            out.push(sse::data(&last));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
}

#[cfg(test)]
mod tests;
