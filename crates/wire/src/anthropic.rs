//! The Anthropic Messages API (Claude Code's): `POST /v1/messages`,
//! `POST /v1/messages/count_tokens`, `GET /v1/models`; the key in
//! `x-api-key` with `anthropic-version`; errors as
//! `{"type":"error","error":{"type","message"}}`; a stream of named events
//! from `message_start` to `message_stop`, with `ping` as its keep-alive.

use bytes::Bytes;
use http::StatusCode;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{EventClass, Observed, Usage, lenient, read_shape, shape_value, sse, type_of};

pub const BASE_URL: &str = "https://api.anthropic.com";
pub const MESSAGES_PATH: &str = "/v1/messages";
pub const COUNT_TOKENS_PATH: &str = "/v1/messages/count_tokens";
/// The header Anthropic's answers carry their request id in.
pub const REQUEST_ID_HEADER: &str = "request-id";
pub(crate) const KEY_HEADER: &str = "x-api-key";
/// The API version sent when the client named none (translated requests).
pub(crate) const VERSION: &str = "2023-06-01";

pub(super) fn endpoint(path: &str) -> Option<super::Endpoint> {
    match path {
        MESSAGES_PATH => Some(super::Endpoint::Messages),
        COUNT_TOKENS_PATH => Some(super::Endpoint::CountTokens),
        _ => None,
    }
}

pub(super) fn key_header(key: &str) -> (HeaderName, String) {
    (HeaderName::from_static(KEY_HEADER), key.to_string())
}

/// A request arriving from an OpenAI client: `openai-*` headers dropped, a
/// passed-through `Authorization: Bearer` moved to `x-api-key`, and the
/// version header Anthropic requires.
pub(super) fn adopt_headers(headers: &mut HeaderMap, passthrough: bool) {
    super::remove_prefixed(headers, "openai-");
    let key = HeaderName::from_static(KEY_HEADER);
    if passthrough
        && !headers.contains_key(&key)
        && let Some(token) = headers
            .get(AUTHORIZATION)
            .and_then(crate::fields::bearer)
            .and_then(|t| HeaderValue::from_str(t).ok())
    {
        headers.remove(AUTHORIZATION);
        headers.insert(key, token);
    }
    if !headers.contains_key("anthropic-version") {
        headers.insert("anthropic-version", HeaderValue::from_static(VERSION));
    }
}

/// How Claude Code's billing block starts: the first system block, with a
/// nonce that changes on every request. It is for Anthropic's billing,
/// not an instruction to the model.
pub const BILLING_BLOCK_PREFIX: &str = "x-anthropic-billing-header";

/// The system prompt's text for a model of another vendor: text blocks
/// joined, without Claude Code's billing block — sent on, its per-request
/// nonce at the front of the prompt would defeat every prefix cache
/// (OpenAI's, vLLM's, llama.cpp's, Ollama's).
pub fn system_text(system: &Value) -> String {
    match system {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .filter(|t| !t.starts_with(BILLING_BLOCK_PREFIX))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What starts the `signature` of a thinking block weir made from another
/// vendor's reasoning: Anthropic's signatures are opaque base64 and never
/// start with it. Such a block is never sent to Anthropic as if it had
/// signed it.
pub const WEIR_SIGNATURE_PREFIX: &str = "weir.";

/// Whether a `thinking` / `redacted_thinking` block can go to Anthropic:
/// one it signed (a `thinking` block with a signature not weir's), or a
/// `redacted_thinking` block (its `data` is Anthropic's own).
pub fn signed_by_anthropic(block: &Value) -> bool {
    match type_of(block) {
        Some(block::THINKING) => block["signature"]
            .as_str()
            .is_some_and(|s| !s.is_empty() && !s.starts_with(WEIR_SIGNATURE_PREFIX)),
        Some(block::REDACTED_THINKING) => block["data"].is_string(),
        _ => false,
    }
}

/// Whether a content block is thinking of any kind.
pub fn is_thinking(block: &Value) -> bool {
    matches!(
        type_of(block),
        Some(block::THINKING | block::REDACTED_THINKING)
    )
}

/// A request's thinking turned off: `thinking` removed, with the context
/// edits that require it (`clear_thinking_*`).
pub fn thinking_off(request: &mut serde_json::Map<String, Value>) {
    request.remove("thinking");
    if let Some(cm) = request.get_mut("context_management")
        && let Some(edits) = cm.get_mut("edits").and_then(Value::as_array_mut)
    {
        edits.retain(|e| !type_of(e).is_some_and(|t| t.starts_with("clear_thinking")));
        if edits.is_empty() {
            request.remove("context_management");
        }
    }
}

/// The type of Anthropic's web search server tool, as weir sends it
/// (docs.claude.com/en/docs/agents-and-tools/tool-use/web-search-tool);
/// later versions (`web_search_2026…`) are read as the same tool.
pub const WEB_SEARCH_TOOL: &str = "web_search_20250305";
/// The fixed name of that tool and of its `server_tool_use` blocks.
pub const WEB_SEARCH_NAME: &str = "web_search";

/// Whether a tool definition is Anthropic's web search server tool.
pub fn is_web_search_tool(tool: &Value) -> bool {
    type_of(tool).is_some_and(|t| t.starts_with("web_search_"))
}

/// The `encrypted_content` of a search result, and the `encrypted_index`
/// of a citation, that weir made from another vendor's search: Anthropic
/// issued neither, so such blocks never go to it.
pub const WEIR_SEARCH_MARK: &str = "weir.w1";
/// How the ids of the `server_tool_use` blocks weir makes start (a search
/// with no results has no `encrypted_content` to mark).
pub const WEIR_SEARCH_ID_PREFIX: &str = "srvtoolu_weir_";

/// Whether a block is a web search weir made from another vendor's: its
/// `server_tool_use` or its `web_search_tool_result`.
pub fn is_weir_search(block: &Value) -> bool {
    let id = match type_of(block) {
        Some(block::SERVER_TOOL_USE) => &block["id"],
        Some(block::WEB_SEARCH_TOOL_RESULT) => &block["tool_use_id"],
        _ => return false,
    };
    id.as_str()
        .is_some_and(|id| id.starts_with(WEIR_SEARCH_ID_PREFIX))
}

/// A text block without the citations weir made (of another vendor's
/// search); whether it had any.
pub fn strip_weir_citations(block: &mut Value) -> bool {
    let Some(fields) = block.as_object_mut() else {
        return false;
    };
    let Some(citations) = fields.get_mut("citations").and_then(Value::as_array_mut) else {
        return false;
    };
    let before = citations.len();
    citations.retain(|c| c["encrypted_index"] != WEIR_SEARCH_MARK);
    let removed = citations.len() != before;
    if citations.is_empty() {
        fields.remove("citations");
    }
    removed
}

/// The smallest `thinking.budget_tokens` Anthropic accepts.
pub const MIN_THINKING_BUDGET: u64 = 1024;

/// The most `max_tokens` a Claude model takes (Anthropic refuses more), by
/// its id; 32,000 for one weir does not know.
pub fn max_output_tokens(model: &str) -> u64 {
    const BY_PREFIX: [(&str, u64); 9] = [
        ("claude-opus-4-0", 32_000),
        ("claude-opus-4-1", 32_000),
        ("claude-opus-4-2025", 32_000),
        ("claude-opus-4", 64_000),
        ("claude-sonnet-4", 64_000),
        ("claude-haiku-4", 64_000),
        ("claude-3-7-sonnet", 64_000),
        ("claude-3-5", 8_192),
        ("claude-3", 4_096),
    ];
    let model = model.to_ascii_lowercase();
    BY_PREFIX
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map_or(32_000, |(_, n)| *n)
}

/// The `error.type` for a status.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        501 => "not_supported",
        503 | 529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The status an `error.type` stands for (the inverse of [`error_type`],
/// for errors that arrive inside a stream, with no status of their own).
pub fn status_of(error_type: &str) -> StatusCode {
    match error_type {
        "authentication_error" => StatusCode::UNAUTHORIZED,
        "permission_error" => StatusCode::FORBIDDEN,
        "not_found_error" => StatusCode::NOT_FOUND,
        "request_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
        "rate_limit_error" => StatusCode::TOO_MANY_REQUESTS,
        "overloaded_error" => StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        "invalid_request_error" => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An error body; generated errors carry weir's `request_id`.
pub fn error_body(status: StatusCode, message: &str, request_id: Option<&str>) -> String {
    error_value(error_type(status), message, request_id).to_string()
}

fn error_value(kind: &str, message: &str, request_id: Option<&str>) -> Value {
    let mut v = json!({"type": event::ERROR, "error": {"type": kind, "message": message}});
    if let Some(id) = request_id {
        v["request_id"] = id.into();
    }
    v
}

/// An error body with an explicit `error.type`.
pub fn typed_error_body(kind: &str, message: &str) -> String {
    error_value(kind, message, None).to_string()
}

/// What an error body says: its `error.type` and message.
pub fn read_error(body: &Value) -> (Option<&str>, Option<&str>) {
    (
        body["error"]["type"].as_str(),
        body["error"]["message"].as_str(),
    )
}

/// Words Claude Code acts on: an error starting `prompt is too long`
/// makes it compact its context. With the numbers when they are known.
pub fn prompt_too_long(tokens: Option<(u64, u64)>, detail: &str) -> String {
    match tokens {
        Some((actual, max)) => format!("prompt is too long: {actual} tokens > {max} maximum"),
        None => format!("prompt is too long: {detail}"),
    }
}

/// Whether an error message reports a context-window overflow.
pub fn is_overflow(message: &str) -> bool {
    message.starts_with("prompt is too long")
}

/// One stream event, written as Anthropic writes them.
pub fn event(data: &Value) -> Bytes {
    sse::event(type_of(data).unwrap_or(event::ERROR), data)
}

/// An error event inside a stream.
pub fn error_event(kind: &str, message: &str) -> Bytes {
    sse::event(event::ERROR, &error_value(kind, message, None))
}

/// The opening of a stream: `message_start` (for the model the client
/// asked for) and a `ping`, as Anthropic sends them.
pub fn opening(id: &str, model: &str, out: &mut Vec<Bytes>) {
    out.push(event(&json!({"type": event::MESSAGE_START, "message": {
        "id": format!("msg_{id}"),
        "type": MESSAGE,
        "role": role::ASSISTANT,
        "model": model,
        "content": [],
        "stop_reason": null,
        "stop_sequence": null,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }})));
    out.push(event(&json!({"type": event::PING})));
}

/// What a `message_start` event says of the message: its id, and the
/// usage so far (the input side).
pub fn message_started(data: &Value) -> (Option<&str>, Usage) {
    let m = &data["message"];
    (m["id"].as_str(), usage(&m["usage"]).unwrap_or_default())
}

/// The events of content block `index`, as a translated stream writes
/// them: its start, each delta, its stop.
pub fn block_start(index: usize, block: &Value) -> Bytes {
    event(&json!({"type": event::CONTENT_BLOCK_START, "index": index, "content_block": block}))
}

pub fn block_delta(index: usize, delta: &Value) -> Bytes {
    event(&json!({"type": event::CONTENT_BLOCK_DELTA, "index": index, "delta": delta}))
}

pub fn block_stop(index: usize) -> Bytes {
    event(&json!({"type": event::CONTENT_BLOCK_STOP, "index": index}))
}

/// The end of a stream: `message_delta` with the stop reason and the
/// usage, then `message_stop`.
pub fn closing(stop_reason: &str, usage: Value, out: &mut Vec<Bytes>) {
    out.push(event(&json!({"type": event::MESSAGE_DELTA,
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": usage})));
    out.push(event(&json!({"type": event::MESSAGE_STOP})));
}

pub(super) fn keepalive() -> Bytes {
    Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n")
}

pub(super) fn in_band_error(message: &str) -> Bytes {
    error_event("api_error", message)
}

pub(super) fn observe(name: Option<&str>, data: &str) -> Observed {
    let parsed;
    let kind = match name {
        Some(n) => n,
        None => {
            parsed = serde_json::from_str::<Value>(data).ok();
            parsed.as_ref().and_then(type_of).unwrap_or_default()
        }
    };
    let class = match kind {
        event::MESSAGE_START => EventClass::Preamble,
        event::PING => EventClass::KeepAlive,
        event::ERROR => EventClass::Error,
        event::MESSAGE_STOP => EventClass::Done,
        _ => EventClass::Content,
    };
    // Usage rides on message_start and message_delta, the stop reason on
    // message_delta: only those are parsed.
    let v = if data.contains("usage") || data.contains("stop_reason") {
        serde_json::from_str::<Value>(data).ok()
    } else {
        None
    };
    let Some(v) = v else {
        return Observed::of(class, None);
    };
    let u = match kind {
        event::MESSAGE_START => &v["message"]["usage"],
        _ => &v["usage"],
    };
    Observed {
        class,
        usage: usage(u),
        finish: v["delta"]["stop_reason"].as_str().map(super::Finish::of),
    }
}

/// A Messages `usage` object: the counts weir reads and writes (others,
/// such as `server_tool_use`, are left unread). A count that is absent or
/// not a non-negative integer is `None`.
#[derive(Default, serde::Deserialize, serde::Serialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "lenient")]
    input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    cache_read_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    cache_creation_input_tokens: Option<u64>,
}

/// A Messages `usage` object (`None` when it is not an object).
pub fn usage(u: &Value) -> Option<Usage> {
    read_shape::<WireUsage>(u).map(|w| Usage {
        input: w.input_tokens.unwrap_or(0),
        output: w.output_tokens.unwrap_or(0),
        cache_read: w.cache_read_input_tokens.unwrap_or(0),
        cache_write: w.cache_creation_input_tokens.unwrap_or(0),
    })
}

/// A `message_delta`'s usage over the running totals: the fields it
/// reports replace the earlier ones (they are cumulative); fields it
/// leaves out, or of the wrong type, keep theirs.
pub fn update_usage(total: &mut Usage, delta: &Value) {
    let w: WireUsage = read_shape(delta).unwrap_or_default();
    let set = |field: &mut u64, n: Option<u64>| {
        if let Some(n) = n {
            *field = n;
        }
    };
    set(&mut total.input, w.input_tokens);
    set(&mut total.output, w.output_tokens);
    set(&mut total.cache_read, w.cache_read_input_tokens);
    set(&mut total.cache_write, w.cache_creation_input_tokens);
}

/// A `usage` object in this API's terms.
pub fn usage_value(u: Usage) -> Value {
    shape_value(&WireUsage {
        input_tokens: Some(u.input),
        output_tokens: Some(u.output),
        cache_read_input_tokens: Some(u.cache_read),
        cache_creation_input_tokens: Some(u.cache_write),
    })
}

pub(super) fn model_list<'a>(names: impl Iterator<Item = &'a str>) -> Value {
    let data: Vec<_> = names
        .map(|m| json!({"type": "model", "id": m, "display_name": m, "created_at": "1970-01-01T00:00:00Z"}))
        .collect();
    json!({
        "data": data,
        "has_more": false,
        "first_id": data.first().map(|d| d["id"].clone()),
        "last_id": data.last().map(|d| d["id"].clone()),
    })
}

/// The JSON schema a request constrains its answer to: `output_config.format`
/// (structured outputs, generally available; platform.claude.com/docs/en/
/// build-with-claude/structured-outputs), or `output_format`, the same
/// object under the earlier `structured-outputs-2025-11-13` beta.
pub fn output_schema(v: &Value) -> Option<&Value> {
    [&v["output_config"]["format"], &v["output_format"]]
        .into_iter()
        .find(|f| type_of(f) == Some(JSON_SCHEMA))
        .map(|f| &f["schema"])
        .filter(|s| s.is_object())
}

/// The type of an output format that constrains answers to a schema.
const JSON_SCHEMA: &str = "json_schema";

/// `output_config.format` for answers constrained to `schema`.
pub fn output_format(schema: &Value) -> Value {
    json!({"type": JSON_SCHEMA, "schema": schema})
}

/// Marks `block` as the end of a cached prefix (prompt caching: at most 4
/// such breakpoints in a request; platform.claude.com/docs/en/
/// build-with-claude/prompt-caching).
pub fn mark_cache_breakpoint(block: &mut Value) {
    if let Some(b) = block.as_object_mut() {
        b.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// The `type` of a whole answer (a Messages object).
pub(crate) const MESSAGE: &str = "message";

/// The type names of a Messages stream's events (also their SSE `event:`
/// names).
pub(crate) mod event {
    pub(crate) const MESSAGE_START: &str = "message_start";
    pub(crate) const MESSAGE_DELTA: &str = "message_delta";
    pub(crate) const MESSAGE_STOP: &str = "message_stop";
    pub(crate) const CONTENT_BLOCK_START: &str = "content_block_start";
    pub(crate) const CONTENT_BLOCK_DELTA: &str = "content_block_delta";
    pub(crate) const CONTENT_BLOCK_STOP: &str = "content_block_stop";
    pub(crate) const PING: &str = "ping";
    pub(crate) const ERROR: &str = "error";
}

/// The type names of a `content_block_delta`'s delta.
pub(crate) mod delta {
    pub(crate) const TEXT: &str = "text_delta";
    pub(crate) const INPUT_JSON: &str = "input_json_delta";
    pub(crate) const THINKING: &str = "thinking_delta";
    pub(crate) const SIGNATURE: &str = "signature_delta";
    pub(crate) const CITATIONS: &str = "citations_delta";
}

/// The type names of content blocks, in a request's messages and in an
/// answer's `content` (text, image and document share their names with
/// OpenAI Chat parts, but are Messages' own here: each API names its
/// shapes in its own module).
pub(crate) mod block {
    pub(crate) const TEXT: &str = "text";
    pub(crate) const IMAGE: &str = "image";
    pub(crate) const DOCUMENT: &str = "document";
    pub(crate) const TOOL_USE: &str = "tool_use";
    pub(crate) const TOOL_RESULT: &str = "tool_result";
    pub(crate) const SERVER_TOOL_USE: &str = "server_tool_use";
    pub(crate) const WEB_SEARCH_TOOL_RESULT: &str = "web_search_tool_result";
    pub(crate) const REDACTED_THINKING: &str = "redacted_thinking";
    pub(crate) const THINKING: &str = "thinking";
    /// One result inside a `web_search_tool_result`'s content.
    pub(crate) const WEB_SEARCH_RESULT: &str = "web_search_result";
    /// A `web_search_tool_result`'s content when the search failed.
    pub(crate) const WEB_SEARCH_TOOL_RESULT_ERROR: &str = "web_search_tool_result_error";
}

/// The type names of an image or document block's `source`.
pub(crate) mod source {
    pub(crate) const BASE64: &str = "base64";
    pub(crate) const URL: &str = "url";
    /// A plain-text document (its text in `data`).
    pub(crate) const TEXT: &str = "text";
    /// A document given as content blocks.
    pub(crate) const CONTENT: &str = "content";
}

/// The type of a text block's citation of a search result.
pub(crate) const CITATION_OF_SEARCH: &str = "web_search_result_location";

/// The types of `tool_choice`.
pub(crate) mod tool_choice {
    pub(crate) const AUTO: &str = "auto";
    pub(crate) const ANY: &str = "any";
    pub(crate) const TOOL: &str = "tool";
    pub(crate) const NONE: &str = "none";
}

/// The types of a request's `thinking`.
pub(crate) mod thinking {
    /// With a `budget_tokens`.
    pub(crate) const ENABLED: &str = "enabled";
    /// The model decides, at `output_config.effort`.
    pub(crate) const ADAPTIVE: &str = "adaptive";
}

/// The `stop_reason`s of an answer.
pub(crate) mod stop {
    pub(crate) const END_TURN: &str = "end_turn";
    pub(crate) const MAX_TOKENS: &str = "max_tokens";
    pub(crate) const TOOL_USE: &str = "tool_use";
    pub(crate) const REFUSAL: &str = "refusal";
    pub(crate) const MODEL_CONTEXT_WINDOW_EXCEEDED: &str = "model_context_window_exceeded";
}

/// The roles of a request's messages (the system prompt is not one).
pub(crate) mod role {
    pub(crate) const USER: &str = "user";
    pub(crate) const ASSISTANT: &str = "assistant";
}
