//! The access log line and request metrics, written when the response body
//! ends — not when the handler returns — so that duration and bytes sent are
//! the real ones for streams and downloads.

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};

use crate::listen::registry::ConnState;
use crate::telemetry::Metrics;

/// Marks a request in flight on its connection until dropped, so the
/// connection counts as busy (never reclaimed, no idle deadline) exactly as
/// long as its response body is being sent.
pub struct InFlight(Arc<ConnState>);

impl InFlight {
    pub fn new(state: Arc<ConnState>) -> Self {
        InFlight(state)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// Everything known about a request by the time its response starts, and
/// everything that must live exactly as long as its response body: the
/// access-log record, the connection's in-flight mark, admission permits.
pub struct RequestRecord {
    pub start: Instant,
    pub client: IpAddr,
    pub host: String,
    pub method: http::Method,
    pub path: String,
    pub status: u16,
    pub route: Option<Arc<str>>,
    pub upstream: Option<Arc<str>>,
    pub metrics: Arc<Metrics>,
    pub access_log: bool,
    pub in_flight: Option<InFlight>,
}

/// How the response body ended.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Complete,
    Error,
    /// The client went away (or the connection was closed) mid-body.
    Aborted,
}

impl RequestRecord {
    fn finish(self, bytes: u64, outcome: Outcome) {
        let elapsed = self.start.elapsed();
        let route = self.route.as_deref().unwrap_or("-");
        self.metrics
            .record_request(route, self.status, elapsed.as_secs_f64());
        if self.access_log {
            tracing::info!(
                target: "weir::access",
                client = %self.client,
                host = %self.host,
                method = %self.method,
                path = %self.path,
                status = self.status,
                bytes,
                duration_ms = elapsed.as_millis() as u64,
                route,
                upstream = self.upstream.as_deref().unwrap_or("-"),
                outcome = ?outcome,
            );
        }
    }
}

/// A response body that writes its [`RequestRecord`] exactly once: at the
/// end of the stream, on a body error, or when dropped early.
pub struct Recorded<B> {
    inner: B,
    bytes: u64,
    record: Option<Box<RequestRecord>>,
}

impl<B> Recorded<B> {
    pub fn new(inner: B, record: Option<RequestRecord>) -> Self {
        Recorded {
            inner,
            bytes: 0,
            record: record.map(Box::new),
        }
    }

    /// Without a record (admin and internal responses).
    pub fn unrecorded(inner: B) -> Self {
        Recorded::new(inner, None)
    }

    fn finish(&mut self, outcome: Outcome) {
        if let Some(r) = self.record.take() {
            r.finish(self.bytes, outcome);
        }
    }
}

impl<B> Body for Recorded<B>
where
    B: Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.bytes += data.remaining() as u64;
                }
                if this.inner.is_end_stream() {
                    this.finish(Outcome::Complete);
                }
            }
            Poll::Ready(Some(Err(_))) => this.finish(Outcome::Error),
            Poll::Ready(None) => this.finish(Outcome::Complete),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for Recorded<B> {
    fn drop(&mut self) {
        let outcome = if self.inner_ended_hint() {
            Outcome::Complete
        } else {
            Outcome::Aborted
        };
        self.finish(outcome);
    }
}

impl<B> Recorded<B> {
    /// A body hyper never polled (HEAD, 204, 304) ends by being dropped.
    fn inner_ended_hint(&self) -> bool {
        self.record
            .as_ref()
            .is_some_and(|r| r.method == http::Method::HEAD || matches!(r.status, 101 | 204 | 304))
    }
}
