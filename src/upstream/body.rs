//! The request body as it streams to the upstream, with the route's size
//! limit enforced frame by frame and the connection layer's minimum data
//! rate, so a trickled upload cannot pin a connection (or an admission
//! slot).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

pub(crate) use super::error::BoxError;
use crate::sync::Locked;

/// Raised inside the upstream request when the client's body crosses the
/// route's `max_request_body`; the proxy turns it into 413.
#[derive(Debug, thiserror::Error)]
#[error("request body exceeds the route limit of {limit} bytes")]
pub(crate) struct BodyTooLarge {
    pub(crate) limit: u64,
}

/// Raised when the client sends its body slower than the minimum rate; the
/// proxy turns it into 408.
#[derive(Debug, thiserror::Error)]
#[error("request body slower than {min_bytes_per_second} bytes/s")]
pub(crate) struct BodyTooSlow {
    pub(crate) min_bytes_per_second: u64,
}

/// The client's body could not be read: bad chunked framing, or the
/// client went away mid-body. The proxy answers 400 and closes.
#[derive(Debug, thiserror::Error)]
#[error("request body could not be read: {0}")]
pub(crate) struct BodyUnreadable(#[source] pub(crate) hyper::Error);

/// The minimum body data rate: at least `min_bytes_per_second × period`
/// bytes in every `period` that weir spends waiting for the client.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyRate {
    pub(crate) min_bytes_per_second: u64,
    pub(crate) period: Duration,
}

impl BodyRate {
    fn bytes_per_period(&self) -> u64 {
        (self.min_bytes_per_second as f64 * self.period.as_secs_f64()) as u64
    }
}

/// Progress in the current rate window. The window is fixed-length; at its
/// end the client must have sent a period's worth of bytes. It is judged
/// when data arrives after the window ended, or when the window's timer
/// fires while weir is waiting for the client. A window that ends while the
/// upstream was not reading (so weir was not polling) is judged at the next
/// poll, when the client's buffered bytes arrive at once and pass. One timer
/// per request, moved once per period: nothing per chunk.
struct RateWindow {
    rate: BodyRate,
    start: Instant,
    received: u64,
    timer: Option<Pin<Box<Sleep>>>,
}

impl RateWindow {
    /// Judge the window if it has ended: `Err` when the client was too slow,
    /// otherwise a new window starts when the old one ended.
    fn judge(&mut self, now: Instant) -> Result<(), BodyTooSlow> {
        if now < self.start + self.rate.period {
            return Ok(());
        }
        if self.received < self.rate.bytes_per_period() {
            return Err(BodyTooSlow {
                min_bytes_per_second: self.rate.min_bytes_per_second,
            });
        }
        self.start = now;
        self.received = 0;
        if let Some(t) = &mut self.timer {
            t.as_mut().reset(now + self.rate.period);
        }
        Ok(())
    }
}

pub(crate) struct RequestBody {
    inner: Incoming,
    limit: Option<u64>,
    received: u64,
    window: Option<RateWindow>,
}

impl RequestBody {
    pub(crate) fn new(inner: Incoming, limit: Option<u64>, rate: Option<BodyRate>) -> Self {
        RequestBody {
            inner,
            limit,
            received: 0,
            window: rate.map(|rate| RateWindow {
                rate,
                start: Instant::now(),
                received: 0,
                timer: None,
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
                        if let Err(slow) = w.judge(Instant::now()) {
                            return Poll::Ready(Some(Err(Box::new(slow))));
                        }
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(BodyUnreadable(e))))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if let Some(w) = &mut this.window {
                    let end = w.start + w.rate.period;
                    let timer = w
                        .timer
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(end)));
                    if timer.as_mut().poll(cx).is_ready() {
                        if let Err(slow) = w.judge(Instant::now()) {
                            return Poll::Ready(Some(Err(Box::new(slow))));
                        }
                        // The window passed and the timer moved on: poll it
                        // once more so it is armed for the new window.
                        if let Some(t) = &mut w.timer {
                            let _ = t.as_mut().poll(cx);
                        }
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

/// The request body as one attempt at a server sends it. In a group of
/// several servers it is shared with a [`Reclaim`]: if the attempt fails
/// before reading any of it (the connection was refused), the body is
/// taken back whole for the next server — the request can go elsewhere
/// whatever its method, because no byte of it left.
pub(crate) enum Attempt {
    Only(RequestBody),
    Shared {
        slot: Arc<Mutex<Option<RequestBody>>>,
        taken: Option<RequestBody>,
    },
    /// A request without a body, sent again after its first attempt
    /// consumed the (empty) one it had.
    Empty,
}

/// The way back to a body no attempt has read.
pub(crate) struct Reclaim(Arc<Mutex<Option<RequestBody>>>);

impl Attempt {
    pub(crate) fn shared(body: RequestBody) -> (Attempt, Reclaim) {
        let slot = Arc::new(Mutex::new(Some(body)));
        (
            Attempt::Shared {
                slot: slot.clone(),
                taken: None,
            },
            Reclaim(slot),
        )
    }
}

impl Reclaim {
    /// Nothing to take back.
    pub(crate) fn empty() -> Reclaim {
        Reclaim(Arc::new(Mutex::new(None)))
    }

    /// The body, if no attempt has begun reading it.
    pub(crate) fn take(&self) -> Option<RequestBody> {
        self.0.locked().take()
    }
}

impl Body for Attempt {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Attempt::Only(body) => Pin::new(body).poll_frame(cx),
            Attempt::Shared { slot, taken } => {
                if taken.is_none() {
                    *taken = slot.locked().take();
                }
                match taken {
                    Some(body) => Pin::new(body).poll_frame(cx),
                    // Another attempt took it: nothing to send.
                    None => Poll::Ready(None),
                }
            }
            Attempt::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Attempt::Only(body) => body.is_end_stream(),
            Attempt::Shared { slot, taken } => match taken {
                Some(body) => body.is_end_stream(),
                None => slot.locked().as_ref().is_none_or(Body::is_end_stream),
            },
            Attempt::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Attempt::Only(body) => body.size_hint(),
            Attempt::Shared { slot, taken } => match taken {
                Some(body) => body.size_hint(),
                None => slot
                    .locked()
                    .as_ref()
                    .map_or_else(|| SizeHint::with_exact(0), Body::size_hint),
            },
            Attempt::Empty => SizeHint::with_exact(0),
        }
    }
}
