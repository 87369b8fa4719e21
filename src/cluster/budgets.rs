//! Budgets kept by the fleet in Redis: reserve, then settle. A budget
//! book is a client token's on a route, a runtime key's or a person's, or
//! a team's; a request reserves in every book it pays from (its key's and
//! its team's) in one atomic step, so a refusal by any holds nothing in
//! the others.
//!
//! The reserve is part of the request's one decision script (see
//! [`super::Cluster::decide`]): checked against what the fleet settled in
//! each window and what it holds in flight, and taken in the same atomic
//! step. A [`SharedReservation`] is then held by the request; this
//! instance renews it in Redis with its leases (every third of
//! `lease_ttl`), so a request of any length keeps it, and an instance that
//! dies stops renewing: the next reserve for that token sweeps it once its
//! TTL has passed.
//!
//! Settling is off the request path: the settle goes into a queue that the
//! supervisor sends as one pipeline when woken. While Redis is away the
//! queue keeps up to [`MAX_PENDING`] settles, sent once it answers again
//! (the usage is then charged to the windows current at that moment);
//! past that, the oldest are dropped and counted. Each settle is applied
//! once however often it is sent: a call that Redis was too slow to answer
//! may still run when Redis catches up, after its settles were queued
//! again for the next connection, so each carries this instance's sequence
//! number and the script applies only those past the highest it applied
//! (see `scripts::SETTLE_MAIN`; decision 068). At shutdown the queue is
//! given a bounded time to reach Redis ([`drained`]). Usage of requests
//! admitted by the local share while Redis was away (`fail_open`) is
//! queued the same way, without a reservation, so the fleet's day counts
//! it once Redis is back.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::{BACKGROUND_TIMEOUT, Inner, RENEW_CHUNK};
use crate::sync::Locked;

/// Settles waiting for Redis, at most.
const MAX_PENDING: usize = 100_000;
/// Settles per script call (one pipeline carries several calls).
const SETTLE_CHUNK: usize = 200;
/// The largest amount sent to Redis (2^53: exact in Lua's numbers, and far
/// from int64's end when added up). Usage is what an upstream reports and
/// a reservation what a client asks, so both are clamped, not trusted.
const MAX_AMOUNT: u64 = 1 << 53;

pub(super) fn clamp(amount: u64) -> u64 {
    amount.min(MAX_AMOUNT)
}

/// One budget book a request pays from: its base key (see
/// `scripts::BUDGET`) and its limits, in `llm::ledger::Bound::ALL`'s
/// order (tokens per minute; tokens and spend per day, per week, per
/// month); `None`: unbounded.
#[derive(Debug, Clone)]
pub struct BudgetBook {
    pub key: Arc<str>,
    pub limits: [Option<u64>; 7],
}

/// What one request asks of its budget books.
#[derive(Debug, Clone, Copy)]
pub struct BudgetAsk<'a> {
    /// Every book it pays from: each must have room.
    pub books: &'a [BudgetBook],
    pub tokens: u64,
    pub spend: u64,
}

/// A budget the fleet refused: the book (its index in the ask), the bound
/// (its index in `Bound::ALL`) and when the request would fit (`None`:
/// never, it asks for more than the whole bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    pub book: usize,
    pub bound: usize,
    pub wait: Option<Duration>,
}

/// A reservation in the fleet's budget, held by its request. Settle it
/// with [`SharedReservation::settle`]; dropped unsettled, it is charged
/// in full (as the local ledger's callers do with a request dropped before
/// its answer).
pub struct SharedReservation {
    id: u64,
    keys: Arc<[Arc<str>]>,
    tokens: u64,
    spend: u64,
    inner: Arc<Inner>,
    settled: bool,
    /// Each book's fullest bound as the reserve found it (book order).
    fill: Vec<Option<Fill>>,
}

/// A book's fullest bound when a request was reserved in it: the bound
/// (its index in `Bound::ALL`) and the percent of its limit used,
/// settled plus in flight with this request (for the soft limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fill {
    pub(crate) bound: usize,
    pub(crate) percent: u64,
}

impl std::fmt::Debug for SharedReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedReservation({:?} {})", self.keys, self.id)
    }
}

impl SharedReservation {
    pub(super) fn new(inner: &Arc<Inner>, id: u64, ask: &BudgetAsk<'_>) -> Self {
        let keys: Arc<[Arc<str>]> = ask.books.iter().map(|b| b.key.clone()).collect();
        inner.reservations.locked().held.insert(
            id,
            Held {
                keys: keys.clone(),
                tokens: ask.tokens,
                spend: ask.spend,
            },
        );
        SharedReservation {
            id,
            keys,
            tokens: ask.tokens,
            spend: ask.spend,
            inner: inner.clone(),
            settled: false,
            fill: Vec::new(),
        }
    }

    /// With each book's fill as the decide script answered it: pairs of
    /// the fullest bound (1..7; 0: none bounded) and its percent.
    pub(super) fn filled(mut self, answer: &[i64]) -> Self {
        self.fill = answer
            .chunks_exact(2)
            .take(self.keys.len())
            .map(|pair| {
                let [bound, percent] = pair else { return None };
                let bound = usize::try_from(*bound)
                    .ok()
                    .filter(|b| (1..=7).contains(b))?;
                Some(Fill {
                    bound: bound - 1,
                    percent: u64::try_from(*percent).unwrap_or(0),
                })
            })
            .collect();
        self
    }

    /// Book `book`'s fullest bound at the reserve (`None`: none bounded,
    /// or not answered).
    pub(crate) fn fill(&self, book: usize) -> Option<Fill> {
        self.fill.get(book).copied().flatten()
    }

    /// What was reserved: tokens and spend.
    pub(crate) fn amount(&self) -> (u64, u64) {
        (self.tokens, self.spend)
    }

    /// End it: stop renewing, and queue its settle with the usage charged.
    pub fn settle(mut self, tokens: u64, spend: u64) {
        self.end(tokens, spend);
    }

    fn end(&mut self, tokens: u64, spend: u64) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        let member = self.inner.member(self.id, self.tokens, self.spend);
        let mut r = self.inner.reservations.locked();
        r.held.remove(&self.id);
        for key in self.keys.iter() {
            let settle = Settle {
                seq: 0,
                key: key.clone(),
                member: member.clone(),
                tokens: clamp(tokens),
                spend: clamp(spend),
            };
            r.queue(settle, &self.inner);
        }
        drop(r);
        self.inner.kick.notify_one();
    }
}

impl Drop for SharedReservation {
    fn drop(&mut self) {
        self.end(self.tokens, self.spend);
    }
}

/// A reservation this instance holds, for its renewal.
struct Held {
    keys: Arc<[Arc<str>]>,
    tokens: u64,
    spend: u64,
}

/// One settle for Redis: a reservation out of flight (`member` empty:
/// none) and the usage charged; `seq` (given when queued, rising in queue
/// order) makes a re-sent one a no-op.
struct Settle {
    seq: u64,
    key: Arc<str>,
    member: String,
    tokens: u64,
    spend: u64,
}

/// This instance's reservations and the settles not yet sent.
#[derive(Default)]
pub(super) struct Reservations {
    held: HashMap<u64, Held>,
    pending: VecDeque<Settle>,
    /// Settles taken off `pending` by a flush and not yet answered: still
    /// pending as far as the gauge is concerned.
    sending: usize,
    /// The last sequence number given to a settle.
    last_seq: u64,
    /// Settles Redis has refused in all, as its last answer said.
    refused_seen: u64,
}

impl Reservations {
    /// Queue a settle; past [`MAX_PENDING`] the oldest is dropped (its
    /// reservation then frees itself at its TTL, its usage is lost).
    fn queue(&mut self, mut settle: Settle, inner: &Inner) {
        self.last_seq = self.last_seq.saturating_add(1);
        settle.seq = self.last_seq;
        if self.pending.len() >= MAX_PENDING && self.pending.pop_front().is_some() {
            inner.metrics.budget_settles_dropped.inc();
        }
        self.pending.push_back(settle);
        self.gauge(inner);
    }

    /// `weir_cluster_budget_settles_pending`: queued plus being sent.
    fn gauge(&self, inner: &Inner) {
        let n = self.pending.len().saturating_add(self.sending);
        inner
            .metrics
            .budget_settles_pending
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

impl Inner {
    /// The day's, the week's and the month's windows now, as this instance
    /// places them: the scripts name those windows' keys by these starts.
    pub(super) fn spans(&self) -> [u64; 6] {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        crate::calendar::spans(now, &crate::calendar::zone())
    }

    /// A reservation's member in its token's set: unique in the fleet, and
    /// carrying its amounts, so whoever sweeps it knows what it held.
    pub(super) fn member(&self, id: u64, tokens: u64, spend: u64) -> String {
        format!("{}:{id}:{tokens}:{spend}", self.instance)
    }

    /// A reservation the request path gave up on (Redis did not answer in
    /// time: the script may have run): queue its removal, charging nothing.
    pub(super) fn forget_reservation(&self, id: u64, ask: &BudgetAsk<'_>) {
        let member = self.member(id, ask.tokens, ask.spend);
        let mut r = self.reservations.locked();
        for book in ask.books {
            let settle = Settle {
                seq: 0,
                key: book.key.clone(),
                member: member.clone(),
                tokens: 0,
                spend: 0,
            };
            r.queue(settle, self);
        }
        drop(r);
        self.kick.notify_one();
    }
}

/// Usage of a request admitted by this instance's local share while Redis
/// was away: queued for the fleet's windows.
pub(super) fn charge_later(inner: &Inner, key: &Arc<str>, tokens: u64, spend: u64) {
    if tokens == 0 && spend == 0 {
        return;
    }
    let settle = Settle {
        seq: 0,
        key: key.clone(),
        member: String::new(),
        tokens: clamp(tokens),
        spend: clamp(spend),
    };
    inner.reservations.locked().queue(settle, inner);
    inner.kick.notify_one();
}

type Failed = String;

/// Send every queued settle, [`SETTLE_CHUNK`] to a script call. On
/// failure those not sent go back to the front of the queue, for the next
/// connection.
pub(super) async fn flush(inner: &Inner, conn: &mut MultiplexedConnection) -> Result<(), Failed> {
    let mut settles: VecDeque<Settle> = {
        let mut r = inner.reservations.locked();
        r.sending = r.pending.len();
        std::mem::take(&mut r.pending)
    };
    while !settles.is_empty() {
        let n = settles.len().min(SETTLE_CHUNK);
        let mut invocation = inner.scripts.settle.prepare_invoke();
        invocation.key(format!("{}settled:{}", inner.prefix, inner.instance));
        for edge in inner.spans() {
            invocation.arg(edge);
        }
        for s in settles.range(..n) {
            invocation
                .key(&*s.key)
                .arg(s.seq)
                .arg(&s.member)
                .arg(s.tokens)
                .arg(s.spend);
        }
        let failed =
            match tokio::time::timeout(BACKGROUND_TIMEOUT, invocation.invoke_async::<i64>(conn))
                .await
            {
                Ok(Ok(refused)) => {
                    let total = u64::try_from(refused).unwrap_or(0);
                    let mut r = inner.reservations.locked();
                    // Below what was seen: the mark expired, counting anew.
                    let new = total.checked_sub(r.refused_seen).unwrap_or(total);
                    r.refused_seen = total;
                    drop(r);
                    inner.metrics.budget_settles_dropped.inc_by(new);
                    None
                }
                // Redis refused the call (a key of another type under the
                // prefix): it will refuse it again; drop these.
                Ok(Err(e)) if super::answered(&e) => {
                    inner.metrics.budget_settles_dropped.inc_by(n as u64);
                    None
                }
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("no answer to the settles".to_string()),
            };
        if let Some(why) = failed {
            let mut r = inner.reservations.locked();
            settles.append(&mut r.pending);
            let over = settles.len().saturating_sub(MAX_PENDING);
            settles.drain(..over);
            inner.metrics.budget_settles_dropped.inc_by(over as u64);
            r.pending = settles;
            r.sending = 0;
            r.gauge(inner);
            return Err(why);
        }
        settles.drain(..n);
        let mut r = inner.reservations.locked();
        r.sending = settles.len();
        r.gauge(inner);
    }
    Ok(())
}

/// Whether every queued settle has been sent and answered.
pub(super) fn drained(inner: &Inner) -> bool {
    let r = inner.reservations.locked();
    r.pending.is_empty() && r.sending == 0
}

/// Every reservation held gets a fresh expiry (and is counted again if
/// Redis lost it).
pub(super) async fn renew(inner: &Inner, conn: &mut MultiplexedConnection) -> Result<(), Failed> {
    let held: Vec<(Arc<str>, String)> = inner
        .reservations
        .locked()
        .held
        .iter()
        .flat_map(|(id, h)| {
            let member = inner.member(*id, h.tokens, h.spend);
            h.keys.iter().map(move |k| (k.clone(), member.clone()))
        })
        .collect();
    let ttl = inner.lease_ttl.as_millis() as u64;
    for chunk in held.chunks(RENEW_CHUNK) {
        let mut invocation = inner.scripts.renew_reservations.prepare_invoke();
        invocation.arg(ttl);
        for (key, member) in chunk {
            invocation.key(&**key).arg(member);
        }
        match tokio::time::timeout(BACKGROUND_TIMEOUT, invocation.invoke_async::<i64>(conn)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if super::answered(&e) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no answer to the reservation renewal".into()),
        }
    }
    Ok(())
}

/// A budget book as the fleet has it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FleetBudget {
    /// Settled in each current window, in `Bound::ALL`'s order.
    pub(crate) used: [u64; 7],
    pub(crate) reserved_tokens: u64,
    pub(crate) reserved_spend: u64,
    pub(crate) in_flight: u64,
    /// Redis's clock, Unix seconds.
    pub(crate) now: u64,
}

/// Read a budget from Redis (for the admin view), under the background
/// bound; `None` when Redis is away or does not answer.
pub(super) async fn view(inner: &Inner, key: &str) -> Option<FleetBudget> {
    let conn = inner.conn.load_full()?;
    let mut c = (*conn).clone();
    let mut invocation = inner.scripts.budget_view.prepare_invoke();
    invocation.key(key);
    for edge in inner.spans() {
        invocation.arg(edge);
    }
    let call = invocation.invoke_async::<Vec<String>>(&mut c);
    let answer = tokio::time::timeout(BACKGROUND_TIMEOUT, call)
        .await
        .ok()?
        .ok()?;
    let n = |i: usize| {
        answer
            .get(i)
            .and_then(|v| v.parse::<i64>().ok())
            .map_or(0, |v| v.max(0) as u64)
    };
    Some(FleetBudget {
        used: std::array::from_fn(n),
        reserved_tokens: n(7),
        reserved_spend: n(8),
        in_flight: n(9),
        now: n(10),
    })
}
