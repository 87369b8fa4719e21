//! Holds: a server out until a known time, for a known reason — because it
//! said so (a 429 or an overload with a retry hint) or because it refuses
//! connections.
//!
//! Passive ejection infers a server is failing from a run of failures and
//! keeps nginx's rule that a group of one is never out (there is nothing to
//! send to instead). A hold is different: the server itself named the time
//! (or cannot be reached at all), so it applies even to a group of one,
//! whatever the cap on the share out; the caller then has somewhere else to
//! go (an LLM route's next upstream) or answers at once with the time.

use std::time::Duration;

use tokio::time::Instant;

use super::{Change, Group};
use crate::sync::Locked;

/// Why a server is held out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// It said it is rate limited, and when to come back.
    RateLimited,
    /// It said it is overloaded, and when to come back.
    Overloaded,
    /// It refused connections: out for a back-off that grows while the
    /// refusals go on.
    Unreachable,
}

impl Reason {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Reason::RateLimited => "rate_limited",
            Reason::Overloaded => "overloaded",
            Reason::Unreachable => "unreachable",
        }
    }
}

/// The first time out for refusing connections; each refusal in a row
/// doubles it, up to [`REFUSED_MAX`].
pub(crate) const REFUSED_START: Duration = Duration::from_secs(1);
pub(crate) const REFUSED_MAX: Duration = Duration::from_secs(60);

/// One server's hold.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// Out until then, and why (past: back).
    until: Option<(Instant, Reason)>,
    /// Refusals since the last answer.
    refusals: u32,
    /// Held since its last answer: the next answer says it is back.
    since_answer: bool,
}

impl Held {
    pub(super) fn is_in(&self, now: Instant) -> bool {
        self.until.is_none_or(|(u, _)| now >= u)
    }

    pub(super) fn out(&self, now: Instant) -> Option<(Instant, Reason)> {
        self.until.filter(|(u, _)| *u > now)
    }

    /// Hold until `until` unless already held longer.
    fn hold(&mut self, until: Instant, reason: Reason) {
        if self.until.is_none_or(|(u, _)| u < until) {
            self.until = Some((until, reason));
            self.since_answer = true;
        }
    }

    /// An answer: it is reachable (a hold for refusing ends), though a
    /// hold it named itself stands (the answer may predate it). Whether
    /// this brings it back.
    pub(super) fn answered(&mut self, now: Instant) -> bool {
        self.refusals = 0;
        if matches!(self.until, Some((_, Reason::Unreachable))) {
            self.until = None;
        }
        let back = self.since_answer && self.is_in(now);
        if back {
            self.since_answer = false;
        }
        back
    }
}

impl<T> Group<T> {
    /// Take server `index` out until `until` because `reason` (a 429 or an
    /// overload with a retry hint): even the only server, whatever the cap
    /// on the share out. A later hold extends an earlier one, never
    /// shortens it. Says when this took the server out.
    pub(crate) fn hold(
        &self,
        index: usize,
        until: Instant,
        reason: Reason,
        now: Instant,
    ) -> Option<Change> {
        let s = self.servers.get(index)?;
        let mut health = s.health.locked();
        let was_in = health.is_in(now);
        health.held.hold(until, reason);
        (was_in && !health.is_in(now)).then_some(Change::Out { until })
    }

    /// Server `index` refused a connection: held out for 1 s, then 2, 4 …
    /// 60 s while refusals go on, until it answers. Until when, and
    /// whether this took it out.
    pub(crate) fn refused(&self, index: usize, now: Instant) -> Option<(Instant, Option<Change>)> {
        let s = self.servers.get(index)?;
        let mut health = s.health.locked();
        let nth = health.held.refusals;
        health.held.refusals = nth.saturating_add(1);
        let wait = REFUSED_START
            .saturating_mul(1u32 << nth.min(6))
            .min(REFUSED_MAX);
        let until = now + wait;
        let was_in = health.is_in(now);
        health.held.hold(until, Reason::Unreachable);
        let change = (was_in && !health.is_in(now)).then_some(Change::Out { until });
        Some((until, change))
    }

    /// Until when, and why, server `index` is held out.
    pub(crate) fn held(&self, index: usize, now: Instant) -> Option<(Instant, Reason)> {
        self.servers.get(index)?.health.locked().held.out(now)
    }
}
