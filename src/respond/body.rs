//! The payload of a response: streamed from the upstream, or generated here.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;

/// Any error a response body can end with.
pub(crate) use crate::upstream::BoxError;

/// A body produced by a route kind's own streaming (an LLM relay).
pub(crate) type StreamBody = Pin<Box<dyn Body<Data = Bytes, Error = BoxError> + Send + Sync>>;

/// A response payload. An enum rather than a boxed body for the common
/// cases: no allocation per proxied response, and every frame (data and
/// trailers) is delegated unchanged.
pub(crate) enum Payload {
    /// Streamed from the upstream as it arrives, never buffered.
    Upstream(Incoming),
    /// The same, holding what must live as long as the body does (the
    /// server's in-flight count in its group).
    Held(Incoming, #[allow(dead_code)] Guard),
    /// A small body weir produced itself (errors, redirects, admin pages).
    Generated(Full<Bytes>),
    /// A stream a route kind shapes on the way (LLM routes: failover hold,
    /// keep-alives, in-band errors).
    Stream(StreamBody),
}

/// Anything kept alive until the body is done with, then dropped.
pub(crate) struct Guard(#[allow(dead_code)] Box<dyn Send + Sync>);

impl Guard {
    pub(crate) fn new(held: impl Send + Sync + 'static) -> Self {
        Guard(Box::new(held))
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}

impl Payload {
    pub(crate) fn empty() -> Self {
        Payload::Generated(Full::new(Bytes::new()))
    }

    pub(crate) fn text(s: impl Into<Bytes>) -> Self {
        Payload::Generated(Full::new(s.into()))
    }
}

impl Body for Payload {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Payload::Upstream(b) | Payload::Held(b, _) => match Pin::new(b).poll_frame(cx) {
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
                Poll::Ready(Some(Ok(f))) => Poll::Ready(Some(Ok(f))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            Payload::Stream(b) => b.as_mut().poll_frame(cx),
            Payload::Generated(b) => match Pin::new(b).poll_frame(cx) {
                Poll::Ready(Some(Ok(f))) => Poll::Ready(Some(Ok(f))),
                Poll::Ready(Some(Err(never))) => match never {},
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Payload::Upstream(b) | Payload::Held(b, _) => b.is_end_stream(),
            Payload::Generated(b) => b.is_end_stream(),
            Payload::Stream(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Payload::Upstream(b) | Payload::Held(b, _) => b.size_hint(),
            Payload::Generated(b) => b.size_hint(),
            Payload::Stream(b) => b.size_hint(),
        }
    }
}
