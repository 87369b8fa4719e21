//! A fleet's shared limits, in Redis (`[cluster]`).
//!
//! Several weirs behind one load balancer share each route's per-client
//! rate limit and each client token's concurrency bound through one
//! Redis, so a client limited to 50 requests a second gets 50 from the
//! fleet, not 50 from each instance. Without `[cluster]` none of this
//! exists and every limit is the process's own.
//!
//! The request path asks one question per request ([`Cluster::decide`]):
//! one script, one round trip, under a bounded wait. Redis's answer is the
//! decision. No answer in time, or no Redis, and the failure mode decides
//! at once: `fail_open` tells the caller to enforce its share of the limit
//! locally (1/N, N the live instances), `fail_closed` to refuse. A request
//! that found Redis silent marks it down; until the supervisor
//! ([`link`]) has reconnected, requests do not ask Redis at all, so a dead
//! Redis costs no request any wait.
//!
//! A concurrency slot is a [`Lease`]: an entry in the token's sorted set
//! scored by its expiry, renewed by the supervisor while the request runs,
//! released when the response body ends (the lease lives in the request's
//! admission, which the respond layer drops then). A crashed instance
//! stops renewing, so its slots come back within the lease TTL.
//!
//! A client token's budget on a shared route is the fleet's too: its
//! reservation is taken by the same decision script, and settled off the
//! request path ([`budgets`]).
//!
//! The scripts are in [`scripts`]; the connection, its health and the
//! background work (heartbeat, renewal, releases) in [`link`]. LLM
//! members' holds, shared by the fleet, are in [`holds`].

mod budgets;
mod holds;
mod leases;
mod link;
mod scripts;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use redis::aio::MultiplexedConnection;
use tokio::sync::Notify;

pub(crate) use crate::config::FailureMode;
use crate::config::{ClusterSettings, Secret};
use crate::telemetry::ClusterMetrics;
pub(crate) use budgets::Fill;
pub(crate) use budgets::FleetBudget;
use budgets::Reservations;
pub use budgets::SharedReservation;
pub use budgets::{BudgetAsk, BudgetBook, OverBudget};
pub(crate) use holds::Holdable;
use holds::Holds;
use leases::Leases;
use scripts::Scripts;

/// A fleet's shared state in Redis, one per process.
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    password: Option<Secret>,
    /// The roots a `rediss://` Redis is verified against (the web PKI's and
    /// `ca_file`'s), as the client takes them (see [`link`]), or why they
    /// are unusable.
    roots: Result<Vec<u8>, String>,
    prefix: String,
    timeout: Duration,
    mode: FailureMode,
    lease_ttl: Duration,
    /// This process in the fleet's instance set and in its lease ids.
    instance: String,
    /// The connection while Redis is healthy; `None` while it is not.
    conn: ArcSwapOption<MultiplexedConnection>,
    /// [`STARTING`], [`UP`] or [`DOWN`], for the log line per change.
    state: AtomicU8,
    /// Live instances, at least 1; the last known while Redis is down.
    instances: AtomicU32,
    next_lease: AtomicU64,
    leases: std::sync::Mutex<Leases>,
    /// Budget reservations held, and settles waiting for Redis.
    reservations: std::sync::Mutex<Reservations>,
    scripts: Scripts,
    /// Wakes the supervisor: releases to send, or the connection failed.
    kick: Arc<Notify>,
    /// Signalled once the first connection attempt has ended.
    settled: Notify,
    /// A refused script has been logged at warn.
    script_error_logged: std::sync::atomic::AtomicBool,
    metrics: ClusterMetrics,
    /// LLM members' holds, shared with the fleet.
    holds: Holds,
}

/// The wait for anything the fleet does off the request path: connecting,
/// heartbeats, renewals, releases, settles, views.
const BACKGROUND_TIMEOUT: Duration = Duration::from_secs(1);
/// Leases or reservations renewed per script call.
const RENEW_CHUNK: usize = 500;

const STARTING: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// A GCRA quota in Redis's terms: µs between requests, and the burst as
/// µs of tolerance — the `governor` crate's `t` and `tau`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    pub interval_us: u64,
    pub tolerance_us: u64,
}

impl Gcra {
    /// `per_second` sustained, `burst` at once (at least 1 each).
    pub fn new(per_second: u32, burst: u32) -> Self {
        Gcra::every(std::time::Duration::from_secs(1) / per_second.max(1), burst)
    }

    /// One request per `interval` sustained, `burst` at once (at least 1).
    pub fn every(interval: std::time::Duration, burst: u32) -> Self {
        let interval_us = u64::try_from(interval.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        Gcra {
            interval_us,
            tolerance_us: interval_us.saturating_mul(u64::from(burst.max(1) - 1)),
        }
    }
}

/// What one request asks: a rate check, a concurrency lease, or both.
pub struct Ask<'a> {
    /// The client's rate key and its quota.
    pub rate: Option<(&'a str, Gcra)>,
    /// The token's lease key and its limit.
    pub lease: Option<(&'a Arc<str>, usize)>,
    /// The budget books it pays from and what this request reserves in
    /// each.
    pub budget: Option<BudgetAsk<'a>>,
    /// A runtime key's own rate key and quota, beside the route's `rate`
    /// (both must pass; a request either refuses takes from neither).
    pub key_rate: Option<(&'a str, Gcra)>,
}

/// The answer.
pub enum Decision {
    /// Redis let the request through, with its lease if one was asked.
    Admitted(Option<Lease>),
    /// Redis: over the rate; a request would pass after this long.
    Limited(Duration),
    /// Redis: over the runtime key's own rate (`Ask::key_rate`).
    KeyLimited(Duration),
    /// Redis: every slot of the token is taken.
    Full,
    /// Redis let the request through and reserved its budget.
    Reserved(Option<Lease>, SharedReservation),
    /// Redis: a budget book has no room for this request (nothing was
    /// reserved in any).
    OverBudget(OverBudget),
    /// No answer in time (`fail_open`): enforce 1/`instances` of each
    /// limit locally, with [`Cluster::lease_here`] for slots.
    Open { instances: u32 },
    /// No answer in time (`fail_closed`): refuse.
    Closed,
}

/// A concurrency slot, given back when dropped.
pub struct Lease {
    id: u64,
    key: Arc<str>,
    inner: Arc<Inner>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.inner.leases.locked().release(self.id, &self.key);
        self.inner.kick.notify_one();
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({} {})", self.key, self.id)
    }
}

use crate::sync::Locked;

impl Cluster {
    /// The fleet's shared state, and its supervisor started on the current
    /// runtime (which must outlive serving: the main one). Nothing waits
    /// for Redis here; see [`Cluster::settled`].
    pub fn start(settings: &ClusterSettings, metrics: ClusterMetrics) -> Arc<Cluster> {
        let instance = instance_id();
        let (holds, outbox) = Holds::new(instance.clone(), metrics.clone());
        let inner = Arc::new(Inner {
            url: settings.url.clone(),
            password: settings.password.clone(),
            roots: crate::pki::client_roots_pem(settings.ca_file.as_deref())
                .map_err(|e| e.to_string()),
            prefix: settings.key_prefix.clone(),
            timeout: settings.timeout,
            mode: settings.on_failure,
            lease_ttl: settings.lease_ttl,
            instance,
            conn: ArcSwapOption::empty(),
            state: AtomicU8::new(STARTING),
            instances: AtomicU32::new(1),
            next_lease: AtomicU64::new(1),
            leases: Default::default(),
            reservations: Default::default(),
            scripts: Scripts::new(),
            kick: Arc::new(Notify::new()),
            settled: Notify::new(),
            script_error_logged: Default::default(),
            metrics,
            holds,
        });
        inner.metrics.instances.set(1);
        tokio::spawn(link::supervise(Arc::downgrade(&inner), outbox));
        Arc::new(Cluster { inner })
    }

    /// Wait (at most `bound`) for the first connection attempt to end,
    /// so a fleet member starts deciding by Redis rather than by the
    /// failure mode when Redis is there.
    pub async fn settled(&self, bound: Duration) {
        let wait = self.inner.settled.notified();
        if self.inner.state.load(Ordering::Acquire) != STARTING {
            return;
        }
        let _ = tokio::time::timeout(bound, wait).await;
    }

    /// The key of a route's rate limit for one client (an address or a
    /// token id): `<prefix>rl:<route>:`, to which the caller appends the
    /// client.
    pub(crate) fn rate_prefix(&self, route: &str) -> String {
        format!("{}rl:{route}:", self.inner.prefix)
    }

    /// The base of a client token's budget keys on a route (see
    /// `scripts::BUDGET`).
    pub fn budget_key(&self, route: &str, token: &str) -> Arc<str> {
        format!("{}bg:{route}:{token}:", self.inner.prefix).into()
    }

    /// The base of a runtime key's (or a person's) budget keys, on every
    /// route: `id` is the key's id (a person's is `idp:<name>`).
    pub fn key_budget_key(&self, id: &str) -> Arc<str> {
        format!("{}bk:{id}:", self.inner.prefix).into()
    }

    /// The base of a team's shared budget keys.
    pub fn team_budget_key(&self, team: &str) -> Arc<str> {
        format!("{}bt:{team}:", self.inner.prefix).into()
    }

    /// Usage of a request admitted by the local share while Redis was away
    /// (`fail_open`), charged to the fleet's windows once Redis answers.
    pub(crate) fn charge_later(&self, key: &Arc<str>, tokens: u64, spend: u64) {
        budgets::charge_later(&self.inner, key, tokens, spend);
    }

    /// A client token's budget as the fleet has it (`None`: Redis is away
    /// or did not answer within a second).
    pub(crate) async fn budget_view(&self, key: &str) -> Option<FleetBudget> {
        budgets::view(&self.inner, key).await
    }

    /// The key of a runtime key's own rate, the same on every route:
    /// `<prefix>rk:`, to which the caller appends the key's id.
    pub(crate) fn key_rate_prefix(&self) -> String {
        format!("{}rk:", self.inner.prefix)
    }

    /// The key of a runtime key's concurrency slots, on every route.
    pub(crate) fn key_lease_key(&self, id: &str) -> Arc<str> {
        format!("{}ck:{id}", self.inner.prefix).into()
    }

    /// The key of a client token's concurrency slots on a route.
    pub(crate) fn lease_key(&self, route: &str, token: &str) -> Arc<str> {
        format!("{}cc:{route}:{token}", self.inner.prefix).into()
    }

    /// At shutdown: give the queued budget settles up to `bound` to reach
    /// Redis (the supervisor sends them; this wakes it and waits). Whether
    /// every one did; those that did not are logged with their count.
    pub async fn flush_settles(&self, bound: Duration) -> bool {
        let inner = &self.inner;
        inner.kick.notify_one();
        let deadline = tokio::time::Instant::now() + bound;
        while !budgets::drained(inner) {
            if tokio::time::Instant::now() >= deadline {
                let left = inner.metrics.budget_settles_pending.get();
                tracing::warn!(
                    target: "weir::cluster",
                    settles = left,
                    "cluster: budget settles not sent to Redis before exit; their usage is not in the fleet's budgets"
                );
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Whether Redis is answering now.
    pub fn is_up(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == UP
    }

    /// The connection while Redis answers, for work off the request path
    /// (ACME's shared certificates); `None` while Redis is down.
    pub(crate) fn connection(&self) -> Option<MultiplexedConnection> {
        self.inner.conn.load_full().map(|c| (*c).clone())
    }

    /// `suffix` under the configured key prefix.
    pub(crate) fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.inner.prefix)
    }

    /// This process's name in the fleet (host, pid, a random part).
    pub(crate) fn instance(&self) -> &str {
        &self.inner.instance
    }

    /// How long a lease outlives the instance holding it.
    pub(crate) fn lease_ttl(&self) -> Duration {
        self.inner.lease_ttl
    }

    /// Live instances (the last known while Redis is down), at least 1.
    pub(crate) fn instances(&self) -> u32 {
        self.inner.instances.load(Ordering::Relaxed).max(1)
    }

    /// Decide one request: one script in Redis under the bounded wait, or
    /// at once by the failure mode when Redis is down or does not answer
    /// in time.
    pub async fn decide(&self, ask: Ask<'_>) -> Decision {
        let inner = &self.inner;
        let Some(conn) = inner.conn.load_full() else {
            return self.fallback();
        };
        let ask = Ask {
            budget: ask.budget.map(|b| BudgetAsk {
                tokens: budgets::clamp(b.tokens),
                spend: budgets::clamp(b.spend),
                ..b
            }),
            ..ask
        };
        let lease_id = ask
            .lease
            .map(|_| inner.next_lease.fetch_add(1, Ordering::Relaxed));
        let ask = Ask {
            budget: ask.budget.filter(|b| !b.books.is_empty()),
            ..ask
        };
        let budget_id = ask
            .budget
            .map(|_| inner.next_lease.fetch_add(1, Ordering::Relaxed));
        let invocation = inner.decide_invocation(&ask, lease_id, budget_id);
        let started = Instant::now();
        let mut c = (*conn).clone();
        let answer =
            tokio::time::timeout(inner.timeout, invocation.invoke_async::<Vec<i64>>(&mut c)).await;
        let answer = match answer {
            Ok(Ok(a)) => a,
            failed => {
                // The script may have run: a slot or a reservation it
                // took would stay taken until its TTL, so give it back.
                if let (Some((key, _)), Some(id)) = (ask.lease, lease_id) {
                    inner.leases.locked().forget(id, key);
                }
                if let (Some(b), Some(id)) = (ask.budget, budget_id) {
                    inner.forget_reservation(id, &b);
                }
                match failed {
                    // Redis answered with an error (a key of the wrong
                    // type, an ACL refusal): it is there, this decision
                    // is the failure mode's.
                    Ok(Err(e)) if answered(&e) => inner.script_failed(&e),
                    Ok(Err(e)) => inner.down(&conn, &e.to_string()),
                    _ => inner.down(
                        &conn,
                        &format!(
                            "no answer within {}",
                            humantime::format_duration(inner.timeout)
                        ),
                    ),
                }
                return self.fallback();
            }
        };
        inner
            .metrics
            .redis_seconds
            .observe(started.elapsed().as_secs_f64());
        inner.metrics.by_redis.inc();
        // Six numbers, then the books' fill when reserved (scripts.rs);
        // a short answer (never from this script) reads as refused.
        let at = |i: usize| answer.get(i).copied().unwrap_or(0);
        let head = (at(0), at(1), at(2), at(3), at(4), at(5));
        let fill = answer.get(6..).unwrap_or_default();
        self.verdict(&ask, (lease_id, budget_id), head, fill)
    }

    /// What the script's answer means for this request: limited, over
    /// budget, no slot, or admitted with the slot and reservation it holds
    /// (now held here too, for renewal and release).
    fn verdict(
        &self,
        ask: &Ask<'_>,
        (lease_id, budget_id): (Option<u64>, Option<u64>),
        (wait, lease, reserved, bound, budget_wait, book): (i64, i64, i64, i64, i64, i64),
        fill: &[i64],
    ) -> Decision {
        let inner = &self.inner;
        if wait > 0 {
            let wait = Duration::from_micros(wait as u64);
            // A rate's refusal names which rate in the bound's place.
            return match bound {
                2 => Decision::KeyLimited(wait),
                _ => Decision::Limited(wait),
            };
        }
        if reserved == 0 {
            return Decision::OverBudget(OverBudget {
                book: usize::try_from(book.max(1) - 1).unwrap_or(0),
                bound: usize::try_from(bound.clamp(1, 7) - 1).unwrap_or(0),
                wait: u64::try_from(budget_wait).ok().map(Duration::from_micros),
            });
        }
        let lease = match (ask.lease, lease_id, lease) {
            (Some((key, _)), Some(id), 1) => {
                inner.leases.locked().hold(id, key);
                Some(self.lease(id, key))
            }
            (Some(_), _, 0) => return Decision::Full,
            _ => None,
        };
        match (ask.budget, budget_id, reserved) {
            (Some(b), Some(id), 1) => {
                let reservation = SharedReservation::new(&self.inner, id, &b);
                Decision::Reserved(lease, reservation.filled(fill))
            }
            _ => Decision::Admitted(lease),
        }
    }

    /// A slot taken while Redis is down (`fail_open`), when fewer than
    /// `limit` of the token's slots are held by this instance. It is
    /// renewed — so written to Redis — once Redis answers again, so the
    /// fleet's count includes it from then on.
    pub(crate) fn lease_here(&self, key: &Arc<str>, limit: usize) -> Option<Lease> {
        let id = self.inner.next_lease.fetch_add(1, Ordering::Relaxed);
        let mut leases = self.inner.leases.locked();
        if leases.held_for(key) >= limit {
            return None;
        }
        leases.hold(id, key);
        drop(leases);
        Some(self.lease(id, key))
    }

    fn lease(&self, id: u64, key: &Arc<str>) -> Lease {
        Lease {
            id,
            key: key.clone(),
            inner: self.inner.clone(),
        }
    }

    /// The fleet's name for an LLM upstream member: route, upstream,
    /// endpoint (scheme, host, port and path: never credentials in a URL)
    /// and the key's digest (`passthrough` for clients' own keys) — the
    /// same on every instance with the same config, and never the key.
    pub(crate) fn member_id(
        route: &str,
        upstream: &str,
        endpoint: &http::Uri,
        key_digest: &str,
    ) -> Arc<str> {
        let scheme = endpoint.scheme_str().unwrap_or("http");
        let host = endpoint.host().unwrap_or("");
        let port = endpoint.port().map(|p| format!(":{p}")).unwrap_or_default();
        format!(
            "{route}:{upstream}:{scheme}://{host}{port}{}:{key_digest}",
            endpoint.path()
        )
        .into()
    }

    /// Holds the fleet learns for member `id` apply to `member` while it
    /// lives (and those known already, at once).
    /// The fleet's id of a hold member `member` named for one client
    /// credential alone, `tenant` being the credential's hash in hex.
    pub(crate) fn tenant_id(member: &str, tenant: &str) -> String {
        format!("{member}{}{tenant}", holds::TENANT_SEPARATOR)
    }

    pub(crate) fn share_holds(&self, id: Arc<str>, member: &Arc<dyn Holdable>) {
        self.inner.holds.register(id, member);
    }

    /// Member `id` said it is busy until `until`: tell the fleet, without
    /// waiting (a full queue, or Redis down, keeps it local). Refusals are
    /// not shared (see [`holds`]).
    pub(crate) fn hold_learnt(
        &self,
        id: &Arc<str>,
        until: tokio::time::Instant,
        reason: crate::upstream::balance::Reason,
    ) {
        self.inner.holds.learnt(id, until, reason, self.is_up());
    }

    /// The failure mode's answer, counted.
    fn fallback(&self) -> Decision {
        match self.inner.mode {
            FailureMode::Open => {
                self.inner.metrics.fail_open.inc();
                Decision::Open {
                    instances: self.instances(),
                }
            }
            FailureMode::Closed => {
                self.inner.metrics.fail_closed.inc();
                Decision::Closed
            }
        }
    }
}

/// Whether `e` is Redis's own answer on a connection that still works
/// (rather than a lost connection, or a Redis that cannot serve now:
/// loading, read-only after a failover, its primary down).
fn answered(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    !e.is_unrecoverable_error()
        && matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::ResponseError
                    | ServerErrorKind::NoPerm
                    | ServerErrorKind::NoScript
                    | ServerErrorKind::CrossSlot
                    | ServerErrorKind::ExecAbort
            ) | ErrorKind::Extension
                | ErrorKind::UnexpectedReturnType
        )
}

impl Inner {
    /// The decide script's keys and arguments for `ask`: the rate limit's
    /// GCRA, the token's slot, the budget's reservation (empty where the
    /// request has none; `scripts.rs` reads them in this order).
    fn decide_invocation(
        &self,
        ask: &Ask<'_>,
        lease_id: Option<u64>,
        budget_id: Option<u64>,
    ) -> redis::ScriptInvocation<'_> {
        let inner = self;
        let mut invocation = inner.scripts.decide.prepare_invoke();
        let (rate_key, gcra) = match ask.rate {
            Some((key, g)) => (
                key,
                Some((g.interval_us.to_string(), g.tolerance_us.to_string())),
            ),
            None => (
                ask.lease
                    .map(|(k, _)| &**k)
                    .or(ask.budget.and_then(|b| b.books.first()).map(|b| &*b.key))
                    .or(ask.key_rate.map(|(k, _)| k))
                    .unwrap_or(""),
                None,
            ),
        };
        let lease_key = ask.lease.map_or(rate_key, |(k, _)| &**k);
        invocation.key(rate_key).key(lease_key);
        let (t, tau) = gcra.unwrap_or_default();
        invocation.arg(t).arg(tau);
        match (ask.lease, lease_id) {
            (Some((_, limit)), Some(id)) => {
                invocation
                    .arg(limit)
                    .arg(inner.lease_name(id))
                    .arg(inner.lease_ttl.as_millis() as u64);
            }
            _ => {
                invocation.arg("").arg("").arg("");
            }
        }
        for edge in inner.spans() {
            invocation.arg(edge);
        }
        match (ask.budget, budget_id) {
            (Some(b), Some(id)) => {
                invocation
                    .arg(inner.member(id, b.tokens, b.spend))
                    .arg(inner.lease_ttl.as_millis() as u64)
                    .arg(b.tokens)
                    .arg(b.spend)
                    .arg(b.books.len());
                for book in b.books {
                    invocation.key(&*book.key);
                    for limit in book.limits {
                        invocation.arg(limit.map(|l| l.to_string()).unwrap_or_default());
                    }
                }
            }
            _ => {
                invocation.arg("").arg("").arg("").arg("").arg(0);
            }
        }
        // The key's own rate after everything else (its place moves with
        // the books').
        if let Some((key, g)) = ask.key_rate {
            invocation.key(key).arg(g.interval_us).arg(g.tolerance_us);
        }
        invocation
    }

    /// A script Redis refused: the first at warn (it will not fix itself:
    /// a key of another program's under the prefix, an ACL), the rest at
    /// debug so a flood of them cannot flood the log.
    fn script_failed(&self, e: &redis::RedisError) {
        if !self
            .script_error_logged
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::warn!(
                target: "weir::cluster",
                error = %e,
                "cluster: Redis refused a shared-limit script; such requests are decided by the failure mode (later refusals are logged at debug)"
            );
        } else {
            tracing::debug!(target: "weir::cluster", error = %e, "cluster: script refused");
        }
    }

    /// A lease's member in its sorted set: unique in the fleet.
    fn lease_name(&self, id: u64) -> String {
        format!("{}:{id}", self.instance)
    }

    /// `conn` failed on the request path: stop using it (unless it was
    /// replaced already), log the change, and let the supervisor reconnect.
    fn down(&self, conn: &Arc<MultiplexedConnection>, why: &str) {
        let previous = self.conn.compare_and_swap(conn, None);
        if previous.as_ref().is_some_and(|p| Arc::ptr_eq(p, conn)) {
            self.set_state(DOWN, why);
            self.kick.notify_one();
        }
    }

    /// Move to `state`, logging the change once.
    fn set_state(&self, state: u8, why: &str) {
        let was = self.state.swap(state, Ordering::AcqRel);
        self.metrics.redis_up.set(i64::from(state == UP));
        if was == state {
            return;
        }
        let instances = self.instances.load(Ordering::Relaxed).max(1);
        if state == UP {
            tracing::info!(
                target: "weir::cluster",
                redis = %self.url,
                instances,
                "cluster: Redis answers; shared limits are the fleet's"
            );
        } else {
            let mode = self.mode.name();
            match self.mode {
                FailureMode::Open => tracing::warn!(
                    target: "weir::cluster",
                    redis = %self.url,
                    mode,
                    instances,
                    reason = why,
                    "cluster: Redis does not answer; each instance enforces 1/{instances} of each shared limit"
                ),
                FailureMode::Closed => tracing::warn!(
                    target: "weir::cluster",
                    redis = %self.url,
                    mode,
                    instances,
                    reason = why,
                    "cluster: Redis does not answer; requests under shared limits are refused (503)"
                ),
            }
        }
        if was == STARTING {
            self.settled.notify_waiters();
        }
    }
}

/// This process's name in the fleet: host, pid and a random part (a pid
/// is reused across restarts and containers).
fn instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!(
        "{}-{}-{:08x}",
        if host.is_empty() { "weir" } else { &host },
        std::process::id(),
        fastrand::u32(..)
    )
}
