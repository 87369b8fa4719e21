//! The process-wide connection registry: one cap shared by every listener,
//! an optional per-IP cap, and reclaiming under load.
//!
//! Being at the cap must not mean real clients wait behind attackers. Each
//! connection publishes its [`Phase`] (handshaking, sending a head, active,
//! idle) through a [`ConnState`] of atomics. When a new connection arrives
//! at the cap, the registry evicts the connection that has been doing no
//! useful work the longest — in the TLS handshake, still sending a request
//! head, or idle between requests — and admits the newcomer in its place. A
//! connection with a request in flight (or an upgraded tunnel) is never
//! evicted; if every connection is busy, the newcomer is refused.
//!
//! An evicted connection leaves the count at once (its task closes within
//! microseconds), so the number of live descriptors can briefly exceed the
//! cap by the evictions in progress; the FD budget's reserve covers that.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

/// What a connection is doing, as far as overload defence cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// TLS handshake in progress.
    Handshake = 0,
    /// Waiting for, or receiving, a request head.
    ReadingHead = 1,
    /// At least one request in flight.
    Active = 2,
    /// Keep-alive with no request in flight.
    Idle = 3,
    /// Upgraded to a tunnel (WebSocket): active until it closes.
    Tunnel = 4,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Handshake,
            1 => Phase::ReadingHead,
            2 => Phase::Active,
            3 => Phase::Idle,
            _ => Phase::Tunnel,
        }
    }

    /// Phases whose connection may be closed to make room for others.
    pub fn reclaimable(self) -> bool {
        matches!(self, Phase::Handshake | Phase::ReadingHead | Phase::Idle)
    }
}

/// Why a connection is being closed by weir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CloseReason {
    None = 0,
    /// Evicted to admit a new connection at the cap.
    Reclaimed = 1,
    HandshakeTimeout = 2,
    HeadTimeout = 3,
    IdleTimeout = 4,
    /// The client stopped reading its response.
    SendTimeout = 5,
    /// The per-connection request cap was reached.
    MaxRequests = 6,
    /// HTTP/2 control-frame flood.
    Flood = 7,
}

impl CloseReason {
    fn from_u8(v: u8) -> CloseReason {
        match v {
            1 => CloseReason::Reclaimed,
            2 => CloseReason::HandshakeTimeout,
            3 => CloseReason::HeadTimeout,
            4 => CloseReason::IdleTimeout,
            5 => CloseReason::SendTimeout,
            6 => CloseReason::MaxRequests,
            7 => CloseReason::Flood,
            _ => CloseReason::None,
        }
    }

    /// Whether the connection should finish what it is doing (GOAWAY /
    /// `Connection: close`) rather than be dropped at once.
    pub fn graceful(self) -> bool {
        matches!(self, CloseReason::IdleTimeout | CloseReason::MaxRequests)
    }

    pub fn label(self) -> &'static str {
        match self {
            CloseReason::None => "none",
            CloseReason::Reclaimed => "reclaimed",
            CloseReason::HandshakeTimeout => "handshake_timeout",
            CloseReason::HeadTimeout => "head_timeout",
            CloseReason::IdleTimeout => "idle_timeout",
            CloseReason::SendTimeout => "send_timeout",
            CloseReason::MaxRequests => "max_requests",
            CloseReason::Flood => "h2_flood",
        }
    }
}

/// The shared, lock-free state of one connection.
pub struct ConnState {
    pub peer: IpAddr,
    pub listener: Arc<str>,
    epoch: Instant,
    phase: AtomicU8,
    /// Microseconds since `epoch` when the current phase began.
    since_us: AtomicU64,
    in_flight: AtomicU32,
    requests: AtomicU64,
    /// Microseconds since `epoch` when a write started to block; 0 = not blocked.
    write_blocked_us: AtomicU64,
    /// Response bodies that produced a frame hyper has not come back for:
    /// it is the client's turn to read.
    awaiting_client: AtomicU32,
    /// When the client last made progress on any response.
    client_progress_us: AtomicU64,
    is_h2: AtomicBool,
    close: AtomicU8,
    closed: Notify,
}

impl ConnState {
    fn new(peer: IpAddr, listener: Arc<str>, epoch: Instant, phase: Phase) -> Self {
        let s = ConnState {
            peer,
            listener,
            epoch,
            phase: AtomicU8::new(phase as u8),
            since_us: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            requests: AtomicU64::new(0),
            write_blocked_us: AtomicU64::new(0),
            awaiting_client: AtomicU32::new(0),
            client_progress_us: AtomicU64::new(0),
            is_h2: AtomicBool::new(false),
            close: AtomicU8::new(0),
            closed: Notify::new(),
        };
        s.since_us.store(s.now_us(), Ordering::Relaxed);
        s
    }

    fn now_us(&self) -> u64 {
        // Never 0, so 0 can mean "unset".
        self.epoch.elapsed().as_micros() as u64 + 1
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// Microseconds the connection has been in its current phase.
    pub fn phase_age_us(&self) -> u64 {
        self.now_us()
            .saturating_sub(self.since_us.load(Ordering::Acquire))
    }

    pub fn phase_age_ms(&self) -> u64 {
        self.phase_age_us() / 1000
    }

    fn set_phase(&self, phase: Phase) {
        self.since_us.store(self.now_us(), Ordering::Release);
        self.phase.store(phase as u8, Ordering::Release);
    }

    /// The client speaks HTTP/2 (ALPN, or the cleartext preface arrived).
    pub fn set_h2(&self) {
        self.is_h2.store(true, Ordering::Relaxed);
    }

    /// The TLS handshake finished.
    pub fn handshake_done(&self) {
        self.set_phase(Phase::ReadingHead);
    }

    /// Bytes arrived: an idle HTTP/1.1 connection is now sending a head.
    /// (HTTP/2 frames while idle — PINGs — are not a new request.)
    pub fn bytes_received(&self) {
        if self.phase() == Phase::Idle && !self.is_h2.load(Ordering::Relaxed) {
            self.set_phase(Phase::ReadingHead);
        }
    }

    /// A request head was parsed. Returns how many requests this
    /// connection has now started.
    pub fn request_started(&self) -> u64 {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        if self.phase() != Phase::Tunnel {
            self.set_phase(Phase::Active);
        }
        self.requests.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// A response body ended (or was dropped).
    pub fn request_finished(&self) {
        let before = self.in_flight.fetch_sub(1, Ordering::AcqRel);
        if before == 1 && self.phase() == Phase::Active {
            self.set_phase(Phase::Idle);
        }
    }

    /// The connection became a tunnel (WebSocket).
    pub fn upgraded(&self) {
        self.set_phase(Phase::Tunnel);
    }

    pub fn write_blocked(&self, blocked: bool) {
        if blocked {
            let _ = self.write_blocked_us.compare_exchange(
                0,
                self.now_us(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        } else {
            self.write_blocked_us.store(0, Ordering::Release);
        }
    }

    /// Milliseconds writes have been blocked on the client, if they are.
    pub fn write_blocked_for_ms(&self) -> Option<u64> {
        match self.write_blocked_us.load(Ordering::Acquire) {
            0 => None,
            since => Some(self.now_us().saturating_sub(since) / 1000),
        }
    }

    /// A response body handed hyper a frame; until hyper asks for the next
    /// one the client has to read (or grant HTTP/2 window).
    pub fn body_handed_off(&self) {
        if self.awaiting_client.fetch_add(1, Ordering::AcqRel) == 0 {
            self.client_progress_us
                .store(self.now_us(), Ordering::Release);
        }
    }

    /// hyper came back for more: the client made progress.
    pub fn body_taken(&self) {
        self.client_progress_us
            .store(self.now_us(), Ordering::Release);
        self.awaiting_client.fetch_sub(1, Ordering::AcqRel);
    }

    /// Milliseconds the client has made no progress on any response that
    /// is waiting for it, if one is.
    pub fn body_stalled_for_ms(&self) -> Option<u64> {
        if self.awaiting_client.load(Ordering::Acquire) == 0 {
            return None;
        }
        let since = self.client_progress_us.load(Ordering::Acquire);
        Some(self.now_us().saturating_sub(since) / 1000)
    }

    /// Ask the connection's task to close it. The first reason wins, except
    /// that an abrupt reason overrides a graceful one still in progress (a
    /// draining connection whose client stops reading is still cut).
    pub fn close(&self, reason: CloseReason) {
        let mut current = self.close.load(Ordering::Acquire);
        loop {
            let cur = CloseReason::from_u8(current);
            let replace = cur == CloseReason::None || (cur.graceful() && !reason.graceful());
            if !replace {
                return;
            }
            match self.close.compare_exchange(
                current,
                reason as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.closed.notify_one();
                    return;
                }
                Err(actual) => current = actual,
            }
        }
    }

    pub fn close_reason(&self) -> CloseReason {
        CloseReason::from_u8(self.close.load(Ordering::Acquire))
    }

    /// Resolves when the close reason differs from `seen`.
    pub async fn close_requested(&self, seen: CloseReason) -> CloseReason {
        loop {
            let reason = self.close_reason();
            if reason != seen {
                return reason;
            }
            self.closed.notified().await;
        }
    }
}

/// Why a new connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// At the cap and every connection is busy.
    Full,
    /// This client already holds `max_per_ip` connections.
    PerIp,
}

/// A /64 for IPv6 (one customer's allocation), the address for IPv4.
fn ip_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

struct Inner {
    next_id: u64,
    conns: HashMap<u64, Arc<ConnState>>,
    per_ip: HashMap<IpAddr, usize>,
}

pub struct Registry {
    max: usize,
    max_per_ip: usize,
    epoch: Instant,
    open: AtomicUsize,
    inner: Mutex<Inner>,
}

/// A connection's place in the registry; leaving it frees the place.
pub struct Slot {
    id: u64,
    pub state: Arc<ConnState>,
    registry: Arc<Registry>,
    /// The listener's open-connections gauge: counts live sockets, so an
    /// evicted connection counts until its task has closed it.
    open_gauge: Gauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.remove(self.id);
        self.open_gauge.dec();
    }
}

impl Registry {
    pub fn new(max: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Registry {
            max,
            max_per_ip,
            epoch: Instant::now(),
            open: AtomicUsize::new(0),
            inner: Mutex::new(Inner {
                next_id: 0,
                conns: HashMap::new(),
                per_ip: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the maps half-updated
        // in a way that matters more than refusing to serve; keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Open connections as a fraction of the cap (0 when there is no cap).
    pub fn load(&self) -> f64 {
        if self.max == 0 {
            0.0
        } else {
            self.open() as f64 / self.max as f64
        }
    }

    /// Admit a new connection, evicting an unproductive one at the cap.
    /// Returns the slot, and the evicted connection's state if one was.
    pub fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        listener: Arc<str>,
        phase: Phase,
        open_gauge: Gauge,
    ) -> Result<(Slot, Option<Arc<ConnState>>), Refused> {
        let key = ip_key(peer);
        let mut inner = self.lock();
        if self.max_per_ip > 0 && inner.per_ip.get(&key).copied().unwrap_or(0) >= self.max_per_ip {
            return Err(Refused::PerIp);
        }
        let mut evicted = None;
        if self.max > 0 && inner.conns.len() >= self.max {
            // Half-sent heads and stalled handshakes first (the slowloris
            // signature), then idle keep-alives (often a real client's
            // pool); oldest first within each.
            let victim = inner
                .conns
                .iter()
                .filter(|(_, c)| c.phase().reclaimable())
                .max_by_key(|(_, c)| (c.phase() != Phase::Idle, c.phase_age_us()))
                .map(|(id, _)| *id);
            let Some(victim) = victim else {
                return Err(Refused::Full);
            };
            if let Some(state) = Self::forget(&mut inner, victim) {
                state.close(CloseReason::Reclaimed);
                evicted = Some(state);
            }
        }
        let id = inner.next_id;
        inner.next_id += 1;
        let state = Arc::new(ConnState::new(peer, listener, self.epoch, phase));
        inner.conns.insert(id, state.clone());
        *inner.per_ip.entry(key).or_insert(0) += 1;
        self.open.store(inner.conns.len(), Ordering::Relaxed);
        drop(inner);
        open_gauge.inc();
        Ok((
            Slot {
                id,
                state,
                registry: self.clone(),
                open_gauge,
            },
            evicted,
        ))
    }

    fn forget(inner: &mut Inner, id: u64) -> Option<Arc<ConnState>> {
        let state = inner.conns.remove(&id)?;
        let key = ip_key(state.peer);
        if let Some(n) = inner.per_ip.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                inner.per_ip.remove(&key);
            }
        }
        Some(state)
    }

    fn remove(&self, id: u64) {
        let mut inner = self.lock();
        Self::forget(&mut inner, id);
        self.open.store(inner.conns.len(), Ordering::Relaxed);
    }

    /// Visit every registered connection (for the deadline sweeper).
    pub fn for_each(&self, mut f: impl FnMut(&Arc<ConnState>)) {
        let inner = self.lock();
        for c in inner.conns.values() {
            f(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(
        r: &Arc<Registry>,
        ip: &str,
        phase: Phase,
    ) -> Result<(Slot, Option<Arc<ConnState>>), Refused> {
        r.admit(ip.parse().expect("ip"), "l".into(), phase, Gauge::default())
    }

    #[test]
    fn cap_is_shared_and_slots_free_on_drop() {
        let r = Registry::new(2, 0);
        let a = admit(&r, "192.0.2.1", Phase::Active).expect("a");
        let b = admit(&r, "192.0.2.2", Phase::Active).expect("b");
        assert_eq!(r.open(), 2);
        assert_eq!(
            admit(&r, "192.0.2.3", Phase::ReadingHead).err(),
            Some(Refused::Full),
            "all busy"
        );
        drop(a);
        assert_eq!(r.open(), 1);
        let _c = admit(&r, "192.0.2.3", Phase::ReadingHead).expect("room again");
        drop(b);
    }

    #[test]
    fn at_the_cap_the_oldest_unproductive_connection_is_evicted() {
        let r = Registry::new(3, 0);
        let (old_head, _) = admit(&r, "192.0.2.1", Phase::ReadingHead).expect("1");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (idle, _) = admit(&r, "192.0.2.2", Phase::ReadingHead).expect("2");
        idle.state.request_started();
        idle.state.request_finished();
        assert_eq!(idle.state.phase(), Phase::Idle);
        let (active, _) = admit(&r, "192.0.2.3", Phase::ReadingHead).expect("3");
        active.state.request_started();

        let (_new, evicted) =
            admit(&r, "192.0.2.4", Phase::ReadingHead).expect("admitted by eviction");
        let evicted = evicted.expect("someone was evicted");
        assert!(
            Arc::ptr_eq(&evicted, &old_head.state),
            "the oldest head-sender goes first"
        );
        assert_eq!(old_head.state.close_reason(), CloseReason::Reclaimed);
        assert_eq!(r.open(), 3, "the cap holds");
        assert_eq!(
            active.state.close_reason(),
            CloseReason::None,
            "active connections are never evicted"
        );
        drop(old_head); // its late drop must not free someone else's place
        assert_eq!(r.open(), 3);
    }

    #[test]
    fn per_ip_cap_counts_ipv6_by_64() {
        let r = Registry::new(0, 2);
        let _a = admit(&r, "2001:db8::1", Phase::Active).expect("a");
        let _b = admit(&r, "2001:db8::ffff", Phase::Active).expect("b");
        assert_eq!(
            admit(&r, "2001:db8:0:0:1::1", Phase::Active).err(),
            Some(Refused::PerIp)
        );
        let _c = admit(&r, "2001:db8:0:1::1", Phase::Active).expect("another /64");
    }

    #[test]
    fn h2_pings_do_not_make_an_idle_connection_busy() {
        let r = Registry::new(0, 0);
        let (s, _) = admit(&r, "192.0.2.1", Phase::ReadingHead).expect("a");
        s.state.set_h2();
        s.state.request_started();
        s.state.request_finished();
        s.state.bytes_received();
        assert_eq!(s.state.phase(), Phase::Idle);
        let (s1, _) = admit(&r, "192.0.2.2", Phase::ReadingHead).expect("b");
        s1.state.request_started();
        s1.state.request_finished();
        s1.state.bytes_received();
        assert_eq!(
            s1.state.phase(),
            Phase::ReadingHead,
            "HTTP/1.1 bytes after idle start a head"
        );
    }
}
