//! Connection deadlines, enforced by one sweeper for all connections.
//!
//! Every connection publishes its phase and when it began (see
//! [`super::state`]). A single task scans them a few times a
//! second and asks overdue ones to close. One place decides every
//! connection deadline, which makes the load-aware rule simple: above the
//! pressure threshold (80% of the cap by default) the handshake, head and
//! idle deadlines all shrink to `pressure_timeout` (1 s), so slots held by
//! clients that do nothing are recycled quickly exactly when they are
//! scarce. A connection with a request in flight is never subject to these
//! deadlines; its body is bounded by the body data rate, and a response its
//! client will not read by the send timeout.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::registry::Registry;
use super::state::{CloseReason, ConnState, Park, Phase};
use crate::config::ConnectionSettings;

#[derive(Debug, Clone)]
pub struct Deadlines {
    pub(crate) handshake: Duration,
    pub(crate) head: Duration,
    pub(crate) idle: Duration,
    pub(crate) send: Duration,
    /// Load (0..1 of the cap) above which `pressure` replaces the others.
    pub(crate) pressure_threshold: f64,
    pub(crate) pressure: Duration,
    /// An HTTP/1.1 connection idle this long gives up its buffers.
    pub(crate) park_after: Duration,
}

/// How long an HTTP/1.1 connection stays idle before it is parked.
pub(crate) const PARK_AFTER: Duration = Duration::from_secs(1);

impl Deadlines {
    pub fn new(c: &ConnectionSettings) -> Self {
        Deadlines {
            handshake: c.tls_handshake_timeout,
            head: c.request_head_timeout,
            idle: c.keepalive_timeout,
            send: c.send_timeout,
            pressure_threshold: f64::from(c.pressure_threshold_percent) / 100.0,
            pressure: c.pressure_timeout,
            park_after: PARK_AFTER,
        }
    }

    /// Whether a connection has overstayed its phase, given the load.
    pub(crate) fn overdue(&self, c: &ConnState, load: f64) -> Option<CloseReason> {
        // The client is not taking what weir has for it: either the socket
        // is full, or (HTTP/2) no response on the connection has moved.
        let send = self.send.as_millis() as u64;
        if c.write_blocked_for_ms().is_some_and(|ms| ms > send)
            || c.body_stalled_for_ms().is_some_and(|ms| ms > send)
        {
            return Some(CloseReason::SendTimeout);
        }
        let (limit, reason) = match c.phase() {
            Phase::Handshake => (self.handshake, CloseReason::HandshakeTimeout),
            Phase::ReadingHead => (self.head, CloseReason::HeadTimeout),
            Phase::Idle => (self.idle, CloseReason::IdleTimeout),
            Phase::Active | Phase::Tunnel => return None,
        };
        let limit = if load >= self.pressure_threshold {
            limit.min(self.pressure)
        } else {
            limit
        };
        (c.phase_age_ms() > limit.as_millis() as u64).then_some(reason)
    }

    /// How often the sweeper looks: a tenth of the shortest deadline,
    /// between 10 ms and 250 ms.
    pub(crate) fn tick(&self) -> Duration {
        let shortest = [
            self.handshake,
            self.head,
            self.idle,
            self.send,
            self.pressure,
        ]
        .into_iter()
        .min()
        .unwrap_or(Duration::from_secs(1));
        (shortest / 10).clamp(Duration::from_millis(10), Duration::from_millis(250))
    }
}

/// Scan all connections until `stop` turns true. The deadlines are read
/// afresh each round, so a reload changes them for every connection.
pub(crate) async fn sweep(
    registry: Arc<Registry>,
    deadlines: Arc<ArcSwap<Deadlines>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut overdue: Vec<(Arc<ConnState>, CloseReason)> = Vec::new();
    loop {
        let deadlines = deadlines.load_full();
        tokio::select! {
            _ = tokio::time::sleep(deadlines.tick()) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        sweep_once(&registry, &deadlines, &mut overdue);
        for (c, reason) in overdue.drain(..) {
            tracing::debug!(peer = %c.peer(), listener = %c.listener, reason = reason.label(), "closing connection");
            c.close(reason);
        }
    }
}

/// One pass over every connection: the overdue ones and why, into `out`.
pub fn sweep_once(
    registry: &Registry,
    deadlines: &Deadlines,
    out: &mut Vec<(Arc<ConnState>, CloseReason)>,
) {
    let load = registry.load();
    registry.for_each_chunked(|c| {
        let current = c.close_reason();
        // A graceful close in progress can still be overtaken (by the
        // send timeout, say); an abrupt one is already final.
        if (current == CloseReason::None || current.graceful())
            && let Some(reason) = deadlines.overdue(c, load)
            && reason != current
        {
            out.push((c.clone(), reason));
        } else if current == CloseReason::None
            && c.phase() == Phase::Idle
            && c.phase_age_us() > deadlines.park_after.as_micros() as u64
            && c.park_state() == Park::No
        {
            // Atomics and a notification: cheap enough under the lock.
            c.request_park();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadlines() -> Deadlines {
        Deadlines {
            handshake: Duration::from_millis(100),
            head: Duration::from_millis(100),
            idle: Duration::from_millis(500),
            send: Duration::from_millis(100),
            pressure_threshold: 0.8,
            pressure: Duration::from_millis(20),
            park_after: Duration::from_millis(200),
        }
    }

    async fn pass(ms: u64) {
        tokio::time::advance(Duration::from_millis(ms)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn each_phase_has_its_deadline_and_active_has_none() {
        let r = Registry::new(10, 0);
        let (s, _) = r
            .admit(
                "192.0.2.1".parse().expect("ip"),
                "l".into(),
                Phase::Handshake,
                Default::default(),
            )
            .expect("slot");
        let d = deadlines();
        assert_eq!(d.overdue(&s.state, 0.0), None);
        pass(150).await;
        assert_eq!(
            d.overdue(&s.state, 0.0),
            Some(CloseReason::HandshakeTimeout)
        );
        s.state.handshake_done();
        assert_eq!(
            d.overdue(&s.state, 0.0),
            None,
            "the head deadline starts fresh"
        );
        s.state.request_started();
        pass(150).await;
        assert_eq!(
            d.overdue(&s.state, 0.0),
            None,
            "active connections have no phase deadline"
        );
        s.state.request_finished();
        pass(150).await;
        assert_eq!(d.overdue(&s.state, 0.0), None, "idle deadline is longer");
        assert_eq!(
            d.overdue(&s.state, 0.9),
            Some(CloseReason::IdleTimeout),
            "under pressure it shrinks"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_blocked_writer_is_cut_even_when_active() {
        let r = Registry::new(10, 0);
        let (s, _) = r
            .admit(
                "192.0.2.1".parse().expect("ip"),
                "l".into(),
                Phase::ReadingHead,
                Default::default(),
            )
            .expect("slot");
        s.state.request_started();
        s.state.write_blocked(true);
        pass(150).await;
        assert_eq!(
            deadlines().overdue(&s.state, 0.0),
            Some(CloseReason::SendTimeout)
        );
        s.state.write_blocked(false);
        assert_eq!(deadlines().overdue(&s.state, 0.0), None);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_http1_connections_are_asked_to_park_once_busy_and_h2_ones_never() {
        let r = Registry::new(10, 0);
        let admit = || {
            r.admit(
                "192.0.2.1".parse().expect("ip"),
                "l".into(),
                Phase::ReadingHead,
                Default::default(),
            )
            .expect("slot")
            .0
        };
        let (h1, h2, busy) = (admit(), admit(), admit());
        h2.state.set_h2();
        for s in [&h1, &h2, &busy] {
            s.state.request_started();
        }
        h1.state.request_finished();
        h2.state.request_finished();
        let d = deadlines();
        let mut out = Vec::new();
        pass(150).await;
        sweep_once(&r, &d, &mut out);
        assert_eq!(h1.state.park_state(), Park::No, "not idle long enough");
        pass(100).await;
        sweep_once(&r, &d, &mut out);
        assert!(out.is_empty(), "parking is not closing");
        assert_eq!(h1.state.park_state(), Park::Requested);
        assert_eq!(h2.state.park_state(), Park::No);
        assert_eq!(busy.state.park_state(), Park::No);
        // Busy again before the task acted: the request is dropped.
        h1.state.request_started();
        assert!(!h1.state.confirm_park());
        assert_eq!(h1.state.park_state(), Park::No);
    }
}
