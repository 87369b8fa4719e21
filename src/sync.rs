//! Shared state between requests, decided once: lock recovery, and the
//! two pieces of the fair tables (`admit::fair`, `llm::body`) — which
//! counter a client falls in, and a scan for the heaviest one that many
//! callers share.
//!
//! Lock recovery:
//! A panic while a lock is held poisons it. Every lock in weir guards
//! state that is consistent between statements (maps, counters, the
//! request's facts), so the right answer to poison is always to go on
//! with the value: a panic in one request must not take every later
//! request that touches the same map down with it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio::time::Instant;

/// `lock`, recovering from poison.
pub(crate) trait Locked<T> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `read` and `write`, recovering from poison.
pub(crate) trait RwLocked<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RwLocked<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The counter of a table of `buckets` (a power of two) that a client's
/// key falls in, mixed with a per-process `seed` (odd) so that nobody can
/// choose keys that share another's counter.
pub(crate) fn bucket(key: u64, seed: u64, buckets: usize) -> usize {
    let mixed = (key ^ (seed >> 7)).wrapping_mul(seed);
    (mixed >> (64 - buckets.trailing_zeros())) as usize
}

/// The last result of a scan, trusted for `every`: when it is older, one
/// caller scans again (the one that wins a compare-and-swap on the time)
/// and the others read the last result, so a table is crossed at most
/// once per `every` however many requests ask.
pub(crate) struct Rescan {
    epoch: Instant,
    every_us: u64,
    /// When the last scan ran, in microseconds since `epoch` (+1; 0: never).
    scanned_us: AtomicU64,
    last: AtomicU64,
}

impl Rescan {
    pub(crate) fn new(every: Duration) -> Self {
        Rescan {
            epoch: Instant::now(),
            every_us: u64::try_from(every.as_micros()).unwrap_or(u64::MAX),
            scanned_us: AtomicU64::new(0),
            last: AtomicU64::new(0),
        }
    }

    /// The last scan's result, or `scan()`'s when it is stale.
    pub(crate) fn get(&self, scan: impl FnOnce() -> u64) -> u64 {
        let now = u64::try_from(self.epoch.elapsed().as_micros())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1);
        let last = self.scanned_us.load(Ordering::Acquire);
        let stale = last == 0 || now.saturating_sub(last) >= self.every_us;
        if stale
            && self
                .scanned_us
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let value = scan();
            self.last.store(value, Ordering::Release);
            return value;
        }
        self.last.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_scan_is_shared_until_it_is_stale() {
        let rescan = Rescan::new(Duration::from_millis(10));
        assert_eq!(rescan.get(|| 7), 7, "the first asks scan");
        assert_eq!(rescan.get(|| 9), 7, "a fresh result is shared");
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(rescan.get(|| 9), 9, "a stale one is renewed");
        assert_eq!(rescan.get(|| 11), 9);
    }

    #[test]
    fn every_key_falls_in_the_table() {
        for key in [0, 1, u64::MAX, 0x5555_5555_5555_5555] {
            assert!(bucket(key, 0x9e37_79b9_7f4a_7c15, 1024) < 1024);
            assert!(bucket(key, 3, 4096) < 4096);
        }
    }

    #[test]
    fn a_poisoned_lock_still_gives_its_value() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let held = m.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *m.locked() += 1;
        assert_eq!(*m.locked(), 2);
    }
}
