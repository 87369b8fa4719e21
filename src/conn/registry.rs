//! The process-wide connection registry: one cap shared by every listener,
//! an optional per-IP cap, and reclaiming under load.
//!
//! Being at the cap must not mean real clients wait behind attackers. Each
//! connection publishes its [`Phase`] through a [`ConnState`]. When a new
//! connection arrives at the cap, the registry evicts the connection that
//! has been doing no useful work the longest — in the TLS handshake, still
//! sending a request head, or idle between requests — and admits the
//! newcomer in its place. A connection with a request in flight (or an
//! upgraded tunnel) is never evicted; if every connection is busy, the
//! newcomer is refused.
//!
//! An evicted connection leaves the count at once (its task closes within
//! microseconds), so the number of live descriptors can briefly exceed the
//! cap by the evictions in progress; the FD budget's reserve covers that.
//!
//! The cap itself sizes memory and descriptors and is fixed at start; the
//! per-IP cap can change while running ([`Registry::set_max_per_ip`]).
//!
//! Cost at scale: admitting, leaving and evicting are O(1) whatever the
//! number of connections. Connections sit in a dense vector (an id → index
//! map beside it, removal by swap), so the victim is chosen from a random
//! sample of [`SAMPLE`] connections — the best of the sample, as Redis
//! picks its LRU victims — rather than by scanning them all under the lock
//! on every accept. Up to `4 × SAMPLE` connections the choice is exact. If
//! a sample holds nothing reclaimable, one full scan decides, and a "all
//! busy" answer is trusted for [`ALL_BUSY_FOR`] so a flood against a busy
//! server does not turn each refused accept into a scan. The deadline
//! sweeper walks the connections in chunks, taking the lock once per chunk
//! ([`Registry::for_each_chunked`]), so an accept never waits for a whole
//! sweep (`examples/registry_scale.rs` measures all three).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::state::{CloseReason, ConnState, Phase};
use crate::sync::Locked;

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

/// How many connections an eviction looks at.
pub(crate) const SAMPLE: usize = 64;
/// How long "every connection is busy" is trusted after a full scan.
pub(crate) const ALL_BUSY_FOR: std::time::Duration = std::time::Duration::from_millis(10);
/// Connections the sweeper visits per taking of the lock.
const CHUNK: usize = 1024;

struct Inner {
    next_id: u64,
    /// Dense, so a random sample is O(1); `index` maps an id to its place.
    entries: Vec<(u64, Arc<ConnState>)>,
    index: HashMap<u64, usize>,
    per_ip: HashMap<IpAddr, usize>,
    all_busy_until: Option<Instant>,
    rng: fastrand::Rng,
}

impl Inner {
    /// The reclaimable connection to evict: half-sent heads and stalled
    /// handshakes first (the slowloris signature), then idle keep-alives
    /// (often a real client's pool), then idle tunnels (a WebSocket that
    /// is quiet may still be wanted); oldest first within each.
    fn victim(&mut self) -> Option<u64> {
        let rank = |c: &ConnState| {
            let class = match c.phase() {
                Phase::Tunnel => 0,
                Phase::Idle => 1,
                _ => 2,
            };
            (class, c.phase_age_us())
        };
        let best_of = |it: &mut dyn Iterator<Item = &(u64, Arc<ConnState>)>| {
            it.filter(|(_, c)| c.reclaimable())
                .max_by_key(|(_, c)| rank(c))
                .map(|(id, _)| *id)
        };
        let n = self.entries.len();
        if n <= 4 * SAMPLE {
            return best_of(&mut self.entries.iter());
        }
        let picks: Vec<usize> = (0..SAMPLE).map(|_| self.rng.usize(..n)).collect();
        if let Some(id) = best_of(&mut picks.iter().map(|&i| &self.entries[i])) {
            return Some(id);
        }
        let now = Instant::now();
        if self.all_busy_until.is_some_and(|t| now < t) {
            return None;
        }
        let found = best_of(&mut self.entries.iter());
        self.all_busy_until = found.is_none().then_some(now + ALL_BUSY_FOR);
        found
    }
}

pub struct Registry {
    max: usize,
    max_per_ip: AtomicUsize,
    epoch: Instant,
    open: AtomicUsize,
    /// Woken whenever a connection leaves: a descriptor was freed.
    freed: Arc<Notify>,
    inner: Mutex<Inner>,
}

/// A connection's place in the registry; leaving it frees the place.
pub struct Slot {
    id: u64,
    pub(crate) state: Arc<ConnState>,
    registry: Arc<Registry>,
    /// The listener's open-connections gauge: counts live sockets, so an
    /// evicted connection counts until its task has closed it.
    open_gauge: Gauge,
}

impl Slot {
    /// Count this connection, admitted unattributed, under `client`'s
    /// per-IP cap; `Err(Refused::PerIp)` when the client is at the cap.
    pub(crate) fn attribute(&self, client: IpAddr) -> Result<(), Refused> {
        self.registry.attribute(self.id, &self.state, client)
    }
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
            max_per_ip: AtomicUsize::new(max_per_ip),
            epoch: Instant::now(),
            open: AtomicUsize::new(0),
            freed: Arc::new(Notify::new()),
            inner: Mutex::new(Inner {
                next_id: 0,
                entries: Vec::new(),
                index: HashMap::new(),
                per_ip: HashMap::new(),
                all_busy_until: None,
                // Seeded: which connection is evicted is reproducible.
                rng: fastrand::Rng::with_seed(0x5eed),
            }),
        })
    }

    /// Change the per-IP cap; connections over a lowered cap stay, new
    /// ones are refused until the client is under it.
    pub(crate) fn set_max_per_ip(&self, max_per_ip: usize) {
        self.max_per_ip.store(max_per_ip, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the maps half-updated
        // in a way that matters more than refusing to serve; keep going.
        self.inner.locked()
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Open connections as a fraction of the cap (0 when there is no cap).
    pub(crate) fn load(&self) -> f64 {
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
        self.admit_as(peer, true, listener, phase, open_gauge)
    }

    /// Admit a connection from a balancer that will name the client in a
    /// PROXY header: under the process-wide cap now, under the per-IP cap
    /// only once [`Slot::attribute`] is given the client's address (the
    /// balancer's own address is not a client's, and must not fill its
    /// per-IP count).
    pub(crate) fn admit_unattributed(
        self: &Arc<Self>,
        socket_peer: IpAddr,
        listener: Arc<str>,
        phase: Phase,
        open_gauge: Gauge,
    ) -> Result<(Slot, Option<Arc<ConnState>>), Refused> {
        self.admit_as(socket_peer, false, listener, phase, open_gauge)
    }

    fn admit_as(
        self: &Arc<Self>,
        peer: IpAddr,
        per_ip: bool,
        listener: Arc<str>,
        phase: Phase,
        open_gauge: Gauge,
    ) -> Result<(Slot, Option<Arc<ConnState>>), Refused> {
        let key = ip_key(peer);
        let mut inner = self.lock();
        let max_per_ip = self.max_per_ip.load(Ordering::Relaxed);
        if per_ip && max_per_ip > 0 && inner.per_ip.get(&key).copied().unwrap_or(0) >= max_per_ip {
            return Err(Refused::PerIp);
        }
        let mut evicted = None;
        if self.max > 0 && inner.entries.len() >= self.max {
            let Some(victim) = inner.victim() else {
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
        let at = inner.entries.len();
        inner.entries.push((id, state.clone()));
        inner.index.insert(id, at);
        if per_ip {
            *inner.per_ip.entry(key).or_insert(0) += 1;
            let _ = state.counted_as.set(peer);
        }
        self.open.store(inner.entries.len(), Ordering::Relaxed);
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

    /// Count an unattributed connection under `client`'s per-IP cap, or
    /// refuse it if the client is at the cap. A connection already
    /// evicted is not counted (its task is closing it).
    fn attribute(&self, id: u64, state: &ConnState, client: IpAddr) -> Result<(), Refused> {
        let key = ip_key(client);
        let mut inner = self.lock();
        if !inner.index.contains_key(&id) || state.counted_as.get().is_some() {
            return Ok(());
        }
        let max_per_ip = self.max_per_ip.load(Ordering::Relaxed);
        if max_per_ip > 0 && inner.per_ip.get(&key).copied().unwrap_or(0) >= max_per_ip {
            return Err(Refused::PerIp);
        }
        *inner.per_ip.entry(key).or_insert(0) += 1;
        let _ = state.counted_as.set(client);
        Ok(())
    }

    fn forget(inner: &mut Inner, id: u64) -> Option<Arc<ConnState>> {
        let at = inner.index.remove(&id)?;
        let (_, state) = inner.entries.swap_remove(at);
        if let Some((moved, _)) = inner.entries.get(at) {
            inner.index.insert(*moved, at);
        }
        // An unattributed connection was never counted per IP.
        if let Some(&counted) = state.counted_as.get() {
            let key = ip_key(counted);
            if let Some(n) = inner.per_ip.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    inner.per_ip.remove(&key);
                }
            }
        }
        Some(state)
    }

    fn remove(&self, id: u64) {
        let mut inner = self.lock();
        Self::forget(&mut inner, id);
        self.open.store(inner.entries.len(), Ordering::Relaxed);
        drop(inner);
        self.freed.notify_waiters();
    }

    /// Notified each time a connection's slot is released (its socket is
    /// closed with it): an accept loop backing off on EMFILE can try again.
    pub(crate) fn freed(&self) -> Arc<Notify> {
        self.freed.clone()
    }

    /// Visit the registered connections (for the deadline sweeper), a
    /// chunk per taking of the lock, with the lock released while `f` runs.
    /// Connections that come or go during the walk may be missed or seen
    /// twice by it; the next sweep sees them.
    pub(crate) fn for_each_chunked(&self, mut f: impl FnMut(&Arc<ConnState>)) {
        let mut chunk: Vec<Arc<ConnState>> = Vec::with_capacity(CHUNK);
        let mut at = 0;
        loop {
            {
                let inner = self.lock();
                let end = (at + CHUNK).min(inner.entries.len());
                chunk.extend(
                    inner.entries[at.min(end)..end]
                        .iter()
                        .map(|(_, c)| c.clone()),
                );
            }
            if chunk.is_empty() {
                return;
            }
            at += chunk.len();
            for c in chunk.drain(..) {
                f(&c);
            }
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

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_oldest_unproductive_connection_is_evicted() {
        let r = Registry::new(3, 0);
        let (old_head, _) = admit(&r, "192.0.2.1", Phase::ReadingHead).expect("1");
        tokio::time::advance(std::time::Duration::from_millis(5)).await;
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

    #[tokio::test(start_paused = true)]
    async fn a_sampled_eviction_takes_an_old_head_and_finds_a_lone_one() {
        // 2,000 heads of ages 2,000 ms (the first) … 1 ms (the last).
        let r = Registry::new(2000, 0);
        let mut slots = Vec::new();
        for i in 0..2000u32 {
            let ip = format!("10.0.{}.{}", i / 250, i % 250);
            slots.push(admit(&r, &ip, Phase::ReadingHead).expect("fill").0);
            tokio::time::advance(std::time::Duration::from_millis(1)).await;
        }
        for _ in 0..50 {
            let (s, evicted) = admit(&r, "192.0.2.9", Phase::Active).expect("evicts");
            let evicted = evicted.expect("a victim");
            let rank = slots
                .iter()
                .position(|s| Arc::ptr_eq(&s.state, &evicted))
                .expect("one of the heads");
            assert!(rank < 500, "a victim from the oldest quarter, not {rank}");
            slots.push(s);
        }
        assert_eq!(r.open(), 2000);

        // Every connection busy but one idle: the sample misses it, the
        // full scan finds it.
        let r = Registry::new(1000, 0);
        let mut held = Vec::new();
        for i in 0..1000u32 {
            let (s, _) =
                admit(&r, &format!("10.1.{}.{}", i / 250, i % 250), Phase::Active).expect("fill");
            if i != 777 {
                s.state.request_started();
            } else {
                s.state.request_started();
                s.state.request_finished();
            }
            held.push(s);
        }
        let (_new, evicted) = admit(&r, "192.0.2.10", Phase::Active).expect("the lone idle");
        assert!(Arc::ptr_eq(&evicted.expect("victim"), &held[777].state));
        assert_eq!(
            admit(&r, "192.0.2.11", Phase::Active).err(),
            Some(Refused::Full),
            "now every connection is busy"
        );
        // That answer is trusted for ALL_BUSY_FOR (refusals meanwhile only
        // sample); a connection that went idle is found by the first full
        // scan after it.
        held[5].state.request_finished();
        tokio::time::advance(ALL_BUSY_FOR).await;
        let (_late, evicted) =
            admit(&r, "192.0.2.13", Phase::Active).expect("found by the next scan");
        assert!(Arc::ptr_eq(&evicted.expect("victim"), &held[5].state));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_tunnel_is_reclaimed_after_idle_keepalives_and_a_busy_one_never() {
        let r = Registry::new(3, 0);
        let (tunnel, _) = admit(&r, "192.0.2.1", Phase::Active).expect("1");
        tunnel.state.request_started();
        tunnel.state.upgraded();
        let (busy, _) = admit(&r, "192.0.2.2", Phase::Active).expect("2");
        busy.state.request_started();
        busy.state.upgraded();
        let (idle, _) = admit(&r, "192.0.2.3", Phase::ReadingHead).expect("3");
        idle.state.request_started();
        idle.state.request_finished();
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
        busy.state.tunnel_active();
        let (_a, evicted) = admit(&r, "192.0.2.4", Phase::Active).expect("evicts");
        assert!(
            Arc::ptr_eq(&evicted.expect("victim"), &idle.state),
            "keep-alives first"
        );
        let (_b, evicted) = admit(&r, "192.0.2.5", Phase::Active).expect("evicts");
        assert!(
            Arc::ptr_eq(&evicted.expect("victim"), &tunnel.state),
            "then the idle tunnel"
        );
        assert_eq!(tunnel.state.close_reason(), CloseReason::Reclaimed);
        assert_eq!(
            admit(&r, "192.0.2.6", Phase::Active).err(),
            Some(Refused::Full),
            "a tunnel that just carried bytes is busy"
        );
    }

    #[test]
    fn removal_keeps_the_index_true() {
        let r = Registry::new(0, 0);
        let mut slots: Vec<Slot> = (0..300u32)
            .map(|i| {
                admit(&r, &format!("10.2.{}.{}", i / 250, i % 250), Phase::Active)
                    .expect("a")
                    .0
            })
            .collect();
        // Drop from the middle, the front and the back, in a scrambled order.
        for i in [150usize, 0, 297, 10, 100] {
            slots.remove(i.min(slots.len() - 1));
        }
        assert_eq!(r.open(), 295);
        let mut seen = 0;
        r.for_each_chunked(|_| seen += 1);
        assert_eq!(seen, 295);
        drop(slots);
        assert_eq!(r.open(), 0);
        let mut seen = 0;
        r.for_each_chunked(|_| seen += 1);
        assert_eq!(seen, 0);
    }

    #[test]
    fn per_ip_cap_counts_ipv6_by_64_and_can_change() {
        let r = Registry::new(0, 2);
        let _a = admit(&r, "2001:db8::1", Phase::Active).expect("a");
        let _b = admit(&r, "2001:db8::ffff", Phase::Active).expect("b");
        assert_eq!(
            admit(&r, "2001:db8:0:0:1::1", Phase::Active).err(),
            Some(Refused::PerIp)
        );
        let _c = admit(&r, "2001:db8:0:1::1", Phase::Active).expect("another /64");
        r.set_max_per_ip(3);
        let _d = admit(&r, "2001:db8:0:0:1::1", Phase::Active).expect("raised cap");
    }

    #[test]
    fn a_balancers_connections_count_under_the_clients_they_name() {
        let r = Registry::new(3, 1);
        let lb: IpAddr = "10.0.0.1".parse().expect("ip");
        let unattributed = |r: &Arc<Registry>| {
            r.admit_unattributed(lb, "l".into(), Phase::ReadingHead, Gauge::default())
                .expect("admitted")
                .0
        };
        // The balancer's own address never fills a per-IP count.
        let a = unattributed(&r);
        let b = unattributed(&r);
        assert_eq!(
            a.state.peer(),
            lb,
            "the socket's peer until a header names one"
        );
        a.attribute("192.0.2.1".parse().expect("ip"))
            .expect("first client");
        assert_eq!(a.state.peer().to_string(), "192.0.2.1");
        assert_eq!(
            b.attribute("192.0.2.1".parse().expect("ip")),
            Err(Refused::PerIp),
            "the named client is at its cap"
        );
        b.attribute("192.0.2.2".parse().expect("ip"))
            .expect("another client");
        assert_eq!(
            admit(&r, "192.0.2.2", Phase::Active).err(),
            Some(Refused::PerIp),
            "counted like a direct connection of that client"
        );
        // The global cap still holds for unattributed connections.
        let c = unattributed(&r);
        for busy in [&a, &b, &c] {
            busy.state.request_started();
        }
        assert_eq!(
            r.admit_unattributed(lb, "l".into(), Phase::Active, Gauge::default())
                .err(),
            Some(Refused::Full)
        );
        drop(a);
        let _d = admit(&r, "192.0.2.1", Phase::Active).expect("the client's count was freed");
        drop(c);
        // An evicted, unattributed connection is not counted later.
        let r = Registry::new(1, 1);
        let e = unattributed(&r);
        let (f, evicted) = admit(&r, "192.0.2.9", Phase::Active).expect("evicts");
        assert!(evicted.is_some());
        e.attribute("192.0.2.3".parse().expect("ip"))
            .expect("nothing to count");
        drop(f);
        let _g = admit(&r, "192.0.2.3", Phase::Active).expect("192.0.2.3 holds no count");
        drop(e);
        assert_eq!(r.open(), 1, "the evicted slot's drop frees nothing else");
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
