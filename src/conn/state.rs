//! What one connection is doing, published for the rest of weir to read:
//! its [`Phase`] and when it began, requests in flight, whether writes to
//! the client are blocked, and why weir wants it closed. All atomics, so the
//! deadline sweeper and the registry read it without locks, and so a reader
//! on the request path never waits on the connection's task.
//!
//! Time comes from `tokio::time::Instant`, so tests of deadlines built on
//! this state run under paused time.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use tokio::sync::Notify;
use tokio::time::Instant;

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
    pub(crate) fn reclaimable(self) -> bool {
        matches!(self, Phase::Handshake | Phase::ReadingHead | Phase::Idle)
    }
}

/// A tunnel is idle, and reclaimable at the connection cap, after this
/// long without a byte (as for the request gates' reclaim: `admit::fair`).
pub(crate) const TUNNEL_IDLE_MIN_US: u64 = 1_000_000;

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
    pub(crate) fn graceful(self) -> bool {
        matches!(self, CloseReason::IdleTimeout | CloseReason::MaxRequests)
    }

    pub(crate) fn label(self) -> &'static str {
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
    /// The TCP peer: the client, or the balancer that sent a PROXY header.
    socket_peer: IpAddr,
    /// The client's address as the per-IP cap counts it, set by the
    /// registry when it counts the connection: at admission, or — behind
    /// a balancer — once the PROXY header has named the client.
    pub(super) counted_as: std::sync::OnceLock<IpAddr>,
    pub(crate) listener: Arc<str>,
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
    /// Bytes of the next request head have arrived (cleared when the head
    /// is parsed): an HTTP/1.1 connection with this set is not idle, and
    /// a drain does not close it.
    head_heard: AtomicBool,
    close: AtomicU8,
    /// See [`Park`].
    park: AtomicU8,
    /// The close reason has been counted in the metrics.
    counted: AtomicBool,
    /// Wakes the connection's task: a close reason was set, or parking
    /// was asked for.
    closed: Notify,
}

/// Where an idle HTTP/1.1 connection is in giving up its buffers: the
/// sweeper asks, the connection's reader ends hyper's connection at the
/// next read while still idle, and the task waits for the next byte with
/// only the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Park {
    No = 0,
    Requested = 1,
    /// hyper was told the client left; its connection is being taken apart.
    Parked = 2,
    /// Parked, waiting for the client's next byte with only the socket.
    Waiting = 3,
}

/// What woke a connection's task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    Close(CloseReason),
    Park,
}

impl ConnState {
    pub(super) fn new(peer: IpAddr, listener: Arc<str>, epoch: Instant, phase: Phase) -> Self {
        let s = ConnState {
            socket_peer: peer,
            counted_as: std::sync::OnceLock::new(),
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
            head_heard: AtomicBool::new(false),
            close: AtomicU8::new(0),
            park: AtomicU8::new(Park::No as u8),
            counted: AtomicBool::new(false),
            closed: Notify::new(),
        };
        s.since_us.store(s.now_us(), Ordering::Relaxed);
        s
    }

    /// The client's address: the one a PROXY header carried, once read,
    /// else the TCP peer.
    pub(crate) fn peer(&self) -> IpAddr {
        self.counted_as.get().copied().unwrap_or(self.socket_peer)
    }

    fn now_us(&self) -> u64 {
        // Never 0, so 0 can mean "unset".
        self.epoch.elapsed().as_micros() as u64 + 1
    }

    pub(crate) fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// Microseconds the connection has been in its current phase.
    pub(crate) fn phase_age_us(&self) -> u64 {
        self.now_us()
            .saturating_sub(self.since_us.load(Ordering::Acquire))
    }

    pub(crate) fn phase_age_ms(&self) -> u64 {
        self.phase_age_us() / 1000
    }

    fn set_phase(&self, phase: Phase) {
        self.since_us.store(self.now_us(), Ordering::Release);
        self.phase.store(phase as u8, Ordering::Release);
    }

    pub(crate) fn is_h2(&self) -> bool {
        self.is_h2.load(Ordering::Relaxed)
    }

    pub(crate) fn park_state(&self) -> Park {
        match self.park.load(Ordering::Acquire) {
            1 => Park::Requested,
            2 => Park::Parked,
            3 => Park::Waiting,
            _ => Park::No,
        }
    }

    /// Ask an idle HTTP/1.1 connection to give up its buffers (the
    /// sweeper's call). Returns whether this asked.
    pub(crate) fn request_park(&self) -> bool {
        if self.phase() != Phase::Idle || self.is_h2() {
            return false;
        }
        let asked = self
            .park
            .compare_exchange(
                Park::No as u8,
                Park::Requested as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if asked {
            self.closed.notify_one();
        }
        asked
    }

    /// The connection's task acts on a park request: parked if the
    /// connection is still idle and nothing is waiting to be written,
    /// otherwise the request is dropped (the sweeper may ask again).
    pub(crate) fn confirm_park(&self) -> bool {
        let ok = self.phase() == Phase::Idle && self.write_blocked_for_ms().is_none();
        let to = if ok { Park::Parked } else { Park::No };
        self.park
            .compare_exchange(
                Park::Requested as u8,
                to as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
            && ok
    }

    /// hyper's connection is gone; the next byte is awaited.
    pub(crate) fn park_waiting(&self) {
        self.park.store(Park::Waiting as u8, Ordering::Release);
    }

    /// Serving again after a park.
    pub(crate) fn unpark(&self) {
        self.park.store(Park::No as u8, Ordering::Release);
    }

    /// The client speaks HTTP/2 (ALPN, or the cleartext preface arrived).
    pub(crate) fn set_h2(&self) {
        self.is_h2.store(true, Ordering::Relaxed);
    }

    /// The TLS handshake finished.
    pub(crate) fn handshake_done(&self) {
        self.set_phase(Phase::ReadingHead);
    }

    /// Bytes arrived: an idle HTTP/1.1 connection is now sending a head.
    /// (HTTP/2 frames while idle — PINGs — are not a new request.)
    pub(crate) fn bytes_received(&self) {
        match self.phase() {
            Phase::Idle if !self.is_h2.load(Ordering::Relaxed) => {
                self.head_heard.store(true, Ordering::Relaxed);
                self.set_phase(Phase::ReadingHead);
            }
            Phase::ReadingHead if !self.head_heard.load(Ordering::Relaxed) => {
                self.head_heard.store(true, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Microseconds an HTTP/1.1 connection has waited with nothing of a
    /// request arrived: idle between requests, or new and silent. `None`
    /// while a head is arriving, a request is in flight, or it is a
    /// tunnel — a drain closes a connection only once this has lasted its
    /// grace.
    pub(crate) fn quiet_for_us(&self) -> Option<u64> {
        match self.phase() {
            Phase::Idle => Some(self.phase_age_us()),
            Phase::Handshake | Phase::ReadingHead if !self.head_heard.load(Ordering::Acquire) => {
                Some(self.phase_age_us())
            }
            _ => None,
        }
    }

    /// A request head was parsed. Returns how many requests this
    /// connection has now started.
    pub(crate) fn request_started(&self) -> u64 {
        self.head_heard.store(false, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        if self.phase() != Phase::Tunnel {
            self.set_phase(Phase::Active);
        }
        self.requests.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// A response body ended (or was dropped).
    pub(crate) fn request_finished(&self) {
        let before = self.in_flight.fetch_sub(1, Ordering::AcqRel);
        if before == 1 && self.phase() == Phase::Active {
            self.set_phase(Phase::Idle);
        }
    }

    /// The connection became a tunnel (WebSocket).
    pub(crate) fn upgraded(&self) {
        self.set_phase(Phase::Tunnel);
    }

    /// A tunnel carried a byte: its phase age is its idle time, which the
    /// registry reads when it looks for a connection to reclaim.
    pub(crate) fn tunnel_active(&self) {
        if self.phase() == Phase::Tunnel {
            self.since_us.store(self.now_us(), Ordering::Release);
        }
    }

    /// Whether the connection may be closed to make room for others: a
    /// half-sent head, a stalled handshake, an idle keep-alive, or a
    /// tunnel that carried nothing for [`TUNNEL_IDLE_MIN_US`].
    pub(crate) fn reclaimable(&self) -> bool {
        let phase = self.phase();
        phase.reclaimable() || (phase == Phase::Tunnel && self.phase_age_us() >= TUNNEL_IDLE_MIN_US)
    }

    pub(crate) fn write_blocked(&self, blocked: bool) {
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
    pub(crate) fn write_blocked_for_ms(&self) -> Option<u64> {
        match self.write_blocked_us.load(Ordering::Acquire) {
            0 => None,
            since => Some(self.now_us().saturating_sub(since) / 1000),
        }
    }

    /// A response body handed hyper a frame; until hyper asks for the next
    /// one the client has to read (or grant HTTP/2 window).
    pub(crate) fn body_handed_off(&self) {
        if self.awaiting_client.fetch_add(1, Ordering::AcqRel) == 0 {
            self.client_progress_us
                .store(self.now_us(), Ordering::Release);
        }
    }

    /// hyper came back for more: the client made progress.
    pub(crate) fn body_taken(&self) {
        self.client_progress_us
            .store(self.now_us(), Ordering::Release);
        self.awaiting_client.fetch_sub(1, Ordering::AcqRel);
    }

    /// Milliseconds the client has made no progress on any response that
    /// is waiting for it, if one is.
    pub(crate) fn body_stalled_for_ms(&self) -> Option<u64> {
        if self.awaiting_client.load(Ordering::Acquire) == 0 {
            return None;
        }
        let since = self.client_progress_us.load(Ordering::Acquire);
        Some(self.now_us().saturating_sub(since) / 1000)
    }

    /// Ask the connection's task to close it. The first reason wins, except
    /// that an abrupt reason overrides a graceful one still in progress (a
    /// draining connection whose client stops reading is still cut).
    pub(crate) fn close(&self, reason: CloseReason) {
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

    /// True the first time only: the close is counted once, whichever
    /// path gets there first.
    pub(crate) fn first_count(&self) -> bool {
        !self.counted.swap(true, Ordering::AcqRel)
    }

    pub(crate) fn close_reason(&self) -> CloseReason {
        CloseReason::from_u8(self.close.load(Ordering::Acquire))
    }

    /// Resolves when the close reason differs from `seen`, or parking was
    /// asked for (and not yet acted on) — one waiter for both, since
    /// both share one notification.
    pub(crate) async fn woken(&self, seen: CloseReason) -> Wake {
        loop {
            let reason = self.close_reason();
            if reason != seen {
                return Wake::Close(reason);
            }
            if self.park_state() == Park::Requested {
                return Wake::Park;
            }
            self.closed.notified().await;
        }
    }

    /// Resolves when the close reason differs from `seen`.
    pub(crate) async fn close_requested(&self, seen: CloseReason) -> CloseReason {
        loop {
            let reason = self.close_reason();
            if reason != seen {
                return reason;
            }
            self.closed.notified().await;
        }
    }
}
