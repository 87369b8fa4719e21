//! Per-client rate limits: a rate (one request per interval: `10/s` is one
//! per 100 ms, `10/min` one per 6 s) plus a burst, per client —
//! its IP (an IPv6 client per /64), or on an LLM route with client tokens
//! its token — by GCRA (the `governor` crate; no hand-written bucket).
//!
//! Memory stays bounded whatever the number of distinct clients: past
//! `max_keys` tracked clients, those whose budget has fully refilled are
//! dropped (they are indistinguishable from new ones); if that is not
//! enough the table starts over. Starting over hands every client a fresh
//! burst once, which is the price of a hard memory bound under a flood of
//! distinct addresses.
//!
//! With `[cluster]` a route's limit can be the fleet's ([`RateLimit::sharing`]):
//! the same GCRA, run by a script in Redis, decides (see `crate::cluster`),
//! and while Redis does not answer in `fail_open` a local limiter with
//! 1/N of the quota (N the live instances) stands in.
//!
//! A limited client is logged for fail2ban — one line per client per
//! `LOG_EVERY`, itself rate limited the same way, so an attack cannot
//! flood the log: `weir: rate_limited client=… route=… host=…`.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::cluster::{Cluster, Gcra};

/// Clients tracked per route before idle ones are dropped.
pub const MAX_KEYS: usize = 100_000;
/// At most one fail2ban line per limited client per this.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(10);

/// A route's per-client limit.
pub struct RateLimit {
    /// The time one request's budget takes to refill, and the burst, as
    /// configured.
    interval: Duration,
    burst: u32,
    /// The fleet's limit, when the route shares it.
    shared: Option<Shared>,
    quota: Quota,
    limiter: ArcSwap<DefaultKeyedRateLimiter<Client>>,
    log_lines: DefaultKeyedRateLimiter<Client>,
    clock: DefaultClock,
    max_keys: usize,
    /// Checks since the table size was last looked at.
    checks: std::sync::atomic::AtomicU32,
}

/// How often (in checks) the table's size is looked at.
const SIZE_CHECK_EVERY: u32 = 256;

/// Who a request is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Client {
    /// An address, or an IPv6 /64 (one customer's allocation).
    Ip(IpAddr),
    /// A client token of the route, by its index.
    Token(usize),
    /// A runtime key, by a hash of its id.
    Key(u64),
}

impl Client {
    /// The client's name in the fleet's keys, for an address (a token's
    /// is its id, which the route knows).
    pub(crate) fn ip_id(&self) -> Option<String> {
        match self {
            Client::Ip(ip) => Some(ip.to_string()),
            Client::Token(_) | Client::Key(_) => None,
        }
    }

    /// The key for a peer address.
    pub fn ip(ip: IpAddr) -> Client {
        Client::Ip(match ip {
            IpAddr::V4(_) => ip,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let s = v6.segments();
                    IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
                }
            },
        })
    }
}

/// The fail2ban line (deploy/fail2ban): stable text, written only when
/// [`Limited::log`] says so (at most once per client per `LOG_EVERY`).
pub(crate) fn log_limited(peer: IpAddr, route: &str, host: &str) {
    tracing::warn!(
        target: "weir::rate_limit",
        "weir: rate_limited client={peer} route={route} host={host}"
    );
}

/// Over the limit: retry after this many whole seconds (at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after: u64,
    /// Whether this one should be logged (the per-client log limit).
    pub log: bool,
}

/// A route's limit in the fleet: its key in Redis, its quota there, and
/// the local stand-in for `fail_open` (1/N of the quota, rebuilt when N
/// changes).
struct Shared {
    cluster: Arc<Cluster>,
    /// `<prefix>rl:<route>:`; the client's id is appended.
    key: String,
    gcra: Gcra,
    share: ArcSwap<(u32, RateLimit)>,
}

/// Why a request may not go on under a route's client limits.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Over the rate (429).
    Limited(Limited),
    /// Over a runtime key's own rate (429).
    KeyLimited(Limited),
    /// Every concurrency slot of the client token is taken (429).
    Full,
    /// A shared limit could not be decided: Redis did not answer in time
    /// and the mode is `fail_closed` (503).
    Unavailable,
}

impl RateLimit {
    /// `per_second` sustained, `burst` at once (at least 1 each).
    pub fn new(per_second: u32, burst: u32, max_keys: usize) -> Self {
        let rate = NonZeroU32::new(per_second.max(1)).unwrap_or(NonZeroU32::MIN);
        let interval = Duration::from_secs(1) / rate.get();
        Self::with_quota(Quota::per_second(rate), interval, burst, max_keys)
    }

    /// One request per `interval` sustained (`10/min`: 6 s), `burst` at
    /// once. For a whole number per second this is [`RateLimit::new`]'s
    /// quota: governor's per-second quota is the same interval.
    pub(crate) fn every(interval: Duration, burst: u32, max_keys: usize) -> Self {
        let interval = interval.max(Duration::from_nanos(1));
        let quota = Quota::with_period(interval).unwrap_or(Quota::per_second(NonZeroU32::MAX));
        Self::with_quota(quota, interval, burst, max_keys)
    }

    /// `per_minute` sustained, `burst` at once.
    pub(crate) fn per_minute(per_minute: u32, burst: u32, max_keys: usize) -> Self {
        let rate = NonZeroU32::new(per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
        let interval = Duration::from_secs(60) / rate.get();
        Self::with_quota(Quota::per_minute(rate), interval, burst, max_keys)
    }

    /// This limit decided for the fleet by `cluster` under `route`'s keys.
    pub(crate) fn sharing(self, cluster: &Arc<Cluster>, route: &str) -> Self {
        let prefix = cluster.rate_prefix(route);
        self.sharing_under(cluster, prefix)
    }

    /// This limit decided for the fleet by `cluster`, a client's key being
    /// `prefix` and its id (a runtime key's own rate: `rk:<id>`).
    pub(crate) fn sharing_under(mut self, cluster: &Arc<Cluster>, prefix: String) -> Self {
        let share = RateLimit::share_of(self.interval, self.burst, 1, self.max_keys);
        self.shared = Some(Shared {
            key: prefix,
            gcra: Gcra::every(self.interval, self.burst),
            cluster: cluster.clone(),
            share: ArcSwap::from_pointee((1, share)),
        });
        self
    }

    /// One instance's share of a fleet of `n`: 1/n of the rate (an
    /// interval n times as long), and of the burst (rounded up: at least 1).
    fn share_of(interval: Duration, burst: u32, n: u32, max_keys: usize) -> Self {
        let n = n.max(1);
        let period = interval.checked_mul(n).unwrap_or(Duration::MAX);
        let quota = Quota::with_period(period).unwrap_or(Quota::per_second(NonZeroU32::MIN));
        Self::with_quota(quota, interval, burst.div_ceil(n), max_keys)
    }

    fn with_quota(quota: Quota, interval: Duration, burst: u32, max_keys: usize) -> Self {
        let allowed = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
        let quota = quota.allow_burst(allowed);
        let log_quota = Quota::with_period(LOG_EVERY).unwrap_or(Quota::per_second(NonZeroU32::MIN));
        RateLimit {
            interval,
            burst,
            shared: None,
            quota,
            limiter: ArcSwap::from_pointee(RateLimiter::keyed(quota)),
            log_lines: RateLimiter::keyed(log_quota),
            clock: DefaultClock::default(),
            max_keys,
            checks: Default::default(),
        }
    }

    /// The cluster deciding this limit, if the fleet shares it.
    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.shared.as_ref().map(|s| &s.cluster)
    }

    /// The Redis key of `client`'s budget (`id`: its address, or its
    /// token's id), when the limit is shared.
    pub(crate) fn shared_key(&self, id: &str) -> Option<(String, Gcra)> {
        let s = self.shared.as_ref()?;
        Some((format!("{}{id}", s.key), s.gcra))
    }

    /// Redis said `client` is over the limit until `wait` from now.
    pub fn limited(&self, key: Client, wait: Duration) -> Limited {
        Limited {
            retry_after: wait.as_secs_f64().ceil().max(1.0) as u64,
            log: self.log_lines.check_key(&key).is_ok(),
        }
    }

    /// Redis did not answer (`fail_open`): this instance's share of the
    /// fleet's limit, 1/`instances`, decides.
    pub(crate) fn check_share(&self, key: Client, instances: u32) -> Result<(), Limited> {
        let Some(shared) = &self.shared else {
            return self.check(key);
        };
        let mut share = shared.share.load_full();
        if share.0 != instances {
            let fresh = RateLimit::share_of(self.interval, self.burst, instances, self.max_keys);
            shared.share.store(Arc::new((instances, fresh)));
            share = shared.share.load_full();
        }
        share.1.check(key).map_err(|l| Limited {
            log: self.log_lines.check_key(&key).is_ok(),
            ..l
        })
    }

    /// Whether `client` may send a request now, by this process alone.
    pub fn check(&self, key: Client) -> Result<(), Limited> {
        let n = self
            .checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n.is_multiple_of(SIZE_CHECK_EVERY) {
            let limiter = self.limiter.load();
            if limiter.len() > self.max_keys {
                self.shrink(&limiter);
            }
        }
        match self.limiter.load().check_key(&key) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let log = self.log_lines.check_key(&key).is_ok();
                if n.is_multiple_of(SIZE_CHECK_EVERY) && self.log_lines.len() > self.max_keys {
                    self.log_lines.retain_recent();
                }
                Err(Limited {
                    retry_after: wait.as_secs_f64().ceil().max(1.0) as u64,
                    log,
                })
            }
        }
    }

    /// Keep the table under `max_keys`: drop refilled clients, else start over.
    fn shrink(&self, limiter: &Arc<DefaultKeyedRateLimiter<Client>>) {
        limiter.retain_recent();
        limiter.shrink_to_fit();
        if limiter.len() > self.max_keys {
            self.limiter.store(Arc::new(RateLimiter::keyed(self.quota)));
        }
    }

    /// Clients tracked now.
    pub fn tracked(&self) -> usize {
        self.limiter.load().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate_and_each_client_apart() {
        let r = RateLimit::new(1, 3, 1000);
        let a = Client::ip("192.0.2.1".parse().expect("ip"));
        for _ in 0..3 {
            assert!(r.check(a).is_ok());
        }
        let limited = r.check(a).expect_err("over the burst");
        assert_eq!(limited.retry_after, 1);
        assert!(limited.log, "the first limit is logged");
        assert!(!r.check(a).expect_err("still").log, "the next is not");
        assert!(
            r.check(Client::ip("192.0.2.2".parse().expect("ip")))
                .is_ok(),
            "another client"
        );
        assert!(
            r.check(Client::Token(0)).is_ok(),
            "a token is its own client"
        );
        // One IPv6 customer is one /64.
        let v6a = Client::ip("2001:db8::1".parse().expect("ip"));
        let v6b = Client::ip("2001:db8::2".parse().expect("ip"));
        for _ in 0..3 {
            assert!(r.check(v6a).is_ok());
        }
        assert!(r.check(v6b).is_err(), "same /64, same budget");
    }

    #[test]
    fn a_rate_per_minute_refills_one_request_every_interval() {
        // 10/min with a burst of 1: the next request waits 6 s.
        let r = RateLimit::every(Duration::from_secs(6), 1, 1000);
        let a = Client::ip("192.0.2.1".parse().expect("ip"));
        assert!(r.check(a).is_ok());
        assert_eq!(r.check(a).expect_err("within 6 s").retry_after, 6);
        // A whole number per second is the same quota as before.
        assert_eq!(
            RateLimit::every(Duration::from_secs(1) / 3, 2, 10).quota,
            RateLimit::new(3, 2, 10).quota
        );
    }

    #[test]
    fn memory_stays_bounded_under_many_distinct_clients() {
        let r = RateLimit::new(1, 1, 1000);
        for i in 0..10_000u32 {
            let ip = Client::ip(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)));
            let _ = r.check(ip);
            let _ = r.check(ip);
        }
        // Looked at every SIZE_CHECK_EVERY checks: bounded by the cap plus that.
        assert!(
            r.tracked() <= 1000 + SIZE_CHECK_EVERY as usize,
            "{} tracked",
            r.tracked()
        );
    }
}
