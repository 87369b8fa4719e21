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

use bytes::Bytes;
use http::header;
use http::{Response, StatusCode};
use tokio::time::Instant;

use super::answer::{
    is_event_stream, json_content, read_error_body, read_whole, relay_streaming, relay_verbatim,
    relay_whole, served_by_header, translate_whole,
};
use super::body::Answer;
use super::outgoing::{Outgoing, Prepared, Sent, Translation, send};
use super::relay::{Held, Relay, Tally};
use super::upstream::{LlmMember, MAX_HINT, retry_hint};
use super::{Context, LlmRoute};
use crate::config::{Choice, LlmSettings};
use crate::respond::{Payload, Rescue, StreamBody};
use crate::sync::Locked;
use crate::upstream::balance::{Outcome, Pick, Reason};
use crate::upstream::headers::remove_hop_by_hop;
use weir_wire::Endpoint;

/// The most members of one upstream tried for one request: enough to get
/// past a rate-limited key or a dead endpoint, few enough that a request
/// never walks a long list of keys.
pub(crate) const MEMBER_ATTEMPTS: usize = 3;

/// A failed attempt weir may relay if nothing better comes.
struct Answered {
    /// 3: rate limited (tells the client when to return); 2: overloaded,
    /// server error, or an error inside the stream; 1: a translated
    /// request refused as invalid.
    rank: u8,
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Answered {
    /// A failed attempt's answer, its error in the client's envelope.
    async fn read(
        resp: Response<hyper::body::Incoming>,
        rank: u8,
        translation: Option<&Translation>,
        settings: &LlmSettings,
    ) -> Answered {
        let (mut parts, body) = resp.into_parts();
        let mut body = read_error_body(body, settings.first_byte_timeout).await;
        if let Some(t) = translation {
            body = t.pair.error(parts.status, &body);
            json_content(&mut parts.headers);
        }
        Answered {
            rank,
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }
}

/// The messages, responses and chat completions endpoints.
pub(crate) async fn run(
    llm: &LlmRoute,
    request: &Outgoing,
    endpoint: Endpoint,
    choices: &[Choice],
    model: usize,
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let settings = &llm.settings;
    let mut best: Option<Answered> = None;
    let mut tally = Attempts::default();
    let note_failover = |reason: &'static str| {
        llm.metrics.failover(model, reason);
        let mut f = cx.facts.locked();
        f.failovers += 1;
    };
    for choice in choices {
        let upstream = &llm.upstreams[choice.upstream];
        let name = llm.metrics.upstream_label(choice.upstream);
        let mut tried: Vec<usize> = Vec::new();
        // Made once for the upstream, sent to each member tried.
        let mut draft = None;
        // Members of this upstream, one after another while they refuse or
        // say they are busy; `break` moves on to the next upstream.
        while tried.len() < MEMBER_ATTEMPTS {
            let now = Instant::now();
            let mut pick = match upstream.group.pick(request.conversation, &tried, now) {
                Ok(pick) => pick,
                Err(out) => {
                    if tried.is_empty() {
                        // Every member is held or ejected: passed over at once.
                        if let Some(out) = upstream.all_out(out.until, now) {
                            tally.cooling.push(out);
                        }
                        note_failover("cooling");
                    }
                    break;
                }
            };
            tried.push(pick.index());
            let member = pick.target();
            if draft.is_none() {
                let prepared = request
                    .for_upstream(upstream, endpoint, choice.model.as_deref(), &llm.offload)
                    .await;
                match prepared {
                    Prepared::Ready(d) => draft = Some(d),
                    Prepared::Skip => {
                        tally.skipped += 1;
                        break;
                    }
                    Prepared::Invalid(why) => {
                        return Err(Rescue::status(StatusCode::BAD_REQUEST).saying(why));
                    }
                    Prepared::Unserved(why) => {
                        note_failover("cannot_serve");
                        tally.unserved.get_or_insert(why);
                        break;
                    }
                    Prepared::Busy => return Err(super::busy()),
                }
            }
            let Some(req) = draft.as_ref().and_then(|d| d.for_member(member)) else {
                // A key that is no header value: another member may do.
                continue;
            };
            tally.tried += 1;
            member.metrics.picks.inc();
            // The member: the upstream, and which endpoint and key when it has several.
            {
                let mut f = cx.facts.locked();
                f.upstream = Some(member.label.clone());
                f.upstream_index = Some(choice.upstream);
                f.served_model = Some(
                    choice
                        .model
                        .clone()
                        .or_else(|| request.model.clone())
                        .unwrap_or_default(),
                );
            }
            let resp = match send(upstream, req, settings.first_byte_timeout).await {
                Sent::Response(r) => r,
                Sent::Refused => {
                    if let Some((_, change)) = upstream.group.refused(pick.index(), Instant::now())
                    {
                        member.changed(
                            cx.metrics,
                            cx.route_name,
                            change,
                            Reason::Unreachable.name(),
                        );
                    }
                    note_failover("connect");
                    continue;
                }
                Sent::Failed(reason) => {
                    finish(&mut pick, Outcome::Failed, cx);
                    note_failover(reason);
                    break;
                }
            };
            let status = resp.status();
            let served_by = settings.served_by_header.then_some(&**name);
            if settings.failover_on.contains(&status.as_u16()) {
                let why = match status.as_u16() {
                    429 => Some(Reason::RateLimited),
                    503 | 529 => Some(Reason::Overloaded),
                    _ => None,
                };
                match (why, retry_hint(resp.headers())) {
                    (Some(why), Some(wait)) => {
                        let now = Instant::now();
                        let until = now + wait.min(MAX_HINT);
                        let change = upstream.hold(pick.index(), until, why, now);
                        member.changed(cx.metrics, cx.route_name, change, why.name());
                    }
                    _ => finish(&mut pick, Outcome::Failed, cx),
                }
                let rank = if status == StatusCode::TOO_MANY_REQUESTS {
                    3
                } else {
                    2
                };
                note_failover(if rank == 3 {
                    "status_429"
                } else {
                    "status_5xx"
                });
                let translation = draft.as_ref().and_then(|d| d.translation.as_ref());
                let failed = Answered::read(resp, rank, translation, settings).await;
                keep_best(&mut best, failed);
                // Busy, not broken: another member (key, endpoint) may serve.
                if why.is_some() {
                    continue;
                }
                break;
            }
            let latency =
                Outcome::Answered(Instant::now().saturating_duration_since(pick.started()));
            finish(&mut pick, latency, cx);
            // Every way on from here ends this upstream's attempts.
            let translation = draft.take().and_then(|d| d.translation);
            if translation.is_some() && refused_as_translated(status) {
                // This upstream could not take what weir made of the request;
                // another may take the client's own, and an earlier 429/529
                // says more to the client than this 400 does.
                note_failover("translated_refused");
                let failed = Answered::read(resp, 1, translation.as_ref(), settings).await;
                keep_best(&mut best, failed);
                break;
            }
            let tally = Tally {
                metrics: llm.metrics.clone(),
                model,
                upstream: choice.upstream,
                facts: cx.facts.clone(),
                started: cx.started,
                _in_flight: Some(pick),
            };
            let streamed = endpoint
                .api()
                .filter(|_| status.is_success() && is_event_stream(resp.headers()));
            let Some(client_api) = streamed else {
                // Relayed at once: a JSON answer, or a status the client must see.
                let outcome = if status.is_success() {
                    "completed"
                } else {
                    "relayed_error"
                };
                if status.is_success() {
                    tally.first_content();
                } else if translation.is_none() {
                    tally.answered(None, outcome);
                    return Ok(relay_verbatim(resp, served_by));
                }
                // Read whole: to count its usage as a stream's is counted, and
                // to translate it.
                let declared = weir_wire::fields::content_length(resp.headers());
                let (parts, body) = resp.into_parts();
                let read = read_whole(
                    body,
                    declared,
                    &llm.budget,
                    translation.is_some(),
                    settings.stream_idle_timeout,
                )
                .await;
                let held = match read {
                    Ok(Answer::Whole(held)) => held,
                    Ok(Answer::Streaming { head, rest }) => {
                        tally.answered(None, outcome);
                        return Ok(relay_streaming(parts, head, rest, served_by));
                    }
                    Err(e) => {
                        tally.answered(None, outcome);
                        return Err(e);
                    }
                };
                let bytes = held.bytes.clone();
                let answer_api = endpoint
                    .api()
                    .map(|a| translation.as_ref().map_or(a, |t| t.pair.upstream_api()));
                let usage = answer_api
                    .filter(|_| status.is_success())
                    .and_then(|a| a.answer_usage(&bytes));
                tally.answered(usage, outcome);
                return match translation {
                    None => Ok(relay_whole(parts, bytes, served_by)),
                    Some(t) => translate_whole(t, parts, bytes, request, served_by),
                };
            };

            // A stream: hold its preamble until content shows it is good.
            let (parts, body) = resp.into_parts();
            let client_model = request.model.as_deref().unwrap_or_default();
            let mut relay = Relay::new(
                body,
                client_api,
                translation.map(|t| {
                    let mut s = t.pair.stream(client_model, t.names);
                    s.include_usage(t.include_usage);
                    s
                }),
                settings.sse_keepalive,
                settings.stream_idle_timeout,
                tally,
            );
            match relay.hold_preamble(settings.first_token_timeout).await {
                Held::Content | Held::TimedOut | Held::TooLarge => {
                    let stream: StreamBody = Box::pin(relay);
                    let mut resp = Response::from_parts(parts, Payload::Stream(stream));
                    remove_hop_by_hop(resp.headers_mut());
                    resp.headers_mut().remove(header::CONTENT_LENGTH);
                    served_by_header(&mut resp, served_by);
                    return Ok(resp);
                }
                Held::Broken => {
                    // Cut before any content: nothing worth relaying.
                    note_failover("broken");
                    relay.abandon();
                    break;
                }
                Held::Error => {
                    // An error before any content: pass this upstream over; its
                    // stream so far is what the client gets if nothing better.
                    note_failover("preamble_error");
                    let body = Bytes::from(relay.held_bytes());
                    relay.abandon();
                    keep_best(
                        &mut best,
                        Answered {
                            rank: 2,
                            status: parts.status,
                            headers: parts.headers,
                            body,
                        },
                    );
                    break;
                }
            }
        }
    }
    let b = exhausted(best, &tally, endpoint, Instant::now())?;
    llm.metrics.request(model, None, "relayed_error");
    cx.facts.locked().outcome = Some("relayed_error");
    let mut resp = Response::new(Payload::text(b.body));
    *resp.status_mut() = b.status;
    *resp.headers_mut() = b.headers;
    remove_hop_by_hop(resp.headers_mut());
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    Ok(resp)
}

/// What the attempts came to, when none succeeded.
#[derive(Default)]
struct Attempts {
    /// Requests sent.
    tried: usize,
    /// Upstreams that cannot serve the endpoint (no translation).
    skipped: usize,
    /// Upstreams passed over with every member out: until the first is
    /// back, and whether all of them are rate limited.
    cooling: Vec<(Instant, bool)>,
    /// Why the first upstream that could not serve this request (a web
    /// search to a Chat Completions server) could not.
    unserved: Option<String>,
}

/// The answer when every attempt failed: the most useful failure relayed;
/// else, when nothing was tried, 501 (nobody speaks the endpoint) or an
/// immediate 429/503 with the soonest recovery as `Retry-After` (everyone
/// is cooling: 429 only when all are rate limited); else 502.
fn exhausted(
    best: Option<Answered>,
    tally: &Attempts,
    endpoint: Endpoint,
    now: Instant,
) -> Result<Answered, Rescue> {
    if let Some(b) = best {
        return Ok(b);
    }
    let cooling = &tally.cooling;
    if let Some(why) = tally
        .unserved
        .as_ref()
        .filter(|_| tally.tried == 0 && cooling.is_empty())
    {
        // Nothing was sent and nobody is cooling: the request asks what
        // no upstream of the model can do, which a retry will not change.
        return Err(Rescue::status(StatusCode::BAD_REQUEST).saying(why.clone()));
    }
    if tally.tried == 0 && cooling.is_empty() && tally.skipped > 0 {
        return Err(Rescue::status(StatusCode::NOT_IMPLEMENTED).saying(format!(
            "no upstream of this model speaks {}, and weir does not translate it to theirs",
            endpoint.label()
        )));
    }
    if tally.tried == 0 && !cooling.is_empty() {
        let soonest = cooling.iter().map(|(u, _)| *u).min().unwrap_or(now);
        let wait = soonest.saturating_duration_since(now).as_secs_f64().ceil() as u64;
        let all_limited = cooling.iter().all(|(_, limited)| *limited);
        let status = if all_limited {
            StatusCode::TOO_MANY_REQUESTS
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        return Err(Rescue::status(status).retry_after(wait).saying(format!(
            "every upstream for this model is cooling down ({} {}); retry in {wait} s",
            cooling.len(),
            if all_limited {
                "rate limited"
            } else {
                "unavailable"
            }
        )));
    }
    Err(Rescue::status(StatusCode::BAD_GATEWAY).saying(format!(
        "all upstreams failed ({} attempted, {} cooling down)",
        tally.tried,
        cooling.len()
    )))
}

/// Whether a translated request's answer says the upstream refused what
/// weir sent (not the client's credentials, size or rate): the request
/// moves on rather than ending there.
fn refused_as_translated(status: StatusCode) -> bool {
    matches!(status.as_u16(), 400 | 422)
}

/// Keep the more useful of two failures; the earlier on a tie.
fn keep_best(best: &mut Option<Answered>, new: Answered) {
    if best.as_ref().is_none_or(|b| new.rank > b.rank) {
        *best = Some(new);
    }
}

/// Record how an attempt went, and log and count what that changed.
pub(super) fn finish(pick: &mut Pick<LlmMember>, outcome: Outcome, cx: &Context<'_>) {
    let change = pick.finish(outcome, Instant::now());
    pick.target()
        .changed(cx.metrics, cx.route_name, change, "failing");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn failed(rank: u8, status: u16) -> Answered {
        Answered {
            rank,
            status: StatusCode::from_u16(status).expect("status"),
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
        }
    }

    #[test]
    fn a_rate_limit_is_the_failure_relayed_whatever_the_order() {
        for order in [[(3, 429), (2, 529)], [(2, 529), (3, 429)]] {
            let mut best = None;
            for (rank, status) in order {
                keep_best(&mut best, failed(rank, status));
            }
            assert_eq!(best.map(|b| b.status.as_u16()), Some(429), "{order:?}");
        }
        let mut best = None;
        keep_best(&mut best, failed(2, 500));
        keep_best(&mut best, failed(2, 503));
        assert_eq!(
            best.map(|b| b.status.as_u16()),
            Some(500),
            "the first on a tie"
        );
    }

    #[test]
    fn a_refused_translation_never_hides_an_earlier_rate_limit_or_overload() {
        for earlier in [(3, 429), (2, 529)] {
            let mut best = None;
            keep_best(&mut best, failed(earlier.0, earlier.1));
            keep_best(&mut best, failed(1, 400));
            assert_eq!(best.map(|b| b.status.as_u16()), Some(earlier.1));
        }
        let mut best = None;
        keep_best(&mut best, failed(1, 422));
        keep_best(&mut best, failed(2, 503));
        assert_eq!(best.map(|b| b.status.as_u16()), Some(503));
        assert!(refused_as_translated(StatusCode::BAD_REQUEST));
        assert!(!refused_as_translated(StatusCode::UNAUTHORIZED));
        assert!(!refused_as_translated(StatusCode::PAYLOAD_TOO_LARGE));
    }

    #[test]
    fn when_all_fail_the_answer_says_why() {
        let now = Instant::now();
        let e = Endpoint::Messages;
        let status = |r: Result<Answered, Rescue>| match r {
            Ok(a) => (a.status, None),
            Err(r) => (r.status, r.retry_after),
        };
        let relayed = exhausted(Some(failed(3, 429)), &Attempts::default(), e, now);
        assert_eq!(status(relayed).0, StatusCode::TOO_MANY_REQUESTS);

        let nobody = Attempts {
            skipped: 2,
            ..Attempts::default()
        };
        assert_eq!(
            status(exhausted(None, &nobody, e, now)).0,
            StatusCode::NOT_IMPLEMENTED
        );

        let limited = Attempts {
            cooling: vec![
                (now + Duration::from_millis(7_200), true),
                (now + Duration::from_secs(30), true),
            ],
            ..Attempts::default()
        };
        assert_eq!(
            status(exhausted(None, &limited, e, now)),
            (StatusCode::TOO_MANY_REQUESTS, Some(8)),
            "the soonest recovery, rounded up"
        );
        let mixed = Attempts {
            cooling: vec![
                (now + Duration::from_secs(5), true),
                (now + Duration::from_secs(2), false),
            ],
            ..Attempts::default()
        };
        assert_eq!(
            status(exhausted(None, &mixed, e, now)),
            (StatusCode::SERVICE_UNAVAILABLE, Some(2))
        );

        let tried = Attempts {
            tried: 2,
            cooling: mixed.cooling.clone(),
            ..Attempts::default()
        };
        assert_eq!(
            status(exhausted(None, &tried, e, now)).0,
            StatusCode::BAD_GATEWAY
        );
    }
}
