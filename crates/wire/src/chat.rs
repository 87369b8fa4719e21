//! The OpenAI Chat Completions API (vLLM, Ollama, OpenRouter and most
//! self-hosted servers): `POST /v1/chat/completions`; a stream of unnamed
//! `chat.completion.chunk` events ended by `data: [DONE]`, usage in a
//! final chunk with no choices, errors as a chunk with an `error` object.

use bytes::Bytes;
use serde_json::Value;

use super::openai::{CachedDetails, ReasoningDetails};
use super::{EventClass, Observed, Usage, lenient, read_shape, shape_value, sse};

pub const PATH: &str = "/v1/chat/completions";
/// The data of the event that ends a stream.
pub const DONE: &str = "[DONE]";

/// The signature of a thinking block weir made from a Chat server's
/// `reasoning_content` (DeepSeek, Kimi, vLLM's reasoning parsers): its
/// text goes back as the assistant message's `reasoning_content`, which
/// those servers want on a tool-call continuation.
pub const REASONING_SIGNATURE: &str = "weir.c1";

/// A translated request made fit for a Chat Completions upstream: the
/// reasoning or sampling parameters its model would refuse left out, and
/// the output limit in the field(s) it reads.
pub fn fit(
    body: &mut serde_json::Map<String, Value>,
    reasoning: bool,
    field: super::openai::MaxTokensField,
) {
    use super::openai::MaxTokensField;
    super::openai::fit_reasoning(body, reasoning, "reasoning_effort");
    match field {
        MaxTokensField::MaxCompletionTokens => {}
        MaxTokensField::MaxTokens => {
            if let Some(n) = body.remove("max_completion_tokens") {
                body.insert("max_tokens".into(), n);
            }
        }
        MaxTokensField::Both => {
            if let Some(n) = body.get("max_completion_tokens").cloned() {
                body.insert("max_tokens".into(), n);
            }
        }
    }
}

pub(super) fn endpoint(path: &str) -> Option<super::Endpoint> {
    (path == PATH).then_some(super::Endpoint::ChatCompletions)
}

pub(super) fn observe(data: &str) -> Observed {
    if data.trim() == DONE {
        return Observed::of(EventClass::Done, None);
    }
    let Ok(v) = serde_json::from_str::<Value>(data) else {
        return Observed::of(EventClass::Content, None);
    };
    if v.get("error").is_some() {
        return Observed::of(EventClass::Error, None);
    }
    let choice = &v["choices"][0];
    let delta = &choice["delta"];
    let has = |k: &str| match &delta[k] {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        _ => true,
    };
    let content = has("content")
        || has("tool_calls")
        || has("refusal")
        || has("reasoning_content")
        || choice["finish_reason"].is_string();
    Observed {
        class: if content {
            EventClass::Content
        } else {
            EventClass::Preamble
        },
        usage: usage(&v["usage"]),
        finish: choice["finish_reason"].as_str().map(super::Finish::of),
    }
}

/// A Chat Completions `usage` object: `prompt_tokens` counts cached input
/// too ([`Usage::input`] does not). A count that is absent or not a
/// non-negative integer is 0.
#[derive(Default, serde::Deserialize, serde::Serialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "lenient")]
    prompt_tokens: u64,
    #[serde(default, deserialize_with = "lenient")]
    completion_tokens: u64,
    #[serde(default, deserialize_with = "lenient")]
    total_tokens: u64,
    #[serde(default, deserialize_with = "lenient")]
    prompt_tokens_details: CachedDetails,
    #[serde(default, deserialize_with = "lenient")]
    completion_tokens_details: ReasoningDetails,
}

/// A Chat Completions `usage` object (`None` when it is not an object).
pub fn usage(u: &Value) -> Option<Usage> {
    read_shape::<WireUsage>(u).map(|w| {
        let cached = w.prompt_tokens_details.cached_tokens;
        Usage {
            input: w.prompt_tokens.saturating_sub(cached),
            output: w.completion_tokens,
            cache_read: cached,
            cache_write: 0,
        }
    })
}

/// A `usage` object in this API's terms: `prompt_tokens` counts all the
/// input, cached included.
pub fn usage_value(u: Usage) -> Value {
    let prompt = u
        .input
        .saturating_add(u.cache_read)
        .saturating_add(u.cache_write);
    shape_value(&WireUsage {
        prompt_tokens: prompt,
        completion_tokens: u.output,
        total_tokens: prompt.saturating_add(u.output),
        prompt_tokens_details: CachedDetails {
            cached_tokens: u.cache_read,
        },
        completion_tokens_details: ReasoningDetails {
            reasoning_tokens: 0,
        },
    })
}

/// One chunk of a streamed completion.
pub fn chunk(id: &str, created: u64, model: &str, choices: Value) -> Value {
    serde_json::json!({
        "id": id, "object": "chat.completion.chunk", "created": created,
        "model": model, "choices": choices,
    })
}

pub(super) fn in_band_error(message: &str) -> Bytes {
    sse::data(&super::openai::error_value("server_error", None, message))
}

/// `response_format` for answers following `schema` (not `strict`, as for
/// Responses' `text.format`).
pub fn response_format(schema: &Value) -> Value {
    serde_json::json!({"type": format::JSON_SCHEMA, "json_schema": {"name": "output", "schema": schema, "strict": false}})
}

/// The JSON schema of a `json_schema` `response_format`, when the request
/// asks for structured output.
pub fn output_schema(v: &Value) -> Option<&Value> {
    let f = &v["response_format"];
    (super::type_of(f) == Some(format::JSON_SCHEMA) && f["json_schema"]["schema"].is_object())
        .then_some(&f["json_schema"]["schema"])
}

/// The client's output limit: `max_completion_tokens`, or the older
/// `max_tokens`.
pub fn max_tokens(v: &Value) -> Option<u64> {
    v["max_completion_tokens"]
        .as_u64()
        .or(v["max_tokens"].as_u64())
}

/// The type names of a message's content parts.
pub(crate) mod part {
    pub(crate) const TEXT: &str = "text";
    pub(crate) const IMAGE_URL: &str = "image_url";
    pub(crate) const FILE: &str = "file";
}

/// The type of a tool (and of a tool call, and a `tool_choice` naming
/// one): Chat has only functions.
pub(crate) const FUNCTION: &str = "function";

/// The types of `response_format`.
pub(crate) mod format {
    pub(crate) const JSON_SCHEMA: &str = "json_schema";
    pub(crate) const JSON_OBJECT: &str = "json_object";
    /// Plain text: no format asked for.
    pub(crate) const TEXT: &str = "text";
}

/// A choice's `finish_reason`s.
pub(crate) mod finish {
    pub(crate) const STOP: &str = "stop";
    pub(crate) const LENGTH: &str = "length";
    pub(crate) const TOOL_CALLS: &str = "tool_calls";
    pub(crate) const FUNCTION_CALL: &str = "function_call";
    pub(crate) const CONTENT_FILTER: &str = "content_filter";
}

/// The roles of a message.
pub(crate) mod role {
    pub(crate) const SYSTEM: &str = "system";
    pub(crate) const DEVELOPER: &str = "developer";
    pub(crate) const USER: &str = "user";
    pub(crate) const ASSISTANT: &str = "assistant";
    pub(crate) const TOOL: &str = "tool";
}
