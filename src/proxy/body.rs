//! The request body as it streams to the upstream, with the route's size
//! limit enforced frame by frame (for bodies without a declared length).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Raised inside the upstream request when the client's body crosses the
/// route's `max_request_body`; the proxy turns it into 413.
#[derive(Debug, thiserror::Error)]
#[error("request body exceeds the route limit of {limit} bytes")]
pub struct BodyTooLarge {
    pub limit: u64,
}

pub struct RequestBody {
    inner: Incoming,
    limit: Option<u64>,
    received: u64,
}

impl RequestBody {
    pub fn new(inner: Incoming, limit: Option<u64>) -> Self {
        RequestBody {
            inner,
            limit,
            received: 0,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    if let Some(limit) = this.limit
                        && this.received > limit
                    {
                        return Poll::Ready(Some(Err(Box::new(BodyTooLarge { limit }))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
