//! The OpenAI Responses API (Codex's): `POST /v1/responses`; a stream of
//! named events from `response.created` to a terminal
//! `response.completed` / `response.incomplete` / `response.failed`, each
//! with a `sequence_number`. Codex ends a turn only on a terminal event,
//! so a broken stream gets `error` *and* `response.failed`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::anthropic::block;
use super::openai::{CachedDetails, ReasoningDetails};
use super::{EventClass, Observed, Usage, lenient, read_shape, shape_value, sse, type_of};

pub const PATH: &str = "/v1/responses";
/// The smallest `max_output_tokens` the API accepts (Claude Code's quota
/// probe asks for 1).
pub const MIN_MAX_OUTPUT_TOKENS: u64 = 16;

/// A translated request made fit for an upstream whose model is
/// (`reasoning`) or is not a reasoning model: the parameters it would
/// refuse are left out, and without reasoning nothing asks for encrypted
/// reasoning either.
pub fn fit(body: &mut serde_json::Map<String, Value>, reasoning: bool) {
    super::openai::fit_reasoning(body, reasoning, "reasoning");
    if !reasoning && let Some(Value::Array(include)) = body.get_mut("include") {
        include.retain(|i| i != "reasoning.encrypted_content");
        if include.is_empty() {
            body.remove("include");
        }
    }
}

/// What a translated request asks for so that reasoning can be carried to
/// the next turn without storing anything upstream.
pub const INCLUDE_ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

/// How a thinking block's `signature` carries a Responses `reasoning` item
/// for the next turn: this prefix, the item's id (base64url, so it holds no
/// dot), a dot, then its `encrypted_content` as the upstream sent it.
const REASONING_SIGNATURE: &str = "weir.r1.";
/// The signature of a thinking block made from a reasoning summary that
/// came without encrypted content: nothing to carry back.
pub const SUMMARY_SIGNATURE: &str = "weir.s1";
/// How a `reasoning` item's `encrypted_content` carries an Anthropic
/// thinking or redacted_thinking block for the next turn: this prefix, then
/// the block as JSON in base64url.
const BLOCK_CONTENT: &str = "weir.a1.";

/// A thinking block's signature carrying reasoning item `id` and its
/// `encrypted` content.
pub fn reasoning_signature(id: &str, encrypted: &str) -> String {
    use base64::Engine as _;
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id);
    format!("{REASONING_SIGNATURE}{id}.{encrypted}")
}

/// The reasoning item (id, encrypted content) a signature carries, if it is
/// one [`reasoning_signature`] made.
pub fn reasoning_of_signature(signature: &str) -> Option<(String, &str)> {
    use base64::Engine as _;
    let (id, encrypted) = signature
        .strip_prefix(REASONING_SIGNATURE)?
        .split_once('.')?;
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(id)
        .ok()?;
    Some((String::from_utf8(id).ok()?, encrypted))
}

/// The `include` value that makes a `web_search_call` list the pages it
/// found (`action.sources`), which an Anthropic client gets as results.
pub const INCLUDE_SEARCH_SOURCES: &str = "web_search_call.action.sources";

/// Whether a tool definition is OpenAI's web search tool (`web_search`,
/// its dated form, or the older `web_search_preview`).
pub fn is_web_search_tool(tool: &Value) -> bool {
    type_of(tool).is_some_and(|t| t.starts_with(tool::WEB_SEARCH))
}

/// The `encrypted_content` carrying an Anthropic thinking block.
pub fn block_content(block: &Value) -> String {
    use base64::Engine as _;
    let json = block.to_string();
    format!(
        "{BLOCK_CONTENT}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    )
}

/// The Anthropic thinking / redacted_thinking block an `encrypted_content`
/// carries, if [`block_content`] made it.
pub fn block_of_content(content: &str) -> Option<Value> {
    use base64::Engine as _;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(content.strip_prefix(BLOCK_CONTENT)?)
        .ok()?;
    let b: Value = serde_json::from_slice(&json).ok()?;
    match type_of(&b) {
        Some(block::THINKING) if b["thinking"].is_string() && b["signature"].is_string() => Some(
            json!({"type": block::THINKING, "thinking": b["thinking"], "signature": b["signature"]}),
        ),
        Some(block::REDACTED_THINKING) if b["data"].is_string() => {
            Some(json!({"type": block::REDACTED_THINKING, "data": b["data"]}))
        }
        _ => None,
    }
}

pub(super) fn endpoint(path: &str) -> Option<super::Endpoint> {
    (path == PATH).then_some(super::Endpoint::Responses)
}

pub(super) fn observe(name: Option<&str>, data: &str) -> Observed {
    let parsed = if name.is_none() || data.contains("usage") {
        serde_json::from_str::<Value>(data).ok()
    } else {
        None
    };
    let kind = name
        .or_else(|| parsed.as_ref().and_then(type_of))
        .unwrap_or_default();
    let class = match kind {
        event::CREATED | event::IN_PROGRESS => EventClass::Preamble,
        event::ERROR | event::FAILED => EventClass::Error,
        event::COMPLETED | event::INCOMPLETE => EventClass::Done,
        _ => EventClass::Content,
    };
    let usage = parsed.as_ref().and_then(|v| usage(&v["response"]["usage"]));
    let finish = match (class, &parsed) {
        (EventClass::Done, Some(v)) => finish(
            v["response"]["status"].as_str(),
            &v["response"]["incomplete_details"],
        ),
        _ => None,
    };
    Observed {
        class,
        usage,
        finish,
    }
}

/// Why a response ended: `incomplete`'s reason (`max_output_tokens`,
/// `content_filter`), else its status.
pub(super) fn finish(status: Option<&str>, incomplete: &Value) -> Option<super::Finish> {
    incomplete["reason"]
        .as_str()
        .or(status)
        .map(super::Finish::of)
}

/// `sequence_number` of an event, read without a full parse.
pub(super) fn sequence_number(data: &str) -> Option<u64> {
    const KEY: &str = "\"sequence_number\":";
    let at = data.find(KEY)?.checked_add(KEY.len())?;
    let digits: String = data
        .get(at..)?
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A Responses `usage` object: `input_tokens` counts cached input too
/// ([`Usage::input`] does not). A count that is absent or not a
/// non-negative integer is 0.
#[derive(Default, serde::Deserialize, serde::Serialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "lenient")]
    input_tokens: u64,
    #[serde(default, deserialize_with = "lenient")]
    input_tokens_details: CachedDetails,
    #[serde(default, deserialize_with = "lenient")]
    output_tokens: u64,
    #[serde(default, deserialize_with = "lenient")]
    output_tokens_details: ReasoningDetails,
    #[serde(default, deserialize_with = "lenient")]
    total_tokens: u64,
}

/// A Responses `usage` object (`None` when it is not an object).
pub fn usage(u: &Value) -> Option<Usage> {
    read_shape::<WireUsage>(u).map(|w| {
        let cached = w.input_tokens_details.cached_tokens;
        Usage {
            input: w.input_tokens.saturating_sub(cached),
            output: w.output_tokens,
            cache_read: cached,
            cache_write: 0,
        }
    })
}

/// A `usage` object in this API's terms.
pub fn usage_value(u: Usage) -> Value {
    let input = u
        .input
        .saturating_add(u.cache_read)
        .saturating_add(u.cache_write);
    shape_value(&WireUsage {
        input_tokens: input,
        input_tokens_details: CachedDetails {
            cached_tokens: u.cache_read,
        },
        output_tokens: u.output,
        output_tokens_details: ReasoningDetails {
            reasoning_tokens: 0,
        },
        total_tokens: input.saturating_add(u.output),
    })
}

/// The `code` of a `response.failed` for an error of `status`: the codes
/// Codex acts on (it backs off on `rate_limit_exceeded` and
/// `server_is_overloaded`, compacts on `context_length_exceeded`).
pub fn failed_code(status: http::StatusCode) -> &'static str {
    match status.as_u16() {
        429 => "rate_limit_exceeded",
        503 | 529 => "server_is_overloaded",
        _ => "server_error",
    }
}

pub(super) fn in_band_error(message: &str, sequence: u64) -> Bytes {
    let error = json!({
        "type": event::ERROR,
        "code": "server_error",
        "message": message,
        "param": null,
        "sequence_number": sequence,
    });
    let failed = json!({
        "type": event::FAILED,
        "response": {
            "id": "resp_incomplete",
            "object": "response",
            "status": status::FAILED,
            "output": [],
            "error": {"code": "server_error", "message": message},
        },
        "sequence_number": sequence.saturating_add(1),
    });
    let mut out = sse::event(event::ERROR, &error).to_vec();
    out.extend_from_slice(&sse::event(event::FAILED, &failed));
    Bytes::from(out)
}

/// The JSON schema of `text.format` (`{type: "json_schema", name, schema,
/// strict}`), when the request asks for structured output.
pub fn output_schema(v: &Value) -> Option<&Value> {
    let f = &v["text"]["format"];
    (type_of(f) == Some(format::JSON_SCHEMA) && f["schema"].is_object()).then_some(&f["schema"])
}

/// `text` for answers following `schema`. Not `strict`: strict mode
/// refuses schemas with optional properties, which Anthropic's accept.
pub fn text_format(schema: &Value) -> Value {
    json!({"format": {"type": format::JSON_SCHEMA, "name": "output", "schema": schema, "strict": false}})
}

/// The type names of a Responses stream's events (also their SSE `event:`
/// names).
pub(crate) mod event {
    pub(crate) const COMPLETED: &str = "response.completed";
    pub(crate) const CONTENT_PART_ADDED: &str = "response.content_part.added";
    pub(crate) const CONTENT_PART_DONE: &str = "response.content_part.done";
    pub(crate) const CREATED: &str = "response.created";
    pub(crate) const CUSTOM_TOOL_CALL_INPUT_DELTA: &str = "response.custom_tool_call_input.delta";
    pub(crate) const CUSTOM_TOOL_CALL_INPUT_DONE: &str = "response.custom_tool_call_input.done";
    pub(crate) const FAILED: &str = "response.failed";
    pub(crate) const FUNCTION_CALL_ARGUMENTS_DELTA: &str = "response.function_call_arguments.delta";
    pub(crate) const FUNCTION_CALL_ARGUMENTS_DONE: &str = "response.function_call_arguments.done";
    pub(crate) const IN_PROGRESS: &str = "response.in_progress";
    pub(crate) const INCOMPLETE: &str = "response.incomplete";
    pub(crate) const OUTPUT_ITEM_ADDED: &str = "response.output_item.added";
    pub(crate) const OUTPUT_ITEM_DONE: &str = "response.output_item.done";
    pub(crate) const OUTPUT_TEXT_ANNOTATION_ADDED: &str = "response.output_text.annotation.added";
    pub(crate) const OUTPUT_TEXT_DELTA: &str = "response.output_text.delta";
    pub(crate) const OUTPUT_TEXT_DONE: &str = "response.output_text.done";
    pub(crate) const REASONING_SUMMARY_PART_ADDED: &str = "response.reasoning_summary_part.added";
    pub(crate) const REASONING_SUMMARY_PART_DONE: &str = "response.reasoning_summary_part.done";
    pub(crate) const REASONING_SUMMARY_TEXT_DELTA: &str = "response.reasoning_summary_text.delta";
    pub(crate) const REASONING_SUMMARY_TEXT_DONE: &str = "response.reasoning_summary_text.done";
    pub(crate) const REFUSAL_DELTA: &str = "response.refusal.delta";
    pub(crate) const WEB_SEARCH_CALL_COMPLETED: &str = "response.web_search_call.completed";
    pub(crate) const WEB_SEARCH_CALL_IN_PROGRESS: &str = "response.web_search_call.in_progress";
    pub(crate) const WEB_SEARCH_CALL_SEARCHING: &str = "response.web_search_call.searching";
    pub(crate) const ERROR: &str = "error";
}

/// The type names of the items of a request's `input` and an answer's
/// `output`.
pub(crate) mod item {
    pub(crate) const MESSAGE: &str = "message";
    pub(crate) const FUNCTION_CALL: &str = "function_call";
    pub(crate) const FUNCTION_CALL_OUTPUT: &str = "function_call_output";
    pub(crate) const CUSTOM_TOOL_CALL: &str = "custom_tool_call";
    pub(crate) const CUSTOM_TOOL_CALL_OUTPUT: &str = "custom_tool_call_output";
    pub(crate) const REASONING: &str = "reasoning";
    pub(crate) const WEB_SEARCH_CALL: &str = "web_search_call";
}

/// The type names of a message item's content parts, and of a reasoning
/// item's summary parts.
pub(crate) mod part {
    pub(crate) const INPUT_TEXT: &str = "input_text";
    pub(crate) const INPUT_IMAGE: &str = "input_image";
    pub(crate) const INPUT_FILE: &str = "input_file";
    pub(crate) const OUTPUT_TEXT: &str = "output_text";
    pub(crate) const REFUSAL: &str = "refusal";
    pub(crate) const SUMMARY_TEXT: &str = "summary_text";
}

/// The type names of the tools a request offers (and of a `tool_choice`
/// naming one); web search's are matched by prefix
/// ([`super::is_web_search_tool`]).
pub(crate) mod tool {
    pub(crate) const FUNCTION: &str = "function";
    pub(crate) const CUSTOM: &str = "custom";
    pub(crate) const WEB_SEARCH: &str = "web_search";
}

/// The type of an `output_text` part's annotation citing a web page.
pub(crate) const URL_CITATION: &str = "url_citation";
/// The type of a `web_search_call`'s action that searched.
pub(crate) const SEARCH_ACTION: &str = "search";

/// The types of `text.format`.
pub(crate) mod format {
    pub(crate) const JSON_SCHEMA: &str = "json_schema";
    pub(crate) const JSON_OBJECT: &str = "json_object";
}

/// The `status` of a response and of an output item.
pub(crate) mod status {
    pub(crate) const COMPLETED: &str = "completed";
    pub(crate) const INCOMPLETE: &str = "incomplete";
    pub(crate) const IN_PROGRESS: &str = "in_progress";
    pub(crate) const FAILED: &str = "failed";
}

/// Why a response is `incomplete` (`incomplete_details.reason`).
pub(crate) mod incomplete {
    pub(crate) const MAX_OUTPUT_TOKENS: &str = "max_output_tokens";
    pub(crate) const CONTENT_FILTER: &str = "content_filter";
}

/// The roles of a message item.
pub(crate) mod role {
    pub(crate) const USER: &str = "user";
    pub(crate) const ASSISTANT: &str = "assistant";
    pub(crate) const SYSTEM: &str = "system";
    pub(crate) const DEVELOPER: &str = "developer";
}

/// Codex's Responses-over-WebSocket transport: the client sends each
/// request as one text frame, the server answers each event of its stream
/// as one text frame (the event's JSON, as the SSE `data`).
pub mod websocket {
    use serde_json::{Value, json};

    /// A frame asking for a response: the Responses body and this `type`.
    pub const CREATE: &str = "response.create";
    /// A frame saying the client has handled a response: nothing to answer.
    pub const PROCESSED: &str = "response.processed";
    /// The event that starts a response, and the one that completes it.
    pub const CREATED: &str = super::event::CREATED;
    pub const COMPLETED: &str = super::event::COMPLETED;
    /// The event that carries one whole output item.
    pub const OUTPUT_ITEM_DONE: &str = super::event::OUTPUT_ITEM_DONE;
    /// An error event (in-band over SSE; over WebSocket, with the HTTP
    /// status and headers it stands for).
    pub const ERROR: &str = super::event::ERROR;

    /// Whether an event of type `kind` ends a response.
    pub fn is_terminal(kind: &str) -> bool {
        matches!(
            kind,
            super::event::COMPLETED
                | super::event::FAILED
                | super::event::INCOMPLETE
                | super::event::ERROR
        )
    }

    /// What ended a response, as a bounded label.
    pub fn outcome(kind: &str) -> &'static str {
        match kind {
            super::event::COMPLETED => "completed",
            super::event::FAILED => "failed",
            super::event::INCOMPLETE => "incomplete",
            _ => "error",
        }
    }

    /// The two events that answer a warm-up (`generate: false`): a
    /// response with no output, completed at once.
    pub fn warmup(id: &str, model: &str, created_at: u64) -> [Value; 2] {
        let response = |status: &str| {
            json!({
                "id": id,
                "object": "response",
                "created_at": created_at,
                "status": status,
                "model": model,
                "output": [],
                "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
            })
        };
        [
            json!({"type": CREATED, "sequence_number": 0, "response": response("in_progress")}),
            json!({"type": COMPLETED, "sequence_number": 1, "response": response("completed")}),
        ]
    }

    /// An error frame in the shape Codex maps to an HTTP error:
    /// `{"type":"error","status":…,"error":{…},"headers":{…}}`.
    pub fn error_frame(
        status: u16,
        error: Value,
        headers: serde_json::Map<String, Value>,
    ) -> Value {
        json!({"type": ERROR, "status": status, "error": error, "headers": headers})
    }

    /// An error object: `type`, `code`, `message` (and `param`).
    pub fn error(kind: &str, code: &str, message: &str, param: Option<&str>) -> Value {
        json!({"type": kind, "code": code, "message": message, "param": param})
    }
}
