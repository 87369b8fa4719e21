//! Bedrock's `InvokeModel` as a client API (`kind = "bedrock"`): what
//! Claude Code sends with `CLAUDE_CODE_USE_BEDROCK=1` and
//! `ANTHROPIC_BEDROCK_BASE_URL` pointed at weir, and what it must get
//! back. The request is made into a Messages request (the model and the
//! stream are the path's, [`Invocation`]; the body's `anthropic_beta` is
//! the `anthropic-beta` header, [`messages_body`]), so every upstream API
//! serves it through the Messages pairs; the Messages answer is made
//! back into Bedrock's: a stream's events each in a `chunk` frame
//! ([`FrameEncoder`]), an error in Bedrock's exception shape
//! ([`exception_for`], [`error_body`]).

use base64::Engine as _;
use http::StatusCode;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::eventstream::Frame;
use crate::sse::{self, Framer};

/// The header naming an error answer's exception, as Bedrock writes it.
pub const ERROR_TYPE_HEADER: &str = super::ERROR_TYPE_HEADER;
/// The header a Bedrock answer's request id travels in.
pub const REQUEST_ID_HEADER: &str = "x-amzn-requestid";
/// The longest model id taken from a path: Bedrock's ARNs of inference
/// profiles run to about 200 bytes.
const MAX_MODEL_ID: usize = 512;

/// One call named by its path: `POST /model/{modelId}/invoke` or
/// `/invoke-with-response-stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The model id, percent-decoded (`us.anthropic.…-v1:0`).
    pub model: String,
    pub stream: bool,
}

impl Invocation {
    /// The call `path` names, if it names one.
    pub fn of(path: &str) -> Option<Invocation> {
        let rest = path.strip_prefix("/model/")?;
        let (model, call) = rest.rsplit_once('/')?;
        let stream = match call {
            "invoke" => false,
            "invoke-with-response-stream" => true,
            _ => return None,
        };
        let model = percent_decode(model)?;
        let fits = !model.is_empty() && model.len() <= MAX_MODEL_ID;
        (fits && !model.contains('/') && !model.chars().any(char::is_control))
            .then_some(Invocation { model, stream })
    }
}

/// `%XX` decoded; None for a broken escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A Bedrock body made into a Messages one, and the betas it asked for.
#[derive(Debug)]
pub struct MessagesBody {
    pub body: Vec<u8>,
    /// The body's `anthropic_beta`: the `anthropic-beta` header's now.
    pub betas: Vec<String>,
}

/// The Bedrock body as a Messages body: `model` and `stream` from the
/// path set, `anthropic_version` (the header's on Messages) and
/// `anthropic_beta` (returned, for the header) taken out. Only the top
/// level is read; every other field is kept byte for byte. Err for a body
/// that is not a JSON object, or that names a model or stream itself
/// (Bedrock refuses both).
pub fn messages_body(body: &[u8], call: &Invocation) -> Result<MessagesBody, String> {
    let mut fields: std::collections::BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(body)
            .map_err(|_| "the request body is not a JSON object".to_string())?;
    for own in ["model", "stream"] {
        if fields.contains_key(own) {
            return Err(format!(
                "`{own}` is not a field of an InvokeModel body: it is the path's"
            ));
        }
    }
    fields.remove("anthropic_version");
    let betas: Vec<String> = match fields.remove("anthropic_beta") {
        Some(v) => serde_json::from_str(v.get())
            .map_err(|_| "`anthropic_beta` must be an array of strings".to_string())?,
        None => Vec::new(),
    };
    let raw = |e: serde_json::Error| e.to_string();
    let model = serde_json::value::to_raw_value(&call.model).map_err(raw)?;
    let stream = serde_json::value::to_raw_value(&call.stream).map_err(raw)?;
    fields.insert("model".into(), model);
    fields.insert("stream".into(), stream);
    let body = serde_json::to_vec(&fields).map_err(|e| e.to_string())?;
    Ok(MessagesBody { body, betas })
}

/// The Messages request's headers: the body's betas added to
/// `anthropic-beta` (each once), and `anthropic-version` when the client
/// sent none (Claude Code sends it; an SDK signing for AWS may not).
pub fn messages_headers(headers: &mut http::HeaderMap, betas: &[String]) {
    let mut all = super::betas(headers);
    for b in betas {
        if !all.contains(b) {
            all.push(b.clone());
        }
    }
    if let Ok(v) = http::HeaderValue::from_str(&all.join(",")) {
        if all.is_empty() {
            headers.remove("anthropic-beta");
        } else {
            headers.insert("anthropic-beta", v);
        }
    }
    if !headers.contains_key("anthropic-version") {
        let version = http::HeaderValue::from_static(crate::anthropic::VERSION);
        headers.insert("anthropic-version", version);
    }
}

/// The exception Bedrock names an error of `status` by, as
/// `x-amzn-ErrorType` and an error body's `__type` carry it; the status
/// a client reads is the one given (so the SDKs' retry rules hold).
pub fn exception_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 | 422 => "ValidationException",
        401 => "UnrecognizedClientException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 | 504 => "ModelTimeoutException",
        429 => "ThrottlingException",
        503 | 529 => "ServiceUnavailableException",
        _ => "InternalServerException",
    }
}

/// An error body in Bedrock's shape: `{"message": …}`.
pub fn error_body(message: &str) -> String {
    json!({ "message": message }).to_string()
}

/// The message of a Messages error envelope (`{"error":{"message":…}}`),
/// or of a body that is already Bedrock's (`{"message":…}`).
pub fn message_of(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v["error"]["message"]
        .as_str()
        .or_else(|| v["message"].as_str())
        .map(str::to_string)
}

/// The exception a Messages stream's `error` event is sent as: the
/// members of Bedrock's `ResponseStream` that can end a stream.
fn stream_exception(error_type: &str) -> &'static str {
    match error_type {
        "rate_limit_error" => "throttlingException",
        "overloaded_error" => "serviceUnavailableException",
        "invalid_request_error" => "validationException",
        "timeout_error" => "modelTimeoutException",
        "api_error" => "internalServerException",
        _ => "modelStreamErrorException",
    }
}

/// A chunk frame carrying one Messages event (its JSON, unchanged).
pub fn chunk_frame(event: &[u8]) -> Vec<u8> {
    let bytes = base64::engine::general_purpose::STANDARD.encode(event);
    Frame {
        headers: vec![
            (":event-type".into(), "chunk".into()),
            (":content-type".into(), "application/json".into()),
            (":message-type".into(), "event".into()),
        ],
        payload: json!({ "bytes": bytes }).to_string().into_bytes(),
    }
    .encode()
}

/// An exception frame: what ends a Bedrock stream that failed.
pub fn exception_frame(exception: &str, message: &str) -> Vec<u8> {
    Frame {
        headers: vec![
            (":exception-type".into(), exception.into()),
            (":content-type".into(), "application/json".into()),
            (":message-type".into(), "exception".into()),
        ],
        payload: error_body(message).into_bytes(),
    }
    .encode()
}

/// Makes a Messages SSE stream into Bedrock's event-stream frames as it
/// arrives: each event with data a `chunk` frame (a `ping` too: it keeps
/// a quiet stream alive, and the SDKs pass it to the Messages reader,
/// which reads past it), an `error` event an exception frame, a comment
/// nothing.
#[derive(Debug, Default)]
pub struct FrameEncoder {
    events: Framer,
}

impl FrameEncoder {
    /// The frames of every event `sse` completes.
    pub fn push(&mut self, sse: &[u8]) -> Vec<u8> {
        self.events.push(sse);
        let mut out = Vec::new();
        while let Some(event) = self.events.next_event() {
            let (name, data) = sse::fields(&event);
            if data.is_empty() {
                continue;
            }
            if name == Some("error") {
                let v: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                let kind = v["error"]["type"].as_str().unwrap_or_default();
                let message = v["error"]["message"]
                    .as_str()
                    .unwrap_or("the stream failed");
                out.extend_from_slice(&exception_frame(stream_exception(kind), message));
            } else {
                out.extend_from_slice(&chunk_frame(data.as_bytes()));
            }
        }
        out
    }

    /// Bytes of an event begun and not finished.
    pub fn pending(&self) -> usize {
        self.events.pending()
    }
}
