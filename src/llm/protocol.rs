//! What differs between the LLM APIs weir speaks: which endpoints a route
//! kind serves, which header carries a key, how a stream's events are
//! classified for failover, and the bytes of a keep-alive or an in-band
//! error in each protocol's own format.

use bytes::Bytes;
use http::Method;

use crate::config::{Protocol, UpstreamApi};

/// An API endpoint an LLM route serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// Anthropic `POST /v1/messages`.
    Messages,
    /// Anthropic `POST /v1/messages/count_tokens`.
    CountTokens,
    /// `GET /v1/models`, both protocols.
    Models,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// OpenAI `POST /v1/chat/completions`.
    ChatCompletions,
}

impl Endpoint {
    /// The endpoint `method` + `path` names on a route speaking `protocol`.
    pub fn find(protocol: Protocol, method: &Method, path: &str) -> Option<Endpoint> {
        let path = path.trim_end_matches('/');
        Some(match (protocol, path) {
            (Protocol::Anthropic, "/v1/messages") if method == Method::POST => Endpoint::Messages,
            (Protocol::Anthropic, "/v1/messages/count_tokens") if method == Method::POST => {
                Endpoint::CountTokens
            }
            (_, "/v1/models") if method == Method::GET => Endpoint::Models,
            (Protocol::OpenAi, "/v1/responses") if method == Method::POST => Endpoint::Responses,
            (Protocol::OpenAi, "/v1/chat/completions") if method == Method::POST => {
                Endpoint::ChatCompletions
            }
            _ => return None,
        })
    }

    pub fn label(self) -> &'static str {
        match self {
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
            Endpoint::Models => "models",
            Endpoint::Responses => "responses",
            Endpoint::ChatCompletions => "chat_completions",
        }
    }

    /// Whether the request body names a model to route by.
    pub fn routes_by_model(self) -> bool {
        self != Endpoint::Models
    }

    /// Whether answers may stream (and so get the failover hold).
    pub fn streams(self) -> bool {
        matches!(
            self,
            Endpoint::Messages | Endpoint::Responses | Endpoint::ChatCompletions
        )
    }
}

/// What a stream event means for failover and accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventClass {
    /// Before any content (`message_start`, `response.created`, a role-only
    /// chat chunk): held while failover is still possible.
    Preamble,
    /// The model produced something: no failover past this point.
    Content,
    /// An error reported inside the stream.
    Error,
    /// The stream's success terminator (`message_stop`,
    /// `response.completed`/`incomplete`, `[DONE]`).
    Done,
    /// A keep-alive (`ping`, comments).
    KeepAlive,
}

/// Classify one complete SSE event of `endpoint`'s stream.
pub fn classify(endpoint: Endpoint, name: Option<&str>, data: &str) -> EventClass {
    if name.is_none() && data.is_empty() {
        return EventClass::KeepAlive;
    }
    match endpoint {
        Endpoint::ChatCompletions => {
            if data.trim() == "[DONE]" {
                return EventClass::Done;
            }
            let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                return EventClass::Content;
            };
            if v.get("error").is_some() {
                return EventClass::Error;
            }
            let delta = &v["choices"][0]["delta"];
            let has = |k: &str| match &delta[k] {
                serde_json::Value::Null => false,
                serde_json::Value::String(s) => !s.is_empty(),
                _ => true,
            };
            let finished = v["choices"][0]["finish_reason"].is_string();
            if has("content")
                || has("tool_calls")
                || has("refusal")
                || has("reasoning_content")
                || finished
            {
                EventClass::Content
            } else {
                EventClass::Preamble
            }
        }
        _ => {
            let owned;
            let kind = match name {
                Some(n) => n,
                None => {
                    owned = serde_json::from_str::<serde_json::Value>(data)
                        .ok()
                        .and_then(|v| v["type"].as_str().map(str::to_string))
                        .unwrap_or_default();
                    owned.as_str()
                }
            };
            match kind {
                "message_start" | "response.created" | "response.in_progress" => {
                    EventClass::Preamble
                }
                "ping" => EventClass::KeepAlive,
                "error" | "response.failed" => EventClass::Error,
                "message_stop" | "response.completed" | "response.incomplete" => EventClass::Done,
                _ => EventClass::Content,
            }
        }
    }
}

/// The header an upstream's key travels in, and how it is written.
pub fn key_header(api: UpstreamApi, key: &str) -> (http::HeaderName, String) {
    match api {
        UpstreamApi::Anthropic => (http::HeaderName::from_static("x-api-key"), key.to_string()),
        _ => (http::header::AUTHORIZATION, format!("Bearer {key}")),
    }
}

/// Headers for a translated request: the client's credential moved to
/// the header the upstream's API reads (when the client's own is passed
/// through), the other API's headers dropped, and the version header
/// Anthropic requires.
pub fn translated_headers(headers: &mut http::HeaderMap, to: UpstreamApi, passthrough: bool) {
    let x_api_key = http::HeaderName::from_static("x-api-key");
    if to == UpstreamApi::Anthropic {
        let stale: Vec<_> = headers
            .keys()
            .filter(|k| k.as_str().starts_with("openai-"))
            .cloned()
            .collect();
        for k in stale {
            headers.remove(k);
        }
        if passthrough
            && !headers.contains_key(&x_api_key)
            && let Some(token) = headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .and_then(|t| http::HeaderValue::from_str(t.trim()).ok())
        {
            headers.remove(http::header::AUTHORIZATION);
            headers.insert(x_api_key, token);
        }
        if !headers.contains_key("anthropic-version") {
            headers.insert(
                "anthropic-version",
                http::HeaderValue::from_static("2023-06-01"),
            );
        }
    } else {
        let stale: Vec<_> = headers
            .keys()
            .filter(|k| k.as_str().starts_with("anthropic-"))
            .cloned()
            .collect();
        for k in stale {
            headers.remove(k);
        }
        if passthrough
            && !headers.contains_key(http::header::AUTHORIZATION)
            && let Some(key) = headers.remove(&x_api_key)
            && let Ok(v) =
                http::HeaderValue::from_str(&format!("Bearer {}", key.to_str().unwrap_or_default()))
        {
            headers.insert(http::header::AUTHORIZATION, v);
        }
    }
}

/// The keep-alive sent after upstream silence: Anthropic's own `ping`
/// event (its SDKs skip it), an SSE comment for OpenAI (ignored by every
/// SSE parser).
pub fn keepalive(endpoint: Endpoint) -> Bytes {
    match endpoint {
        Endpoint::Messages => Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n"),
        _ => Bytes::from_static(b": keepalive\n\n"),
    }
}

/// An error event in the stream's own format, for a failure after content
/// reached the client: the client learns the answer is incomplete instead
/// of seeing a clean end. `sequence` is the Responses API's next
/// `sequence_number`; a Responses stream also gets its terminal
/// `response.failed`, without which Codex reports "stream closed before
/// response.completed" instead of the error.
pub fn in_band_error(endpoint: Endpoint, message: &str, sequence: u64) -> Bytes {
    match endpoint {
        Endpoint::Messages | Endpoint::CountTokens | Endpoint::Models => {
            let data = serde_json::json!({
                "type": "error",
                "error": {"type": "api_error", "message": message},
            });
            Bytes::from(format!("event: error\ndata: {data}\n\n"))
        }
        Endpoint::Responses => {
            let error = serde_json::json!({
                "type": "error",
                "code": "server_error",
                "message": message,
                "param": null,
                "sequence_number": sequence,
            });
            let failed = serde_json::json!({
                "type": "response.failed",
                "response": {
                    "id": "resp_incomplete",
                    "object": "response",
                    "status": "failed",
                    "output": [],
                    "error": {"code": "server_error", "message": message},
                },
                "sequence_number": sequence + 1,
            });
            Bytes::from(format!(
                "event: error\ndata: {error}\n\nevent: response.failed\ndata: {failed}\n\n"
            ))
        }
        Endpoint::ChatCompletions => {
            let data = serde_json::json!({
                "error": {"message": message, "type": "server_error", "param": null, "code": null},
            });
            Bytes::from(format!("data: {data}\n\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_by_protocol() {
        let a = Protocol::Anthropic;
        let o = Protocol::OpenAi;
        assert_eq!(
            Endpoint::find(a, &Method::POST, "/v1/messages"),
            Some(Endpoint::Messages)
        );
        assert_eq!(
            Endpoint::find(a, &Method::POST, "/v1/messages/count_tokens"),
            Some(Endpoint::CountTokens)
        );
        assert_eq!(Endpoint::find(a, &Method::POST, "/v1/responses"), None);
        assert_eq!(Endpoint::find(a, &Method::GET, "/v1/messages"), None);
        assert_eq!(
            Endpoint::find(o, &Method::POST, "/v1/chat/completions"),
            Some(Endpoint::ChatCompletions)
        );
        assert_eq!(
            Endpoint::find(o, &Method::GET, "/v1/models"),
            Some(Endpoint::Models)
        );
    }

    #[test]
    fn events_are_classified_per_protocol() {
        use EventClass::*;
        let m = Endpoint::Messages;
        assert_eq!(classify(m, Some("message_start"), "{}"), Preamble);
        assert_eq!(classify(m, Some("ping"), "{}"), KeepAlive);
        assert_eq!(classify(m, Some("content_block_start"), "{}"), Content);
        assert_eq!(classify(m, Some("error"), "{}"), Error);
        assert_eq!(classify(m, Some("message_stop"), "{}"), Done);
        let r = Endpoint::Responses;
        assert_eq!(classify(r, Some("response.created"), "{}"), Preamble);
        assert_eq!(
            classify(r, None, r#"{"type":"response.in_progress"}"#),
            Preamble
        );
        assert_eq!(
            classify(r, Some("response.output_item.added"), "{}"),
            Content
        );
        assert_eq!(classify(r, Some("response.failed"), "{}"), Error);
        assert_eq!(classify(r, Some("response.completed"), "{}"), Done);
        let c = Endpoint::ChatCompletions;
        assert_eq!(
            classify(
                c,
                None,
                r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#
            ),
            Preamble
        );
        assert_eq!(
            classify(c, None, r#"{"choices":[{"delta":{"content":"Hi"}}]}"#),
            Content
        );
        assert_eq!(classify(c, None, r#"{"error":{"message":"x"}}"#), Error);
        assert_eq!(classify(c, None, "[DONE]"), Done);
    }

    #[test]
    fn in_band_errors_parse_in_each_format() {
        let e = in_band_error(Endpoint::Messages, "cut", 0);
        assert!(e.starts_with(b"event: error\ndata: {"));
        let e = in_band_error(Endpoint::Responses, "cut", 7);
        let text = std::str::from_utf8(&e).expect("utf8");
        let data = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .expect("data");
        let v: serde_json::Value = serde_json::from_str(data).expect("json");
        assert_eq!(v["sequence_number"], 7);
        assert_eq!(v["type"], "error");
        let failed = text
            .split("\n\n")
            .find(|e| e.starts_with("event: response.failed"))
            .and_then(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .expect("a terminal response.failed");
        let v: serde_json::Value = serde_json::from_str(failed).expect("json");
        assert_eq!(v["sequence_number"], 8);
        assert_eq!(v["response"]["status"], "failed");
    }
}
