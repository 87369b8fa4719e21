//! Which server of an upstream group takes a request, and which servers
//! are out.
//!
//! A [`Group`] is a route's servers (each with a weight, some marked
//! backup) and what weir has learnt about them: requests in flight, a
//! latency average, consecutive failures and ejections. [`Group::pick`]
//! chooses by the group's [`Policy`] among the servers that are in —
//! primaries, or the backups when no primary is — and returns a [`Pick`],
//! which counts the request in flight until it is dropped and is told how
//! the request went ([`Pick::finish`]). When every server is out, `pick`
//! says when the first comes back, so the route answers at once instead of
//! queueing. Besides failing (passive ejection, [`Ejection`]), a server
//! can be held out until a time it named, or for refusing connections
//! ([`Group::hold`], [`Group::refused`]): LLM upstreams' cooldowns.
//!
//! Pure and clock-driven (tokio's `Instant`, so tests run on paused time);
//! it knows nothing of HTTP. The proxy and the LLM routes own what a server
//! *is* (the type parameter) and decide what counts as a failure.

mod budget;
mod eject;
mod ewma;
mod hold;
mod ring;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

pub(crate) use budget::Budget;
use eject::Health;
use ewma::PeakEwma;
pub(crate) use hold::Reason;
use ring::Ring;
pub(crate) use ring::key;

pub(crate) use crate::config::{Ejection, Member, Policy};
use crate::sync::Locked;

/// A server and what is known of it.
#[derive(Debug)]
struct Server<T> {
    member: Member<T>,
    in_flight: AtomicU32,
    latency: std::sync::Mutex<PeakEwma>,
    health: std::sync::Mutex<Health>,
}

impl<T> Server<T> {
    fn new(member: Member<T>, health: Health) -> Self {
        Server {
            member,
            in_flight: AtomicU32::new(0),
            latency: std::sync::Mutex::new(PeakEwma::default()),
            health: std::sync::Mutex::new(health),
        }
    }
}

/// How a request to a server went, as the caller judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// An answer (whatever its status, unless the caller counts it as a
    /// failure), after `latency`.
    Answered(Duration),
    /// No usable answer: refused, reset, timed out, or a status the
    /// caller counts as the server failing.
    Failed,
}

/// A server going out of its group or coming back, for the caller to log
/// and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Taken out until then.
    Out { until: Instant },
    /// Answered after having been out, or passed its health check again.
    Back,
    /// Failed its active health check.
    Down,
}

/// Why no server was picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AllOut {
    /// When the first ejected server comes back (none: every server was
    /// excluded by the caller).
    pub(crate) until: Option<Instant>,
}

/// A server as the dashboard shows it ([`Group::view`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MemberView {
    /// Out: why (`health_check`, `failing`, `rate_limited`, `overloaded`,
    /// `unreachable`) and for how much longer, when known.
    pub(crate) out: Option<(&'static str, Option<Duration>)>,
    /// Failures since its last success.
    pub(crate) failures: u32,
    pub(crate) in_flight: u32,
    /// Its peak-EWMA latency estimate (decayed to now).
    pub(crate) latency: Duration,
    pub(crate) weight: u32,
    pub(crate) backup: bool,
}

/// A route's servers and their state.
#[derive(Debug)]
pub(crate) struct Group<T> {
    /// Shared with the group this one was carried over from, if any, so a
    /// request picked from the old group still counts on the same server.
    servers: Box<[Arc<Server<T>>]>,
    policy: Policy,
    ejection: Ejection,
    /// Nginx's smooth weighted round robin: each server's current weight.
    round_robin: std::sync::Mutex<Vec<i64>>,
    ring: Option<Ring>,
}

impl<T> Group<T> {
    pub(crate) fn new(members: Vec<Member<T>>, policy: Policy, ejection: Ejection) -> Self {
        let ring = (policy == Policy::Hash).then(|| Ring::new(members.iter().map(|m| m.weight)));
        let round_robin = std::sync::Mutex::new(vec![0; members.len()]);
        Group {
            servers: members
                .into_iter()
                .map(|member| Arc::new(Server::new(member, Health::default())))
                .collect(),
            policy,
            ejection,
            round_robin,
            ring,
        }
    }

    /// A group of `members` that carries over what `old` knows: a member
    /// that is (`same`) a server of `old` is that server — its requests in
    /// flight, latency and time out go on, and requests picked from `old`
    /// still count on it — and any other is made (`make`) and joins now,
    /// with slow start. Servers of `old` not among `members` are in no new
    /// pick; they leave when the picks already made are dropped.
    pub(crate) fn carrying<M>(
        old: &Group<T>,
        members: Vec<Member<M>>,
        same: impl Fn(&T, &M) -> bool,
        mut make: impl FnMut(M) -> T,
        now: Instant,
    ) -> Self {
        let mut group = Group::new(Vec::new(), old.policy, old.ejection);
        group.ring =
            (old.policy == Policy::Hash).then(|| Ring::new(members.iter().map(|m| m.weight)));
        group.round_robin = std::sync::Mutex::new(vec![0; members.len()]);
        group.servers = members
            .into_iter()
            .map(|m| {
                match old
                    .servers
                    .iter()
                    .find(|s| same(&s.member.target, &m.target))
                {
                    Some(kept) => kept.clone(),
                    None => Arc::new(Server::new(
                        Member {
                            target: make(m.target),
                            weight: m.weight,
                            backup: m.backup,
                        },
                        Health::joining(now),
                    )),
                }
            })
            .collect();
        group
    }

    pub(crate) fn len(&self) -> usize {
        self.servers.len()
    }

    pub(crate) fn member(&self, index: usize) -> Option<&Member<T>> {
        self.servers.get(index).map(|s| &s.member)
    }

    /// What is known of server `index` at `now`, for the dashboard: read
    /// only, taking each of its locks once.
    pub(crate) fn view(&self, index: usize, now: Instant) -> Option<MemberView> {
        let s = self.servers.get(index)?;
        let (out, failures) = {
            let health = s.health.locked();
            (health.why_out(now), health.consecutive())
        };
        Some(MemberView {
            out: out.map(|(why, until)| (why, until.map(|u| u.saturating_duration_since(now)))),
            failures,
            in_flight: s.in_flight.load(Ordering::Relaxed),
            latency: Duration::from_nanos(s.latency.locked().value(now) as u64),
            weight: s.member.weight,
            backup: s.member.backup,
        })
    }

    /// Every server's [`view`](Self::view), named by `label`.
    pub(crate) fn views(
        &self,
        now: Instant,
        label: impl Fn(&T) -> String,
    ) -> Vec<(String, MemberView)> {
        (0..self.servers.len())
            .filter_map(|i| Some((label(&self.member(i)?.target), self.view(i, now)?)))
            .collect()
    }

    /// Whether server `index` is in at `now` (not ejected).
    #[cfg(test)]
    pub(crate) fn is_in(&self, index: usize, now: Instant) -> bool {
        self.servers
            .get(index)
            .is_some_and(|s| s.health.locked().is_in(now))
    }

    /// The active health check's verdict on server `index`: down takes it
    /// out whatever the cap on the share out (the check says it cannot
    /// serve), up brings it back. Says when this changed its state.
    pub(crate) fn checked(&self, index: usize, up: bool) -> Option<Change> {
        let s = self.servers.get(index)?;
        if !s.health.locked().checked(up) {
            return None;
        }
        Some(if up { Change::Back } else { Change::Down })
    }

    /// Requests in flight on server `index`.
    #[cfg(test)]
    pub(crate) fn in_flight(&self, index: usize) -> u32 {
        self.servers
            .get(index)
            .map_or(0, |s| s.in_flight.load(Ordering::Relaxed))
    }

    /// A server for one request: by the policy, among the servers that are
    /// in and not in `exclude` (those already tried for this request);
    /// `key` is the request's hash key, for [`Policy::Hash`].
    pub(crate) fn pick(
        self: &Arc<Self>,
        key: Option<u64>,
        exclude: &[usize],
        now: Instant,
    ) -> Result<Pick<T>, AllOut> {
        // A group of one is never out (unless held: it said so) and has
        // nothing to choose.
        if self.servers.len() == 1 && exclude.is_empty() && self.held(0, now).is_none() {
            return Ok(Pick::new(self.clone(), 0, now));
        }
        let eligible = self.eligible(exclude, now);
        if eligible.is_empty() {
            let until = self
                .servers
                .iter()
                .enumerate()
                .filter(|(i, _)| !exclude.contains(i))
                .filter_map(|(_, s)| s.health.locked().out_until(now))
                .min();
            return Err(AllOut { until });
        }
        let index = match self.policy {
            Policy::P2cEwma => self.p2c(&eligible, now),
            Policy::RoundRobin => self.round_robin(&eligible, now),
            Policy::LeastInFlight => self.least_in_flight(&eligible, now),
            Policy::Hash => match (key, &self.ring) {
                (Some(key), Some(ring)) => ring.lookup(key, |i| eligible.contains(&i)),
                _ => None,
            }
            .unwrap_or_else(|| self.p2c(&eligible, now)),
        };
        Ok(Pick::new(self.clone(), index, now))
    }

    /// The primaries that are in, else the backups that are in.
    fn eligible(&self, exclude: &[usize], now: Instant) -> Vec<usize> {
        let of = |backup: bool| -> Vec<usize> {
            self.servers
                .iter()
                .enumerate()
                .filter(|(i, s)| {
                    s.member.backup == backup
                        && !exclude.contains(i)
                        && s.health.locked().is_in(now)
                })
                .map(|(i, _)| i)
                .collect()
        };
        let primaries = of(false);
        if primaries.is_empty() {
            of(true)
        } else {
            primaries
        }
    }

    /// A server's weight now: its configured weight, ramped up over the
    /// slow-start window after it (re)joins.
    fn weight(&self, index: usize, now: Instant) -> f64 {
        let s = &self.servers[index];
        let ramp = s.health.locked().ramp(now, self.ejection.slow_start);
        f64::from(s.member.weight.max(1)) * ramp
    }

    fn p2c(&self, eligible: &[usize], now: Instant) -> usize {
        let (a, b) = match eligible.len() {
            0 | 1 => return eligible.first().copied().unwrap_or(0),
            n => {
                let a = fastrand::usize(..n);
                let mut b = fastrand::usize(..n - 1);
                if b >= a {
                    b += 1;
                }
                (eligible[a], eligible[b])
            }
        };
        let cost = |i: usize| {
            let s = &self.servers[i];
            let latency = s.latency.locked().value(now);
            let pending = f64::from(s.in_flight.load(Ordering::Relaxed)) + 1.0;
            latency * pending / self.weight(i, now)
        };
        if cost(b) < cost(a) { b } else { a }
    }

    fn round_robin(&self, eligible: &[usize], now: Instant) -> usize {
        let mut current = self.round_robin.locked();
        let mut total = 0i64;
        let mut best: Option<usize> = None;
        for &i in eligible {
            // Whole units of a hundredth keep slow start's ramp in the
            // integer arithmetic nginx's algorithm uses.
            let w = (self.weight(i, now) * 100.0).ceil() as i64;
            if let Some(c) = current.get_mut(i) {
                *c = c.saturating_add(w);
            }
            total = total.saturating_add(w);
            if best.is_none_or(|b| current[i] > current[b]) {
                best = Some(i);
            }
        }
        let chosen = best.unwrap_or(eligible[0]);
        if let Some(c) = current.get_mut(chosen) {
            *c = c.saturating_sub(total);
        }
        chosen
    }

    fn least_in_flight(&self, eligible: &[usize], now: Instant) -> usize {
        let load = |i: usize| {
            f64::from(self.servers[i].in_flight.load(Ordering::Relaxed)) / self.weight(i, now)
        };
        let least = eligible
            .iter()
            .map(|&i| load(i))
            .fold(f64::INFINITY, f64::min);
        let tied: Vec<usize> = eligible
            .iter()
            .copied()
            .filter(|&i| load(i) <= least)
            .collect();
        tied.get(fastrand::usize(..tied.len().max(1)))
            .copied()
            .unwrap_or(eligible[0])
    }

    /// Record how a request to `index` went.
    fn record(&self, index: usize, outcome: Outcome, now: Instant) -> Option<Change> {
        let s = self.servers.get(index)?;
        // An answer ends a hold for refusing, whatever the group's size.
        let unheld =
            matches!(outcome, Outcome::Answered(_)) && s.health.locked().held.answered(now);
        // nginx's rule: a group of one is never taken out (there is
        // nothing to send its requests to instead), and has no choice
        // for the latency to inform.
        if self.servers.len() < 2 {
            return unheld.then_some(Change::Back);
        }
        match outcome {
            Outcome::Answered(latency) => {
                s.latency.locked().observe(latency, now);
                let back = s.health.locked().succeeded();
                (back || unheld).then_some(Change::Back)
            }
            Outcome::Failed => {
                // Counted before the server's own lock is taken: never two
                // servers' locks at once.
                let out = self
                    .servers
                    .iter()
                    .filter(|s| s.health.locked().out_until(now).is_some())
                    .count();
                let may_eject = out < self.ejection.most_out(self.servers.len());
                s.health
                    .locked()
                    .failed(&self.ejection, may_eject, now)
                    .map(|until| Change::Out { until })
            }
        }
    }
}

/// One request's server: counted in flight until dropped.
#[derive(Debug)]
pub(crate) struct Pick<T> {
    group: Arc<Group<T>>,
    index: usize,
    started: Instant,
    finished: bool,
}

impl<T> Pick<T> {
    fn new(group: Arc<Group<T>>, index: usize, now: Instant) -> Self {
        if let Some(s) = group.servers.get(index) {
            s.in_flight.fetch_add(1, Ordering::Relaxed);
        }
        Pick {
            group,
            index,
            started: now,
            finished: false,
        }
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The server picked.
    pub(crate) fn target(&self) -> &T {
        &self.group.servers[self.index].member.target
    }

    /// When the request was sent.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// How the request went; only the first call counts. The request
    /// stays in flight until the pick is dropped. Says when this took the
    /// server out, or brought it back.
    pub(crate) fn finish(&mut self, outcome: Outcome, now: Instant) -> Option<Change> {
        if self.finished {
            return None;
        }
        self.finished = true;
        self.group.record(self.index, outcome, now)
    }
}

impl<T> Drop for Pick<T> {
    fn drop(&mut self) {
        if let Some(s) = self.group.servers.get(self.index) {
            s.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
