//! A fair gate: a bound on requests in flight where, when the gate is
//! (nearly) full, the client holding the most slots loses first.
//!
//! The rules (docs/operations.md, "Fair shedding"):
//! - While more than the *headroom* (1/16 of the limit, rounded down) is
//!   free, any request takes a slot.
//! - Within the headroom, a request from the client that holds the most
//!   slots (ties included) is shed; every other client is still admitted,
//!   so a newcomer with nothing in flight finds a slot.
//! - At a full gate, a client holding fewer slots than the heaviest takes
//!   over the slot of one of the heaviest client's idle tunnels (idle
//!   longest first), and that tunnel is closed; with none, it is shed.
//!
//! The client is a peer address (IPv6 by /64), counted in a fixed table of
//! [`BUCKETS`] counters indexed by a seeded hash of the address: admitting
//! a request is the semaphore's atomic plus one more on the bucket — no
//! lock, no map, no allocation. Two clients in one bucket count as one (the
//! seed is per gate and per process, so a client cannot aim at another's
//! bucket). Who is heaviest is found by scanning the table, only within
//! the headroom and at most once per [`RESCAN`]; the tunnels a gate can
//! reclaim sit in a list under a lock that only upgrades and a full gate
//! take.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use crate::sync::{Locked, Rescan, bucket};

/// Counters per gate: 16 KiB, enough that the clients of a gate of a few
/// thousand slots rarely share one.
pub(crate) const BUCKETS: usize = 4096;
/// How long a scan for the heaviest client is trusted.
pub(crate) const RESCAN: Duration = Duration::from_millis(10);
/// A tunnel that carried a byte more recently than this is not idle, and
/// is never reclaimed.
pub(crate) const TUNNEL_IDLE_MIN: Duration = Duration::from_secs(1);

/// Why a gate refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Every slot is taken and no lighter client's claim could be met.
    Full,
    /// Within the headroom, and this client holds the most slots.
    Heaviest,
}

/// A bound on concurrent requests. `None` inside means no bound at all: no
/// semaphore, no atomic operations, exactly as without a gate.
#[derive(Clone, Default)]
pub(crate) struct Gate(Option<Arc<Inner>>);

struct Inner {
    sem: Semaphore,
    /// Free slots at or below which the heaviest client is shed.
    headroom: usize,
    /// `None` for gates that are one client's already (a token's).
    fair: Option<Fair>,
}

struct Fair {
    counts: Box<[AtomicU32]>,
    seed: u64,
    /// The last scan: the heaviest count (high 32 bits) and its bucket.
    heaviest: Rescan,
    /// The tunnels holding a slot of this gate, for reclaiming.
    tunnels: Mutex<Vec<Arc<Ticket>>>,
}

impl Gate {
    /// A plain gate for `limit` requests; 0 disables it.
    pub(crate) fn new(limit: usize) -> Self {
        Gate((limit > 0).then(|| {
            Arc::new(Inner {
                sem: Semaphore::new(limit),
                headroom: 0,
                fair: None,
            })
        }))
    }

    /// A fair gate for `limit` requests; 0 disables it.
    pub(crate) fn fair(limit: usize) -> Self {
        Gate((limit > 0).then(|| {
            Arc::new(Inner {
                sem: Semaphore::new(limit),
                headroom: limit / 16,
                fair: Some(Fair::new()),
            })
        }))
    }

    /// Take a slot for `client`, or say why not. `Ok(None)` when there is
    /// no gate.
    pub(crate) fn try_enter(&self, client: IpAddr) -> Result<Option<Slot>, Refused> {
        let Some(g) = &self.0 else {
            return Ok(None);
        };
        let Some(fair) = &g.fair else {
            let permit = g.sem.try_acquire().map_err(|_| Refused::Full)?;
            permit.forget();
            return Ok(Some(Slot::new(g, 0)));
        };
        let bucket = fair.bucket(client);
        match g.sem.try_acquire() {
            Ok(permit) => {
                if g.sem.available_permits() < g.headroom && fair.is_heaviest(bucket) {
                    return Err(Refused::Heaviest);
                }
                permit.forget();
                fair.counts[bucket].fetch_add(1, Ordering::Relaxed);
                Ok(Some(Slot::new(g, bucket)))
            }
            Err(_) => match fair.hand_over(bucket) {
                true => Ok(Some(Slot::new(g, bucket))),
                false => Err(Refused::Full),
            },
        }
    }

    /// Slots in use (for tests; 0 without a gate).
    #[cfg(test)]
    pub(crate) fn in_use(&self, limit: usize) -> usize {
        self.0
            .as_ref()
            .map_or(0, |g| limit - g.sem.available_permits())
    }
}

impl Fair {
    fn new() -> Self {
        Fair {
            counts: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
            // Odd, so the multiply below is a bijection.
            seed: fastrand::u64(..) | 1,
            heaviest: Rescan::new(RESCAN),
            tunnels: Mutex::new(Vec::new()),
        }
    }

    /// The client's bucket: IPv4 by address, IPv6 by /64 (one customer's
    /// allocation, as the per-IP connection cap counts).
    fn bucket(&self, client: IpAddr) -> usize {
        let key = match client {
            IpAddr::V4(a) => u64::from(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => u64::from(u32::from(v4)),
                None => (u128::from(a) >> 64) as u64 ^ (1 << 63),
            },
        };
        bucket(key, self.seed, BUCKETS)
    }

    /// The heaviest count and its bucket, from a scan at most [`RESCAN`]
    /// old (one caller rescans; the others read the last one).
    fn heaviest(&self) -> (u32, usize) {
        let packed = self.heaviest.get(|| self.scan());
        ((packed >> 32) as u32, (packed & 0xffff_ffff) as usize)
    }

    /// The heaviest count (high 32 bits) and its bucket, packed.
    fn scan(&self) -> u64 {
        let (count, bucket) = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, c)| (c.load(Ordering::Relaxed), i))
            .max()
            .unwrap_or((0, 0));
        (u64::from(count) << 32) | bucket as u64
    }

    /// Whether `bucket` holds the most slots (ties included); a client with
    /// nothing in flight never does.
    fn is_heaviest(&self, bucket: usize) -> bool {
        let mine = self.counts[bucket].load(Ordering::Relaxed);
        mine > 0 && mine >= self.heaviest().0
    }

    /// At a full gate: if `bucket` holds fewer slots than the heaviest
    /// client, take over the slot of the idle tunnel of the heaviest
    /// client that has been idle longest, and tell it to close.
    fn hand_over(&self, bucket: usize) -> bool {
        let mine = self.counts[bucket].load(Ordering::Relaxed);
        let mut tunnels = self.tunnels.locked();
        if tunnels.is_empty() {
            return false;
        }
        let (heaviest, _) = self.heaviest();
        if mine >= heaviest {
            return false;
        }
        let now = Instant::now();
        // Among the tunnels of clients heavier than this one: the heaviest
        // client first, then the one idle longest.
        let victim = tunnels
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                now.saturating_duration_since(t.tunnel.last_active()) >= TUNNEL_IDLE_MIN
            })
            .map(|(i, t)| (self.counts[t.bucket].load(Ordering::Relaxed), t, i))
            .filter(|(count, _, _)| *count > mine)
            .max_by_key(|(count, t, _)| (*count, std::cmp::Reverse(t.tunnel.last_active())))
            .map(|(_, _, i)| i);
        let Some(i) = victim else {
            return false;
        };
        let ticket = tunnels.swap_remove(i);
        drop(tunnels);
        if ticket.handed.swap(true, Ordering::AcqRel) {
            // The tunnel ended meanwhile and gave its slot back itself.
            return false;
        }
        self.counts[ticket.bucket].fetch_sub(1, Ordering::Relaxed);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        ticket.tunnel.reclaim();
        true
    }
}

/// A request's slot in one gate; dropping it frees the slot (unless it was
/// handed over to another client while its tunnel was idle).
pub(crate) struct Slot {
    gate: Arc<Inner>,
    bucket: usize,
    ticket: Option<Arc<Ticket>>,
}

impl Slot {
    fn new(gate: &Arc<Inner>, bucket: usize) -> Self {
        Slot {
            gate: gate.clone(),
            bucket,
            ticket: None,
        }
    }

    /// This slot now holds `tunnel`: a fair gate may reclaim it.
    pub(crate) fn hold_tunnel(&mut self, tunnel: &Arc<Tunnel>) {
        let Some(fair) = &self.gate.fair else {
            return;
        };
        let ticket = Arc::new(Ticket {
            bucket: self.bucket,
            tunnel: tunnel.clone(),
            handed: AtomicBool::new(false),
        });
        fair.tunnels.locked().push(ticket.clone());
        self.ticket = Some(ticket);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            if let Some(fair) = &self.gate.fair {
                fair.tunnels.locked().retain(|t| !Arc::ptr_eq(t, &ticket));
            }
            if ticket.handed.swap(true, Ordering::AcqRel) {
                // Handed over: the slot (and its count) is another's now.
                return;
            }
        }
        if let Some(fair) = &self.gate.fair {
            fair.counts[self.bucket].fetch_sub(1, Ordering::Relaxed);
        }
        self.gate.sem.add_permits(1);
    }
}

/// A tunnel's slot in a gate's list of reclaimable tunnels.
struct Ticket {
    bucket: usize,
    tunnel: Arc<Tunnel>,
    /// Set once, by whichever comes first: the gate handing the slot over,
    /// or the tunnel's end giving it back.
    handed: AtomicBool,
}

/// What a gate knows of an open tunnel: when it last carried a byte, and
/// whether a gate took its slot (then it must close).
pub(crate) struct Tunnel {
    opened: Instant,
    /// Milliseconds after `opened` of the last byte either way.
    last_ms: AtomicU64,
    reclaimed: AtomicBool,
    wake: Notify,
}

impl Tunnel {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Tunnel {
            opened: Instant::now(),
            last_ms: AtomicU64::new(0),
            reclaimed: AtomicBool::new(false),
            wake: Notify::new(),
        })
    }

    /// A byte went through (either way).
    pub(crate) fn touch(&self) {
        let ms = self.opened.elapsed().as_millis() as u64;
        if self.last_ms.load(Ordering::Relaxed) != ms {
            self.last_ms.store(ms, Ordering::Relaxed);
        }
    }

    /// When the tunnel last carried a byte (or opened).
    pub(crate) fn last_active(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    fn reclaim(&self) {
        self.reclaimed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Resolves once a gate has taken the tunnel's slot for another client.
    pub(crate) async fn reclaimed(&self) {
        loop {
            let notified = self.wake.notified();
            if self.reclaimed.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn within_the_headroom_the_heaviest_client_is_shed_and_a_newcomer_admitted() {
        let gate = Gate::fair(32); // headroom 2
        let heavy = ip("192.0.2.1");
        let mut held: Vec<Slot> = (0..30)
            .map(|_| gate.try_enter(heavy).expect("room").expect("gated"))
            .collect();
        assert_eq!(gate.try_enter(heavy).err(), Some(Refused::Heaviest));
        held.push(
            gate.try_enter(ip("192.0.2.2"))
                .expect("newcomer")
                .expect("gated"),
        );
        held.push(
            gate.try_enter(ip("192.0.2.3"))
                .expect("newcomer")
                .expect("gated"),
        );
        assert_eq!(gate.in_use(32), 32);
        assert_eq!(
            gate.try_enter(ip("192.0.2.4")).err(),
            Some(Refused::Full),
            "full, and no tunnel to take over"
        );
        drop(held);
        assert_eq!(gate.in_use(32), 0);
    }

    #[test]
    fn a_small_gate_has_no_headroom() {
        let gate = Gate::fair(2);
        let a = ip("192.0.2.1");
        let _one = gate.try_enter(a).expect("1");
        let _two = gate.try_enter(a).expect("2: a lone client may fill it");
        assert_eq!(gate.try_enter(a).err(), Some(Refused::Full));
    }

    #[tokio::test(start_paused = true)]
    async fn at_a_full_gate_a_lighter_client_takes_an_idle_tunnels_slot() {
        let gate = Gate::fair(3);
        let heavy = ip("2001:db8::1");
        let mut tunnels = Vec::new();
        for _ in 0..3 {
            let mut slot = gate.try_enter(heavy).expect("room").expect("gated");
            let t = Tunnel::new();
            slot.hold_tunnel(&t);
            tunnels.push((slot, t));
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        let other = ip("192.0.2.7");
        assert_eq!(
            gate.try_enter(other).err(),
            Some(Refused::Full),
            "tunnels that just carried bytes are not idle"
        );
        tokio::time::advance(TUNNEL_IDLE_MIN).await;
        tunnels[0].1.touch();
        let taken = gate.try_enter(other).expect("an idle tunnel's slot");
        assert!(taken.is_some());
        assert!(
            tunnels[1].1.reclaimed.load(Ordering::Acquire),
            "idle longest"
        );
        assert!(!tunnels[0].1.reclaimed.load(Ordering::Acquire));
        // The same /64 is the same client: it cannot take from itself.
        assert_eq!(gate.try_enter(ip("2001:db8::2")).err(), Some(Refused::Full));
        // The reclaimed tunnel's end gives nothing back: the slot is taken.
        let (slot, _) = tunnels.remove(1);
        drop(slot);
        assert_eq!(gate.in_use(3), 3);
        drop(taken);
        assert_eq!(gate.in_use(3), 2);
        drop(tunnels);
        assert_eq!(gate.in_use(3), 0);
    }

    #[test]
    fn plain_gates_ignore_the_client() {
        let gate = Gate::new(1);
        let _one = gate.try_enter(ip("192.0.2.1")).expect("1");
        assert_eq!(gate.try_enter(ip("192.0.2.2")).err(), Some(Refused::Full));
    }
}
