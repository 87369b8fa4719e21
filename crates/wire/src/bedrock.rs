//! Amazon Bedrock (`bedrock-runtime`) serving Anthropic's models: the
//! Messages API's bodies and events ([`super::anthropic`]), reached the
//! way Bedrock is reached. What is Bedrock's own is here:
//!
//! - where a request goes: `POST /model/{modelId}/invoke` (the Messages
//!   JSON answered whole) or `/model/{modelId}/invoke-with-response-stream`
//!   ([`path`]); the model id — a base model or a cross-region inference
//!   profile such as `us.anthropic.claude-sonnet-4-5-20250929-v1:0` — is
//!   one percent-encoded path segment;
//! - the body ([`request_body`]): the Messages body without `model` and
//!   `stream` (both are in the path, and Bedrock refuses them in the
//!   body), with `anthropic_version: "bedrock-2023-05-31"`, and the
//!   client's `anthropic-beta` header as the body's `anthropic_beta`;
//! - the stream, `application/vnd.amazon.eventstream` binary frames
//!   ([`eventstream`]), each `chunk` event carrying one Messages event
//!   base64-encoded, made back into the Messages SSE stream
//!   ([`event_to_sse`]);
//! - the errors: `x-amzn-ErrorType` on an error answer, or an exception
//!   frame in a stream, named by their exception ([`Exception`]) and
//!   turned into the Messages error envelope with the status failover
//!   reads ([`error_answer`]).
//!
//! The credential is the caller's: SigV4 (service `bedrock`) or a Bedrock
//! API key sent as `Authorization: Bearer` ([`key_header`]).

use http::StatusCode;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName};
use serde_json::value::RawValue;
use serde_json::{Value, json};

pub mod client;
pub mod eventstream;

use super::anthropic;
use eventstream::{Frame, FrameError};

/// The `anthropic_version` a Bedrock body carries.
pub const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";
/// The SigV4 service name of `bedrock-runtime`.
pub const SIGNING_SERVICE: &str = "bedrock";
/// The content type of the answer stream.
pub const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";
/// The header naming an error answer's exception.
pub const ERROR_TYPE_HEADER: &str = "x-amzn-errortype";
/// The seconds a throttled client is told to wait: Bedrock sends no hint
/// of its own, and AWS's SDKs back off from about a second.
pub const THROTTLED_RETRY_AFTER: u64 = 2;

/// The path of one call for `model`: `invoke`, or
/// `invoke-with-response-stream` when the answer is streamed.
pub fn path(model: &str, stream: bool) -> String {
    let call = if stream {
        "invoke-with-response-stream"
    } else {
        "invoke"
    };
    format!("/model/{}/{call}", super::path_segment(model))
}

/// The region of a `bedrock-runtime` endpoint's host
/// (`bedrock-runtime.us-east-1.amazonaws.com`, the `-fips` one too).
pub fn region_of_host(host: &str) -> Option<&str> {
    let rest = host
        .strip_prefix("bedrock-runtime.")
        .or_else(|| host.strip_prefix("bedrock-runtime-fips."))?;
    let region = rest
        .strip_suffix(".amazonaws.com")
        .or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    is_region(region).then_some(region)
}

/// Whether `name` can be an AWS region: lowercase letters, digits and
/// `-`, 1 to 32 of them, starting with a letter.
pub fn is_region(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The regional endpoint of `bedrock-runtime`.
pub fn endpoint(region: &str) -> String {
    format!("https://bedrock-runtime.{region}.amazonaws.com")
}

/// A Bedrock API key travels as a bearer token.
pub(super) fn key_header(key: &str) -> (HeaderName, String) {
    (AUTHORIZATION, format!("Bearer {key}"))
}

/// A request leaving for Bedrock: every credential the client sent
/// dropped (weir's own signs or carries the key), and the Anthropic and
/// OpenAI headers with them: what they say travels in the body.
pub(super) fn adopt_headers(headers: &mut HeaderMap, _passthrough: bool) {
    super::remove_prefixed(headers, "openai-");
    super::remove_prefixed(headers, "anthropic-");
    super::remove_prefixed(headers, "x-stainless-");
    headers.remove("x-api-key");
    headers.remove(AUTHORIZATION);
}

/// The betas a client asked for in `anthropic-beta` (comma-separated,
/// possibly over several header lines).
pub fn betas(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(str::to_string)
        .collect()
}

/// A Messages body made into Bedrock's, and whether it asked for a stream.
#[derive(Debug)]
pub struct BedrockBody {
    pub body: Vec<u8>,
    pub stream: bool,
}

/// The Messages `body` as Bedrock takes it: `model` and `stream` taken
/// out (they are the path's), `anthropic_version` set, and `betas` merged
/// into `anthropic_beta`. Only the top level is read; every other field
/// is kept byte for byte. Err for a body that is not a JSON object.
pub fn request_body(body: &[u8], betas: &[String]) -> Result<BedrockBody, String> {
    let mut fields: std::collections::BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(body).map_err(|e| format!("the request body is not valid: {e}"))?;
    fields.remove("model");
    let stream = match fields.remove("stream") {
        Some(v) => serde_json::from_str::<bool>(v.get())
            .map_err(|_| "`stream` must be a boolean".to_string())?,
        None => false,
    };
    let version = serde_json::value::to_raw_value(ANTHROPIC_VERSION).map_err(|e| e.to_string())?;
    fields.insert("anthropic_version".into(), version);
    let mut all: Vec<String> = match fields.get("anthropic_beta") {
        Some(v) => serde_json::from_str(v.get())
            .map_err(|_| "`anthropic_beta` must be an array of strings".to_string())?,
        None => Vec::new(),
    };
    for b in betas {
        if !all.contains(b) {
            all.push(b.clone());
        }
    }
    if !all.is_empty() {
        let raw = serde_json::value::to_raw_value(&all).map_err(|e| e.to_string())?;
        fields.insert("anthropic_beta".into(), raw);
    }
    let body = serde_json::to_vec(&fields).map_err(|e| e.to_string())?;
    Ok(BedrockBody { body, stream })
}

/// A Bedrock exception, by the name in `x-amzn-ErrorType` or an exception
/// frame's `:exception-type` (either case of the first letter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exception {
    Throttling,
    ServiceUnavailable,
    ModelNotReady,
    ModelTimeout,
    ModelStreamError,
    InternalServer,
    Validation,
    AccessDenied,
    ResourceNotFound,
    ServiceQuotaExceeded,
    /// An exception this table does not name: its status decides.
    Other,
}

impl Exception {
    /// The exception `name` names: `ThrottlingException`, or with the
    /// `:http://internal.amazon.com/…` tail of `x-amzn-ErrorType`, or the
    /// lower-camel form of an exception frame.
    pub fn named(name: &str) -> Exception {
        let name = name.split(':').next().unwrap_or_default();
        let name = name.strip_suffix("Exception").unwrap_or(name);
        let mut chars = name.chars();
        let first = chars.next().map(|c| c.to_ascii_uppercase());
        let name: String = first.into_iter().chain(chars).collect();
        match name.as_str() {
            "Throttling" => Exception::Throttling,
            "ServiceUnavailable" => Exception::ServiceUnavailable,
            "ModelNotReady" => Exception::ModelNotReady,
            "ModelTimeout" => Exception::ModelTimeout,
            "ModelStreamError" => Exception::ModelStreamError,
            "InternalServer" => Exception::InternalServer,
            "Validation" => Exception::Validation,
            "AccessDenied" => Exception::AccessDenied,
            "ResourceNotFound" => Exception::ResourceNotFound,
            "ServiceQuotaExceeded" => Exception::ServiceQuotaExceeded,
            _ => Exception::Other,
        }
    }

    /// The status a client (and failover) reads, given Bedrock's own:
    /// throttling 429; a model not ready (which Bedrock answers 429) or a
    /// service unavailable 503, both failed over and neither the client's
    /// quota; a model that timed out 504.
    pub fn status(self, bedrock: StatusCode) -> StatusCode {
        match self {
            Exception::Throttling => StatusCode::TOO_MANY_REQUESTS,
            Exception::ServiceUnavailable | Exception::ModelNotReady => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Exception::ModelTimeout => StatusCode::GATEWAY_TIMEOUT,
            Exception::InternalServer | Exception::ModelStreamError => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            Exception::Validation => StatusCode::BAD_REQUEST,
            Exception::AccessDenied => StatusCode::FORBIDDEN,
            Exception::ResourceNotFound => StatusCode::NOT_FOUND,
            Exception::ServiceQuotaExceeded | Exception::Other => bedrock,
        }
    }

    /// The retry hint (seconds) a client gets with this exception.
    pub fn retry_after(self) -> Option<u64> {
        match self {
            Exception::Throttling => Some(THROTTLED_RETRY_AFTER),
            _ => None,
        }
    }
}

/// The message of a Bedrock error body (`{"message": …}`, or `Message`).
fn message_of(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    v["message"]
        .as_str()
        .or_else(|| v["Message"].as_str())
        .map_or_else(
            || String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
            str::to_string,
        )
}

/// An error answer in the Messages shape: its status, body and retry hint.
#[derive(Debug)]
pub struct ErrorAnswer {
    pub status: StatusCode,
    pub body: String,
    pub retry_after: Option<u64>,
}

/// Bedrock's error answer (`status`, its `x-amzn-ErrorType`, its body) in
/// the Messages error envelope, with the status failover reads.
pub fn error_answer(status: StatusCode, error_type: Option<&str>, body: &[u8]) -> ErrorAnswer {
    let exception = error_type.map_or(Exception::Other, Exception::named);
    let status = exception.status(status);
    let message = message_of(body);
    ErrorAnswer {
        status,
        body: anthropic::error_body(status, &message, None),
        retry_after: exception.retry_after(),
    }
}

/// Why a frame cannot be made into an event.
#[derive(Debug, PartialEq, Eq)]
pub enum EventError {
    Frame(FrameError),
    /// A `chunk` whose payload is not `{"bytes": base64 of a JSON event}`.
    Chunk,
}

/// One decoded frame as the Messages SSE event it carries: a `chunk`'s
/// event under its own `type` as the event name; an exception (or an
/// error frame) as an `error` event in the Messages envelope, with the
/// error type its status reads as. None for a frame that carries no
/// event (an `initial-response`, an unknown event type).
pub fn event_to_sse(frame: &Frame) -> Result<Option<Vec<u8>>, EventError> {
    match frame.header(":message-type") {
        Some("event") => {}
        Some("exception") => {
            let name = frame.header(":exception-type").unwrap_or_default();
            return Ok(Some(exception_event(name, &frame.payload)));
        }
        _ => {
            let name = frame.header(":error-code").unwrap_or_default();
            let message = frame.header(":error-message").unwrap_or_default();
            let body = json!({"message": message}).to_string();
            return Ok(Some(exception_event(name, body.as_bytes())));
        }
    }
    if frame.header(":event-type") != Some("chunk") {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Chunk {
        bytes: String,
    }
    use base64::Engine as _;
    let chunk: Chunk = serde_json::from_slice(&frame.payload).map_err(|_| EventError::Chunk)?;
    let event = base64::engine::general_purpose::STANDARD
        .decode(chunk.bytes.as_bytes())
        .map_err(|_| EventError::Chunk)?;
    let value: Value = serde_json::from_slice(&event).map_err(|_| EventError::Chunk)?;
    let name = value["type"].as_str().ok_or(EventError::Chunk)?;
    Ok(Some(sse_event(name, &event)))
}

fn exception_event(name: &str, payload: &[u8]) -> Vec<u8> {
    let exception = Exception::named(name);
    let status = exception.status(StatusCode::INTERNAL_SERVER_ERROR);
    let message = message_of(payload);
    let body = anthropic::error_body(status, &message, None);
    sse_event("error", body.as_bytes())
}

fn sse_event(name: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + name.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    out
}

/// Decodes a stream of frames into SSE bytes as they arrive.
#[derive(Debug, Default)]
pub struct SseDecoder {
    frames: eventstream::Decoder,
}

impl SseDecoder {
    /// The SSE bytes of every frame `data` completes; Err when a frame is
    /// broken (a CRC, a length, a header) or carries no valid event: the
    /// stream cannot be trusted past it.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<u8>, EventError> {
        self.frames.push(data);
        let mut out = Vec::new();
        while let Some(frame) = self.frames.next_frame().map_err(EventError::Frame)? {
            if let Some(event) = event_to_sse(&frame)? {
                out.extend_from_slice(&event);
            }
        }
        Ok(out)
    }

    /// Bytes of a frame begun and not finished.
    pub fn pending(&self) -> usize {
        self.frames.pending()
    }
}

#[cfg(test)]
mod tests;
