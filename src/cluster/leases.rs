//! The leases this instance holds (renewed by the supervisor while their
//! requests run) and those given back but not yet removed from Redis.

use std::collections::HashMap;
use std::sync::Arc;

/// Releases waiting for Redis, at most: past this (a long outage), the
/// rest are left to their TTL.
const MAX_PENDING: usize = 100_000;

#[derive(Default)]
pub(super) struct Leases {
    /// Lease id → its token's key.
    held: HashMap<u64, Arc<str>>,
    /// Leases held per key: this instance's share of a token's slots.
    per_key: HashMap<Arc<str>, usize>,
    /// Given back, to be removed from Redis by the supervisor.
    released: Vec<(Arc<str>, u64)>,
}

impl Leases {
    pub(crate) fn hold(&mut self, id: u64, key: &Arc<str>) {
        self.held.insert(id, key.clone());
        *self.per_key.entry(key.clone()).or_default() += 1;
    }

    /// The request ended: stop renewing, and remove it from Redis.
    pub(crate) fn release(&mut self, id: u64, key: &Arc<str>) {
        if self.held.remove(&id).is_some()
            && let Some(n) = self.per_key.get_mut(key)
        {
            *n -= 1;
            if *n == 0 {
                self.per_key.remove(key);
            }
        }
        self.pending(key, id);
    }

    /// A lease the request path gave up on (Redis did not answer): it may
    /// have been taken, so remove it, though it was never held.
    pub(crate) fn forget(&mut self, id: u64, key: &Arc<str>) {
        self.pending(key, id);
    }

    fn pending(&mut self, key: &Arc<str>, id: u64) {
        if self.released.len() < MAX_PENDING {
            self.released.push((key.clone(), id));
        }
    }

    pub(crate) fn held_for(&self, key: &Arc<str>) -> usize {
        self.per_key.get(key).copied().unwrap_or(0)
    }

    /// Every lease held, for a renewal.
    pub(crate) fn all(&self) -> Vec<(Arc<str>, u64)> {
        self.held.iter().map(|(id, k)| (k.clone(), *id)).collect()
    }

    pub(crate) fn take_released(&mut self) -> Vec<(Arc<str>, u64)> {
        std::mem::take(&mut self.released)
    }

    /// Releases that could not be sent go back (the oldest past
    /// [`MAX_PENDING`] are left to their TTL).
    pub(crate) fn requeue(&mut self, mut failed: Vec<(Arc<str>, u64)>) {
        failed.append(&mut self.released);
        let over = failed.len().saturating_sub(MAX_PENDING);
        failed.drain(..over);
        self.released = failed;
    }
}
