//! Each runtime key's budget ledger and concurrency gate, process-wide
//! and by key id: a key's budget is the key's on every route it opens,
//! and survives reloads and changes to the key (a new limit applies to
//! the same ledger). Each team's shared ledger likewise, by team name:
//! a team the config defines (`[[teams]]`) first, else one the database
//! keeps (docs/decisions/102), looked up in memory per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::ledger::{Clock, Ledger};
use crate::admit::TokenGate;
use crate::config::{Budget, TeamBudget};
use crate::keys::{Key, Keys};
use crate::sync::Locked;

/// Books kept at most; past it, those of keys no request holds are
/// dropped (a revoked key's go then).
const MAX_BOOKS: usize = 100_000;

/// One key's ledger and gate.
#[derive(Clone)]
pub(crate) struct KeyBook {
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) gate: Arc<TokenGate>,
    /// The concurrency the gate was made for.
    limit: usize,
}

/// Every key's book.
#[derive(Default)]
pub(crate) struct KeyBooks {
    by_id: Mutex<HashMap<Arc<str>, KeyBook>>,
}

impl KeyBooks {
    /// The book of `key`, made the first time; its gate made again when
    /// the key's concurrency changed.
    pub(crate) fn of(&self, key: &Key) -> KeyBook {
        let mut books = self.by_id.locked();
        if books.len() >= MAX_BOOKS && !books.contains_key(&key.id) {
            books.retain(|_, b| Arc::strong_count(&b.ledger) > 1);
        }
        let book = books.entry(key.id.clone()).or_insert_with(|| KeyBook {
            ledger: Arc::new(Ledger::new(Clock::system())),
            gate: Arc::new(TokenGate::new(key.max_concurrent, None)),
            limit: key.max_concurrent,
        });
        if book.limit != key.max_concurrent {
            book.gate = Arc::new(TokenGate::new(key.max_concurrent, None));
            book.limit = key.max_concurrent;
        }
        book.clone()
    }
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
}
