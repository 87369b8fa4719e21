//! Error bodies from one API's envelope to the other's, status kept.
//!
//! A context-window overflow is rewritten into the words each agent acts
//! on: Claude Code compacts its context when an error says `prompt is too
//! long: N tokens > M maximum`; Codex when the code is
//! `context_length_exceeded`.

use bytes::Bytes;
use http::StatusCode;
use serde_json::Value;

use crate::{anthropic, openai, responses, sse};

/// An OpenAI (or OpenAI-compatible) error body as Anthropic's envelope.
pub(in crate::translate) fn to_anthropic(status: StatusCode, body: &[u8]) -> Bytes {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let (code, message) = openai::read_error(&v);
    let message = message.map(str::to_string).unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        if text.trim().is_empty() {
            format!("the upstream answered {status}")
        } else {
            text.chars().take(500).collect()
        }
    });
    let (kind, message) = as_anthropic(status, code, &message);
    Bytes::from(anthropic::typed_error_body(kind, &message))
}

/// An OpenAI error (a body's, or one inside a stream with the status its
/// code stands for) as Anthropic's `error.type` and message. A context
/// overflow becomes the words Claude Code compacts its context on.
pub(in crate::translate) fn as_anthropic(
    status: StatusCode,
    code: Option<&str>,
    message: &str,
) -> (&'static str, String) {
    if openai::is_overflow(code, message) {
        let tokens = openai::overflow_tokens(message);
        (
            anthropic::error_type(StatusCode::BAD_REQUEST),
            anthropic::prompt_too_long(tokens, message),
        )
    } else {
        (anthropic::error_type(status), message.to_string())
    }
}

/// An OpenAI error inside a stream as Anthropic's stream `error` event.
pub(in crate::translate) fn anthropic_event(code: Option<&str>, message: &str) -> Bytes {
    let (kind, message) = as_anthropic(openai::status_of(code), code, message);
    anthropic::error_event(kind, &message)
}

/// An Anthropic error body as OpenAI's envelope.
pub(in crate::translate) fn to_openai(status: StatusCode, body: &[u8]) -> Bytes {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let message = anthropic::read_error(&v)
        .1
        .map(str::to_string)
        .unwrap_or_else(|| format!("the upstream answered {status}"));
    let (kind, code) = openai::error_type(status);
    let code = if anthropic::is_overflow(&message) {
        Some(openai::CONTEXT_LENGTH_EXCEEDED)
    } else {
        code
    };
    Bytes::from(openai::error_value(kind, code, &message).to_string())
}

/// An Anthropic stream `error` event as the `code` and message of
/// Codex's `response.failed`.
pub(in crate::translate) fn responses_failure(event: &Value) -> (&'static str, String) {
    let (kind, message) = anthropic::read_error(event);
    let message = message.unwrap_or("the upstream reported an error");
    let code = if anthropic::is_overflow(message) {
        openai::CONTEXT_LENGTH_EXCEEDED
    } else {
        responses::failed_code(anthropic::status_of(kind.unwrap_or_default()))
    };
    (code, message.to_string())
}

/// An Anthropic stream `error` event as a Chat Completions error chunk,
/// with the code the status of its type stands for.
pub(in crate::translate) fn chat_chunk(event: &Value) -> Bytes {
    let (kind, message) = anthropic::read_error(event);
    let message = message.unwrap_or("the upstream reported an error");
    let (kind, code) = openai::error_type(anthropic::status_of(kind.unwrap_or_default()));
    let code = if anthropic::is_overflow(message) {
        Some(openai::CONTEXT_LENGTH_EXCEEDED)
    } else {
        code
    };
    sse::data(&openai::error_value(kind, code, message))
}

/// An OpenAI-compatible error body (OpenAI's envelope, or vLLM's fields
/// at the top level) in OpenAI's own envelope, its code kept.
pub(in crate::translate) fn openai_envelope(status: StatusCode, body: &[u8]) -> Bytes {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let (code, message) = openai::read_error(&v);
    let message = message
        .map(str::to_string)
        .unwrap_or_else(|| format!("the upstream answered {status}"));
    let (kind, status_code) = openai::error_type(status);
    let code = code.or(if openai::is_overflow(None, &message) {
        Some(openai::CONTEXT_LENGTH_EXCEEDED)
    } else {
        status_code
    });
    Bytes::from(openai::error_value(kind, code, &message).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn parse(b: &Bytes) -> Value {
        serde_json::from_slice(b).expect("json")
    }

    #[test]
    fn status_and_kind_survive() {
        let b = to_anthropic(
            StatusCode::TOO_MANY_REQUESTS,
            br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        );
        assert_eq!(
            parse(&b),
            json!({"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"}})
        );
        let b = to_anthropic(
            StatusCode::from_u16(529).expect("529"),
            b"<html>busy</html>",
        );
        assert_eq!(parse(&b)["error"]["type"], "overloaded_error");
        assert_eq!(parse(&b)["error"]["message"], "<html>busy</html>");
    }

    #[test]
    fn a_context_overflow_becomes_claude_codes_prompt_too_long() {
        let openai = br#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let b = to_anthropic(StatusCode::BAD_REQUEST, openai);
        assert_eq!(
            parse(&b)["error"]["message"],
            "prompt is too long: 130512 tokens > 128000 maximum"
        );
        let vllm = br#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).","type":"BadRequestError","code":400}"#;
        let b = to_anthropic(StatusCode::BAD_REQUEST, vllm);
        assert_eq!(
            parse(&b)["error"]["message"],
            "prompt is too long: 5000 tokens > 4096 maximum"
        );
        let responses = br#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#;
        let b = to_anthropic(StatusCode::BAD_REQUEST, responses);
        assert_eq!(
            parse(&b)["error"]["message"],
            "prompt is too long: Your input exceeds the context window of this model. Please adjust your input and try again.",
            "no numbers: the words Claude Code acts on, then the upstream's"
        );
    }

    #[test]
    fn anthropic_errors_become_openai_envelopes() {
        let b = to_openai(
            StatusCode::from_u16(529).expect("529"),
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            parse(&b),
            json!({"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded"}})
        );
        let b = to_openai(
            StatusCode::BAD_REQUEST,
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        );
        assert_eq!(parse(&b)["error"]["code"], "context_length_exceeded");
    }
}
