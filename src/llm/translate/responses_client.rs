//! Codex on an Anthropic upstream: a Responses request → a Messages
//! request, and the Messages answer → the Responses event sequence Codex
//! needs (`response.created`, `response.output_item.added` before any
//! delta, the deltas, `response.output_item.done`, and always a terminal
//! `response.completed` / `response.incomplete` / `response.failed`, with
//! `sequence_number` on every event).

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{TranslateError, errors, text_of};
use crate::wire::{Usage, anthropic, responses, sse};

/// What Anthropic requires and a Responses request may leave out.
pub(super) const DEFAULT_MAX_TOKENS: u64 = 8192;

/// A reasoning effort → a thinking budget.
pub(super) fn budget(effort: &str) -> Option<u64> {
    match effort {
        "minimal" | "none" => None,
        "low" => Some(2048),
        "medium" => Some(8192),
        _ => Some(24576),
    }
}

/// Anthropic wants user and assistant turns to alternate: consecutive
/// items of the same role are merged into one message.
pub(super) fn push(messages: &mut Vec<Value>, role: &str, block: Value) {
    if let Some(last) = messages.last_mut()
        && last["role"] == role
        && let Some(content) = last["content"].as_array_mut()
    {
        content.push(block);
        return;
    }
    messages.push(json!({"role": role, "content": [block]}));
}

pub(super) fn image_block(url: &str) -> Value {
    match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((media_type, data)) => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

/// Content parts of a Responses message → Anthropic blocks.
fn content_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p["type"].as_str() {
                Some("input_text" | "output_text" | "text") => {
                    Some(json!({"type": "text", "text": p["text"]}))
                }
                Some("input_image") => p["image_url"].as_str().map(image_block),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Responses → Messages.
pub fn to_messages(v: &Value, model: &str) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let mut system: Vec<String> = v["instructions"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    let mut messages: Vec<Value> = Vec::new();
    let items = match &v["input"] {
        Value::String(s) => vec![json!({"type": "message", "role": "user", "content": s})],
        Value::Array(a) => a.clone(),
        Value::Null => Vec::new(),
        _ => {
            return Err(TranslateError::Invalid(
                "`input` must be a string or a list of items".into(),
            ));
        }
    };
    for item in &items {
        let kind = item["type"].as_str().unwrap_or("message");
        match kind {
            "message" => {
                let role = item["role"].as_str().unwrap_or("user");
                if matches!(role, "system" | "developer") {
                    let text = text_of(&item["content"]);
                    if !text.is_empty() {
                        system.push(text);
                    }
                    continue;
                }
                let role = if role == "assistant" {
                    "assistant"
                } else {
                    "user"
                };
                for b in content_blocks(&item["content"]) {
                    push(&mut messages, role, b);
                }
            }
            "function_call" => {
                let input: Value = item["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                push(
                    &mut messages,
                    "assistant",
                    json!({"type": "tool_use", "id": item["call_id"], "name": item["name"], "input": input}),
                );
            }
            "function_call_output" => {
                let content = match &item["output"] {
                    Value::String(s) => json!(s),
                    other => Value::Array(content_blocks(other)),
                };
                push(
                    &mut messages,
                    "user",
                    json!({"type": "tool_result", "tool_use_id": item["call_id"], "content": content}),
                );
            }
            // Reasoning items carry OpenAI's encrypted state, which an
            // Anthropic model cannot read; other item kinds have no
            // equivalent.
            other => tracing::debug!(item = other, "input item dropped in translation"),
        }
    }
    if !system.is_empty() {
        out.insert("system".into(), system.join("\n\n").into());
    }
    out.insert("messages".into(), messages.into());
    if let Some(tools) = v["tools"].as_array() {
        let tools: Vec<Value> = tools
            .iter()
            .filter(|t| t["type"] == "function")
            .map(|t| {
                json!({
                    "name": t["name"],
                    "description": t["description"].as_str().unwrap_or(""),
                    "input_schema": if t["parameters"].is_object() { t["parameters"].clone() } else { json!({"type": "object", "properties": {}}) },
                })
            })
            .collect();
        if !tools.is_empty() {
            out.insert("tools".into(), tools.into());
        }
    }
    let mut choice = match &v["tool_choice"] {
        Value::String(s) if s == "required" => Some(json!({"type": "any"})),
        Value::String(s) if s == "none" => Some(json!({"type": "none"})),
        Value::String(s) if s == "auto" => Some(json!({"type": "auto"})),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            Some(json!({"type": "tool", "name": o.get("name").cloned().unwrap_or(Value::Null)}))
        }
        _ => None,
    };
    if v["parallel_tool_calls"] == false && out.contains_key("tools") {
        let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
        c["disable_parallel_tool_use"] = true.into();
    }
    if let Some(c) = choice
        && out.contains_key("tools")
    {
        out.insert("tool_choice".into(), c);
    }
    let mut max_tokens = v["max_output_tokens"]
        .as_u64()
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let thinking = v["reasoning"]["effort"].as_str().and_then(budget);
    if let Some(b) = thinking {
        // The budget must be below max_tokens, and thinking takes no
        // sampling parameters.
        max_tokens = max_tokens.max(b.saturating_add(1024));
        out.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": b}),
        );
    } else {
        for k in ["temperature", "top_p"] {
            if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
                out.insert(k.into(), x.clone());
            }
        }
    }
    out.insert("max_tokens".into(), max_tokens.into());
    if v["stream"] == true {
        out.insert("stream".into(), true.into());
    }
    if let Some(user) = v["user"].as_str() {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    Ok(Value::Object(out))
}

/// An output item being built from one Anthropic content block.
struct Item {
    output_index: usize,
    id: String,
    kind: ItemKind,
    text: String,
}

enum ItemKind {
    Message,
    Function { call_id: Value, name: Value },
    Reasoning,
}

impl Item {
    fn value(&self, status: &str) -> Value {
        match &self.kind {
            ItemKind::Message => json!({
                "id": self.id, "type": "message", "status": status, "role": "assistant",
                "content": if status == "completed" {
                    json!([{"type": "output_text", "text": self.text, "annotations": []}])
                } else { json!([]) },
            }),
            ItemKind::Function { call_id, name } => json!({
                "id": self.id, "type": "function_call", "status": status,
                "call_id": call_id, "name": name, "arguments": self.text,
            }),
            ItemKind::Reasoning => json!({
                "id": self.id, "type": "reasoning",
                "summary": if status == "completed" {
                    json!([{"type": "summary_text", "text": self.text}])
                } else { json!([]) },
            }),
        }
    }
}

pub struct Stream {
    model: String,
    id: String,
    created_at: u64,
    sequence: u64,
    /// The item of the open Anthropic block.
    current: Option<Item>,
    done: Vec<Value>,
    stop_reason: Option<String>,
    usage: Usage,
    finished: bool,
}

impl Stream {
    pub fn new(model: &str) -> Self {
        Stream {
            model: model.to_string(),
            id: "resp_translated".into(),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            sequence: 0,
            current: None,
            done: Vec::new(),
            stop_reason: None,
            usage: Usage::default(),
            finished: false,
        }
    }

    fn emit(&mut self, kind: &str, mut data: Value, out: &mut Vec<Bytes>) {
        data["type"] = kind.into();
        data["sequence_number"] = self.sequence.into();
        self.sequence += 1;
        out.push(sse::event(kind, &data));
    }

    fn response(&self, status: &str) -> Value {
        json!({
            "id": self.id, "object": "response", "created_at": self.created_at,
            "status": status, "model": self.model, "output": self.done,
            "usage": if status == "in_progress" { Value::Null } else { responses::usage_value(self.usage) },
            "error": null, "incomplete_details": null,
        })
    }

    fn item_ref(&self, item: &Item) -> Value {
        json!({"item_id": item.id, "output_index": item.output_index})
    }

    pub fn event(&mut self, name: Option<&str>, data: &str, out: &mut Vec<Bytes>) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let kind = name.or(v["type"].as_str()).unwrap_or("");
        match kind {
            "message_start" => {
                let m = &v["message"];
                if let Some(id) = m["id"].as_str() {
                    self.id = format!("resp_{id}");
                }
                self.usage = anthropic::usage(&m["usage"]).unwrap_or_default();
                let r = self.response("in_progress");
                self.emit("response.created", json!({"response": r}), out);
                let r = self.response("in_progress");
                self.emit("response.in_progress", json!({"response": r}), out);
            }
            "content_block_start" => {
                let block = &v["content_block"];
                let output_index = self.done.len();
                let (prefix, kind) = match block["type"].as_str() {
                    Some("text") => ("msg", ItemKind::Message),
                    Some("tool_use") => (
                        "fc",
                        ItemKind::Function {
                            call_id: block["id"].clone(),
                            name: block["name"].clone(),
                        },
                    ),
                    Some("thinking") => ("rs", ItemKind::Reasoning),
                    _ => return,
                };
                let item = Item {
                    output_index,
                    id: format!("{prefix}_{}_{output_index}", self.id),
                    kind,
                    text: String::new(),
                };
                let added =
                    json!({"output_index": output_index, "item": item.value("in_progress")});
                self.emit("response.output_item.added", added, out);
                let r = self.item_ref(&item);
                match item.kind {
                    ItemKind::Message => {
                        let mut e = r;
                        e["content_index"] = 0.into();
                        e["part"] = json!({"type": "output_text", "text": "", "annotations": []});
                        self.emit("response.content_part.added", e, out);
                    }
                    ItemKind::Reasoning => {
                        let mut e = r;
                        e["summary_index"] = 0.into();
                        e["part"] = json!({"type": "summary_text", "text": ""});
                        self.emit("response.reasoning_summary_part.added", e, out);
                    }
                    ItemKind::Function { .. } => {}
                }
                self.current = Some(item);
            }
            "content_block_delta" => {
                let Some(mut item) = self.current.take() else {
                    return;
                };
                let d = &v["delta"];
                let mut e = self.item_ref(&item);
                let piece = match (d["type"].as_str(), &item.kind) {
                    (Some("text_delta"), ItemKind::Message) => {
                        e["content_index"] = 0.into();
                        e["logprobs"] = json!([]);
                        Some(("response.output_text.delta", d["text"].as_str()))
                    }
                    (Some("input_json_delta"), ItemKind::Function { .. }) => Some((
                        "response.function_call_arguments.delta",
                        d["partial_json"].as_str(),
                    )),
                    (Some("thinking_delta"), ItemKind::Reasoning) => {
                        e["summary_index"] = 0.into();
                        Some((
                            "response.reasoning_summary_text.delta",
                            d["thinking"].as_str(),
                        ))
                    }
                    _ => None,
                };
                if let Some((kind, Some(text))) = piece {
                    item.text.push_str(text);
                    e["delta"] = text.into();
                    self.emit(kind, e, out);
                }
                self.current = Some(item);
            }
            "content_block_stop" => {
                let Some(item) = self.current.take() else {
                    return;
                };
                let r = self.item_ref(&item);
                match item.kind {
                    ItemKind::Message => {
                        let mut e = r.clone();
                        e["content_index"] = 0.into();
                        e["text"] = item.text.clone().into();
                        e["logprobs"] = json!([]);
                        self.emit("response.output_text.done", e, out);
                        let mut e = r;
                        e["content_index"] = 0.into();
                        e["part"] =
                            json!({"type": "output_text", "text": item.text, "annotations": []});
                        self.emit("response.content_part.done", e, out);
                    }
                    ItemKind::Function { .. } => {
                        let mut e = r;
                        e["arguments"] = item.text.clone().into();
                        self.emit("response.function_call_arguments.done", e, out);
                    }
                    ItemKind::Reasoning => {
                        let mut e = r.clone();
                        e["summary_index"] = 0.into();
                        e["text"] = item.text.clone().into();
                        self.emit("response.reasoning_summary_text.done", e, out);
                        let mut e = r;
                        e["summary_index"] = 0.into();
                        e["part"] = json!({"type": "summary_text", "text": item.text});
                        self.emit("response.reasoning_summary_part.done", e, out);
                    }
                }
                let value = item.value("completed");
                let done = json!({"output_index": item.output_index, "item": value.clone()});
                self.emit("response.output_item.done", done, out);
                self.done.push(value);
            }
            "message_delta" => {
                if let Some(r) = v["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(r.to_string());
                }
                anthropic::update_usage(&mut self.usage, &v["usage"]);
            }
            "message_stop" => self.finish(out),
            "error" => {
                let (code, message) = errors::responses_failure(&v);
                let mut r = self.response("failed");
                r["error"] = json!({"code": code, "message": message});
                self.emit("response.failed", json!({"response": r}), out);
                self.finished = true;
            }
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.stop_reason.as_deref() == Some("max_tokens") {
            let mut r = self.response("incomplete");
            r["incomplete_details"] = json!({"reason": "max_output_tokens"});
            self.emit("response.incomplete", json!({"response": r}), out);
        } else {
            let r = self.response("completed");
            self.emit("response.completed", json!({"response": r}), out);
        }
    }
}

/// A whole Messages object → a Responses object.
pub fn whole(v: &Value, model: &str) -> Option<Value> {
    let content = v["content"].as_array()?;
    let id = format!("resp_{}", v["id"].as_str().unwrap_or("translated"));
    let mut output = Vec::new();
    for (n, b) in content.iter().enumerate() {
        match b["type"].as_str() {
            Some("text") => output.push(json!({
                "id": format!("msg_{id}_{n}"), "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": b["text"], "annotations": []}],
            })),
            Some("tool_use") => output.push(json!({
                "id": format!("fc_{id}_{n}"), "type": "function_call", "status": "completed",
                "call_id": b["id"], "name": b["name"], "arguments": b["input"].to_string(),
            })),
            Some("thinking") => output.push(json!({
                "id": format!("rs_{id}_{n}"), "type": "reasoning",
                "summary": [{"type": "summary_text", "text": b["thinking"]}],
            })),
            _ => {}
        }
    }
    let incomplete = v["stop_reason"] == "max_tokens";
    Some(json!({
        "id": id,
        "object": "response",
        "created_at": 0,
        "status": if incomplete { "incomplete" } else { "completed" },
        "model": model,
        "output": output,
        "usage": responses::usage_value(anthropic::usage(&v["usage"]).unwrap_or_default()),
        "error": null,
        "incomplete_details": if incomplete { json!({"reason": "max_output_tokens"}) } else { Value::Null },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_request_golden() {
        let req = json!({
            "model": "gpt-5-codex",
            "instructions": "You are Codex.",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be careful."}]},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "List files"},
                    {"type": "input_image", "image_url": "data:image/png;base64,QUJD"},
                ]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xyz"},
                {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files."}]},
            ],
            "tools": [
                {"type": "function", "name": "shell", "description": "Run a command", "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}, "strict": false},
                {"type": "web_search"},
            ],
            "tool_choice": "auto",
            "parallel_tool_calls": false,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "temperature": 0.5,
        });
        let out = to_messages(&req, "claude-sonnet-4").expect("translated");
        assert_eq!(
            out,
            json!({
                "model": "claude-sonnet-4",
                "system": "You are Codex.\n\nBe careful.",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "List files"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "call_1", "name": "shell", "input": {"command": ["ls"]}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt\nb.txt"},
                    ]},
                    {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
                ],
                "tools": [{"name": "shell", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "array"}}}}],
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
                "thinking": {"type": "enabled", "budget_tokens": 8192},
                "max_tokens": 9216,
                "stream": true,
            })
        );
    }

    fn run(events: &[(&str, Value)]) -> Vec<(String, Value)> {
        let mut s = Stream::new("gpt-5-codex");
        let mut out = Vec::new();
        for (name, data) in events {
            s.event(Some(name), &data.to_string(), &mut out);
        }
        out.iter()
            .map(|b| {
                let text = std::str::from_utf8(b).expect("utf8");
                let mut lines = text.lines();
                let name = lines.next().expect("event")["event: ".len()..].to_string();
                let data = &lines.next().expect("data")["data: ".len()..];
                (name, serde_json::from_str(data).expect("json"))
            })
            .collect()
    }

    #[test]
    fn an_anthropic_stream_becomes_the_sequence_codex_needs() {
        let out = run(&[
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
            ),
            ("ping", json!({"type": "ping"})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"command\":"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "[\"ls\"]}"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]);
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, (_, d)) in out.iter().enumerate() {
            assert_eq!(
                d["sequence_number"], i as u64,
                "sequence_number on every event"
            );
        }
        assert_eq!(out[0].1["response"]["id"], "resp_msg_1");
        assert_eq!(out[8].1["item"]["call_id"], "toolu_1");
        let done = &out[13].1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][1]["arguments"], "{\"command\":[\"ls\"]}");
        assert_eq!(done["output"][0]["content"][0]["text"], "Hi");
        assert_eq!(
            done["usage"],
            json!({"input_tokens": 15, "input_tokens_details": {"cached_tokens": 5}, "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 45})
        );
    }

    #[test]
    fn max_tokens_is_incomplete_and_an_error_fails_the_response() {
        let out = run(&[
            ("message_start", json!({"message": {"id": "m"}})),
            (
                "message_delta",
                json!({"delta": {"stop_reason": "max_tokens"}}),
            ),
            ("message_stop", json!({})),
        ]);
        let last = &out.last().expect("terminal").1;
        assert_eq!(last["type"], "response.incomplete");
        assert_eq!(
            last["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );
        let out = run(&[
            ("message_start", json!({"message": {"id": "m"}})),
            (
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
        ]);
        let last = &out.last().expect("terminal").1;
        assert_eq!(last["type"], "response.failed");
        assert_eq!(last["response"]["error"]["code"], "server_is_overloaded");
    }

    #[test]
    fn a_whole_message_becomes_a_response() {
        let m = json!({"id": "msg_9", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t", "name": "ls", "input": {"a": 1}}], "stop_reason": "tool_use", "usage": {"input_tokens": 2, "output_tokens": 3}});
        let r = whole(&m, "gpt").expect("response");
        assert_eq!(r["status"], "completed");
        assert_eq!(r["output"][1]["arguments"], "{\"a\":1}");
        assert_eq!(r["usage"]["total_tokens"], 5);
    }

    /// Found by fuzzing (issue 23): a number where usage should be, then a
    /// usage object, panicked on serde_json's index into a non-object; and
    /// u64::MAX counts overflowed the totals.
    #[test]
    fn wrong_usage_types_and_huge_counts_neither_panic_nor_wrap() {
        let out = run(&[
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "m", "usage": 5}}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7, "input_tokens": "many"}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]);
        let last = &out.last().expect("terminal").1;
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["usage"]["output_tokens"], 7);
        assert_eq!(last["response"]["usage"]["input_tokens"], 0);

        let max = u64::MAX;
        let out = run(&[
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": max, "cache_read_input_tokens": max, "cache_creation_input_tokens": max}}}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": max}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]);
        let usage = &out.last().expect("terminal").1["response"]["usage"];
        assert_eq!(usage["input_tokens"], max);
        assert_eq!(usage["total_tokens"], max);
    }

    #[test]
    fn an_overflow_inside_the_stream_reaches_codex_as_context_length_exceeded() {
        let out = run(&[
            ("message_start", json!({"message": {"id": "m"}})),
            (
                "error",
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
            ),
        ]);
        let last = &out.last().expect("terminal").1;
        assert_eq!(last["type"], "response.failed");
        assert_eq!(last["response"]["error"]["code"], "context_length_exceeded");
    }
}
