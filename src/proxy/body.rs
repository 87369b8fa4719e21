//! The request body as it streams to the upstream, with the route's size
//! limit enforced frame by frame and the connection layer's minimum data
//! rate, so a trickled upload cannot pin a connection (or an admission
//! slot).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Raised inside the upstream request when the client's body crosses the
/// route's `max_request_body`; the proxy turns it into 413.
#[derive(Debug, thiserror::Error)]
#[error("request body exceeds the route limit of {limit} bytes")]
pub struct BodyTooLarge {
    pub limit: u64,
}

/// Raised when the client sends its body slower than the minimum rate; the
/// proxy turns it into 408.
#[derive(Debug, thiserror::Error)]
#[error("request body slower than {min_bytes_per_second} bytes/s")]
pub struct BodyTooSlow {
    pub min_bytes_per_second: u64,
}

/// The minimum body data rate: at least `min_bytes_per_second × period`
/// bytes in every `period` that weir spends waiting for the client.
#[derive(Debug, Clone, Copy)]
pub struct BodyRate {
    pub min_bytes_per_second: u64,
    pub period: Duration,
}

impl BodyRate {
    fn bytes_per_period(&self) -> u64 {
        (self.min_bytes_per_second as f64 * self.period.as_secs_f64()) as u64
    }
}

/// Progress in the current rate window. A window opens when weir first has
/// to wait for the client and closes as soon as the client has sent a
/// period's worth of bytes; time the upstream spends not reading (so weir
/// does not poll) only counts if the client still has nothing buffered.
struct RateWindow {
    rate: BodyRate,
    received: u64,
    deadline: Option<Pin<Box<Sleep>>>,
}

pub struct RequestBody {
    inner: Incoming,
    limit: Option<u64>,
    received: u64,
    window: Option<RateWindow>,
}

impl RequestBody {
    pub fn new(inner: Incoming, limit: Option<u64>, rate: Option<BodyRate>) -> Self {
        RequestBody {
            inner,
            limit,
            received: 0,
            window: rate.map(|rate| RateWindow {
                rate,
                received: 0,
                deadline: None,
            }),
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
                    let n = data.len() as u64;
                    this.received += n;
                    if let Some(limit) = this.limit
                        && this.received > limit
                    {
                        return Poll::Ready(Some(Err(Box::new(BodyTooLarge { limit }))));
                    }
                    if let Some(w) = &mut this.window {
                        w.received += n;
                        if w.received >= w.rate.bytes_per_period() {
                            // The client has proved the rate for this window.
                            w.received = 0;
                            w.deadline = None;
                        }
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if let Some(w) = &mut this.window {
                    let deadline = w.deadline.get_or_insert_with(|| {
                        Box::pin(tokio::time::sleep_until(Instant::now() + w.rate.period))
                    });
                    if deadline.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Some(Err(Box::new(BodyTooSlow {
                            min_bytes_per_second: w.rate.min_bytes_per_second,
                        }))));
                    }
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
