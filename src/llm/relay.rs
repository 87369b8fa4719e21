//! The body of a streamed LLM answer, on its way from the upstream to the
//! client.
//!
//! Two phases. While failover is still possible, [`Relay::hold_preamble`]
//! reads events until the first one with content (a `message_start` or
//! `response.created` alone is held), so an upstream that opens a stream
//! and then reports an error can still be passed over. Once content
//! arrives the relay is the response body: each complete event is handed
//! on as it arrives, a keep-alive is added after `sse_keepalive` of
//! upstream silence, and an upstream that breaks off — cut, silent past
//! `stream_idle_timeout`, or ended without its terminator — is reported to
//! the client as an error event in the protocol's own format, never as a
//! clean end. Dropping the relay (the client went away) drops the upstream
//! body, which closes that connection instead of returning it to the pool,
//! so the upstream stops generating.
//!
//! On a translated route a [`translate::Stream`] sits between the framer
//! and everything else: each upstream event becomes the client's events at
//! once, and the hold, keep-alives, in-band errors and usage all work on
//! the client's protocol, exactly as on an untranslated route.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::framed::UpstreamBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::facts::SharedLlmFacts;
use crate::respond::BoxError;
use crate::sync::Locked;
use crate::telemetry::LlmRouteMetrics;
use weir_wire::sse::{self, Framer};
use weir_wire::translate;
use weir_wire::{Api, EventClass, Finish, Usage, Watch};

/// Where the relay reports: the request's facts and the route's metrics.
pub(crate) struct Tally {
    pub(crate) metrics: Arc<LlmRouteMetrics>,
    /// The configured model entry (see [`LlmRouteMetrics::model`]).
    pub(crate) model: usize,
    /// The configured upstream serving, by index.
    pub(crate) upstream: usize,
    pub(crate) facts: SharedLlmFacts,
    pub(crate) started: std::time::Instant,
    /// The member serving: counted in flight until the answer ends.
    pub(crate) _in_flight: Option<crate::upstream::balance::Pick<super::upstream::LlmMember>>,
}

impl Tally {
    pub(crate) fn first_content(&self) {
        let elapsed = self.started.elapsed();
        self.metrics.first_token(self.model, elapsed.as_secs_f64());
        let mut f = self.facts.locked();
        f.first_token_ms.get_or_insert(elapsed.as_millis() as u64);
    }

    fn usage(&self, u: Usage) {
        let mut f = self.facts.locked();
        f.usage_reported = true;
        // Streams report running totals: keep the largest seen.
        f.input_tokens = f.input_tokens.max(u.input);
        f.output_tokens = f.output_tokens.max(u.output);
        f.cache_read_tokens = f.cache_read_tokens.max(u.cache_read);
        f.cache_write_tokens = f.cache_write_tokens.max(u.cache_write);
    }

    /// A whole (non-streamed) answer: its usage, when it reports one, why
    /// it ended, and its outcome.
    pub(crate) fn answered(
        &self,
        (usage, finish): (Option<Usage>, Option<Finish>),
        outcome: &'static str,
    ) {
        if let Some(u) = usage {
            self.usage(u);
        }
        self.finished(finish);
        self.finish(outcome);
    }

    fn finished(&self, finish: Option<Finish>) {
        if let Some(f) = finish {
            self.facts.locked().finish = Some(f.as_str());
        }
    }

    fn finish(&self, outcome: &'static str) {
        self.metrics
            .request(self.model, Some(self.upstream), outcome);
        let (tokens, reported) = {
            let mut f = self.facts.locked();
            f.outcome = Some(outcome);
            let tokens = [
                f.input_tokens,
                f.output_tokens,
                f.cache_read_tokens,
                f.cache_write_tokens,
            ];
            (tokens, f.usage_reported)
        };
        self.metrics.tokens(self.model, tokens);
        if reported {
            let [input, output, read, write] = tokens;
            let input = input.saturating_add(read).saturating_add(write);
            self.metrics.request_tokens(self.model, input, output);
        }
    }
}

/// The most a stream's held preamble may take: past it the stream is
/// released as it is (a real preamble is a few hundred bytes).
pub(crate) const MAX_HELD: usize = 64 * 1024;
/// The longest single event weir will hold while its end arrives; an
/// upstream that never ends an event is treated as broken.
pub(crate) const MAX_EVENT: usize = 1024 * 1024;

/// How the failover window ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// Content arrived: commit to this upstream.
    Content,
    /// The stream reported an error before any content: fail over.
    Error,
    /// The upstream ended or broke before any content.
    Broken,
    /// No content within `first_token_timeout`: release the stream as is.
    TimedOut,
    /// The preamble passed [`MAX_HELD`] without content: release the
    /// stream as is.
    TooLarge,
}

enum Next {
    Event(Bytes, EventClass),
    End,
    Failed,
}

pub(crate) struct Relay {
    upstream: Option<UpstreamBody>,
    framer: Framer,
    /// Translates the upstream's events into the client's protocol.
    translator: Option<translate::Stream>,
    /// The client's events one upstream event became, not yet taken.
    translated: VecDeque<Bytes>,
    /// The translator failed: the stream is ended with an error.
    translation_failed: bool,
    /// The translator kept more of the answer than it may: the stream is
    /// ended with an error saying so.
    translation_over_bound: bool,
    ready: VecDeque<Bytes>,
    /// Reads the client's events as they pass: what each means, and how a
    /// broken stream is ended in the client's API.
    watch: Watch,
    api: Api,
    keepalive_every: Duration,
    keepalive: Pin<Box<Sleep>>,
    idle_after: Duration,
    idle: Pin<Box<Sleep>>,
    content_seen: bool,
    done_seen: bool,
    error_seen: bool,
    ended: bool,
    tally: Option<Tally>,
}

impl Relay {
    /// `api` is the client's; `translator` turns the upstream's events
    /// into it when the upstream speaks another.
    pub(crate) fn new(
        upstream: UpstreamBody,
        api: Api,
        translator: Option<translate::Stream>,
        keepalive_every: Duration,
        idle_after: Duration,
        tally: Tally,
    ) -> Self {
        let now = Instant::now();
        Relay {
            upstream: Some(upstream),
            framer: Framer::default(),
            translator,
            translated: VecDeque::new(),
            translation_failed: false,
            translation_over_bound: false,
            ready: VecDeque::new(),
            watch: api.watch(),
            api,
            keepalive_every,
            keepalive: Box::pin(tokio::time::sleep_until(now + keepalive_every)),
            idle_after,
            idle: Box::pin(tokio::time::sleep_until(now + idle_after)),
            content_seen: false,
            done_seen: false,
            error_seen: false,
            ended: false,
            tally: Some(tally),
        }
    }

    /// Read until the first content event (held events stay queued for the
    /// client), an error, the end, or `limit`.
    pub(crate) async fn hold_preamble(&mut self, limit: Duration) -> Held {
        let hold = async {
            loop {
                match poll_fn(|cx| self.poll_next(cx)).await {
                    Next::Event(bytes, class) => {
                        self.ready.push_back(bytes);
                        match class {
                            EventClass::Content | EventClass::Done => return Held::Content,
                            EventClass::Error => return Held::Error,
                            EventClass::Preamble | EventClass::KeepAlive => {}
                        }
                        if self.ready.iter().map(Bytes::len).sum::<usize>() > MAX_HELD {
                            return Held::TooLarge;
                        }
                    }
                    Next::End | Next::Failed => return Held::Broken,
                }
            }
        };
        match tokio::time::timeout(limit, hold).await {
            Ok(held) => held,
            Err(_) => Held::TimedOut,
        }
    }

    /// Give up on this upstream before its stream reached the client: not
    /// counted as a served request.
    pub(crate) fn abandon(mut self) {
        // What its preamble reported was not served: the next upstream's
        // answer is the request's usage.
        if let Some(t) = self.tally.take() {
            let mut f = t.facts.locked();
            f.usage_reported = false;
            f.input_tokens = 0;
            f.output_tokens = 0;
            f.cache_read_tokens = 0;
            f.cache_write_tokens = 0;
        }
    }

    /// The events held so far, for relaying a failed attempt verbatim.
    pub(crate) fn held_bytes(&self) -> Vec<u8> {
        self.ready.iter().flat_map(|b| b.iter().copied()).collect()
    }

    /// Pull the next complete event from the upstream.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Next> {
        loop {
            if let Some(event) = self
                .translated
                .pop_front()
                .or_else(|| self.next_upstream_event())
            {
                let (name, data) = sse::fields(&event);
                let class = self.observe(name, &data);
                return Poll::Ready(Next::Event(event, class));
            }
            if self.translation_failed {
                self.upstream = None;
                return Poll::Ready(Next::Failed);
            }
            if self.framer.pending() > MAX_EVENT {
                tracing::debug!("LLM upstream event over the size bound");
                self.upstream = None;
                return Poll::Ready(Next::Failed);
            }
            let Some(upstream) = &mut self.upstream else {
                return Poll::Ready(Next::End);
            };
            match Pin::new(upstream).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.heard_from_upstream();
                        self.framer.push(&data);
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    tracing::debug!(error = %e, "LLM upstream stream broke");
                    self.upstream = None;
                    return Poll::Ready(Next::Failed);
                }
                Poll::Ready(None) => {
                    self.upstream = None;
                    return Poll::Ready(Next::End);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// The next complete upstream event, or on a translated route the
    /// first client event the next upstream events map to (some map to
    /// none).
    fn next_upstream_event(&mut self) -> Option<Bytes> {
        loop {
            let event = self.framer.next_event()?;
            let Some(t) = &mut self.translator else {
                return Some(event);
            };
            let (name, data) = sse::fields(&event);
            let mut out = Vec::new();
            // A translator that fails anyway (every known panic is fixed
            // and fuzzed against) must not end the stream silently: the
            // client still gets its API's error and terminal event.
            let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                t.event(name, &data, &mut out)
            }));
            if step.is_err() {
                tracing::error!(
                    "translating an upstream stream event failed; the stream ends with an error"
                );
                self.translator = None;
                self.translation_failed = true;
                return None;
            }
            self.translated.extend(out);
            if t.over_bound() {
                tracing::warn!(
                    "a translated stream's answer passed the most the gateway keeps for its final events; the stream ends with an error"
                );
                self.translator = None;
                self.translation_failed = true;
                self.translation_over_bound = true;
            }
            if let Some(first) = self.translated.pop_front() {
                return Some(first);
            }
        }
    }

    fn heard_from_upstream(&mut self) {
        let now = Instant::now();
        self.keepalive.as_mut().reset(now + self.keepalive_every);
        self.idle.as_mut().reset(now + self.idle_after);
    }

    /// Note what an event says: content, the end, usage.
    fn observe(&mut self, name: Option<&str>, data: &str) -> EventClass {
        let observed = self.watch.observe(name, data);
        let class = observed.class;
        match class {
            EventClass::Content if !self.content_seen => {
                self.content_seen = true;
                if let Some(t) = &self.tally {
                    t.first_content();
                }
            }
            EventClass::Done => self.done_seen = true,
            EventClass::Error => self.error_seen = true,
            _ => {}
        }
        if let Some(t) = &self.tally {
            if let Some(u) = observed.usage {
                t.usage(u);
            }
            t.finished(observed.finish);
        }
        class
    }

    /// End the stream with an in-band error (unless the upstream already
    /// ended it, successfully or with its own error).
    fn fail(&mut self, message: &str) {
        self.upstream = None;
        if !self.done_seen && !self.error_seen {
            self.ready.push_back(self.watch.in_band_error(message));
            self.error_seen = true;
        }
        self.end();
    }

    fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let outcome = if self.done_seen && !self.error_seen {
            "completed"
        } else {
            "upstream_error"
        };
        if let Some(t) = self.tally.take() {
            t.finish(outcome);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // A client that hangs up once it has the terminal event (Codex
        // closes after `response.completed`, before the upstream may have
        // ended its body) was served in full.
        if self.done_seen && !self.error_seen && self.ready.is_empty() && self.translated.is_empty()
        {
            self.end();
        }
        if let Some(t) = self.tally.take() {
            t.finish("client_cancel");
        }
    }
}

impl Body for Relay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if let Some(bytes) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match this.poll_next(cx) {
                Poll::Ready(Next::Event(bytes, _)) => this.ready.push_back(bytes),
                Poll::Ready(Next::End) => {
                    if this.done_seen || this.error_seen {
                        this.end();
                    } else {
                        this.fail("the upstream ended the stream before it was complete");
                    }
                }
                Poll::Ready(Next::Failed) if this.translation_over_bound => this.fail(
                    "the answer is longer than the gateway keeps for a translated stream; the stream was ended",
                ),
                Poll::Ready(Next::Failed) => {
                    this.fail("the upstream connection broke before the stream was complete")
                }
                Poll::Pending => {
                    if this.idle.as_mut().poll(cx).is_ready() {
                        let secs = this.idle_after.as_secs();
                        this.fail(&format!(
                            "no data from the upstream for {secs} s; the stream was ended"
                        ));
                        continue;
                    }
                    if this.keepalive.as_mut().poll(cx).is_ready() {
                        // Whole events only are ever sent, so the client is
                        // always at an event boundary here.
                        this.ready.push_back(this.api.keepalive());
                        let next = Instant::now() + this.keepalive_every;
                        this.keepalive.as_mut().reset(next);
                        continue;
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.ready.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
