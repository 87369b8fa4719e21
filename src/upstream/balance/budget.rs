//! A retry budget (Linkerd's, Envoy's): retries may be at most a share of
//! the requests over a sliding window, plus a floor per second so a quiet
//! route can still retry. When a group fails, every request would retry;
//! the budget keeps the retries from multiplying the load on servers that
//! are already failing.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::RetryBudget;
use crate::sync::Locked;

/// The window is kept in this many slots: it slides by a tenth of itself,
/// so the count is never more than a slot out of date, and memory and work
/// per request are constant.
const SLOTS: usize = 10;

#[derive(Debug, Default, Clone, Copy)]
struct Slot {
    requests: u64,
    retries: u64,
}

#[derive(Debug)]
struct Window {
    slots: [Slot; SLOTS],
    /// The slot number (since `epoch`) of the newest slot.
    current: u64,
}

impl Window {
    fn newest(&mut self) -> &mut Slot {
        let i = (self.current % SLOTS as u64) as usize;
        &mut self.slots[i]
    }
}

/// A route's budget and what it has spent.
#[derive(Debug)]
pub(crate) struct Budget {
    rule: RetryBudget,
    epoch: Instant,
    window: std::sync::Mutex<Window>,
}

impl Budget {
    pub(crate) fn new(rule: RetryBudget, now: Instant) -> Self {
        Budget {
            rule,
            epoch: now,
            window: std::sync::Mutex::new(Window {
                slots: [Slot::default(); SLOTS],
                current: 0,
            }),
        }
    }

    pub(crate) fn rule(&self) -> RetryBudget {
        self.rule
    }

    /// A request (not a retry) was sent: it earns a share of a retry.
    pub(crate) fn request(&self, now: Instant) {
        let mut w = self.advanced(now);
        let slot = w.newest();
        slot.requests = slot.requests.saturating_add(1);
    }

    /// Whether one more retry fits; if it does, it is spent.
    pub(crate) fn try_retry(&self, now: Instant) -> bool {
        let mut w = self.advanced(now);
        let (requests, retries) = w.slots.iter().fold((0u64, 0u64), |(q, r), s| {
            (q.saturating_add(s.requests), r.saturating_add(s.retries))
        });
        let floor = (f64::from(self.rule.min_per_second) * self.rule.window.as_secs_f64()) as u64;
        let share = requests.saturating_mul(u64::from(self.rule.percent)) / 100;
        if retries >= floor.saturating_add(share) {
            return false;
        }
        let slot = w.newest();
        slot.retries = slot.retries.saturating_add(1);
        true
    }

    /// The window with the slots that fell out of it emptied.
    fn advanced(&self, now: Instant) -> std::sync::MutexGuard<'_, Window> {
        let slot_len = (self.rule.window / SLOTS as u32).max(Duration::from_millis(1));
        let elapsed = now.saturating_duration_since(self.epoch);
        let n = (elapsed.as_nanos() / slot_len.as_nanos()) as u64;
        let mut w = self.window.locked();
        if n > w.current {
            // At most a whole window's slots to empty, however long idle.
            let stale = (n - w.current).min(SLOTS as u64);
            for k in 0..stale {
                let i = ((n - k) % SLOTS as u64) as usize;
                w.slots[i] = Slot::default();
            }
            w.current = n;
        }
        w
    }
}
