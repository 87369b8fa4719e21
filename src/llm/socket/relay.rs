//! A turn's answer sent back: a stream one event per text frame (the
//! event's JSON `data`), to its terminal event; any other answer one error
//! frame with its status and headers. The client's frames are read as the
//! answer streams: a second `response.create` gets an error frame, the
//! client leaving drops the answer (and, through the relay, the upstream
//! request).

use futures_util::StreamExt;
use http::Response;
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_tungstenite::tungstenite::Message;
use weir_wire::responses::websocket as ws;
use weir_wire::sse;

use super::{Gone, Socket, error_frame, send};
use crate::respond::{Payload, Recorded};

/// The most of an error answer's body read into an error frame.
const MAX_ERROR_BODY: usize = 64 << 10;
/// The most headers an error frame carries.
const MAX_ERROR_HEADERS: usize = 32;
/// How long the rest of an answer, past its terminal event, may take.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// What a relayed answer said.
#[derive(Default)]
pub(super) struct Answered {
    /// `completed`, `failed`, `incomplete` or `error`.
    pub(super) outcome: &'static str,
    pub(super) completed: bool,
    ended: bool,
    pub(super) id: Option<String>,
    /// The output items, whole, in order.
    pub(super) output: Vec<Value>,
    /// Their size as they arrived.
    pub(super) output_bytes: u64,
}

#[derive(Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<ResponseHead>,
    #[serde(default)]
    status: Option<u16>,
}

#[derive(Deserialize)]
struct ResponseHead {
    #[serde(default)]
    id: Option<String>,
}

impl Answered {
    /// Read one event's `data`: its output item, the response id, whether
    /// it ends the response; the frame to send for it.
    fn observe(&mut self, data: String) -> Message {
        let Ok(head) = serde_json::from_str::<EventHead>(&data) else {
            return Message::text(data);
        };
        if let Some(id) = head.response.and_then(|r| r.id) {
            self.id = Some(id);
        }
        if head.kind == ws::OUTPUT_ITEM_DONE
            && let Some(item) = head.item
        {
            self.output.push(item);
            self.output_bytes = self.output_bytes.saturating_add(data.len() as u64);
        }
        if ws::is_terminal(&head.kind) {
            self.ended = true;
            self.outcome = ws::outcome(&head.kind);
            self.completed = head.kind == ws::COMPLETED;
        }
        if head.kind == ws::ERROR && head.status.is_none() {
            // An in-band error of a stream that had started (the relay's,
            // or the upstream's): Codex maps an error frame by its status.
            return in_band(&data);
        }
        Message::text(data)
    }
}

/// An in-band `error` event as an error frame (502: the upstream failed
/// mid-answer, which Codex retries).
fn in_band(data: &str) -> Message {
    let event: Map<String, Value> = serde_json::from_str(data).unwrap_or_default();
    let text = |k: &str| event.get(k).and_then(Value::as_str).unwrap_or_default();
    let code = match text("code") {
        "" => "server_error",
        c => c,
    };
    error_frame(502, ws::error("server_error", code, text("message"), None))
}

/// Relay a streamed answer, event by event, to its terminal event.
pub(super) async fn relay(
    socket: &mut Socket,
    mut body: Recorded<Payload>,
) -> Result<Answered, Gone> {
    let mut framer = sse::Framer::default();
    let mut answered = Answered::default();
    while !answered.ended {
        tokio::select! {
            frame = body.frame() => {
                let Some(Ok(frame)) = frame else { break };
                let Ok(data) = frame.into_data() else { continue };
                framer.push(&data);
                while let Some(event) = framer.next_event() {
                    let (_, data) = sse::fields(&event);
                    if data.is_empty() || answered.ended {
                        continue;
                    }
                    send(socket, answered.observe(data)).await?;
                }
            }
            message = socket.next() => match message {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Err(Gone),
                Some(Ok(Message::Text(text))) if !processed(&text) => {
                    send(socket, busy()).await?;
                }
                Some(Ok(_)) => {}
            },
        }
    }
    if !answered.ended {
        answered.outcome = "error";
        let error = ws::error(
            "server_error",
            "server_error",
            "the answer ended before its terminal event",
            None,
        );
        send(socket, error_frame(502, error)).await?;
    }
    // The rest of the stream (nothing, after a terminal event) so that its
    // record ends as a finished answer, not a client gone.
    let _ = tokio::time::timeout(DRAIN, async { while body.frame().await.is_some() {} }).await;
    Ok(answered)
}

/// Whether a client frame is a `response.processed` (nothing to answer).
fn processed(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    serde_json::from_str::<Kind<'_>>(text).is_ok_and(|k| k.kind == ws::PROCESSED)
}

/// A second `response.create` while one runs.
fn busy() -> Message {
    let error = ws::error(
        "invalid_request_error",
        "response_in_progress",
        "a response is already in progress on this connection; send the next when it has ended",
        None,
    );
    error_frame(400, error)
}

/// An answer that is not a stream (weir's own error, or an upstream's
/// relayed): one error frame with its status, its error object and its
/// headers (the retry hints among them).
pub(super) async fn error_answer(
    socket: &mut Socket,
    resp: Response<Recorded<Payload>>,
) -> Result<Answered, Gone> {
    let (parts, mut body) = resp.into_parts();
    let mut read = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            read.extend_from_slice(&data);
            if read.len() > MAX_ERROR_BODY {
                break;
            }
        }
    }
    drop(body);
    let error = match serde_json::from_slice::<Value>(&read) {
        Ok(Value::Object(mut o)) => match o.remove("error") {
            Some(e @ Value::Object(_)) => e,
            _ => Value::Object(o),
        },
        _ => {
            let text = String::from_utf8_lossy(&read[..read.len().min(1024)]).into_owned();
            ws::error("server_error", "server_error", &text, None)
        }
    };
    let mut headers = Map::new();
    for (name, value) in &parts.headers {
        if headers.len() >= MAX_ERROR_HEADERS || !carried(name) {
            continue;
        }
        if let Ok(v) = value.to_str() {
            headers.insert(name.as_str().to_string(), Value::String(v.to_string()));
        }
    }
    let frame = ws::error_frame(parts.status.as_u16(), error, headers);
    send(socket, Message::text(frame.to_string())).await?;
    Ok(Answered {
        outcome: "error",
        ..Answered::default()
    })
}

/// Whether an answer's header goes into its error frame: not those about
/// the HTTP message itself.
fn carried(name: &http::HeaderName) -> bool {
    use http::header;
    ![
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
        header::DATE,
        header::SERVER,
        header::CONTENT_ENCODING,
        header::VARY,
    ]
    .contains(name)
}
