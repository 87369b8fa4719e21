//! An upstream's answer as the rest of the LLM path reads it: its body as
//! it arrives ([`UpstreamBody::Plain`]), or — for an upstream API whose
//! answers are framed otherwise (Amazon Bedrock's event stream and
//! `x-amzn-ErrorType` errors, [`weir_wire::bedrock`]) — made into the
//! SSE stream and error envelope of the API it serves before failover,
//! the relay or the renderer look at it. They stay as they are: they
//! read a body of bytes.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http::header::{self, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use weir_wire::bedrock::{self, SseDecoder};

use crate::respond::{BoxError, Payload};

/// An upstream answer's body.
pub(crate) enum UpstreamBody {
    /// As the upstream sends it.
    Plain(Incoming),
    /// Read whole and rewritten (an error in the served API's envelope).
    Whole(Option<Bytes>),
    /// Event-stream frames decoded into SSE events as they arrive.
    Events(Box<Events>),
}

/// An event stream being decoded.
pub(crate) struct Events {
    upstream: Incoming,
    decoder: SseDecoder,
    done: bool,
}

impl UpstreamBody {
    /// The body as a response's payload.
    pub(crate) fn into_payload(self) -> Payload {
        match self {
            UpstreamBody::Plain(b) => Payload::Upstream(b),
            UpstreamBody::Whole(b) => Payload::text(b.unwrap_or_default()),
            events @ UpstreamBody::Events(_) => Payload::Stream(Box::pin(events)),
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            UpstreamBody::Plain(b) => Pin::new(b)
                .poll_frame(cx)
                .map_err(|e| Box::new(e) as BoxError),
            UpstreamBody::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            UpstreamBody::Events(e) => e.poll_events(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamBody::Plain(b) => b.is_end_stream(),
            UpstreamBody::Whole(b) => b.is_none(),
            UpstreamBody::Events(e) => e.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::Plain(b) => b.size_hint(),
            UpstreamBody::Whole(b) => {
                SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64))
            }
            UpstreamBody::Events(_) => SizeHint::default(),
        }
    }
}

impl Events {
    /// The next SSE bytes the upstream's frames make; an error when a
    /// frame is broken or the stream ends inside one: the relay ends the
    /// client's stream with its API's in-band error.
    fn poll_events(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut self.upstream).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    match self.decoder.push(&data) {
                        Ok(sse) if sse.is_empty() => {}
                        Ok(sse) => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(sse))))),
                        Err(e) => {
                            self.done = true;
                            let why = format!("the upstream's event stream is broken: {e:?}");
                            return Poll::Ready(Some(Err(why.into())));
                        }
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    if self.decoder.pending() > 0 {
                        let why = "the upstream's event stream ended inside a frame";
                        return Poll::Ready(Some(Err(why.into())));
                    }
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// An upstream's answer as the API it serves frames it: a Bedrock event
/// stream decoded into SSE; a Bedrock error (`x-amzn-ErrorType`) read
/// (bounded, within `timeout`) into the Messages envelope with the status
/// failover reads and, when throttled, a retry hint; anything else as it
/// is.
pub(crate) async fn unframe(
    resp: Response<Incoming>,
    timeout: std::time::Duration,
) -> Response<UpstreamBody> {
    let (mut parts, body) = resp.into_parts();
    let event_stream = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(bedrock::EVENT_STREAM));
    if parts.status.is_success() && event_stream {
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        parts.headers.remove(header::CONTENT_LENGTH);
        let events = Events {
            upstream: body,
            decoder: SseDecoder::default(),
            done: false,
        };
        return Response::from_parts(parts, UpstreamBody::Events(Box::new(events)));
    }
    if parts.status.is_success() {
        return Response::from_parts(parts, UpstreamBody::Plain(body));
    }
    let raw = read_error_body(UpstreamBody::Plain(body), timeout).await;
    let error_type = parts
        .headers
        .get(bedrock::ERROR_TYPE_HEADER)
        .and_then(|v| v.to_str().ok());
    let answer = bedrock::error_answer(parts.status, error_type, &raw);
    parts.status = answer.status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = answer.retry_after {
        parts
            .headers
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    let body = UpstreamBody::Whole(Some(Bytes::from(answer.body)));
    Response::from_parts(parts, body)
}

/// An error body is read whole to be relayed later; bounded (provider
/// error bodies are a few hundred bytes).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// An error body read whole (at most [`MAX_ERROR_BODY`], within
/// `timeout`); empty when it could not be.
pub(crate) async fn read_error_body(body: UpstreamBody, timeout: std::time::Duration) -> Bytes {
    let read = Limited::new(body, MAX_ERROR_BODY).collect();
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    }
}
