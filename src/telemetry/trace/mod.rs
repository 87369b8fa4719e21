//! OpenTelemetry traces (`[telemetry.traces]`): a server span per
//! request, a client span per upstream attempt, W3C trace context in and
//! out, exported over OTLP off the request path ([`export`]).
//!
//! With no `[telemetry.traces]` there is no [`Tracer`], and a request's
//! only cost is the branch on its `Option`. A request not sampled has no
//! [`Trace`] either: nothing is recorded and its headers go upstream as
//! they came. A sampled one carries a `Trace`: its server span and its
//! attempts' spans, kept in one place (a lock no other request touches)
//! until its response body ends, then queued for export whole.

mod encode;
mod export;
pub(crate) mod http;
mod span;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::http::HeaderMap;
use ::http::header::HeaderValue;

pub(crate) use span::{Event, Kind, Span, Value, now};

use crate::config::TraceSettings;
use crate::sync::Locked;
use crate::telemetry::TraceSpans;

/// The W3C trace context headers.
pub(crate) const TRACEPARENT: &str = "traceparent";
pub(crate) const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` passed on (W3C: 32 members, 512 bytes is
/// what every participant must keep).
const MAX_TRACESTATE: usize = 512;

/// The process's tracer: which traces are recorded, and the export
/// queue. Fixed at start.
pub(crate) struct Tracer {
    queue: export::Queue,
    /// A new trace is recorded when its id's low 63 bits are below this.
    threshold: u64,
    sample_all: bool,
    trust_client: bool,
    /// With `capture_content`: the most bytes of a prompt kept.
    content: Option<usize>,
}

impl Tracer {
    /// The tracer `settings` ask for, its exporter started on the current
    /// runtime.
    pub(crate) fn start(
        settings: &TraceSettings,
        counters: TraceSpans,
    ) -> Result<Arc<Self>, String> {
        let queue = export::start(settings, counters)?;
        let ratio = settings.sampling_ratio.clamp(0.0, 1.0);
        Ok(Arc::new(Tracer {
            queue,
            threshold: (ratio * (1u64 << 63) as f64) as u64,
            sample_all: ratio >= 1.0,
            trust_client: settings.trust_client_context,
            content: settings
                .capture_content
                .then_some(settings.max_content_size),
        }))
    }

    /// A request's trace, when it is sampled: a trusted client's context
    /// continued (and its sampled flag followed), else a new trace
    /// sampled by its id.
    pub(crate) fn begin(self: &Arc<Self>, headers: &HeaderMap) -> Option<Box<Trace>> {
        let parent = self
            .trust_client
            .then(|| headers.get(TRACEPARENT).and_then(parse_traceparent))
            .flatten();
        let (trace_id, parent_id) = match parent {
            Some(p) if !p.sampled => return None,
            Some(p) => (p.trace_id, Some(p.span_id)),
            None => {
                let id = span::trace_id();
                if !self.sampled(&id) {
                    return None;
                }
                (id, None)
            }
        };
        let mut server = Span::new(trace_id, parent_id, Kind::Server);
        if parent.is_some()
            && let Some(state) = headers.get(TRACESTATE).and_then(|v| v.to_str().ok())
            && state.len() <= MAX_TRACESTATE
        {
            server.trace_state = state.to_string();
        }
        Some(Box::new(Trace {
            tracer: self.clone(),
            spans: Mutex::new(Spans {
                server,
                attempts: Vec::new(),
                open: None,
                winner: None,
            }),
        }))
    }

    /// OpenTelemetry's TraceIdRatioBased: the same trace is sampled
    /// alike by every participant with the same ratio.
    fn sampled(&self, trace_id: &[u8; 16]) -> bool {
        let mut low = [0u8; 8];
        low.copy_from_slice(&trace_id[8..]);
        self.sample_all || (u64::from_be_bytes(low) >> 1) < self.threshold
    }

    /// Wait, at most `wait`, for the spans queued so far to be exported:
    /// at shutdown, after the last requests ended.
    pub(crate) async fn flush(&self, wait: Duration) {
        self.queue.flush(wait).await;
    }
}

/// A `traceparent` as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parent {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) sampled: bool,
}

/// W3C Trace Context's `traceparent`: `00-<32 hex>-<16 hex>-<2 hex>`; a
/// later version's header is read by its first four fields. Anything
/// else (all-zero ids, version `ff`, upper-case hex) is no parent.
pub(crate) fn parse_traceparent(v: &HeaderValue) -> Option<Parent> {
    let s = v.to_str().ok()?;
    let b = s.as_bytes();
    let shaped = b.len() >= 55 && b[2] == b'-' && b[35] == b'-' && b[52] == b'-';
    if !shaped || (b.len() > 55 && (&s[..2] == "00" || b[55] != b'-')) || &s[..2] == "ff" {
        return None;
    }
    hex::<1>(&s[..2])?;
    let trace_id = hex::<16>(&s[3..35])?;
    let span_id = hex::<8>(&s[36..52])?;
    let flags = hex::<1>(&s[53..55])?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(Parent {
        trace_id,
        span_id,
        sampled: flags[0] & 1 == 1,
    })
}

/// Lower-case hex to `N` bytes.
fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = digit(b[2 * i])? << 4 | digit(b[2 * i + 1])?;
    }
    Some(out)
}

/// Bytes as lower-case hex.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// One sampled request's spans until its response ends.
pub(crate) struct Trace {
    tracer: Arc<Tracer>,
    spans: Mutex<Spans>,
}

struct Spans {
    server: Span,
    attempts: Vec<Span>,
    /// The attempt under way (its answer not judged yet).
    open: Option<usize>,
    /// The attempt whose answer the client is given: ended with the body.
    winner: Option<usize>,
}

impl Trace {
    /// The trace id, as the access log and usage records carry it.
    pub(crate) fn id(&self) -> String {
        to_hex(&self.spans.locked().server.trace_id)
    }

    /// With `capture_content`, the most bytes of a prompt kept.
    pub(crate) fn content_limit(&self) -> Option<usize> {
        self.tracer.content
    }

    /// Edit the server span.
    pub(crate) fn server(&self, edit: impl FnOnce(&mut Span)) {
        edit(&mut self.spans.locked().server);
    }

    /// Start an attempt's client span, named `name`, a child of the server
    /// span; returns the trace context the upstream is sent (its parent:
    /// this attempt). An attempt still open is ended first, as passed over.
    pub(crate) fn attempt(&self, name: String, edit: impl FnOnce(&mut Span)) -> Propagation {
        let mut s = self.spans.locked();
        close_open(&mut s, "abandoned");
        let mut span = Span::new(s.server.trace_id, Some(s.server.span_id), Kind::Client);
        span.trace_state = s.server.trace_state.clone();
        span.name = name;
        span.set("http.request.resend_count", s.attempts.len() as u64);
        edit(&mut span);
        let header = Propagation {
            traceparent: traceparent(&span),
            tracestate: HeaderValue::from_str(&span.trace_state)
                .ok()
                .filter(|v| !v.is_empty()),
        };
        s.open = Some(s.attempts.len());
        s.attempts.push(span);
        header
    }

    /// Edit the attempt under way, if there is one.
    pub(crate) fn attempt_edit(&self, edit: impl FnOnce(&mut Span)) {
        let mut s = self.spans.locked();
        if let Some(i) = s.open
            && let Some(span) = s.attempts.get_mut(i)
        {
            edit(span);
        }
    }

    /// The attempt under way was passed over, for `why`: ended with an
    /// error saying so.
    pub(crate) fn passed_over(&self, why: &str) {
        let mut s = self.spans.locked();
        close_open(&mut s, why);
    }

    /// The attempt under way gave the client's answer: its span ends with
    /// the response body.
    pub(crate) fn answered(&self) {
        let mut s = self.spans.locked();
        s.winner = s.open.take();
    }

    /// The response has ended: the server span and the answering attempt
    /// are ended, `finish` adds what the route kind knows, and every span
    /// is queued for export.
    pub(crate) fn finish(self, status: u16, finish: impl FnOnce(&mut Span, Option<&mut Span>)) {
        let Trace { tracer, spans } = self;
        let mut s = spans.into_inner().unwrap_or_else(|p| p.into_inner());
        close_open(&mut s, "abandoned");
        s.server.set("http.response.status_code", status);
        if status >= 500 {
            s.server.set("error.type", status.to_string());
            s.server.error(format!("answered {status}"));
        }
        let winner = s.winner.and_then(|i| s.attempts.get_mut(i));
        finish(&mut s.server, winner);
        if let Some(w) = s.winner.and_then(|i| s.attempts.get_mut(i)) {
            w.end_now();
        }
        s.server.end_now();
        tracer.queue.push(s.server);
        for span in s.attempts {
            tracer.queue.push(span);
        }
    }
}

/// End the attempt under way, if any, as passed over for `why`.
fn close_open(s: &mut Spans, why: &str) {
    if let Some(i) = s.open.take()
        && let Some(span) = s.attempts.get_mut(i)
    {
        if span.get("weir.failover.reason").is_none() {
            span.set("weir.failover.reason", why);
            span.set("error.type", why);
            span.error(why.to_string());
        }
        span.end_now();
    }
}

/// The `traceparent` naming `span` as the parent: sampled.
fn traceparent(span: &Span) -> HeaderValue {
    let text = format!("00-{}-{}-01", to_hex(&span.trace_id), to_hex(&span.span_id));
    // Hex and dashes are always a valid header value.
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static(""))
}

/// An attempt's trace context for its upstream request.
pub(crate) struct Propagation {
    traceparent: HeaderValue,
    tracestate: Option<HeaderValue>,
}

impl Propagation {
    /// Put it on the upstream request: the `traceparent` naming the
    /// attempt, the trusted client's `tracestate` (or none: a client's
    /// own is not passed on into another trace).
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        headers.insert(TRACEPARENT, self.traceparent);
        match self.tracestate {
            Some(v) => {
                headers.insert(TRACESTATE, v);
            }
            None => {
                headers.remove(TRACESTATE);
            }
        }
    }
}

#[cfg(test)]
mod tests;
