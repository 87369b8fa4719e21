//! The payload of a response: streamed from the upstream, or generated here.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;

/// A response payload. An enum rather than a boxed body: no allocation per
/// response, and every frame (data and trailers) is delegated unchanged.
pub enum Payload {
    /// Streamed from the upstream as it arrives, never buffered.
    Upstream(Incoming),
    /// A small body weir produced itself (errors, redirects, admin pages).
    Generated(Full<Bytes>),
}

impl Payload {
    pub fn empty() -> Self {
        Payload::Generated(Full::new(Bytes::new()))
    }

    pub fn text(s: impl Into<Bytes>) -> Self {
        Payload::Generated(Full::new(s.into()))
    }
}

impl Body for Payload {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            Payload::Upstream(b) => Pin::new(b).poll_frame(cx),
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
            Payload::Upstream(b) => b.is_end_stream(),
            Payload::Generated(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Payload::Upstream(b) => b.size_hint(),
            Payload::Generated(b) => b.size_hint(),
        }
    }
}
