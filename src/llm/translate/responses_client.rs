//! Codex on an Anthropic upstream: a Responses request → a Messages
//! request, and the Messages answer → the Responses event sequence Codex
//! needs (`response.created`, `response.output_item.added` before any
//! delta, the deltas, `response.output_item.done`, and always a terminal
//! `response.completed` / `response.incomplete` / `response.failed`, with
//! `sequence_number` on every event).

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{ToolNames, TranslateError, errors, search, text_of};
use crate::wire::{Usage, anthropic, responses, sse};

/// The room for the answer itself when Codex sets no `max_output_tokens`
/// (Anthropic requires `max_tokens`): the thinking budget comes on top,
/// and the model's own maximum caps the sum.
const DEFAULT_ANSWER_TOKENS: u64 = 16_384;

/// The single string property a freeform tool's text travels in.
const CUSTOM_INPUT: &str = "input";

/// What Anthropic requires and a Chat Completions request may leave out
/// (a Chat client on Anthropic).
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

/// A thinking block restored into the assistant turn: after the turn's
/// other thinking, before its text and calls (a tool-use continuation
/// must start with thinking).
fn push_thinking(messages: &mut Vec<Value>, block: Value) {
    if let Some(last) = messages.last_mut()
        && last["role"] == "assistant"
        && let Some(content) = last["content"].as_array_mut()
    {
        let at = content
            .iter()
            .position(|b| !anthropic::is_thinking(b))
            .unwrap_or(content.len());
        content.insert(at, block);
        return;
    }
    messages.push(json!({"role": "assistant", "content": [block]}));
}

/// A freeform tool (`{type: "custom", name, description, format}`, Codex's
/// `apply_patch`) as an Anthropic tool taking one string, the format's
/// grammar in its description.
fn custom_tool(t: &Value) -> Value {
    let mut about = String::from("The tool's whole input, as free text.");
    if let Some(grammar) = t["format"]["definition"].as_str() {
        let syntax = t["format"]["syntax"].as_str().unwrap_or("grammar");
        about.push_str(&format!(" It must match this {syntax} grammar:\n{grammar}"));
    }
    json!({
        "name": t["name"],
        "description": t["description"].as_str().unwrap_or(""),
        "input_schema": {
            "type": "object",
            "properties": {CUSTOM_INPUT: {"type": "string", "description": about}},
            "required": [CUSTOM_INPUT],
        },
    })
}

/// A tool call's output → a `tool_result` block.
fn tool_result(item: &Value) -> Value {
    let content = match &item["output"] {
        Value::String(s) => json!(s),
        other => Value::Array(content_blocks(other)),
    };
    json!({"type": "tool_result", "tool_use_id": item["call_id"], "content": content})
}

/// A reasoning effort and the client's limit → (`max_tokens`, thinking
/// budget): the budget at least Anthropic's minimum and below
/// `max_tokens`, the sum within what the model takes; no thinking when
/// the model's limit leaves no room for it.
fn limits(model: &str, client_limit: Option<u64>, effort: Option<u64>) -> (u64, Option<u64>) {
    let cap = anthropic::max_output_tokens(model);
    let min = anthropic::MIN_THINKING_BUDGET;
    let wanted = match (client_limit, effort) {
        (Some(n), Some(b)) => n.max(b.saturating_add(min)),
        (Some(n), None) => n,
        (None, b) => DEFAULT_ANSWER_TOKENS.saturating_add(b.unwrap_or(0)),
    };
    let max_tokens = wanted.clamp(1, cap);
    let budget = effort
        .map(|b| b.min(max_tokens.saturating_sub(min)))
        .filter(|b| *b >= min);
    (max_tokens, budget)
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

/// An OpenAI file input → an Anthropic `document` block: a PDF's data
/// URL → a base64 PDF, a plain-text one → its text, a URL → a URL
/// document (Anthropic fetches PDFs by URL), each titled by its
/// filename. `None` for what Anthropic cannot take as a document (an
/// uploaded file's id means nothing there; other media types).
pub(super) fn document_block(
    file_data: Option<&str>,
    filename: Option<&str>,
    file_url: Option<&str>,
) -> Option<Value> {
    let source = match (file_data, file_url) {
        (Some(data), _) => {
            let (media_type, data) = data.strip_prefix("data:")?.split_once(";base64,")?;
            match media_type {
                "application/pdf" => {
                    json!({"type": "base64", "media_type": "application/pdf", "data": data})
                }
                "text/plain" => {
                    use base64::Engine as _;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .ok()?;
                    json!({"type": "text", "media_type": "text/plain",
                        "data": String::from_utf8(bytes).ok()?})
                }
                _ => return None,
            }
        }
        (None, Some(url)) => json!({"type": "url", "url": url}),
        (None, None) => return None,
    };
    let mut block = json!({"type": "document", "source": source});
    if let Some(name) = filename.filter(|n| !n.is_empty()) {
        block["title"] = name.into();
    }
    Some(block)
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
                Some("input_file") => document_block(
                    p["file_data"].as_str(),
                    p["filename"].as_str(),
                    p["file_url"].as_str(),
                ),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Responses → Messages, and what the answer's translation needs to know.
pub fn to_messages(v: &Value, model: &str) -> Result<(Value, ToolNames), TranslateError> {
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
            "custom_tool_call" => push(
                &mut messages,
                "assistant",
                json!({"type": "tool_use", "id": item["call_id"], "name": item["name"],
                    "input": {CUSTOM_INPUT: item["input"].as_str().unwrap_or_default()}}),
            ),
            "function_call_output" | "custom_tool_call_output" => {
                push(&mut messages, "user", tool_result(item));
            }
            // Thinking weir gave Codex goes back exactly as Anthropic signed
            // it; OpenAI's own encrypted reasoning means nothing here.
            "reasoning" => match item["encrypted_content"]
                .as_str()
                .and_then(responses::block_of_content)
            {
                Some(block) => push_thinking(&mut messages, block),
                None => tracing::debug!("foreign reasoning item dropped in translation"),
            },
            // Other item kinds have no equivalent.
            other => tracing::debug!(item = other, "input item dropped in translation"),
        }
    }
    if !system.is_empty() {
        out.insert("system".into(), system.join("\n\n").into());
    }
    let continuation_ok = starts_with_thinking_where_needed(&messages);
    out.insert("messages".into(), messages.into());
    let mut names = ToolNames::default();
    if let Some(tools) = v["tools"].as_array() {
        let tools: Vec<Value> = tools
            .iter()
            .filter_map(|t| match t["type"].as_str() {
                _ if responses::is_web_search_tool(t) => Some(search::to_anthropic_tool(
                    t,
                    v["max_tool_calls"].as_u64(),
                )),
                Some("function") => Some(json!({
                    "name": t["name"],
                    "description": t["description"].as_str().unwrap_or(""),
                    "input_schema": if t["parameters"].is_object() { t["parameters"].clone() } else { json!({"type": "object", "properties": {}}) },
                })),
                Some("custom") => {
                    names.custom.extend(t["name"].as_str().map(str::to_string));
                    Some(custom_tool(t))
                }
                _ => None,
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
        Value::Object(o)
            if matches!(
                o.get("type").and_then(Value::as_str),
                Some("function" | "custom")
            ) =>
        {
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
    let client_limit = v["max_output_tokens"].as_u64();
    names.client_limit = client_limit.is_some();
    let (max_tokens, thinking) = limits(
        model,
        client_limit,
        v["reasoning"]["effort"].as_str().and_then(budget),
    );
    // With thinking on, Anthropic refuses a tool-use continuation whose
    // assistant turn does not start with thinking (Codex's history from
    // another vendor, or from a turn without reasoning): thinking is
    // turned off for that request instead.
    let thinking = thinking.filter(|_| continuation_ok);
    if let Some(b) = thinking {
        // Thinking takes no sampling parameters.
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
    // Codex keys its prompt for OpenAI's automatic cache; Anthropic caches
    // only up to marked breakpoints, so without them Codex's long, stable
    // prefix would be paid in full every turn.
    if v["prompt_cache_key"].is_string() {
        cache_breakpoints(&mut out);
    }
    // `codex exec --output-schema`.
    if let Some(schema) = responses::output_schema(v) {
        out.insert(
            "output_config".into(),
            json!({"format": anthropic::output_format(schema)}),
        );
    }
    Ok((Value::Object(out), names))
}

/// Three cache breakpoints (of Anthropic's 4): the end of the system
/// prompt, of the tool definitions, and of the history before the newest
/// turn — the prefix that stays the same from one turn to the next.
fn cache_breakpoints(out: &mut Map<String, Value>) {
    if let Some(Value::String(text)) = out.get("system") {
        let mut block = json!({"type": "text", "text": text});
        anthropic::mark_cache_breakpoint(&mut block);
        out.insert("system".into(), json!([block]));
    }
    if let Some(last) = out
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.last_mut())
    {
        anthropic::mark_cache_breakpoint(last);
    }
    let Some(messages) = out.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    let Some(before) = messages.len().checked_sub(2) else {
        return;
    };
    let Some(m) = messages.get_mut(before) else {
        return;
    };
    if let Value::String(text) = &m["content"] {
        m["content"] = json!([{"type": "text", "text": text}]);
    }
    // A thinking block takes no cache_control: the last other block does.
    if let Some(block) = m["content"]
        .as_array_mut()
        .and_then(|c| c.iter_mut().rev().find(|b| !anthropic::is_thinking(b)))
    {
        anthropic::mark_cache_breakpoint(block);
    }
}

/// Whether a tool-use continuation (the last turn gives tool results)
/// follows an assistant turn that starts with thinking, as Anthropic
/// requires with thinking on.
pub(super) fn starts_with_thinking_where_needed(messages: &[Value]) -> bool {
    let continues = messages.last().is_some_and(|m| {
        m["role"] == "user"
            && m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    });
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "assistant") else {
        return true;
    };
    if !continues {
        return true;
    }
    let blocks = last["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let calls = blocks.iter().any(|b| b["type"] == "tool_use");
    !calls || blocks.first().is_some_and(anthropic::is_thinking)
}

/// An output item being built from one Anthropic content block.
struct Item {
    output_index: usize,
    id: String,
    kind: ItemKind,
    text: String,
}

enum ItemKind {
    /// Text, with the citations of the search results it rests on.
    Message {
        citations: Vec<Value>,
    },
    /// Anthropic's web search (a `server_tool_use` block): its text is the
    /// JSON of the block's input until the block ends.
    Search,
    Function {
        call_id: Value,
        name: Value,
    },
    /// A call of a freeform tool: its text is the JSON of the Anthropic
    /// input (`{"input": …}`) until the block ends.
    Custom {
        call_id: Value,
        name: Value,
    },
    /// Thinking, with what carries it to the next turn: the signature
    /// (filled by `signature_delta`) or a redacted block's data.
    Reasoning {
        signature: String,
        redacted: Option<Value>,
    },
}

impl Item {
    fn value(&self, status: &str) -> Value {
        match &self.kind {
            ItemKind::Message { citations } => json!({
                "id": self.id, "type": "message", "status": status, "role": "assistant",
                "content": if status == "completed" {
                    json!([{"type": "output_text", "text": self.text,
                        "annotations": search::annotations(&Value::Array(citations.clone()), &self.text)}])
                } else { json!([]) },
            }),
            ItemKind::Search => {
                let mut item = search::call_of_block(&json!({
                    "name": anthropic::WEB_SEARCH_NAME,
                    "input": serde_json::from_str::<Value>(&self.text).unwrap_or_default(),
                }))
                .unwrap_or_default();
                item["id"] = self.id.clone().into();
                item["status"] = status.into();
                if status != "completed" {
                    item.as_object_mut().map(|m| m.remove("action"));
                }
                item
            }
            ItemKind::Function { call_id, name } => json!({
                "id": self.id, "type": "function_call", "status": status,
                "call_id": call_id, "name": name, "arguments": self.text,
            }),
            ItemKind::Custom { call_id, name } => json!({
                "id": self.id, "type": "custom_tool_call", "status": status,
                "call_id": call_id, "name": name, "input": custom_input(&self.text),
            }),
            ItemKind::Reasoning {
                signature,
                redacted,
            } => {
                let mut item = json!({
                    "id": self.id, "type": "reasoning",
                    "summary": if status == "completed" && redacted.is_none() {
                        json!([{"type": "summary_text", "text": self.text}])
                    } else { json!([]) },
                });
                if status == "completed" {
                    let block = match redacted {
                        Some(data) => json!({"type": "redacted_thinking", "data": data}),
                        None => {
                            json!({"type": "thinking", "thinking": self.text, "signature": signature})
                        }
                    };
                    item["encrypted_content"] = responses::block_content(&block).into();
                }
                item
            }
        }
    }
}

/// The text of a freeform tool call from the JSON of its Anthropic input.
fn custom_input(json: &str) -> String {
    serde_json::from_str::<Value>(json)
        .ok()
        .and_then(|v| v[CUSTOM_INPUT].as_str().map(str::to_string))
        .unwrap_or_default()
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
    /// The request's freeform tools and whether Codex set a limit.
    names: ToolNames,
}

impl Stream {
    pub fn new(model: &str, names: ToolNames) -> Self {
        Stream {
            names,
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
                    Some("text") => (
                        "msg",
                        ItemKind::Message {
                            citations: block["citations"].as_array().cloned().unwrap_or_default(),
                        },
                    ),
                    Some("server_tool_use") if block["name"] == anthropic::WEB_SEARCH_NAME => {
                        ("ws", ItemKind::Search)
                    }
                    Some("tool_use") if self.names.is_custom(&block["name"]) => (
                        "ctc",
                        ItemKind::Custom {
                            call_id: block["id"].clone(),
                            name: block["name"].clone(),
                        },
                    ),
                    Some("tool_use") => (
                        "fc",
                        ItemKind::Function {
                            call_id: block["id"].clone(),
                            name: block["name"].clone(),
                        },
                    ),
                    Some("thinking") => (
                        "rs",
                        ItemKind::Reasoning {
                            signature: block["signature"].as_str().unwrap_or_default().into(),
                            redacted: None,
                        },
                    ),
                    Some("redacted_thinking") => (
                        "rs",
                        ItemKind::Reasoning {
                            signature: String::new(),
                            redacted: Some(block["data"].clone()),
                        },
                    ),
                    _ => return,
                };
                let mut item = Item {
                    output_index,
                    id: format!("{prefix}_{}_{output_index}", self.id),
                    kind,
                    text: String::new(),
                };
                if matches!(item.kind, ItemKind::Search)
                    && block["input"].as_object().is_some_and(|i| !i.is_empty())
                {
                    // An input that came whole with the block's start.
                    item.text = block["input"].to_string();
                }
                let added =
                    json!({"output_index": output_index, "item": item.value("in_progress")});
                self.emit("response.output_item.added", added, out);
                let r = self.item_ref(&item);
                match item.kind {
                    ItemKind::Message { .. } => {
                        let mut e = r;
                        e["content_index"] = 0.into();
                        e["part"] = json!({"type": "output_text", "text": "", "annotations": []});
                        self.emit("response.content_part.added", e, out);
                    }
                    ItemKind::Search => self.emit("response.web_search_call.in_progress", r, out),
                    ItemKind::Reasoning { redacted: None, .. } => {
                        let mut e = r;
                        e["summary_index"] = 0.into();
                        e["part"] = json!({"type": "summary_text", "text": ""});
                        self.emit("response.reasoning_summary_part.added", e, out);
                    }
                    _ => {}
                }
                self.current = Some(item);
            }
            "content_block_delta" => {
                let Some(mut item) = self.current.take() else {
                    return;
                };
                let d = &v["delta"];
                let mut e = self.item_ref(&item);
                let piece = match (d["type"].as_str(), &mut item.kind) {
                    (Some("text_delta"), ItemKind::Message { .. }) => {
                        e["content_index"] = 0.into();
                        e["logprobs"] = json!([]);
                        Some(("response.output_text.delta", d["text"].as_str()))
                    }
                    // Its annotations are sent when the text is whole: an
                    // Anthropic citation spans its block.
                    (Some("citations_delta"), ItemKind::Message { citations }) => {
                        citations.push(d["citation"].clone());
                        None
                    }
                    (Some("input_json_delta"), ItemKind::Search) => {
                        item.text
                            .push_str(d["partial_json"].as_str().unwrap_or_default());
                        None
                    }
                    (Some("input_json_delta"), ItemKind::Function { .. }) => Some((
                        "response.function_call_arguments.delta",
                        d["partial_json"].as_str(),
                    )),
                    (Some("input_json_delta"), ItemKind::Custom { .. }) => {
                        // Its text is sent whole when the block ends.
                        item.text
                            .push_str(d["partial_json"].as_str().unwrap_or_default());
                        None
                    }
                    (Some("signature_delta"), ItemKind::Reasoning { signature, .. }) => {
                        signature.push_str(d["signature"].as_str().unwrap_or_default());
                        None
                    }
                    (Some("thinking_delta"), ItemKind::Reasoning { .. }) => {
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
                match &item.kind {
                    ItemKind::Message { citations } => {
                        let annotations =
                            search::annotations(&Value::Array(citations.clone()), &item.text);
                        for (n, a) in annotations.iter().enumerate() {
                            let mut e = r.clone();
                            e["content_index"] = 0.into();
                            e["annotation_index"] = n.into();
                            e["annotation"] = a.clone();
                            self.emit("response.output_text.annotation.added", e, out);
                        }
                        let mut e = r.clone();
                        e["content_index"] = 0.into();
                        e["text"] = item.text.clone().into();
                        e["logprobs"] = json!([]);
                        self.emit("response.output_text.done", e, out);
                        let mut e = r;
                        e["content_index"] = 0.into();
                        e["part"] = json!({"type": "output_text", "text": item.text, "annotations": annotations});
                        self.emit("response.content_part.done", e, out);
                    }
                    ItemKind::Search => {
                        self.emit("response.web_search_call.searching", r.clone(), out);
                        self.emit("response.web_search_call.completed", r, out);
                    }
                    ItemKind::Function { .. } => {
                        let mut e = r;
                        e["arguments"] = item.text.clone().into();
                        self.emit("response.function_call_arguments.done", e, out);
                    }
                    ItemKind::Custom { .. } => {
                        let input = custom_input(&item.text);
                        let mut e = r.clone();
                        e["delta"] = input.clone().into();
                        self.emit("response.custom_tool_call_input.delta", e, out);
                        let mut e = r;
                        e["input"] = input.into();
                        self.emit("response.custom_tool_call_input.done", e, out);
                    }
                    ItemKind::Reasoning {
                        redacted: Some(_), ..
                    } => {}
                    ItemKind::Reasoning { .. } => {
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
        // Cut at a limit Codex did not set, the answer is whole as far as
        // Codex knows: an incomplete turn it would retry.
        if self.stop_reason.as_deref() == Some("max_tokens") && self.names.client_limit {
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
pub fn whole(v: &Value, model: &str, names: &ToolNames) -> Option<Value> {
    let content = v["content"].as_array()?;
    let id = format!("resp_{}", v["id"].as_str().unwrap_or("translated"));
    let mut output = Vec::new();
    for (n, b) in content.iter().enumerate() {
        match b["type"].as_str() {
            Some("text") => output.push(json!({
                "id": format!("msg_{id}_{n}"), "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": b["text"],
                    "annotations": search::annotations(&b["citations"], b["text"].as_str().unwrap_or_default())}],
            })),
            Some("server_tool_use") => {
                if let Some(mut call) = search::call_of_block(b) {
                    call["id"] = format!("ws_{id}_{n}").into();
                    output.push(call);
                }
            }
            Some("tool_use") if names.is_custom(&b["name"]) => output.push(json!({
                "id": format!("ctc_{id}_{n}"), "type": "custom_tool_call", "status": "completed",
                "call_id": b["id"], "name": b["name"],
                "input": b["input"][CUSTOM_INPUT].as_str().unwrap_or_default(),
            })),
            Some("tool_use") => output.push(json!({
                "id": format!("fc_{id}_{n}"), "type": "function_call", "status": "completed",
                "call_id": b["id"], "name": b["name"], "arguments": b["input"].to_string(),
            })),
            Some("thinking") => output.push(json!({
                "id": format!("rs_{id}_{n}"), "type": "reasoning",
                "summary": [{"type": "summary_text", "text": b["thinking"]}],
                "encrypted_content": responses::block_content(b),
            })),
            Some("redacted_thinking") => output.push(json!({
                "id": format!("rs_{id}_{n}"), "type": "reasoning", "summary": [],
                "encrypted_content": responses::block_content(b),
            })),
            _ => {}
        }
    }
    let incomplete = v["stop_reason"] == "max_tokens" && names.client_limit;
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

    /// A PDF and plain text inline, a PDF by URL; an uploaded file's id
    /// and other media types have no Anthropic document.
    #[test]
    fn file_inputs_become_documents() {
        assert_eq!(
            document_block(
                Some("data:application/pdf;base64,JVBE"),
                Some("a.pdf"),
                None
            ),
            Some(json!({"type": "document", "title": "a.pdf",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}))
        );
        assert_eq!(
            document_block(Some("data:text/plain;base64,bm90ZXM="), None, None),
            Some(json!({"type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}))
        );
        assert_eq!(
            document_block(None, None, Some("https://weir.example/a.pdf")),
            Some(
                json!({"type": "document", "source": {"type": "url", "url": "https://weir.example/a.pdf"}})
            )
        );
        assert_eq!(
            document_block(Some("data:image/png;base64,QUJD"), None, None),
            None
        );
        assert_eq!(
            document_block(Some("data:text/plain;base64,%%"), None, None),
            None
        );
        assert_eq!(document_block(None, Some("a.pdf"), None), None);
    }

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
        let (out, names) = to_messages(&req, "claude-sonnet-4").expect("translated");
        assert!(!names.client_limit);
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
                "tools": [
                    {"name": "shell", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "array"}}}},
                    {"type": "web_search_20250305", "name": "web_search"},
                ],
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
                "thinking": {"type": "enabled", "budget_tokens": 8192},
                "max_tokens": 24576,
                "stream": true,
            })
        );
    }

    fn run(events: &[(&str, Value)]) -> Vec<(String, Value)> {
        run_with(ToolNames::default(), events)
    }

    fn run_with(names: ToolNames, events: &[(&str, Value)]) -> Vec<(String, Value)> {
        let mut s = Stream::new("gpt-5-codex", names);
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
        let limited = ToolNames {
            client_limit: true,
            ..ToolNames::default()
        };
        let out = run_with(
            limited,
            &[
                ("message_start", json!({"message": {"id": "m"}})),
                (
                    "message_delta",
                    json!({"delta": {"stop_reason": "max_tokens"}}),
                ),
                ("message_stop", json!({})),
            ],
        );
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
        let r = whole(&m, "gpt", &ToolNames::default()).expect("response");
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

    fn ev(kind: &str, mut data: Value) -> (String, Value) {
        data["type"] = kind.into();
        (kind.to_string(), data)
    }

    /// Thinking Anthropic signed reaches Codex as a reasoning item whose
    /// encrypted content carries the block; Codex sends it back, and the
    /// block is restored exactly, in front of the call it led to, so the
    /// signature check and the tool-use continuation rule pass.
    #[test]
    fn thinking_goes_to_codex_and_comes_back_signed() {
        let events = [
            ev("message_start", json!({"message": {"id": "m1"}})),
            ev(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            ev(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "thinking_delta", "thinking": "List first."}}),
            ),
            ev(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCkYIBxgC"}}),
            ),
            ev("content_block_stop", json!({"index": 0})),
            ev(
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}}),
            ),
            ev("content_block_stop", json!({"index": 1})),
            ev(
                "content_block_start",
                json!({"index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}}),
            ),
            ev(
                "content_block_delta",
                json!({"index": 2, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
            ),
            ev("content_block_stop", json!({"index": 2})),
            ev(
                "message_delta",
                json!({"delta": {"stop_reason": "tool_use"}}),
            ),
            ev("message_stop", json!({})),
        ];
        let refs: Vec<(&str, Value)> = events
            .iter()
            .map(|(n, d)| (n.as_str(), d.clone()))
            .collect();
        let out = run(&refs);
        let done = &out.last().expect("terminal").1["response"]["output"];
        assert_eq!(done[0]["type"], "reasoning");
        assert_eq!(done[0]["summary"][0]["text"], "List first.");
        assert!(done[0]["encrypted_content"].is_string(), "{done}");
        assert_eq!(done[1]["summary"], json!([]));

        let mut input = vec![json!({"type": "message", "role": "user", "content": "list"})];
        input.extend(done.as_array().expect("output").iter().cloned());
        input
            .push(json!({"type": "function_call_output", "call_id": "toolu_1", "output": "a.txt"}));
        let req = json!({"model": "gpt-5", "input": input, "reasoning": {"effort": "low"}});
        let (out, _) = to_messages(&req, "claude-sonnet-4-5").expect("translated");
        assert_eq!(
            out["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "List first.", "signature": "EqQBCkYIBxgC"},
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}},
            ])
        );
        assert_eq!(out["thinking"]["type"], "enabled");

        let m = json!({"id": "m", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "redacted_thinking", "data": "d"},
        ], "stop_reason": "end_turn"});
        let r = whole(&m, "gpt", &ToolNames::default()).expect("response");
        for (n, block) in [(0, &m["content"][0]), (1, &m["content"][1])] {
            let enc = r["output"][n]["encrypted_content"]
                .as_str()
                .expect("carried");
            assert_eq!(responses::block_of_content(enc).as_ref(), Some(block));
        }
    }

    /// A tool-use continuation whose assistant turn has no thinking Anthropic
    /// signed (OpenAI's encrypted reasoning, or none) is sent with thinking
    /// off rather than refused.
    #[test]
    fn a_continuation_without_signed_thinking_turns_thinking_off() {
        let req = json!({"model": "gpt-5", "reasoning": {"effort": "high"}, "input": [
            {"type": "message", "role": "user", "content": "list"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-openai"},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a"},
        ]});
        let (out, _) = to_messages(&req, "claude-sonnet-4").expect("translated");
        assert!(out.get("thinking").is_none(), "{out}");
        assert_eq!(out["messages"][1]["content"][0]["type"], "tool_use");
        // A new user turn after the answer is no continuation: thinking stays.
        let mut req = req;
        let input = req["input"].as_array_mut().expect("input");
        input.push(json!({"type": "message", "role": "assistant", "content": "One file."}));
        input.push(json!({"type": "message", "role": "user", "content": "now what?"}));
        let (out, _) = to_messages(&req, "claude-sonnet-4").expect("translated");
        assert_eq!(out["thinking"]["type"], "enabled");
    }

    /// Without Codex's own limit, `max_tokens` is sized for the model and
    /// the thinking budget, and an answer cut there is complete as far as
    /// Codex knows (it retries an incomplete turn).
    #[test]
    fn limits_are_sized_for_the_model_and_incomplete_only_at_codexs_own() {
        assert_eq!(
            limits("claude-sonnet-4-5", None, Some(8192)),
            (24_576, Some(8192))
        );
        assert_eq!(limits("claude-sonnet-4", None, None), (16_384, None));
        assert_eq!(
            limits("claude-opus-4-1-20250805", None, Some(24_576)),
            (32_000, Some(24_576))
        );
        assert_eq!(
            limits("claude-3-5-haiku-latest", None, Some(24_576)),
            (8_192, Some(7_168))
        );
        assert_eq!(
            limits("claude-sonnet-4", Some(100), Some(2048)),
            (3_072, Some(2048))
        );
        assert_eq!(limits("claude-sonnet-4", Some(1), None), (1, None));
        for model in ["claude-3-haiku", "claude-opus-4-6", "other"] {
            for limit in [None, Some(0), Some(1), Some(1500), Some(u64::MAX)] {
                for effort in [None, Some(2048), Some(24_576)] {
                    let (max, budget) = limits(model, limit, effort);
                    assert!(max >= 1 && max <= crate::wire::anthropic::max_output_tokens(model));
                    if let Some(b) = budget {
                        assert!(b >= 1024 && b < max, "{model} {limit:?} {effort:?}");
                    }
                }
            }
        }
        let cut = [
            ("message_start", json!({"message": {"id": "m"}})),
            (
                "message_delta",
                json!({"delta": {"stop_reason": "max_tokens"}}),
            ),
            ("message_stop", json!({})),
        ];
        let out = run(&cut);
        let last = &out.last().expect("terminal").1;
        assert_eq!(last["type"], "response.completed");
        let m = json!({"id": "m", "content": [], "stop_reason": "max_tokens"});
        let r = whole(&m, "gpt", &ToolNames::default()).expect("response");
        assert_eq!(r["status"], "completed");
    }

    /// Codex's freeform `apply_patch`: a one-string tool for Claude, its
    /// calls back as `custom_tool_call`s (whole and streamed), and the
    /// history's custom calls and outputs as tool_use / tool_result.
    #[test]
    fn an_output_schema_becomes_output_config_format() {
        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false});
        let req = json!({"model": "gpt-5", "input": "check", "text": {"format": {"type": "json_schema", "name": "codex_output_schema", "schema": schema, "strict": true}}});
        let (out, _) = to_messages(&req, "claude-sonnet-4-5").unwrap();
        assert_eq!(
            out["output_config"],
            json!({"format": {"type": "json_schema", "schema": schema}})
        );
        let plain =
            json!({"model": "gpt-5", "input": "check", "text": {"format": {"type": "text"}}});
        assert!(
            to_messages(&plain, "claude-sonnet-4-5")
                .unwrap()
                .0
                .get("output_config")
                .is_none()
        );
    }

    #[test]
    fn a_prompt_cache_key_marks_the_stable_prefix_for_anthropic() {
        let req = json!({"model": "gpt-5", "instructions": "Be Codex.", "prompt_cache_key": "conv-1",
        "tools": [
            {"type": "function", "name": "a", "parameters": {"type": "object"}},
            {"type": "function", "name": "b", "parameters": {"type": "object"}},
        ],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]},
        ]});
        let (out, _) = to_messages(&req, "claude-sonnet-4-5").unwrap();
        let eph = json!({"type": "ephemeral"});
        assert_eq!(
            out["system"],
            json!([{"type": "text", "text": "Be Codex.", "cache_control": eph}])
        );
        assert_eq!(out["tools"][1]["cache_control"], eph);
        assert!(out["tools"][0].get("cache_control").is_none());
        assert_eq!(out["messages"][1]["content"][0]["cache_control"], eph);
        let text = out.to_string();
        assert_eq!(text.matches("cache_control").count(), 3, "{text}");
        let mut plain = req.clone();
        plain.as_object_mut().unwrap().remove("prompt_cache_key");
        let (out, _) = to_messages(&plain, "claude-sonnet-4-5").unwrap();
        assert!(!out.to_string().contains("cache_control"));
    }

    #[test]
    fn freeform_tools_travel_as_one_string() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
        let req = json!({"model": "gpt-5-codex", "max_output_tokens": 4000,
        "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}}],
        "tool_choice": {"type": "custom", "name": "apply_patch"},
        "input": [
            {"type": "message", "role": "user", "content": "add a.txt"},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": patch},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
        ]});
        let (out, names) = to_messages(&req, "claude-sonnet-4").expect("translated");
        let tool = &out["tools"][0];
        assert_eq!(tool["name"], "apply_patch");
        assert_eq!(tool["input_schema"]["required"], json!(["input"]));
        assert!(
            tool["input_schema"]["properties"]["input"]["description"]
                .as_str()
                .is_some_and(|d| d.contains("start: begin_patch"))
        );
        assert_eq!(
            out["tool_choice"],
            json!({"type": "tool", "name": "apply_patch"})
        );
        assert_eq!(
            out["messages"][1]["content"][0],
            json!({"type": "tool_use", "id": "c1", "name": "apply_patch", "input": {"input": patch}})
        );
        assert_eq!(
            out["messages"][2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "c1", "content": "Done"})
        );
        assert!(names.client_limit);

        let arguments = json!({"input": patch}).to_string();
        let (a, b) = arguments.split_at(10);
        let out = run_with(
            names.clone(),
            &[
                ("message_start", json!({"message": {"id": "m"}})),
                (
                    "content_block_start",
                    json!({"index": 0, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "apply_patch", "input": {}}}),
                ),
                (
                    "content_block_delta",
                    json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": a}}),
                ),
                (
                    "content_block_delta",
                    json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": b}}),
                ),
                ("content_block_stop", json!({"index": 0})),
                (
                    "message_delta",
                    json!({"delta": {"stop_reason": "tool_use"}}),
                ),
                ("message_stop", json!({})),
            ],
        );
        let kinds: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            kinds[2..6],
            [
                "response.output_item.added",
                "response.custom_tool_call_input.delta",
                "response.custom_tool_call_input.done",
                "response.output_item.done",
            ]
        );
        assert_eq!(out[2].1["item"]["type"], "custom_tool_call");
        assert_eq!(out[3].1["delta"], patch);
        assert_eq!(
            out[5].1["item"],
            json!({"id": "ctc_resp_m_0", "type": "custom_tool_call", "status": "completed", "call_id": "toolu_9", "name": "apply_patch", "input": patch})
        );
        let m = json!({"id": "m", "content": [{"type": "tool_use", "id": "t", "name": "apply_patch", "input": {"input": patch}}], "stop_reason": "tool_use"});
        let r = whole(&m, "gpt", &names).expect("response");
        assert_eq!(r["output"][0]["type"], "custom_tool_call");
        assert_eq!(r["output"][0]["input"], patch);
    }
}
