//! What one attempt comes to ([`Verdict`]), how useful a failed one is to
//! the client ([`Rank`]), and the answer when every attempt failed
//! ([`exhausted`]): the failover loop's decisions, apart from its I/O.

use bytes::Bytes;
use http::{Response, StatusCode};
use tokio::time::Instant;

use crate::config::UpstreamApi;
use crate::llm::answer::json_content;
use crate::llm::outgoing::Translation;
use crate::respond::{Payload, Rescue};
use weir_wire::Endpoint;

/// How one attempt ended: what the loop in [`run`] does next. Every way an
/// attempt can end is one of these four, and the loop acts on nothing
/// else.
pub(super) enum Verdict {
    /// The client's answer (a success, or a status the client must see):
    /// relay it; the attempts end.
    Relay(Response<Payload>),
    /// This member did not generate — it refused the connection, said it
    /// is rate limited or overloaded, or has a key that makes no request —
    /// so another member of the same upstream is asked; with its failure,
    /// when it answered one.
    NextMember(Option<Answered>),
    /// This upstream's turn is over (it cannot serve the request, failed,
    /// or has no member left): on to the next upstream; with its failure,
    /// when it answered one.
    NextUpstream(Option<Answered>),
    /// The request ends with weir's own answer: a body no upstream could
    /// take, weir too busy, an upstream answer that could not be read.
    Fail(Rescue),
}

/// How useful a failed attempt's answer is to the client: when every
/// attempt fails, the highest ranked is relayed (the earliest on a tie).
/// Variants rise in usefulness; `Ord` follows their order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Rank {
    /// A translated request refused as invalid (400/422): it speaks of what
    /// weir made of the request more than of what the client sent.
    TranslationRefused,
    /// Overloaded, a server error (any other status in `failover_on`), or
    /// an error inside the stream before any content.
    Failing,
    /// Rate limited (429): its headers tell the client when to come back.
    RateLimited,
}

/// A failed attempt weir may relay if nothing better comes.
pub(super) struct Answered {
    pub(super) rank: Rank,
    pub(super) status: StatusCode,
    pub(super) headers: http::HeaderMap,
    pub(super) body: Bytes,
}

impl Answered {
    /// A failed attempt's answer already read (`body` as the upstream
    /// sent it), its error in the client's envelope: first in the
    /// upstream API's own (Vertex's Google envelope read into Anthropic's),
    /// then translated.
    pub(super) fn of(
        mut parts: http::response::Parts,
        mut body: Bytes,
        rank: Rank,
        translation: Option<&Translation>,
        api: UpstreamApi,
    ) -> Answered {
        if let Some(own) = api.own_error(parts.status, &body) {
            body = own;
            json_content(&mut parts.headers);
        }
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

/// What the attempts came to, when none succeeded.
#[derive(Default)]
pub(super) struct Attempts {
    /// Requests sent.
    pub(super) tried: usize,
    /// Upstreams that cannot serve the endpoint (no translation).
    pub(super) skipped: usize,
    /// Upstreams passed over with every member out: until the first is
    /// back, and whether all of them are rate limited.
    pub(super) cooling: Vec<(Instant, bool)>,
    /// Why the first upstream that could not serve this request (a web
    /// search to a Chat Completions server) could not.
    pub(super) unserved: Option<String>,
    /// Why the first upstream with no credential to send (its token
    /// endpoint down) has none.
    pub(super) unavailable: Option<String>,
}

/// The answer when every attempt failed: the most useful failure relayed;
/// else, when nothing was tried, 501 (nobody speaks the endpoint) or an
/// immediate 429/503 with the soonest recovery as `Retry-After` (everyone
/// is cooling: 429 only when all are rate limited); else 502.
pub(super) fn exhausted(
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
    if let Some(why) = tally
        .unavailable
        .as_ref()
        .filter(|_| tally.tried == 0 && cooling.is_empty())
    {
        // Nothing was sent: weir has no credential for the upstream yet;
        // a retry once its token endpoint is back will do.
        return Err(Rescue::status(StatusCode::SERVICE_UNAVAILABLE)
            .retry_after(1)
            .saying(why.clone()));
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
pub(super) fn refused_as_translated(status: StatusCode) -> bool {
    matches!(status.as_u16(), 400 | 422)
}

/// Keep the more useful of two failures (by [`Rank`]); the earlier on a
/// tie. An attempt that answered nothing changes nothing.
pub(super) fn keep_best(best: &mut Option<Answered>, new: Option<Answered>) {
    if let Some(new) = new
        && best.as_ref().is_none_or(|b| new.rank > b.rank)
    {
        *best = Some(new);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Rank::{Failing, RateLimited, TranslationRefused};
    use super::*;

    /// A failure with this rank and status, as an attempt's verdict
    /// carries it.
    fn failed(rank: Rank, status: u16) -> Option<Answered> {
        Some(Answered {
            rank,
            status: StatusCode::from_u16(status).expect("status"),
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
        })
    }

    #[test]
    fn a_rate_limit_is_the_failure_relayed_whatever_the_order() {
        for order in [
            [(RateLimited, 429), (Failing, 529)],
            [(Failing, 529), (RateLimited, 429)],
        ] {
            let mut best = None;
            for (rank, status) in order {
                keep_best(&mut best, failed(rank, status));
            }
            assert_eq!(best.map(|b| b.status.as_u16()), Some(429), "{order:?}");
        }
        let mut best = None;
        keep_best(&mut best, failed(Failing, 500));
        keep_best(&mut best, failed(Failing, 503));
        assert_eq!(
            best.map(|b| b.status.as_u16()),
            Some(500),
            "the first on a tie"
        );
    }

    #[test]
    fn a_refused_translation_never_hides_an_earlier_rate_limit_or_overload() {
        for earlier in [(RateLimited, 429), (Failing, 529)] {
            let mut best = None;
            keep_best(&mut best, failed(earlier.0, earlier.1));
            keep_best(&mut best, failed(TranslationRefused, 400));
            assert_eq!(best.map(|b| b.status.as_u16()), Some(earlier.1));
        }
        let mut best = None;
        keep_best(&mut best, failed(TranslationRefused, 422));
        keep_best(&mut best, failed(Failing, 503));
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
        let relayed = exhausted(failed(RateLimited, 429), &Attempts::default(), e, now);
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
