//! Peak-EWMA latency (Finagle's, as Linkerd and tower use it): a slower
//! answer raises the estimate at once; faster ones pull it down with a
//! weight that grows with the time since the last observation; with no
//! observations it decays, so a server that was slow is tried again.

use std::time::Duration;

use tokio::time::Instant;

/// How fast the estimate forgets (Linkerd's default).
const DECAY: Duration = Duration::from_secs(10);

/// The estimate of a server not yet heard from.
const DEFAULT_RTT: Duration = Duration::from_millis(30);

#[derive(Debug)]
pub(super) struct PeakEwma {
    /// Nanoseconds.
    estimate: f64,
    at: Option<Instant>,
}

impl Default for PeakEwma {
    fn default() -> Self {
        PeakEwma {
            estimate: DEFAULT_RTT.as_nanos() as f64,
            at: None,
        }
    }
}

impl PeakEwma {
    fn decay(&self, now: Instant) -> f64 {
        match self.at {
            Some(at) => {
                let elapsed = now.saturating_duration_since(at).as_secs_f64();
                (-elapsed / DECAY.as_secs_f64()).exp()
            }
            None => 1.0,
        }
    }

    /// The estimate at `now`, in nanoseconds (never zero, so a cost
    /// product still ranks by requests in flight).
    pub(super) fn value(&self, now: Instant) -> f64 {
        (self.estimate * self.decay(now)).max(1.0)
    }

    pub(super) fn observe(&mut self, rtt: Duration, now: Instant) {
        let rtt = rtt.as_nanos() as f64;
        let decay = self.decay(now);
        let current = self.estimate * decay;
        self.estimate = if rtt > current {
            rtt
        } else {
            current * decay + rtt * (1.0 - decay)
        };
        self.at = Some(now);
    }
}
