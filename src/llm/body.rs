//! The request body of an LLM route: read whole (weir routes by the model
//! it names, and may send it to more than one upstream), under the route's
//! size limit, the minimum data rate, and a process-wide byte budget. Its
//! `model` is then found and, when an upstream names the model
//! differently, replaced in place by [`weir_wire::body`], so every other
//! byte (`cache_control` blocks included) reaches the upstream as the
//! client sent it.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::upstream::{BodyTooLarge, BodyTooSlow, RequestBody};

/// Bytes of request bodies held in memory by LLM routes, process-wide.
#[derive(Clone, Default)]
pub(crate) struct ByteBudget(Option<Arc<Semaphore>>);

impl ByteBudget {
    /// A budget of `bytes`; 0 = no bound.
    pub(crate) fn new(bytes: u64) -> Self {
        ByteBudget((bytes > 0).then(|| Arc::new(Semaphore::new(bytes as usize))))
    }

    fn reserve(&self, bytes: u64, held: &mut Option<OwnedSemaphorePermit>) -> bool {
        let Some(sem) = &self.0 else {
            return true;
        };
        if bytes == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(bytes) else {
            return false;
        };
        match sem.clone().try_acquire_many_owned(n) {
            Ok(p) => {
                match held {
                    Some(h) => h.merge(p),
                    None => *held = Some(p),
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Bytes reserved now (for tests and the admin view).
    #[cfg(test)]
    pub(crate) fn in_use(&self, limit: u64) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |s| limit - s.available_permits() as u64)
    }
}

/// A body read whole, and its place in the budget (released on drop).
pub(crate) struct ReadBody {
    pub(crate) bytes: Bytes,
    _reservation: Option<OwnedSemaphorePermit>,
}

/// Why a body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    TooLarge,
    TooSlow,
    Unreadable,
    /// The process-wide budget is spent: shed.
    OverBudget,
}

/// Read `body` whole, reserving its declared length up front and growing
/// the reservation as an undeclared (chunked) body arrives.
pub(crate) async fn read(
    mut body: RequestBody,
    declared: Option<u64>,
    budget: &ByteBudget,
) -> Result<ReadBody, ReadError> {
    let mut reservation = None;
    let mut reserved = declared.unwrap_or(0);
    if !budget.reserve(reserved, &mut reservation) {
        return Err(ReadError::OverBudget);
    }
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0).min(1 << 20) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            if e.is::<BodyTooLarge>() {
                ReadError::TooLarge
            } else if e.is::<BodyTooSlow>() {
                ReadError::TooSlow
            } else {
                ReadError::Unreadable
            }
        })?;
        if let Ok(data) = frame.into_data() {
            let after = (buf.len() + data.len()) as u64;
            if after > reserved {
                if !budget.reserve(after - reserved, &mut reservation) {
                    return Err(ReadError::OverBudget);
                }
                reserved = after;
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(ReadBody {
        bytes: buf.freeze(),
        _reservation: reservation,
    })
}

/// An upstream's whole (non-streamed) answer, as far as it was read.
pub(crate) enum Answer {
    /// All of it, held under the budget.
    Whole(ReadBody),
    /// Too large (or the budget too short) to hold for its usage: what was
    /// read, and the rest still to come, to be relayed as they stream.
    Streaming {
        head: Bytes,
        rest: hyper::body::Incoming,
    },
}

/// An upstream's whole (non-streamed) answer read under the same budget
/// as request bodies, at most `limit` bytes: reserved up front when its
/// length is declared, growing as an undeclared one arrives. Past the
/// limit or the budget, `must_hold` (an answer to translate) fails;
/// otherwise the answer is handed back to be streamed on.
pub(crate) async fn read_answer(
    mut body: hyper::body::Incoming,
    declared: Option<u64>,
    budget: &ByteBudget,
    limit: usize,
    must_hold: bool,
) -> Result<Answer, ReadError> {
    let mut reservation = None;
    let mut reserved = 0;
    let mut buf = BytesMut::new();
    let fits = |n: u64, reservation: &mut Option<OwnedSemaphorePermit>, reserved: &mut u64| {
        if n <= *reserved {
            return Ok(());
        }
        if n > limit as u64 {
            return Err(ReadError::TooLarge);
        }
        if !budget.reserve(n - *reserved, reservation) {
            return Err(ReadError::OverBudget);
        }
        *reserved = n;
        Ok(())
    };
    if let Some(n) = declared {
        match fits(n, &mut reservation, &mut reserved) {
            Ok(()) => buf.reserve(n.min(1 << 20) as usize),
            Err(e) if must_hold => return Err(e),
            Err(_) => {
                return Ok(Answer::Streaming {
                    head: Bytes::new(),
                    rest: body,
                });
            }
        }
    }
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ReadError::Unreadable)?;
        if let Ok(data) = frame.into_data() {
            let after = buf.len().saturating_add(data.len()) as u64;
            match fits(after, &mut reservation, &mut reserved) {
                Ok(()) => buf.extend_from_slice(&data),
                Err(e) if must_hold => return Err(e),
                Err(_) => {
                    buf.extend_from_slice(&data);
                    return Ok(Answer::Streaming {
                        head: buf.freeze(),
                        rest: body,
                    });
                }
            }
        }
    }
    Ok(Answer::Whole(ReadBody {
        bytes: buf.freeze(),
        _reservation: reservation,
    }))
}

/// What was read of an answer, then the rest as it arrives.
pub(crate) struct Prefixed {
    head: Option<Bytes>,
    rest: hyper::body::Incoming,
}

impl Prefixed {
    pub(crate) fn new(head: Bytes, rest: hyper::body::Incoming) -> Self {
        Prefixed {
            head: (!head.is_empty()).then_some(head),
            rest,
        }
    }
}

impl http_body::Body for Prefixed {
    type Data = Bytes;
    type Error = crate::respond::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(head) = self.head.take() {
            return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(head))));
        }
        std::pin::Pin::new(&mut self.rest)
            .poll_frame(cx)
            .map_err(|e| Box::new(e) as crate::respond::BoxError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_reserved_and_released() {
        let budget = ByteBudget::new(100);
        let mut held = None;
        assert!(budget.reserve(60, &mut held));
        assert!(budget.reserve(30, &mut held));
        let mut other = None;
        assert!(!budget.reserve(20, &mut other), "over budget");
        assert_eq!(budget.in_use(100), 90);
        drop(held);
        assert_eq!(budget.in_use(100), 0);
    }
}
