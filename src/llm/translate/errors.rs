//! Error bodies from one API's envelope to the other's, status kept.
//!
//! A context-window overflow is rewritten into the words each agent acts
//! on: Claude Code compacts its context when an error says `prompt is too
//! long: N tokens > M maximum`; Codex when the code is
//! `context_length_exceeded`.

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use crate::respond::{anthropic_error_type, openai_error_type};

/// An OpenAI (or OpenAI-compatible) error body as Anthropic's envelope.
pub fn to_anthropic(status: StatusCode, body: &[u8]) -> Bytes {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let error = if v["error"].is_object() {
        &v["error"]
    } else {
        &v
    };
    let message = error["message"]
        .as_str()
        .or(v["detail"].as_str())
        .or(v["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            if text.trim().is_empty() {
                format!("the upstream answered {status}")
            } else {
                text.chars().take(500).collect()
            }
        });
    let overflow = error["code"].as_str() == Some("context_length_exceeded")
        || message.contains("maximum context length")
        || message.contains("context window");
    let (kind, message) = if overflow {
        let m = prompt_too_long(&message).unwrap_or(format!("prompt is too long: {message}"));
        ("invalid_request_error", m)
    } else {
        (anthropic_error_type(status), message)
    };
    Bytes::from(json!({"type": "error", "error": {"type": kind, "message": message}}).to_string())
}

/// An Anthropic error body as OpenAI's envelope.
pub fn to_openai(status: StatusCode, body: &[u8]) -> Bytes {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let message = v["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("the upstream answered {status}"));
    let (kind, code) = openai_error_type(status);
    let code = if message.starts_with("prompt is too long") {
        Some("context_length_exceeded")
    } else {
        code
    };
    Bytes::from(
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
            .to_string(),
    )
}

/// `prompt is too long: N tokens > M maximum` from an OpenAI-style
/// overflow message ("maximum context length is M tokens. However, your
/// messages resulted in N tokens", or vLLM's "you requested N tokens").
fn prompt_too_long(message: &str) -> Option<String> {
    let number_after = |marker: &str| -> Option<u64> {
        let at = message.find(marker)? + marker.len();
        let digits: String = message[at..]
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
        .unwrap_or(max + 1);
    Some(format!(
        "prompt is too long: {actual} tokens > {max} maximum"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
