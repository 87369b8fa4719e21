//! The request body of an LLM route: read whole (weir routes by the model
//! it names, and may send it to more than one upstream), under the route's
//! size limit, the minimum data rate, and a process-wide byte budget. Its
//! `model` is then found and, when an upstream names the model
//! differently, replaced in place by [`weir_wire::body`], so every other
//! byte (`cache_control` blocks included) reaches the upstream as the
//! client sent it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::sync::{Rescan, bucket};
use crate::upstream::{BodyTooLarge, BodyTooSlow, RequestBody};

/// Counters of bytes held per client: a fixed table, as the request
/// gates count slots (`admit::fair`), so reserving stays lock-free.
const BUCKETS: usize = 1024;
/// How long a scan for the heaviest client is trusted.
const RESCAN: Duration = Duration::from_millis(10);

/// Bytes of request bodies held in memory by LLM routes, process-wide,
/// reserved as they arrive. Within the last sixteenth of the budget, the
/// client holding the most bytes loses first: its next reservation fails
/// (its request is shed), so a newcomer's body still fits.
#[derive(Clone, Default)]
pub(crate) struct ByteBudget(Option<Arc<Inner>>);

struct Inner {
    sem: Arc<Semaphore>,
    total: u64,
    headroom: u64,
    held: Box<[AtomicU64]>,
    seed: u64,
    /// The last scan's heaviest count of bytes.
    heaviest: Rescan,
}

/// Who a body belongs to, for the budget's fairness: a client token of a
/// route when the route has tokens (known before the body is read), else
/// the peer address (IPv6 by /64).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyClient(u64);

impl BodyClient {
    pub(crate) fn address(ip: std::net::IpAddr) -> Self {
        BodyClient(match ip {
            std::net::IpAddr::V4(a) => u64::from(u32::from(a)),
            std::net::IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => u64::from(u32::from(v4)),
                None => (u128::from(a) >> 64) as u64 ^ (1 << 63),
            },
        })
    }

    /// Client token `index` of the route named `route`.
    pub(crate) fn token(route: &str, index: usize) -> Self {
        // FNV-1a over the name; the budget's seed mixes it after.
        let h = route.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x1000_0000_01b3)
        });
        BodyClient(h ^ (index as u64).rotate_left(40) ^ (1 << 62))
    }
}

/// Why the budget refused bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    Spent,
    Heaviest,
}

impl ByteBudget {
    /// A budget of `bytes`; 0 = no bound.
    pub(crate) fn new(bytes: u64) -> Self {
        ByteBudget((bytes > 0).then(|| {
            Arc::new(Inner {
                sem: Arc::new(Semaphore::new(
                    bytes.min(Semaphore::MAX_PERMITS as u64) as usize
                )),
                total: bytes,
                headroom: bytes / 16,
                held: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
                seed: fastrand::u64(..) | 1,
                heaviest: Rescan::new(RESCAN),
            })
        }))
    }

    /// An empty reservation of `client` (`None`: not counted per client).
    fn reservation(&self, client: Option<BodyClient>) -> Reservation {
        Reservation {
            budget: self.0.clone(),
            bucket: match (&self.0, client) {
                (Some(b), Some(c)) => Some(b.bucket(c)),
                _ => None,
            },
            permit: None,
            bytes: 0,
        }
    }

    /// Whether `bytes` could ever fit.
    fn fits_at_all(&self, bytes: u64) -> bool {
        self.0.as_ref().is_none_or(|b| bytes <= b.total)
    }

    /// Bytes reserved now (for tests and the admin view).
    #[cfg(test)]
    pub(crate) fn in_use(&self, limit: u64) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |b| limit - b.sem.available_permits() as u64)
    }
}

impl Inner {
    fn bucket(&self, client: BodyClient) -> usize {
        bucket(client.0, self.seed, BUCKETS)
    }

    /// The most bytes one bucket holds, from a scan at most [`RESCAN`] old.
    fn heaviest(&self) -> u64 {
        self.heaviest.get(|| {
            self.held
                .iter()
                .map(|h| h.load(Ordering::Relaxed))
                .max()
                .unwrap_or(0)
        })
    }
}

/// Bytes one body (or answer) holds in the budget; dropping it gives
/// them back.
pub(crate) struct Reservation {
    budget: Option<Arc<Inner>>,
    bucket: Option<usize>,
    permit: Option<OwnedSemaphorePermit>,
    bytes: u64,
}

impl Reservation {
    /// Hold `bytes` more.
    fn grow(&mut self, bytes: u64) -> Result<(), Refused> {
        let Some(b) = &self.budget else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        let n = u32::try_from(bytes).map_err(|_| Refused::Spent)?;
        let p = b
            .sem
            .clone()
            .try_acquire_many_owned(n)
            .map_err(|_| Refused::Spent)?;
        if let Some(bucket) = self.bucket
            && (b.sem.available_permits() as u64) < b.headroom
        {
            let mine = b.held[bucket].load(Ordering::Relaxed);
            if mine > 0 && mine >= b.heaviest() {
                return Err(Refused::Heaviest);
            }
        }
        match &mut self.permit {
            Some(h) => h.merge(p),
            None => self.permit = Some(p),
        }
        if let Some(bucket) = self.bucket {
            b.held[bucket].fetch_add(bytes, Ordering::Relaxed);
        }
        self.bytes += bytes;
        Ok(())
    }

    /// Hold at least `bytes` in all.
    fn cover(&mut self, bytes: u64) -> Result<(), Refused> {
        match bytes.checked_sub(self.bytes) {
            Some(more) if more > 0 => self.grow(more),
            _ => Ok(()),
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let (Some(b), Some(bucket)) = (&self.budget, self.bucket) {
            b.held[bucket].fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// A body read whole, and its place in the budget (released on drop).
pub(crate) struct ReadBody {
    pub(crate) bytes: Bytes,
    _reservation: Reservation,
}

/// Why a body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    TooLarge,
    TooSlow,
    /// The whole body took longer than `body_read_timeout`.
    TimedOut,
    Unreadable,
    /// The process-wide budget is spent: shed.
    OverBudget,
    /// The budget is nearly spent and this client holds the most of it.
    Heaviest,
}

impl From<Refused> for ReadError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Spent => ReadError::OverBudget,
            Refused::Heaviest => ReadError::Heaviest,
        }
    }
}

/// Read `body` whole within `within`, holding in the budget the memory
/// its buffer takes as bytes arrive (never its declared length up front:
/// a client that declares much and sends slowly holds only what it sent).
/// A declared length larger than the whole budget is refused at once.
pub(crate) async fn read(
    body: RequestBody,
    declared: Option<u64>,
    budget: &ByteBudget,
    client: BodyClient,
    within: Duration,
) -> Result<ReadBody, ReadError> {
    if declared.is_some_and(|n| !budget.fits_at_all(n)) {
        return Err(ReadError::OverBudget);
    }
    let reservation = budget.reservation(Some(client));
    match tokio::time::timeout(within, read_into(body, declared, reservation)).await {
        Ok(read) => read,
        Err(_) => Err(ReadError::TimedOut),
    }
}

async fn read_into(
    mut body: RequestBody,
    declared: Option<u64>,
    mut reservation: Reservation,
) -> Result<ReadBody, ReadError> {
    // The buffer starts small and grows (by doubling) as the body
    // arrives; the budget holds what the buffer takes, before it takes it.
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0).min(8 << 10) as usize);
    reservation.cover(buf.capacity() as u64)?;
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
            let after = buf.len().saturating_add(data.len());
            if after > buf.capacity() {
                let grown = after.max(buf.capacity().saturating_mul(2));
                reservation.cover(grown as u64)?;
                buf.reserve(data.len());
                reservation.cover(buf.capacity() as u64)?;
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(ReadBody {
        bytes: buf.freeze(),
        _reservation: reservation,
    })
}

/// Bytes that arrived whole some other way (a WebSocket frame, or the
/// conversation a WebSocket connection keeps), held in the budget under
/// `client` as a read body is: refused when the budget is spent, or
/// nearly spent and `client` holds the most of it.
pub(crate) fn hold(
    bytes: Bytes,
    budget: &ByteBudget,
    client: BodyClient,
) -> Result<ReadBody, ReadError> {
    let reservation = reserve(bytes.len() as u64, budget, client)?;
    Ok(ReadBody {
        bytes,
        _reservation: reservation,
    })
}

/// `bytes` held in the budget under `client`, as [`hold`] holds them.
pub(crate) fn reserve(
    bytes: u64,
    budget: &ByteBudget,
    client: BodyClient,
) -> Result<Reservation, ReadError> {
    if !budget.fits_at_all(bytes) {
        return Err(ReadError::OverBudget);
    }
    let mut reservation = budget.reservation(Some(client));
    reservation.cover(bytes)?;
    Ok(reservation)
}

/// An upstream's whole (non-streamed) answer, as far as it was read.
pub(crate) enum Answer {
    /// All of it, held under the budget.
    Whole(ReadBody),
    /// Too large (or the budget too short) to hold for its usage: what was
    /// read, and the rest still to come, to be relayed as they stream.
    Streaming {
        head: Bytes,
        rest: super::framed::UpstreamBody,
    },
}

/// An upstream's whole (non-streamed) answer read under the same budget
/// as request bodies, at most `limit` bytes: reserved up front when its
/// length is declared, growing as an undeclared one arrives. Past the
/// limit or the budget, `must_hold` (an answer to translate) fails;
/// otherwise the answer is handed back to be streamed on.
pub(crate) async fn read_answer(
    mut body: super::framed::UpstreamBody,
    declared: Option<u64>,
    budget: &ByteBudget,
    limit: usize,
    must_hold: bool,
) -> Result<Answer, ReadError> {
    let mut reservation = budget.reservation(None);
    let mut buf = BytesMut::new();
    let fits = |n: u64, reservation: &mut Reservation| {
        if n > limit as u64 {
            return Err(ReadError::TooLarge);
        }
        reservation.cover(n).map_err(|_| ReadError::OverBudget)
    };
    if let Some(n) = declared {
        match fits(n, &mut reservation) {
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
            match fits(after, &mut reservation) {
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
    rest: super::framed::UpstreamBody,
}

impl Prefixed {
    pub(crate) fn new(head: Bytes, rest: super::framed::UpstreamBody) -> Self {
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
        std::pin::Pin::new(&mut self.rest).poll_frame(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_reserved_and_released() {
        let budget = ByteBudget::new(100);
        let mut held = budget.reservation(None);
        assert!(held.grow(60).is_ok());
        assert!(held.grow(30).is_ok());
        let mut other = budget.reservation(None);
        assert_eq!(other.grow(20), Err(Refused::Spent), "over budget");
        assert_eq!(budget.in_use(100), 90);
        drop(held);
        assert_eq!(budget.in_use(100), 0);
    }

    #[test]
    fn within_the_headroom_the_client_holding_most_loses_first() {
        let budget = ByteBudget::new(1600); // headroom 100
        let heavy = BodyClient::address("192.0.2.1".parse().expect("ip"));
        let light = BodyClient::token("llm", 0);
        let mut big = budget.reservation(Some(heavy));
        big.grow(1400).expect("room");
        let mut small = budget.reservation(Some(light));
        small.grow(50).expect("room");
        assert_eq!(
            big.grow(60),
            Err(Refused::Heaviest),
            "the heaviest, within the headroom"
        );
        small.grow(100).expect("a lighter client still fits");
        assert_eq!(budget.in_use(1600), 1550);
        drop(big);
        assert_eq!(budget.in_use(1600), 150);
    }
}
