//! What the two OpenAI APIs (Responses, Chat Completions) share: the key
//! as `Authorization: Bearer`, the error envelope
//! `{"error":{"message","type","param","code"}}` with its status table,
//! how a context overflow is told, the model list, and an SSE comment as
//! the keep-alive.

use bytes::Bytes;
use http::StatusCode;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

pub const BASE_URL: &str = "https://api.openai.com";
/// The header OpenAI's answers carry their request id in.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// The error code both OpenAI APIs give a context-window overflow, and
/// the one Codex compacts its context on.
pub const CONTEXT_LENGTH_EXCEEDED: &str = "context_length_exceeded";

/// The longest `user` both APIs accept (`string_above_max_length`).
pub const MAX_USER_LEN: usize = 64;

/// A client's user id as OpenAI's `user`: kept when it fits, else a
/// stable hash of it (Claude Code's `metadata.user_id` is a JSON string of
/// about 150 characters), so one user still reads as one user.
pub fn user(id: &str) -> String {
    if id.len() <= MAX_USER_LEN {
        return id.to_string();
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, id.as_bytes());
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("weir-{hex}")
}

/// The longest function (tool) name both APIs accept.
pub const MAX_TOOL_NAME: usize = 64;

/// A tool name that fits [`MAX_TOOL_NAME`]: as is when it does, else its
/// first 55 bytes (at a character boundary), `_`, and 8 hex digits of its
/// SHA-256 — stable, and distinct for names that share a long prefix.
/// (Claude Code's MCP tools, `mcp__<server>__<tool>`, can be longer.)
pub fn short_tool_name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_TOOL_NAME {
        return name.into();
    }
    let mut cut = MAX_TOOL_NAME - 9;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, name.as_bytes());
    let hex: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}_{hex}", &name[..cut]).into()
}

/// Whether an OpenAI-API upstream's models are reasoning models, which
/// take `reasoning` (Responses) / `reasoning_effort` (Chat) and refuse a
/// non-default `temperature` or `top_p` with `unsupported_parameter`; the
/// others refuse `reasoning` the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reasoning {
    /// By the model's name ([`is_reasoning_model`]).
    Auto,
    Yes,
    No,
}

impl Reasoning {
    pub const ALL: [Reasoning; 3] = [Reasoning::Auto, Reasoning::Yes, Reasoning::No];

    pub fn name(self) -> &'static str {
        match self {
            Reasoning::Auto => "auto",
            Reasoning::Yes => "yes",
            Reasoning::No => "no",
        }
    }

    pub fn from_name(name: &str) -> Option<Reasoning> {
        Reasoning::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether `model` takes the reasoning parameter.
    pub fn for_model(self, model: &str) -> bool {
        match self {
            Reasoning::Auto => is_reasoning_model(model),
            Reasoning::Yes => true,
            Reasoning::No => false,
        }
    }
}

/// A function call's `arguments` (a JSON string, in Chat Completions and
/// Responses alike) as the object Anthropic's `tool_use.input` must be:
/// `{}` when it is missing, not JSON, or not an object.
pub fn arguments_object(arguments: &Value) -> Value {
    arguments
        .as_str()
        .and_then(|a| serde_json::from_str(a).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

/// OpenAI's reasoning model families (o1, o3, o4-mini, gpt-5 and its
/// variants, codex-mini), with or without a router's `openai/` prefix.
/// Other servers' models (vLLM, llama.cpp, Ollama) are not: they take the
/// sampling parameters.
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    let family = |prefix: &str| {
        m.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.']))
    };
    ["o1", "o3", "o4", "o4-mini", "codex-mini"]
        .iter()
        .any(|p| family(p))
        || m.starts_with("gpt-5")
}

/// Where a Chat Completions upstream reads the output limit: OpenAI wants
/// `max_completion_tokens` (its reasoning models refuse `max_tokens`);
/// some compatible servers read only `max_tokens` (Ollama ignores the
/// other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    MaxCompletionTokens,
    MaxTokens,
    Both,
}

impl MaxTokensField {
    pub const ALL: [MaxTokensField; 3] = [
        MaxTokensField::MaxCompletionTokens,
        MaxTokensField::MaxTokens,
        MaxTokensField::Both,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::Both => "both",
        }
    }

    pub fn from_name(name: &str) -> Option<MaxTokensField> {
        MaxTokensField::ALL.into_iter().find(|f| f.name() == name)
    }

    /// For a server at `host` when the config does not say: OpenAI's own
    /// field for OpenAI, both elsewhere.
    pub fn for_host(host: &str) -> MaxTokensField {
        if host.eq_ignore_ascii_case("api.openai.com") {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::Both
        }
    }
}

/// What an OpenAI-API upstream accepts where servers and models differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepts {
    pub reasoning: Reasoning,
    pub max_tokens: MaxTokensField,
}

impl Default for Accepts {
    fn default() -> Self {
        Accepts {
            reasoning: Reasoning::Auto,
            max_tokens: MaxTokensField::MaxCompletionTokens,
        }
    }
}

/// Keeps one of a reasoning model's parameters and a sampling model's,
/// whichever `model` is: the Responses `reasoning` object or Chat's
/// `reasoning_effort` is `reasoning_key`.
pub(super) fn fit_reasoning(
    body: &mut serde_json::Map<String, Value>,
    reasoning: bool,
    reasoning_key: &str,
) {
    if reasoning {
        body.remove("temperature");
        body.remove("top_p");
    } else {
        body.remove(reasoning_key);
    }
}

pub(super) fn key_header(key: &str) -> (HeaderName, String) {
    (AUTHORIZATION, format!("Bearer {key}"))
}

/// A request arriving from an Anthropic client: `anthropic-*` headers
/// dropped, a passed-through `x-api-key` moved to `Authorization: Bearer`.
pub(super) fn adopt_headers(headers: &mut HeaderMap, passthrough: bool) {
    adopt_key(headers, passthrough, AUTHORIZATION, |key| {
        format!("Bearer {key}")
    });
}

/// A request arriving from an Anthropic client to a service of the
/// OpenAI APIs: `anthropic-*` headers dropped, a passed-through
/// `x-api-key` moved to `name` as `value(key)` (unless the client sent an
/// `Authorization` of its own).
pub(super) fn adopt_key(
    headers: &mut HeaderMap,
    passthrough: bool,
    name: HeaderName,
    value: impl Fn(&str) -> String,
) {
    super::remove_prefixed(headers, "anthropic-");
    if passthrough
        && !headers.contains_key(AUTHORIZATION)
        && let Some(key) = headers.remove("x-api-key")
        && let Ok(key) = key.to_str()
        && let Ok(v) = HeaderValue::from_str(&value(key.trim()))
    {
        headers.insert(name, v);
    }
}

/// The `error.type` and `error.code` for a status.
pub fn error_type(status: StatusCode) -> (&'static str, Option<&'static str>) {
    match status.as_u16() {
        401 => ("invalid_request_error", Some("invalid_api_key")),
        403 => ("invalid_request_error", Some("permission_denied")),
        404 => ("invalid_request_error", Some("not_found")),
        413 => ("invalid_request_error", Some("request_too_large")),
        429 => ("rate_limit_error", Some("rate_limit_exceeded")),
        501 => ("invalid_request_error", Some("not_supported")),
        503 | 529 => ("server_error", Some("overloaded")),
        s if s >= 500 => ("server_error", None),
        _ => ("invalid_request_error", None),
    }
}

/// The status an error `code` stands for, for errors that arrive inside a
/// stream with no status of their own.
pub fn status_of(code: Option<&str>) -> StatusCode {
    match code {
        Some("rate_limit_exceeded") => StatusCode::TOO_MANY_REQUESTS,
        Some("server_is_overloaded" | "overloaded") => {
            StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
        }
        Some(CONTEXT_LENGTH_EXCEEDED) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An error body for `status`.
pub fn error_body(status: StatusCode, message: &str) -> String {
    let (kind, code) = error_type(status);
    error_value(kind, code, message).to_string()
}

/// An error body with an explicit code.
pub fn error_value(kind: &str, code: Option<&str>, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// What an error body says, from OpenAI itself or a compatible server
/// (vLLM puts the fields at the top level, some servers say `detail`):
/// its code and message.
pub fn read_error(body: &Value) -> (Option<&str>, Option<&str>) {
    let error = if body["error"].is_object() {
        &body["error"]
    } else {
        body
    };
    let message = error["message"]
        .as_str()
        .or(body["detail"].as_str())
        .or(body["message"].as_str());
    (error["code"].as_str(), message)
}

/// Whether an error reports a context-window overflow, by its code or, for
/// compatible servers that send no code, by its words.
pub fn is_overflow(code: Option<&str>, message: &str) -> bool {
    code == Some(CONTEXT_LENGTH_EXCEEDED)
        || message.contains("maximum context length")
        || message.contains("context window")
}

/// The (actual, maximum) token counts an overflow message states
/// ("maximum context length is M tokens. However, your messages resulted
/// in N tokens", or vLLM's "you requested N tokens"); the actual count is
/// taken as one over the maximum when only the maximum is stated.
pub fn overflow_tokens(message: &str) -> Option<(u64, u64)> {
    let number_after = |marker: &str| -> Option<u64> {
        let at = message.find(marker)?.checked_add(marker.len())?;
        let digits: String = message
            .get(at..)?
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let max = number_after("maximum context length is")
        .or_else(|| number_after("context window of"))
        .or_else(|| number_after("maximum context length of"))?;
    let actual = number_after("resulted in")
        .or_else(|| number_after("you requested"))
        .or_else(|| number_after("requested"))
        .unwrap_or(max.saturating_add(1));
    Some((actual, max))
}

pub(super) fn keepalive() -> Bytes {
    Bytes::from_static(b": keepalive\n\n")
}

pub(super) fn model_list<'a>(names: impl Iterator<Item = &'a str>) -> Value {
    let data: Vec<_> = names
        .map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "weir"}))
        .collect();
    json!({"object": "list", "data": data})
}

/// The input side's details in both APIs' usage (`input_tokens_details`,
/// `prompt_tokens_details`): how much of the input was read from cache.
#[derive(Default, serde::Deserialize, serde::Serialize)]
pub(crate) struct CachedDetails {
    #[serde(default, deserialize_with = "super::lenient")]
    pub(crate) cached_tokens: u64,
}

/// The output side's details in both APIs' usage (`output_tokens_details`,
/// `completion_tokens_details`).
#[derive(Default, serde::Deserialize, serde::Serialize)]
pub(crate) struct ReasoningDetails {
    #[serde(default, deserialize_with = "super::lenient")]
    pub(crate) reasoning_tokens: u64,
}

/// The words a `tool_choice` may be in both OpenAI APIs (its object form
/// names a tool by the tool's type).
pub(crate) mod tool_choice {
    pub(crate) const AUTO: &str = "auto";
    pub(crate) const REQUIRED: &str = "required";
    pub(crate) const NONE: &str = "none";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models_are_known_by_family() {
        for m in [
            "o1",
            "o3",
            "o3-mini",
            "o4-mini",
            "gpt-5",
            "gpt-5.1-codex",
            "gpt-5-mini",
            "openai/gpt-5",
            "codex-mini-latest",
        ] {
            assert!(is_reasoning_model(m), "{m}");
        }
        for m in [
            "gpt-4.1",
            "gpt-4o",
            "o10x",
            "qwen3:8b",
            "llama3",
            "deepseek-chat",
            "",
        ] {
            assert!(!is_reasoning_model(m), "{m}");
        }
    }

    #[test]
    fn a_translated_request_keeps_only_what_its_model_takes() {
        let body = || {
            let v = serde_json::json!({
                "max_completion_tokens": 100, "temperature": 0.2, "top_p": 0.9,
                "reasoning": {"effort": "high"}, "reasoning_effort": "high",
                "include": ["reasoning.encrypted_content"],
            });
            v.as_object().cloned().expect("object")
        };
        let mut r = body();
        super::super::responses::fit(&mut r, true);
        assert!(
            r.contains_key("reasoning")
                && !r.contains_key("temperature")
                && !r.contains_key("top_p")
        );
        let mut r = body();
        super::super::responses::fit(&mut r, false);
        assert!(!r.contains_key("reasoning") && !r.contains_key("include"));
        assert_eq!(r["temperature"], 0.2);

        let mut c = body();
        super::super::chat::fit(&mut c, false, MaxTokensField::Both);
        assert!(!c.contains_key("reasoning_effort"));
        assert_eq!(
            (c["max_tokens"].clone(), c["max_completion_tokens"].clone()),
            (100.into(), 100.into())
        );
        let mut c = body();
        super::super::chat::fit(&mut c, true, MaxTokensField::MaxTokens);
        assert_eq!(c["reasoning_effort"], "high");
        assert!(!c.contains_key("max_completion_tokens") && !c.contains_key("temperature"));
        assert_eq!(c["max_tokens"], 100);
        let mut c = body();
        super::super::chat::fit(&mut c, true, MaxTokensField::MaxCompletionTokens);
        assert!(!c.contains_key("max_tokens"));
    }

    #[test]
    fn long_tool_names_become_short_stable_and_distinct() {
        let a = format!("mcp__{}__read_file", "s".repeat(60));
        let b = format!("mcp__{}__read_dir", "s".repeat(60));
        assert!(short_tool_name(&a).len() <= MAX_TOOL_NAME);
        assert_eq!(short_tool_name(&a), short_tool_name(&a));
        assert_ne!(short_tool_name(&a), short_tool_name(&b));
        assert_eq!(short_tool_name("read"), "read");
        let wide = "é".repeat(40);
        assert!(short_tool_name(&wide).len() <= MAX_TOOL_NAME);
    }

    #[test]
    fn a_long_user_id_becomes_a_stable_short_one() {
        let id = format!(
            "{{\"device_id\":\"{}\",\"session_id\":\"s\"}}",
            "d".repeat(130)
        );
        assert!(id.len() > MAX_USER_LEN);
        let user = user(&id);
        assert!(user.len() <= MAX_USER_LEN, "{user}");
        assert_eq!(user, super::user(&id), "stable");
        assert_ne!(user, super::user(&id.replace('s', "t")));
        assert_eq!(super::user("alice"), "alice");
    }

    #[test]
    fn overflow_numbers_are_read_and_never_overflow() {
        assert_eq!(
            overflow_tokens(
                "This model's maximum context length is 128,000 tokens. However, your messages resulted in 130512 tokens."
            ),
            Some((130_512, 128_000))
        );
        assert_eq!(
            overflow_tokens("maximum context length is 18446744073709551615 tokens"),
            Some((u64::MAX, u64::MAX))
        );
        assert_eq!(overflow_tokens("the context window is full"), None);
    }
}
