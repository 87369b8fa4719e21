//! Each runtime key's budget ledger, concurrency gate and request rate,
//! process-wide and by key id: a key's budget is the key's on every route
//! it opens, and survives reloads and changes to the key (a new limit
//! applies to the same ledger). With `[cluster]` the gate and the rate are
//! the fleet's, decided in Redis (docs/decisions/106). Each team's shared ledger likewise, by team name:
//! a team the config defines (`[[teams]]`) first, else one the database
//! keeps (docs/decisions/102), looked up in memory per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::ledger::{Clock, Ledger};
use crate::admit::TokenGate;
use crate::admit::rate::RateLimit;
use crate::cluster::Cluster;
use crate::config::{Budget, TeamBudget};
use crate::keys::{Key, KeyRate, Keys};
use crate::sync::Locked;

/// Books kept at most; past it, those of keys no request holds are
/// dropped (a revoked key's go then).
const MAX_BOOKS: usize = 100_000;

/// Clients a key's own rate limiter tracks: the key alone.
const RATE_KEYS: usize = 16;

/// One key's ledger, gate and rate.
#[derive(Clone)]
pub(crate) struct KeyBook {
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) gate: Arc<TokenGate>,
    /// The key's requests a second, when it has a rate.
    pub(crate) rate: Option<Arc<RateLimit>>,
    /// What the gate and the rate were made for: the concurrency, the
    /// rate, and whether the fleet keeps them.
    made: (usize, Option<KeyRate>, bool),
}

/// Every key's book.
#[derive(Default)]
pub(crate) struct KeyBooks {
    by_id: Mutex<HashMap<Arc<str>, KeyBook>>,
}

impl KeyBooks {
    /// The book of `key`, made the first time; its gate and rate made
    /// again when the key's concurrency or rate changed, or the fleet
    /// (`cluster`) came or went.
    pub(crate) fn of(&self, key: &Key, cluster: Option<&Arc<Cluster>>) -> KeyBook {
        let mut books = self.by_id.locked();
        if books.len() >= MAX_BOOKS && !books.contains_key(&key.id) {
            books.retain(|_, b| Arc::strong_count(&b.ledger) > 1);
        }
        let made = (key.max_concurrent, key.rate, cluster.is_some());
        let book = books.entry(key.id.clone()).or_insert_with(|| KeyBook {
            ledger: Arc::new(Ledger::new(Clock::system())),
            gate: Arc::new(gate(key, cluster)),
            rate: rate(key, cluster),
            made,
        });
        if book.made != made {
            book.gate = Arc::new(gate(key, cluster));
            book.rate = rate(key, cluster);
            book.made = made;
        }
        book.clone()
    }

    /// Every key's ledger kept now, by key id (for the admin views).
    pub(crate) fn ledgers(&self) -> Vec<(Arc<str>, Arc<Ledger>)> {
        let books = self.by_id.locked();
        books
            .iter()
            .map(|(id, b)| (id.clone(), b.ledger.clone()))
            .collect()
    }
}

/// A key's concurrency gate: the fleet's slots with `cluster`.
fn gate(key: &Key, cluster: Option<&Arc<Cluster>>) -> TokenGate {
    let shared = cluster.map(|c| (c, c.key_lease_key(&key.id)));
    TokenGate::new(key.max_concurrent, shared)
}

/// A key's own rate limiter: decided in Redis with `cluster`.
fn rate(key: &Key, cluster: Option<&Arc<Cluster>>) -> Option<Arc<RateLimit>> {
    let r = key.rate?;
    let limit = RateLimit::new(r.per_second, r.burst, RATE_KEYS);
    Some(Arc::new(match cluster {
        Some(c) => limit.sharing_under(c, c.key_rate_prefix()),
        None => limit,
    }))
}

/// One team's shared budget and the ledger it is counted in.
#[derive(Clone)]
pub(crate) struct TeamBook {
    pub(crate) name: Arc<str>,
    pub(crate) budget: Budget,
    pub(crate) ledger: Arc<Ledger>,
}

/// Every team's ledger, by name, process-wide: kept across reloads while
/// the team keeps a budget (a new bound applies to the same ledger).
#[derive(Default)]
pub(crate) struct TeamLedgers {
    by_name: Mutex<HashMap<Arc<str>, Arc<Ledger>>>,
    /// The ledgers of teams the database keeps (a team changed keeps its
    /// ledger; one deleted loses it at the next prune).
    runtime: RuntimeLedgers,
}

/// The ledgers of the database's teams, by name.
type RuntimeLedgers = Arc<Mutex<HashMap<Arc<str>, Arc<Ledger>>>>;

/// The team budgets of one configuration (`[[teams]]`), with their
/// ledgers, and the database's teams; shared by its routes.
#[derive(Default)]
pub(crate) struct TeamBooks {
    by_name: HashMap<Arc<str>, TeamBook>,
    /// The teams the database keeps, served from memory, and their ledgers.
    runtime: Option<(Arc<Keys>, RuntimeLedgers)>,
}

impl TeamBooks {
    /// The books of `teams`, each with its ledger from `ledgers` (made the
    /// first time); the ledgers of teams no longer listed are dropped.
    /// With `keys`, a team not in the config is looked up among the
    /// database's.
    pub(crate) fn new(
        teams: &[TeamBudget],
        ledgers: &TeamLedgers,
        keys: Option<Arc<Keys>>,
    ) -> TeamBooks {
        let mut kept = ledgers.by_name.locked();
        kept.retain(|name, _| teams.iter().any(|t| *t.name == **name));
        let by_name = teams
            .iter()
            .map(|t| {
                let name: Arc<str> = t.name.as_str().into();
                let ledger = kept
                    .entry(name.clone())
                    .or_insert_with(|| Arc::new(Ledger::new(Clock::system())))
                    .clone();
                let book = TeamBook {
                    name: name.clone(),
                    budget: t.budget,
                    ledger,
                };
                (name, book)
            })
            .collect();
        if let Some(keys) = &keys {
            let mut runtime = ledgers.runtime.locked();
            runtime.retain(|name, _| keys.team(name).is_some());
        }
        TeamBooks {
            by_name,
            runtime: keys.map(|k| (k, ledgers.runtime.clone())),
        }
    }

    /// The budget `team` shares, when it has one: the config's team of
    /// that name, else the database's.
    pub(crate) fn of(&self, team: Option<&str>) -> Option<TeamBook> {
        let team = team?;
        if let Some(book) = self.by_name.get(team) {
            return Some(book.clone());
        }
        let (keys, ledgers) = self.runtime.as_ref()?;
        let kept = keys.team(team).filter(|t| !t.budget.is_unbounded())?;
        let mut ledgers = ledgers.locked();
        if ledgers.len() >= MAX_BOOKS && !ledgers.contains_key(team) {
            ledgers.retain(|name, l| Arc::strong_count(l) > 1 || keys.team(name).is_some());
        }
        let ledger = ledgers
            .entry(kept.name.clone())
            .or_insert_with(|| Arc::new(Ledger::new(Clock::system())))
            .clone();
        Some(TeamBook {
            name: kept.name.clone(),
            budget: kept.budget,
            ledger,
        })
    }

    /// Every team's book (for the admin views).
    pub(crate) fn all(&self) -> Vec<TeamBook> {
        self.by_name.values().cloned().collect()
    }
}
