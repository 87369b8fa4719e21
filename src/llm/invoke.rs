//! Bedrock's `InvokeModel` as a client API (`kind = "bedrock"`, decision
//! 089): Claude Code with `CLAUDE_CODE_USE_BEDROCK=1` and
//! `ANTHROPIC_BEDROCK_BASE_URL` pointed at weir. After the body is read
//! the request becomes a Messages request ([`into_messages`]) and goes
//! through the same steps as an Anthropic client's — model, budget,
//! failover over any upstream API, the relay; the answer is made back
//! into Bedrock's at the end ([`answer`]): a stream's events each in an
//! event-stream `chunk` frame, an error in Bedrock's exception shape.
//! What the wire means is [`weir_wire::bedrock::client`]'s.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Limited};
use weir_wire::bedrock::client::{self as invoke, FrameEncoder, Invocation};
use weir_wire::{Protocol, bedrock};

use super::body::ReadBody;
use super::offload::Offload;
use super::outgoing::Outgoing;
use crate::respond::{BoxError, Payload, Rescue};

/// Bodies up to this are rewritten on the serving thread: the rewrite
/// parses the top level (a validating pass, slower than the model scan),
/// about 0.2 ms at this size; Claude Code's requests are 50–100 KiB.
const REWRITE_INLINE_MAX: usize = 128 * 1024;

/// The request read as Bedrock's made the Messages request the rest of
/// the route serves: the model and stream from the path into the body,
/// `anthropic_beta` into the header, the Messages path. A 400 in
/// Bedrock's shape when the body is not an InvokeModel body.
pub(super) async fn into_messages(
    request: &mut Outgoing,
    read: &mut ReadBody,
    offload: &Offload,
) -> Result<(), Rescue> {
    let path = request.path_and_query.split('?').next().unwrap_or_default();
    let Some(call) = Invocation::of(path) else {
        // Endpoint::find found it: the same path always parses.
        return Err(Rescue::status(StatusCode::NOT_FOUND).saying("not an InvokeModel path"));
    };
    let body = read.bytes.clone();
    let rewritten = offload
        .run_inline_up_to(REWRITE_INLINE_MAX, body.len(), move || {
            invoke::messages_body(&body, &call)
        })
        .await
        .map_err(|_| super::busy())?
        .map_err(|why| Rescue::status(StatusCode::BAD_REQUEST).saying(why))?;
    invoke::messages_headers(&mut request.parts.headers, &rewritten.betas);
    read.bytes = Bytes::from(rewritten.body);
    request.path_and_query = weir_wire::anthropic::MESSAGES_PATH.to_string();
    // Its headers are the Anthropic family's now.
    request.protocol = Protocol::Anthropic;
    Ok(())
}

/// The Messages answer as Bedrock answers: a stream in event-stream
/// frames, an error as Bedrock's exception (read within `timeout`,
/// bounded), a whole answer as it is (InvokeModel's body is the Messages
/// JSON).
pub(super) async fn answer(
    resp: Response<Payload>,
    timeout: std::time::Duration,
) -> Response<Payload> {
    let (mut parts, body) = resp.into_parts();
    if parts.status.is_success() {
        if !super::answer::is_event_stream(&parts.headers) {
            return Response::from_parts(parts, body);
        }
        let h = &mut parts.headers;
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(bedrock::EVENT_STREAM),
        );
        h.insert(
            "x-amzn-bedrock-content-type",
            HeaderValue::from_static("application/json"),
        );
        h.remove(header::CONTENT_LENGTH);
        let framed = Framed {
            inner: body,
            encoder: FrameEncoder::default(),
            done: false,
        };
        return Response::from_parts(parts, Payload::Stream(Box::pin(framed)));
    }
    let read = Limited::new(body, MAX_ERROR_BODY).collect();
    let raw = match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    };
    let message = invoke::message_of(&raw)
        .or_else(|| parts.status.canonical_reason().map(str::to_string))
        .unwrap_or_else(|| "error".into());
    let exception = invoke::exception_for(parts.status);
    let h = &mut parts.headers;
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        invoke::ERROR_TYPE_HEADER,
        HeaderValue::from_static(exception),
    );
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::CONTENT_ENCODING);
    Response::from_parts(parts, Payload::text(invoke::error_body(&message)))
}

/// An error body is read whole to be reshaped; provider error bodies are
/// a few hundred bytes.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A Messages SSE body made into event-stream frames as it passes.
struct Framed {
    inner: Payload,
    encoder: FrameEncoder,
    done: bool,
}

impl Body for Framed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let frames = this.encoder.push(&data);
                    if !frames.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(frames)))));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
