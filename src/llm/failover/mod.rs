//! Trying a model's upstreams in order, before the first content byte.
//!
//! Each attempt is a fresh request to a member of the next upstream, picked
//! by the upstream's group (Pingora's "fresh upstream pick over a retry
//! buffer": the body was read once and is sent again as it is). The same
//! member is never asked twice for one request: a duplicate generation may
//! be billed. A member that refused the connection or said it is rate
//! limited or overloaded (429/503/529) did not generate: another member of
//! the same upstream (another endpoint or key) is tried next, at most
//! [`MEMBER_ATTEMPTS`] of them, before the next upstream. Any other failure
//! moves on to the next upstream at once. An attempt is passed over when the
//! upstream cannot be reached, gives no response head within
//! `first_byte_timeout`, answers a status in `failover_on`, or opens a
//! stream and reports an error before any content; also when it refuses a
//! translated request as invalid (400/422: what weir made of the request,
//! not what the client sent, may be the cause). Anything else — a success,
//! or a status the client must see (400, 401, 403, 404, 413) — is relayed
//! at once.
//!
//! When every upstream fails, the most useful failure is relayed verbatim
//! (a 429 before a 5xx: its headers tell the client when to come back);
//! when none answered, 502 says how many were tried. Members that said
//! when to come back (429/503/529 with a retry hint), or that refused
//! connections, are held out of their group until then; an upstream whose
//! members are all out is skipped, and when all of a model's upstreams
//! are, the answer is immediate, with the soonest recovery as
//! `Retry-After` (429 when every member is rate limited, else 503).
//!
//! [`run`] is a loop over attempts: each asks one member and ends in one
//! [`Verdict`] — relay this answer, ask the next member, go on to the next
//! upstream, or fail with weir's own answer — and a failure kept for the
//! end carries its [`Rank`], which decides the one relayed.

use crate::llm::framed::UpstreamBody;
use bytes::Bytes;
use http::header;
use http::{Response, StatusCode};
use tokio::time::Instant;

use super::answer::{
    is_event_stream, json_content, read_error_body, read_whole, relay_streaming, relay_verbatim,
    relay_whole, served_by_header, translate_whole,
};
use super::body::Answer;
use super::outgoing::{Draft, Outgoing, Prepared, Sent, Translation, send};
use super::relay::{Held, Relay, Tally};
use super::tenants::{Tenant, tenant};
use super::upstream::{LlmMember, LlmUpstream, MAX_HINT, retry_hint};
use super::{Context, LlmRoute};
use crate::config::{Choice, UpstreamApi};
use crate::respond::{Payload, Rescue, StreamBody};
use crate::sync::Locked;
use crate::upstream::balance::{AllOut, Outcome, Pick, Reason};
use crate::upstream::headers::remove_hop_by_hop;
use weir_wire::{Api, Endpoint};

mod verdict;

use verdict::{Answered, Attempts, Rank, Verdict, exhausted, keep_best, refused_as_translated};

/// The most members of one upstream tried for one request: enough to get
/// past a rate-limited key or a dead endpoint, few enough that a request
/// never walks a long list of keys.
pub(crate) const MEMBER_ATTEMPTS: usize = 3;

/// The messages, responses and chat completions endpoints: the model's
/// upstreams in order, each given a [`Turn`] of at most
/// [`MEMBER_ATTEMPTS`] attempts, until a verdict ends the request; when
/// none does, the best failure, or why there is none ([`exhausted`]).
pub(crate) async fn run(
    llm: &LlmRoute,
    request: &Outgoing,
    endpoint: Endpoint,
    choices: &[Choice],
    model: usize,
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let failover = Failover {
        llm,
        request,
        endpoint,
        model,
        cx,
        tenant: std::sync::OnceLock::new(),
    };
    let mut best = None;
    let mut counts = Attempts::default();
    for choice in choices {
        let mut turn = Turn {
            choice,
            upstream: &llm.upstreams[choice.upstream],
            tried: Vec::new(),
            draft: None,
        };
        while turn.tried.len() < MEMBER_ATTEMPTS {
            let verdict = failover.attempt(&mut turn, &mut counts).await;
            if let Some(t) = cx.trace {
                // The attempt's span: the client's answer, or passed over.
                match &verdict {
                    Verdict::Relay(_) => t.answered(),
                    _ => t.passed_over("passed_over"),
                }
            }
            match verdict {
                Verdict::Relay(resp) => return Ok(resp),
                Verdict::Fail(rescue) => return Err(rescue),
                Verdict::NextMember(failed) => keep_best(&mut best, failed),
                Verdict::NextUpstream(failed) => {
                    keep_best(&mut best, failed);
                    break;
                }
            }
        }
    }
    failover.all_failed(best, &counts)
}

/// What every attempt for one request shares.
struct Failover<'a, 'c> {
    llm: &'a LlmRoute,
    request: &'a Outgoing,
    endpoint: Endpoint,
    /// The configured model entry, for its series (see
    /// [`crate::telemetry::LlmRouteMetrics::model`]).
    model: usize,
    cx: &'a Context<'c>,
    /// The client's credential, hashed when first needed (an upstream
    /// without weir's key holds a credential off a member).
    tenant: std::sync::OnceLock<Tenant>,
}

/// One upstream's turn: the members asked so far (none is asked twice for
/// one request: a duplicate generation may be billed), and the request
/// made for the upstream once and sent to each of them.
struct Turn<'a> {
    choice: &'a Choice,
    upstream: &'a LlmUpstream,
    tried: Vec<usize>,
    draft: Option<Box<Draft>>,
}

impl Failover<'_, '_> {
    /// One attempt: the next member of the turn's upstream picked, asked,
    /// and its answer judged. The member counts as tried once picked, so a
    /// member whose key makes no request is not picked again.
    async fn attempt(&self, turn: &mut Turn<'_>, counts: &mut Attempts) -> Verdict {
        let now = Instant::now();
        let held = self.tenant_held(turn.upstream, now);
        let group = &turn.upstream.group;
        let picked = if held.is_empty() {
            group.pick(self.request.conversation, &turn.tried, now)
        } else {
            let mut exclude = turn.tried.clone();
            exclude.extend(held.iter().map(|h| h.0));
            group.pick(self.request.conversation, &exclude, now)
        };
        let mut pick = match picked {
            Ok(pick) => pick,
            Err(out) => return self.none_left(turn, out, &held, now, counts),
        };
        turn.tried.push(pick.index());
        if let Some(verdict) = self.draft(turn, counts).await {
            return verdict;
        }
        let member = pick.target();
        if let Some(aws) = &member.aws
            && aws.get(self.llm.settings.first_byte_timeout).await.is_err()
        {
            // No valid credentials (the first fetch, or every refresh
            // past the expiry, failed: its log line says why).
            return Verdict::NextMember(None);
        }
        let Some(mut req) = turn.draft.as_ref().and_then(|d| d.for_member(member)) else {
            // A key that is no header value: another member may do.
            return Verdict::NextMember(None);
        };
        counts.tried += 1;
        self.sending(turn.choice, member);
        if let Some(t) = self.cx.trace {
            let model = turn.choice.model.as_deref();
            let model = model.or(self.request.model.as_deref()).unwrap_or_default();
            super::traced::attempt(t, &mut req, turn.upstream, member, model);
        }
        let timeout = self.llm.settings.first_byte_timeout;
        match send(turn.upstream, req, timeout).await {
            Sent::Response(resp) => self.judge(resp, pick, turn).await,
            Sent::Refused => self.refused(turn.upstream, &pick),
            Sent::Failed(reason) => {
                // No head in time, or the exchange broke: it may have
                // generated, so no other member of this upstream is asked.
                finish(&mut pick, Outcome::Failed, self.cx);
                self.note(reason);
                Verdict::NextUpstream(None)
            }
        }
    }

    /// No member of the upstream is left to ask. When none was asked yet,
    /// every member is held or ejected: the upstream is passed over at
    /// once, and when its first member is back kept for the answer.
    fn none_left(
        &self,
        turn: &Turn<'_>,
        out: AllOut,
        held: &[(usize, Instant, Reason)],
        now: Instant,
        counts: &mut Attempts,
    ) -> Verdict {
        if turn.tried.is_empty() {
            if let Some(out) = turn.upstream.all_out(out.until, held, now) {
                counts.cooling.push(out);
            }
            self.note("cooling");
        }
        Verdict::NextUpstream(None)
    }

    /// The client's credential, hashed once.
    fn tenant(&self) -> &Tenant {
        self.tenant.get_or_init(|| {
            let headers = &self.request.parts.headers;
            tenant(headers, self.request.strip.0)
        })
    }

    /// The members of `upstream` holding this request's credential off
    /// (none, without hashing it, on an upstream with weir's key or
    /// without such holds).
    fn tenant_held(&self, upstream: &LlmUpstream, now: Instant) -> Vec<(usize, Instant, Reason)> {
        if !upstream.passthrough || upstream.tenants.is_empty() {
            return Vec::new();
        }
        upstream
            .tenants
            .out_for(self.tenant(), upstream.group.len(), now)
    }

    /// The upstream's request, made on its first attempt (translated or
    /// spliced once, whichever member takes it); the verdict when it
    /// cannot be made, none when it is ready.
    async fn draft(&self, turn: &mut Turn<'_>, counts: &mut Attempts) -> Option<Verdict> {
        if turn.draft.is_some() {
            return None;
        }
        let model = turn.choice.model.as_deref();
        let prepared = self
            .request
            .for_upstream(turn.upstream, self.endpoint, model, &self.llm.offload)
            .await;
        match prepared {
            Prepared::Ready(draft) => {
                turn.draft = Some(draft);
                None
            }
            Prepared::Skip => {
                counts.skipped += 1;
                Some(Verdict::NextUpstream(None))
            }
            Prepared::Invalid(why) => Some(Verdict::Fail(
                Rescue::status(StatusCode::BAD_REQUEST).saying(why),
            )),
            Prepared::Unserved(why) => {
                self.note("cannot_serve");
                counts.unserved.get_or_insert(why);
                Some(Verdict::NextUpstream(None))
            }
            Prepared::Busy => Some(Verdict::Fail(super::busy())),
            Prepared::Unavailable(why) => {
                self.note("no_credential");
                counts.unavailable.get_or_insert(why);
                Some(Verdict::NextUpstream(None))
            }
        }
    }

    /// Count the member picked and name it in the request's facts: the
    /// upstream (and which endpoint and key when it has several), and the
    /// model it is asked for.
    fn sending(&self, choice: &Choice, member: &LlmMember) {
        member.metrics.picks.inc();
        let mut f = self.cx.facts.locked();
        f.upstream = Some(member.label.clone());
        f.upstream_index = Some(choice.upstream);
        f.served_model = Some(
            choice
                .model
                .clone()
                .or_else(|| self.request.model.clone())
                .unwrap_or_default(),
        );
    }

    /// The member refused the connection: it generated nothing, so another
    /// member may be asked; it is held out of its group, longer while its
    /// refusals go on.
    fn refused(&self, upstream: &LlmUpstream, pick: &Pick<LlmMember>) -> Verdict {
        if let Some((_, change)) = upstream.group.refused(pick.index(), Instant::now()) {
            let why = Reason::Unreachable.name();
            pick.target()
                .changed(self.cx.metrics, self.cx.route_name, change, why);
        }
        self.note("connect");
        Verdict::NextMember(None)
    }

    /// What the answer's head says: a status in `failover_on`, or a
    /// translated request refused as invalid, passes the member over;
    /// anything else is the client's answer.
    async fn judge(
        &self,
        resp: Response<UpstreamBody>,
        mut pick: Pick<LlmMember>,
        turn: &mut Turn<'_>,
    ) -> Verdict {
        let status = resp.status();
        if let Some(t) = self.cx.trace {
            t.attempt_edit(|s| crate::telemetry::trace::http::answer(s, status));
        }
        if matches!(status.as_u16(), 401 | 403) && pick.target().credential.is_weirs() {
            return self.refused_weirs_key(resp, &mut pick, turn).await;
        }
        if self.llm.settings.failover_on.contains(&status.as_u16()) {
            return self.turned_away(resp, &mut pick, turn).await;
        }
        let latency = Outcome::Answered(Instant::now().saturating_duration_since(pick.started()));
        finish(&mut pick, latency, self.cx);
        // Every way on from here ends this upstream's turn.
        let translation = turn.draft.take().and_then(|d| d.translation);
        if translation.is_some() && refused_as_translated(status) {
            let (parts, body) = resp.into_parts();
            let raw = read_error_body(body, self.llm.settings.first_byte_timeout).await;
            let refused = turn.upstream.config.api.refuses_prompt(status, &raw);
            let rank = Rank::TranslationRefused;
            let api = turn.upstream.config.api;
            let failed = Answered::of(parts, raw, rank, translation.as_ref(), api);
            if refused {
                // The upstream's policy refused the prompt, not what weir
                // made of it: so would every upstream under that policy,
                // and sending it on would route around the policy.
                tracing::info!(
                    route = &**self.cx.route_name,
                    upstream = %self.llm.metrics.upstream_label(turn.choice.upstream),
                    "the upstream's content policy refused the prompt; answered to the client, not failed over"
                );
                return Verdict::Relay(self.relay_failure(failed));
            }
            // This upstream could not take what weir made of the request;
            // another may take the client's own, and an earlier 429/529
            // says more to the client than this 400 does.
            self.note("translated_refused");
            return Verdict::NextUpstream(Some(failed));
        }
        self.relay(resp, pick, translation, turn.choice).await
    }

    /// The upstream refused weir's own key (401/403 with `api_key_*`):
    /// the client's credentials are not at fault, and the provider's
    /// answer may carry fragments of the key or its organisation, so none
    /// of it is kept for the client: the detail goes to the log, the
    /// member counts as failed, and another member (another key) or
    /// upstream is tried; with none left the client gets weir's own 502.
    async fn refused_weirs_key(
        &self,
        resp: Response<UpstreamBody>,
        pick: &mut Pick<LlmMember>,
        turn: &Turn<'_>,
    ) -> Verdict {
        let status = resp.status();
        finish(pick, Outcome::Failed, self.cx);
        if status == StatusCode::UNAUTHORIZED
            && let Some(token) = &turn.upstream.token
        {
            // A token weir got itself, refused before its time (revoked):
            // a new one is fetched now, not at its refresh.
            token.renew();
        }
        let detail = read_error_body(resp.into_body(), self.llm.settings.stream_idle_timeout).await;
        let name = self.llm.metrics.upstream_label(turn.choice.upstream);
        tracing::warn!(
            route = %self.cx.route_name,
            upstream = %name,
            status = status.as_u16(),
            detail = %String::from_utf8_lossy(&detail[..detail.len().min(512)]),
            "the upstream refused weir's key for it; the client is answered 502"
        );
        Verdict::NextMember(None)
    }

    /// A status in `failover_on`, its answer kept. Rate limited or
    /// overloaded (429/503/529) is busy, not broken: the member is held
    /// out for as long as it says (when it says), and another member (key,
    /// endpoint) may serve. Any other status counts against the member and
    /// ends the upstream's turn.
    async fn turned_away(
        &self,
        resp: Response<UpstreamBody>,
        pick: &mut Pick<LlmMember>,
        turn: &Turn<'_>,
    ) -> Verdict {
        let status = resp.status();
        let busy = match status.as_u16() {
            429 => Some(Reason::RateLimited),
            503 | 529 => Some(Reason::Overloaded),
            _ => None,
        };
        let api = turn.upstream.config.api;
        let (mut parts, raw) = resp.into_parts();
        let raw = read_error_body(raw, self.llm.settings.first_byte_timeout).await;
        let hint = retry_hint(&parts.headers).or_else(|| api.body_retry_hint(&raw));
        if let Some(wait) = hint
            && !parts.headers.contains_key(header::RETRY_AFTER)
        {
            // An upstream that says it otherwise (Vertex's RetryInfo in
            // the body, Azure's `x-ms-retry-after-ms`): the client is told
            // in `retry-after`, the header every SDK reads.
            let secs = wait.as_secs_f64().ceil() as u64;
            parts.headers.insert(header::RETRY_AFTER, secs.into());
        }
        match (busy, hint) {
            (Some(why), Some(wait)) if turn.upstream.passthrough => {
                // The client's own credential was sent: the hold is its.
                let now = Instant::now();
                let until = now + wait.min(MAX_HINT);
                let upstream = turn.upstream;
                if upstream.hold_tenant(pick.index(), *self.tenant(), until, why, now) {
                    tracing::info!(
                        route = &**self.cx.route_name,
                        member = &*pick.target().label,
                        reason = why.name(),
                        out_for_s = wait.min(MAX_HINT).as_secs(),
                        "one client credential held off an LLM upstream member"
                    );
                }
            }
            (Some(why), Some(wait)) => {
                let now = Instant::now();
                let until = now + wait.min(MAX_HINT);
                let change = turn.upstream.hold(pick.index(), until, why, now);
                pick.target()
                    .changed(self.cx.metrics, self.cx.route_name, change, why.name());
            }
            _ => finish(pick, Outcome::Failed, self.cx),
        }
        let (rank, reason) = if status == StatusCode::TOO_MANY_REQUESTS {
            (Rank::RateLimited, "status_429")
        } else {
            (Rank::Failing, "status_5xx")
        };
        self.note(reason);
        let translation = turn.draft.as_ref().and_then(|d| d.translation.as_ref());
        let failed = Answered::of(parts, raw, rank, translation, api);
        match busy {
            Some(_) => Verdict::NextMember(Some(failed)),
            None => Verdict::NextUpstream(Some(failed)),
        }
    }

    /// The client's answer from this member: a stream held until its first
    /// content ([`Self::relay_stream`]), anything else at once
    /// ([`Self::relay_answer`]). The member stays counted in flight while
    /// the answer is relayed.
    async fn relay(
        &self,
        resp: Response<UpstreamBody>,
        pick: Pick<LlmMember>,
        translation: Option<Translation>,
        choice: &Choice,
    ) -> Verdict {
        let status = resp.status();
        let tally = Tally {
            metrics: self.llm.metrics.clone(),
            model: self.model,
            upstream: choice.upstream,
            facts: self.cx.facts.clone(),
            started: self.cx.started,
            _in_flight: Some(pick),
        };
        let name = self.llm.metrics.upstream_label(choice.upstream);
        let served_by = self.llm.settings.served_by_header.then_some(&**name);
        let streamed = (self.endpoint.api())
            .filter(|_| status.is_success() && is_event_stream(resp.headers()));
        match streamed {
            Some(client_api) => {
                self.relay_stream(resp, client_api, translation, tally, served_by)
                    .await
            }
            None => {
                let api = self.llm.upstreams[choice.upstream].config.api;
                self.relay_answer(resp, translation, api, tally, served_by)
                    .await
            }
        }
    }

    /// A JSON answer, or a status the client must see, relayed at once: an
    /// untranslated error as it is; anything else read whole first, to
    /// count its usage as a stream's is counted, and to translate it.
    async fn relay_answer(
        &self,
        resp: Response<UpstreamBody>,
        translation: Option<Translation>,
        api: UpstreamApi,
        tally: Tally,
        served_by: Option<&str>,
    ) -> Verdict {
        let status = resp.status();
        let outcome = if status.is_success() {
            "completed"
        } else {
            "relayed_error"
        };
        if status.is_success() {
            tally.first_content();
        } else if translation.is_none() && !api.has_own_errors() {
            tally.answered((None, None), outcome);
            return Verdict::Relay(relay_verbatim(resp, served_by));
        }
        let declared = weir_wire::fields::content_length(resp.headers());
        let (parts, body) = resp.into_parts();
        let idle = self.llm.settings.stream_idle_timeout;
        let translated = translation.is_some();
        let held = match read_whole(body, declared, &self.llm.budget, translated, idle).await {
            Ok(Answer::Whole(held)) => held,
            Ok(Answer::Streaming { head, rest }) => {
                tally.answered((None, None), outcome);
                return Verdict::Relay(relay_streaming(parts, head, rest, served_by));
            }
            Err(e) => {
                tally.answered((None, None), outcome);
                return Verdict::Fail(e);
            }
        };
        let mut bytes = held.bytes.clone();
        let mut parts = parts;
        if let Some(own) = api
            .own_error(status, &bytes)
            .filter(|_| !status.is_success())
        {
            bytes = own;
            json_content(&mut parts.headers);
        }
        let answer_api = (self.endpoint.api())
            .map(|a| translation.as_ref().map_or(a, |t| t.pair.upstream_api()));
        let said = answer_api
            .filter(|_| status.is_success())
            .map_or((None, None), |a| a.answer_facts(&bytes));
        tally.answered(said, outcome);
        let relayed = match translation {
            None => Ok(relay_whole(parts, bytes, served_by)),
            Some(t) => translate_whole(t, parts, bytes, self.request, served_by),
        };
        relayed.map_or_else(Verdict::Fail, Verdict::Relay)
    }

    /// A stream, its preamble held until content shows it is good. Cut
    /// before any content, it is nothing worth relaying; an error before
    /// any content passes the upstream over, its stream so far what the
    /// client gets if nothing better comes.
    async fn relay_stream(
        &self,
        resp: Response<UpstreamBody>,
        client_api: Api,
        translation: Option<Translation>,
        tally: Tally,
        served_by: Option<&str>,
    ) -> Verdict {
        let settings = &self.llm.settings;
        let (parts, body) = resp.into_parts();
        let client_model = self.request.model.as_deref().unwrap_or_default();
        let translator = translation.map(|t| {
            let mut s = t.pair.stream(client_model, t.names);
            s.include_usage(t.include_usage);
            s
        });
        let (keepalive, idle) = (settings.sse_keepalive, settings.stream_idle_timeout);
        let mut relay = Relay::new(body, client_api, translator, keepalive, idle, tally);
        match relay.hold_preamble(settings.first_token_timeout).await {
            Held::Content | Held::TimedOut | Held::TooLarge => {
                let stream: StreamBody = Box::pin(relay);
                let mut resp = Response::from_parts(parts, Payload::Stream(stream));
                remove_hop_by_hop(resp.headers_mut());
                resp.headers_mut().remove(header::CONTENT_LENGTH);
                served_by_header(&mut resp, served_by);
                Verdict::Relay(resp)
            }
            Held::Broken => {
                self.note("broken");
                relay.abandon();
                Verdict::NextUpstream(None)
            }
            Held::Error => {
                self.note("preamble_error");
                let body = Bytes::from(relay.held_bytes());
                relay.abandon();
                Verdict::NextUpstream(Some(Answered {
                    rank: Rank::Failing,
                    status: parts.status,
                    headers: parts.headers,
                    body,
                }))
            }
        }
    }

    /// Every attempt failed: the best failure relayed as it was answered,
    /// else weir's own answer saying why ([`exhausted`]).
    fn all_failed(
        &self,
        best: Option<Answered>,
        counts: &Attempts,
    ) -> Result<Response<Payload>, Rescue> {
        let b = exhausted(best, counts, self.endpoint, Instant::now())?;
        Ok(self.relay_failure(b))
    }

    /// A failed attempt's answer as the client's: an error relayed.
    fn relay_failure(&self, b: Answered) -> Response<Payload> {
        self.llm.metrics.request(self.model, None, "relayed_error");
        self.cx.facts.locked().outcome = Some("relayed_error");
        let mut resp = Response::new(Payload::text(b.body));
        *resp.status_mut() = b.status;
        *resp.headers_mut() = b.headers;
        remove_hop_by_hop(resp.headers_mut());
        resp.headers_mut().remove(header::CONTENT_LENGTH);
        resp
    }

    /// Count a member or upstream passed over, and why, in the model's
    /// series and the request's facts.
    fn note(&self, reason: &'static str) {
        if let Some(t) = self.cx.trace {
            t.passed_over(reason);
        }
        self.llm.metrics.failover(self.model, reason);
        self.cx.facts.locked().failovers += 1;
    }
}
/// Record how an attempt went, and log and count what that changed.
pub(super) fn finish(pick: &mut Pick<LlmMember>, outcome: Outcome, cx: &Context<'_>) {
    let change = pick.finish(outcome, Instant::now());
    pick.target()
        .changed(cx.metrics, cx.route_name, change, "failing");
}
