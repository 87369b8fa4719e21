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

use crate::admit::Admission;
use crate::conn::state::ConnState;
use crate::telemetry::trace::{Span, Trace};
use crate::telemetry::{Metrics, RouteMetrics};

/// Marks a request in flight on its connection until dropped, so the
/// connection counts as busy (never reclaimed, no idle deadline) exactly as
/// long as its response body is being sent.
pub(crate) struct InFlight(pub(crate) Arc<ConnState>);

impl InFlight {
    pub(crate) fn new(state: Arc<ConnState>) -> Self {
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
pub(crate) struct RequestRecord {
    pub(crate) start: Instant,
    pub(crate) client: IpAddr,
    /// The Host as sent; normalised only when a log line is written.
    pub(crate) host: Option<http::HeaderValue>,
    pub(crate) method: http::Method,
    pub(crate) path: Option<http::uri::PathAndQuery>,
    pub(crate) status: u16,
    pub(crate) route: Option<Arc<str>>,
    /// The matched route's own metric handles.
    pub(crate) route_metrics: Option<Arc<RouteMetrics>>,
    pub(crate) upstream: Option<Arc<str>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) access_log: bool,
    pub(crate) in_flight: Option<InFlight>,
    pub(crate) admission: Option<Admission>,
    /// What the route kind keeps of its own (LLM routes: model, tokens,
    /// usage), filled in as the response streams.
    pub(crate) kind: Option<Arc<dyn KindRecord>>,
    /// The request's id, when its route gave it one (`crate::rules`).
    pub(crate) request_id: Option<http::HeaderValue>,
    /// Its spans, with `[telemetry.traces]` when it is sampled.
    pub(crate) trace: Option<Box<Trace>>,
}

/// What a route kind keeps about a request beyond this record, and does
/// with it: read the response head when it is sent (an LLM route: the
/// request id the client was given), and, exactly once when the response
/// has ended, settle what it must and write the access line with its own
/// fields ([`AccessLine::write`] writes the plain one).
pub(crate) trait KindRecord: Send + Sync {
    fn answered(&self, headers: &http::HeaderMap);
    fn ended(&self, line: &AccessLine<'_>);
    /// A sampled request's spans, as they end after [`KindRecord::ended`]:
    /// the server span and the attempt that answered, if one did.
    fn traced(&self, _server: &mut Span, _answered: Option<&mut Span>) {}
}

/// The fields every access line has, as they stand when a response ends.
pub(crate) struct AccessLine<'a> {
    /// Whether the route writes access lines at all.
    pub(crate) enabled: bool,
    pub(crate) client: IpAddr,
    pub(crate) host: Option<&'a str>,
    pub(crate) method: &'a http::Method,
    pub(crate) path: &'a str,
    pub(crate) status: u16,
    pub(crate) bytes: u64,
    pub(crate) elapsed: std::time::Duration,
    pub(crate) route: &'a str,
    pub(crate) outcome: Outcome,
    /// When its route gave the request one; an absent field otherwise.
    pub(crate) request_id: Option<&'a str>,
    /// When the request was traced; an absent field otherwise.
    pub(crate) trace_id: Option<&'a str>,
}

impl AccessLine<'_> {
    /// The line of a route kind with nothing of its own to add.
    fn write(&self, upstream: Option<&str>) {
        if !self.enabled {
            return;
        }
        tracing::info!(
            target: "weir::access",
            client = %self.client,
            host = self.host.unwrap_or("-"),
            method = %self.method,
            path = self.path,
            status = self.status,
            bytes = self.bytes,
            duration_ms = self.elapsed.as_millis() as u64,
            route = self.route,
            upstream = upstream.unwrap_or("-"),
            outcome = ?self.outcome,
            request_id = self.request_id,
            trace_id = self.trace_id,
        );
    }
}

/// The most of a request's path (with its query) an access line carries:
/// the request head may be far longer (`http1.max_head_size`), and one
/// client must not be able to make every line of the log that large.
pub(crate) const MAX_PATH_FIELD: usize = 4096;
/// The most of a Host an access line carries (a DNS name is at most 253
/// bytes; with a port and brackets, under this).
pub(crate) const MAX_HOST_FIELD: usize = 256;
/// The most of a client's model name an access line (and a usage record)
/// carries: a model is whatever the client's body said.
pub(crate) const MAX_MODEL_FIELD: usize = 256;

/// A client's text as a log field: at most `max` bytes, cut at a
/// character boundary.
pub(crate) fn bounded(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// How the response body ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    Complete,
    Error,
    /// The client went away (or the connection was closed) mid-body.
    Aborted,
}

impl Outcome {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::Error => "error",
            Outcome::Aborted => "aborted",
        }
    }
}

impl RequestRecord {
    fn finish(mut self, bytes: u64, outcome: Outcome) {
        let elapsed = self.start.elapsed();
        match &self.route_metrics {
            Some(m) => m.record(self.status, elapsed.as_secs_f64()),
            None => {
                self.metrics
                    .record_request(self.route.as_ref(), self.status, elapsed.as_secs_f64())
            }
        }
        let route = self.route.as_deref().unwrap_or("-");
        // Normalised only when a line is written.
        let host = self
            .host
            .as_ref()
            .filter(|_| self.access_log)
            .and_then(|h| h.to_str().ok())
            .and_then(crate::config::normalise_host);
        let trace = self.trace.take();
        let trace_id = trace.as_ref().map(|t| t.id());
        let line = AccessLine {
            enabled: self.access_log,
            client: self.client,
            host: host.as_deref().map(|h| bounded(h, MAX_HOST_FIELD)),
            method: &self.method,
            path: bounded(
                self.path.as_ref().map_or("/", |p| p.as_str()),
                MAX_PATH_FIELD,
            ),
            status: self.status,
            bytes,
            elapsed,
            route,
            outcome,
            request_id: self.request_id.as_ref().and_then(|id| id.to_str().ok()),
            trace_id: trace_id.as_deref(),
        };
        match &self.kind {
            Some(kind) => kind.ended(&line),
            None => line.write(self.upstream.as_deref()),
        }
        if let Some(trace) = trace {
            trace.finish(self.status, |server, answered| {
                server.set("http.response.body.size", bytes);
                server.set("weir.outcome", outcome.name());
                if let Some(kind) = &self.kind {
                    kind.traced(server, answered);
                }
            });
        }
    }

    /// Edit the server span, when the request is traced.
    pub(crate) fn traced(&self, edit: impl FnOnce(&mut Span)) {
        if let Some(t) = &self.trace {
            t.server(edit);
        }
    }

    /// The response head is going out: the route kind may read it.
    pub(crate) fn answered(&self, headers: &http::HeaderMap) {
        if let Some(kind) = &self.kind {
            kind.answered(headers);
        }
    }
}

/// A response body that writes its [`RequestRecord`] exactly once: at the
/// end of the stream, on a body error, or when dropped early.
pub(crate) struct Recorded<B> {
    /// The body; taken when the record is dropped early, so that the
    /// body's own end (a relay learning its client went away) is known
    /// before the record is written.
    inner: Option<B>,
    bytes: u64,
    record: Option<Box<RequestRecord>>,
    /// A frame was handed to hyper and it has not asked for the next yet.
    handed_off: bool,
}

impl<B> Recorded<B> {
    pub(crate) fn new(inner: B, record: Option<RequestRecord>) -> Self {
        Recorded {
            inner: Some(inner),
            bytes: 0,
            record: record.map(Box::new),
            handed_off: false,
        }
    }

    fn conn(&self) -> Option<&ConnState> {
        self.record.as_ref()?.in_flight.as_ref().map(|f| &*f.0)
    }

    /// Track whose turn it is, for the send timeout.
    fn set_handed_off(&mut self, handed_off: bool) {
        if self.handed_off == handed_off {
            return;
        }
        self.handed_off = handed_off;
        if let Some(conn) = self.conn() {
            if handed_off {
                conn.body_handed_off();
            } else {
                conn.body_taken();
            }
        }
    }

    /// Release everything the response held: log line, metrics, the
    /// connection's in-flight mark, admission slots.
    fn finish(&mut self, outcome: Outcome) {
        self.set_handed_off(false);
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
        this.set_handed_off(false);
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(&mut *inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.bytes += data.remaining() as u64;
                }
                if inner.is_end_stream() {
                    this.finish(Outcome::Complete);
                } else {
                    this.set_handed_off(true);
                }
            }
            Poll::Ready(Some(Err(_))) => this.finish(Outcome::Error),
            Poll::Ready(None) => this.finish(Outcome::Complete),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(B::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), B::size_hint)
    }
}

impl<B> Drop for Recorded<B> {
    fn drop(&mut self) {
        let outcome = if self.inner_ended_hint() {
            Outcome::Complete
        } else {
            Outcome::Aborted
        };
        // The body goes first: what it does as it goes (an LLM relay
        // counts a cancel and marks the request's facts) is part of the
        // record.
        drop(self.inner.take());
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

#[cfg(test)]
mod tests {
    //! Each release path is driven frame by frame with the body still
    //! alive, so a test can only pass through the path it names (consuming
    //! the body by value would release through Drop and hide a missing
    //! end-of-stream branch).

    use std::collections::VecDeque;
    use std::task::Waker;

    use bytes::Bytes;
    use http::HeaderMap;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;

    use super::*;
    use crate::admit::Admitter;

    type Step = Poll<Option<Result<Frame<Bytes>, &'static str>>>;

    /// A body that plays back a script; it reports its end only once the
    /// script is exhausted and `ends_after_last` is set.
    struct Script {
        steps: VecDeque<Step>,
        ends_after_last: bool,
    }

    impl Body for Script {
        type Data = Bytes;
        type Error = &'static str;
        fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Step {
            self.steps.pop_front().unwrap_or(Poll::Ready(None))
        }
        fn is_end_stream(&self) -> bool {
            self.ends_after_last && self.steps.is_empty()
        }
        fn size_hint(&self) -> SizeHint {
            SizeHint::with_exact(42)
        }
    }

    fn data(s: &'static str) -> Step {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(s.as_bytes())))))
    }

    struct Fixture {
        admitter: Admitter,
        gauge: Gauge,
        metrics: Arc<Metrics>,
    }

    impl Fixture {
        fn new() -> Self {
            let gauge = Gauge::default();
            Fixture {
                admitter: Admitter::new(1, gauge.clone(), Histogram::new([1.0])),
                gauge,
                metrics: Arc::new(Metrics::new()),
            }
        }

        fn body(&self, steps: Vec<Step>, ends_after_last: bool) -> Recorded<Script> {
            let record = RequestRecord {
                start: Instant::now(),
                client: [127, 0, 0, 1].into(),
                host: None,
                method: http::Method::GET,
                path: None,
                status: 200,
                route: None,
                route_metrics: None,
                request_id: None,
                trace: None,
                upstream: None,
                metrics: self.metrics.clone(),
                access_log: false,
                in_flight: None,
                admission: Some(
                    self.admitter
                        .admit(std::net::Ipv4Addr::LOCALHOST.into())
                        .expect("slot"),
                ),
                kind: None,
            };
            Recorded::new(
                Script {
                    steps: steps.into(),
                    ends_after_last,
                },
                Some(record),
            )
        }

        fn held(&self) -> bool {
            self.gauge.get() == 1
        }
    }

    fn poll(b: &mut Recorded<Script>) -> Step {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(b).poll_frame(&mut cx)
    }

    #[test]
    fn end_of_stream_flag_releases_with_the_last_frame() {
        let f = Fixture::new();
        let mut b = f.body(vec![data("a"), data("b")], true);
        assert!(poll(&mut b).is_ready());
        assert!(f.held(), "mid-stream the slot is held");
        assert!(poll(&mut b).is_ready());
        assert!(!f.held(), "released with the last frame, body still alive");
        assert!(
            f.admitter
                .admit(std::net::Ipv4Addr::LOCALHOST.into())
                .is_ok()
        );
        drop(b);
    }

    #[test]
    fn a_body_that_learns_its_end_late_releases_on_none() {
        let f = Fixture::new();
        let mut b = f.body(vec![data("a"), Poll::Pending, Poll::Ready(None)], false);
        assert!(poll(&mut b).is_ready());
        assert!(poll(&mut b).is_pending());
        assert!(f.held(), "Pending never releases");
        assert!(matches!(poll(&mut b), Poll::Ready(None)));
        assert!(!f.held());
        drop(b);
    }

    #[test]
    fn a_body_error_releases() {
        let f = Fixture::new();
        let mut b = f.body(
            vec![data("a"), Poll::Ready(Some(Err("upstream reset")))],
            false,
        );
        assert!(poll(&mut b).is_ready());
        assert!(f.held());
        assert!(matches!(poll(&mut b), Poll::Ready(Some(Err(_)))));
        assert!(!f.held(), "released on error, body still alive");
        drop(b);
    }

    #[test]
    fn dropping_mid_stream_releases() {
        let f = Fixture::new();
        let mut b = f.body(vec![data("a"), Poll::Pending], false);
        assert!(poll(&mut b).is_ready());
        assert!(poll(&mut b).is_pending());
        assert!(f.held());
        assert!(!f.metrics.encode().contains("weir_requests_total"));
        drop(b);
        assert!(!f.held(), "client gone: released on drop");
        assert!(
            f.metrics
                .encode()
                .contains("weir_requests_total{route=\"-\",status=\"200\"} 1"),
            "an aborted response is still counted (and logged)"
        );
    }

    #[test]
    fn a_bounded_field_is_cut_at_a_character_boundary() {
        assert_eq!(bounded("short", 256), "short");
        assert_eq!(bounded("abcdef", 3), "abc");
        // 'é' is two bytes: a cut inside it keeps the whole characters.
        assert_eq!(bounded("aé", 2), "a");
        assert_eq!(bounded(&"é".repeat(200), MAX_MODEL_FIELD).len(), 256);
    }

    #[test]
    fn frames_and_hints_pass_through_unchanged() {
        let f = Fixture::new();
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "1".parse().expect("value"));
        let mut b = f.body(
            vec![
                data("abc"),
                Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            ],
            true,
        );
        assert_eq!(b.size_hint().exact(), Some(42));
        assert!(!b.is_end_stream());
        let Poll::Ready(Some(Ok(first))) = poll(&mut b) else {
            panic!("data")
        };
        assert_eq!(first.into_data().ok().as_deref(), Some(&b"abc"[..]));
        let Poll::Ready(Some(Ok(last))) = poll(&mut b) else {
            panic!("trailers")
        };
        assert_eq!(
            last.into_trailers().ok().map(|t| t["x-t"].clone()),
            Some("1".parse().expect("v"))
        );
        assert!(b.is_end_stream());
        assert!(!f.held());
    }
}
