//! Failed authentications limited per address: the admin API's token and
//! LLM routes' client tokens.
//!
//! Failures alone spend an address's allowance (a client with the right
//! credential is never counted); past it, the address is refused (429 with
//! Retry-After) *before* its credential is looked at, so a guess cannot
//! be tested while it waits — an answer that told right from wrong would
//! let guessing go on at full speed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::rate::{Client, RateLimit};
use crate::sync::Locked;

/// Addresses remembered as refused before the expired ones are dropped.
const MAX_BLOCKED: usize = 10_000;

/// One listener's or route's failed authentications, per address.
pub(crate) struct AuthFailures {
    limit: RateLimit,
    blocked: std::sync::Mutex<HashMap<Client, Instant>>,
    /// Whether `blocked` has ever held an address: until then a request
    /// costs one load, not a lock.
    any: AtomicBool,
}

impl AuthFailures {
    /// `burst` failures at once, then `per_minute`.
    pub(crate) fn new(per_minute: u32, burst: u32) -> Self {
        AuthFailures {
            limit: RateLimit::per_minute(per_minute, burst, MAX_BLOCKED),
            blocked: Default::default(),
            any: AtomicBool::new(false),
        }
    }

    /// Seconds until `peer` may try again, while it is refused.
    pub(crate) fn refused(&self, peer: IpAddr) -> Option<u64> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let now = Instant::now();
        let until = self.blocked.locked().get(&Client::ip(peer)).copied()?;
        (until > now).then(|| until.duration_since(now).as_secs().max(1))
    }

    /// `peer` failed to authenticate: counted, and refused for a while
    /// once past its allowance.
    pub(crate) fn failed(&self, peer: IpAddr) {
        let key = Client::ip(peer);
        if let Err(limited) = self.limit.check(key) {
            let now = Instant::now();
            let mut blocked = self.blocked.locked();
            if blocked.len() >= MAX_BLOCKED {
                blocked.retain(|_, until| *until > now);
            }
            if blocked.len() < MAX_BLOCKED {
                blocked.insert(key, now + Duration::from_secs(limited.retry_after));
                self.any.store(true, Ordering::Relaxed);
            }
        }
    }
}
