//! Passive health (outlier detection): a server that keeps failing is
//! taken out for a back-off that doubles while it keeps failing.

use std::time::Duration;

use tokio::time::Instant;

use super::hold::Held;
use crate::config::Ejection;

impl Ejection {
    /// How many of `n` servers may be out at once.
    pub(crate) fn most_out(&self, n: usize) -> usize {
        (n.saturating_mul(usize::from(self.max_share)) / 100).max(1)
    }

    /// The `nth` time out in a row (1-based).
    fn back_off(&self, nth: u32) -> Duration {
        let doubling = 2u32.saturating_pow(nth.saturating_sub(1).min(31));
        self.base.saturating_mul(doubling).min(self.max)
    }
}

/// One server's failures and time out.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// Failures since the last success.
    consecutive: u32,
    /// Times out in a row, with no success between: while non-zero the
    /// server is on probation, and one failure takes it out again.
    ejections: u32,
    /// Out until then (past: back, on probation).
    until: Option<Instant>,
    /// Down by the active health check, until the check passes again.
    checked_down: bool,
    /// Out on its own word, or for refusing connections.
    pub(super) held: Held,
}

impl Health {
    /// A server joining a group that is already serving: in, ramping up
    /// from `now` over the slow-start window.
    pub(super) fn joining(now: Instant) -> Self {
        Health {
            until: Some(now),
            ..Health::default()
        }
    }

    pub(super) fn is_in(&self, now: Instant) -> bool {
        !self.checked_down && self.until.is_none_or(|u| now >= u) && self.held.is_in(now)
    }

    /// When it comes back, if it is out for failing or held (a server the
    /// check holds down has no known time).
    pub(super) fn out_until(&self, now: Instant) -> Option<Instant> {
        let failing = self.until.filter(|u| *u > now);
        let held = self.held.out(now).map(|(u, _)| u);
        failing.max(held)
    }

    /// Why it is out at `now`, and until when if known: the check holding
    /// it down, its own word (a hold), or failing. `None`: in.
    pub(super) fn why_out(&self, now: Instant) -> Option<(&'static str, Option<Instant>)> {
        if self.checked_down {
            return Some(("health_check", None));
        }
        if let Some((until, reason)) = self.held.out(now) {
            return Some((reason.name(), Some(until)));
        }
        self.until
            .filter(|u| *u > now)
            .map(|u| ("failing", Some(u)))
    }

    /// Failures since the last success.
    pub(super) fn consecutive(&self) -> u32 {
        self.consecutive
    }

    /// The active check's verdict; whether it changed.
    pub(super) fn checked(&mut self, up: bool) -> bool {
        let changed = self.checked_down == up;
        self.checked_down = !up;
        if up && changed {
            // Back by the check: a clean slate, as a success gives.
            self.consecutive = 0;
            self.ejections = 0;
            self.until = None;
        }
        changed
    }

    /// An answer. Whether it ends a time out (the server was on
    /// probation).
    pub(super) fn succeeded(&mut self) -> bool {
        let was_out = self.ejections > 0;
        self.consecutive = 0;
        self.ejections = 0;
        was_out
    }

    /// A failure; `may_eject` when the group's cap allows one more out.
    /// Until when this took the server out, if it did.
    pub(super) fn failed(
        &mut self,
        rule: &Ejection,
        may_eject: bool,
        now: Instant,
    ) -> Option<Instant> {
        if !self.is_in(now) {
            // A request sent before it went out; already counted.
            return None;
        }
        self.consecutive = self.consecutive.saturating_add(1);
        let due = self.ejections > 0 || self.consecutive >= rule.after.max(1);
        if !(due && may_eject) {
            return None;
        }
        self.ejections = self.ejections.saturating_add(1);
        self.consecutive = 0;
        let until = now + rule.back_off(self.ejections);
        self.until = Some(until);
        Some(until)
    }

    /// The share of its weight a server takes now: ramped from a tenth
    /// after it comes back, over `window`.
    pub(super) fn ramp(&self, now: Instant, window: Duration) -> f64 {
        match self.until {
            Some(back) if !window.is_zero() && now >= back => {
                let elapsed = now.duration_since(back).as_secs_f64();
                (elapsed / window.as_secs_f64()).clamp(0.1, 1.0)
            }
            _ => 1.0,
        }
    }
}
