//! Runtime keys: issued, changed, rotated and revoked through the admin
//! API (and `weir keys`), kept in the database, served from memory
//! (docs/decisions/083).
//!
//! A request's key is looked up by its SHA-256 in a map behind an
//! `ArcSwap` — no lock, no database. [`Keys::watch`] reads the store's
//! change number when PostgreSQL notifies a change, and at the store's
//! poll interval (every 250 ms for SQLite; a fallback every 2 s for
//! PostgreSQL), and reloads the map when it moved, so a change made
//! through any instance sharing the database is served everywhere within a
//! second; when the database does not answer, the map in memory keeps
//! serving and `weir_database_up` says so.

mod manage;
mod teams;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;

pub(crate) use manage::{KeySpec, view};
pub(crate) use teams::{Team, TeamSpec, Written, team_view};

use crate::config::{AllowedModels, Budget, DatabaseSettings};
use crate::store::{KeyRow, Store, UsageRows, unix_now};
use crate::telemetry::DatabaseMetrics;

/// What every key starts with (so a leaked one can be recognised, and
/// told from a provider's).
pub(crate) const SECRET_PREFIX: &str = "wk-";

/// A live key, as a request sees it.
#[derive(Debug)]
pub(crate) struct Key {
    pub(crate) id: Arc<str>,
    pub(crate) name: Arc<str>,
    pub(crate) user: Option<Arc<str>>,
    pub(crate) team: Option<Arc<str>>,
    /// The routes it may be used on; empty = every route that accepts
    /// runtime keys.
    pub(crate) routes: Vec<String>,
    pub(crate) models: AllowedModels,
    pub(crate) budget: Budget,
    /// Requests in flight at once; 0 = the route's own bound.
    pub(crate) max_concurrent: usize,
    /// Requests a second (`None`: only the route's per-client rate).
    pub(crate) rate: Option<KeyRate>,
    /// Unix seconds.
    pub(crate) expires_at: Option<i64>,
}

/// A key's request rate: `per_second` sustained, `burst` at once (GCRA,
/// as a route's `rate_limit_per_second` and `rate_limit_burst`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRate {
    pub(crate) per_second: u32,
    pub(crate) burst: u32,
}

impl KeyRate {
    /// The rate of stored `per_second` and `burst` (the burst defaults to
    /// the rate, as a route's does); none without a rate.
    pub(crate) fn of(per_second: Option<u64>, burst: Option<u64>) -> Option<KeyRate> {
        let per_second = u32::try_from(per_second?).unwrap_or(u32::MAX).max(1);
        let burst = burst.map_or(per_second, |b| u32::try_from(b).unwrap_or(u32::MAX));
        Some(KeyRate {
            per_second,
            burst: burst.max(1),
        })
    }
}

impl Key {
    /// The key of `row`, under its team's policy when the database keeps
    /// one (`teams`).
    fn of(row: &KeyRow, teams: &HashMap<Arc<str>, Arc<Team>>) -> Key {
        let mut key = Key {
            id: row.id.as_str().into(),
            name: row.name.as_str().into(),
            user: row.user.as_deref().map(Into::into),
            team: row.team.as_deref().map(Into::into),
            routes: row.routes.clone(),
            models: AllowedModels(row.models.clone()),
            budget: Budget {
                tokens_per_minute: row.tokens_per_minute,
                tokens_per_day: row.tokens_per_day,
                spend_per_day: row.spend_per_day,
                tokens_per_week: row.tokens_per_week,
                spend_per_week: row.spend_per_week,
                tokens_per_month: row.tokens_per_month,
                spend_per_month: row.spend_per_month,
                warn_at: row
                    .warn_at
                    .and_then(|p| u8::try_from(p).ok())
                    .filter(|p| (1..100).contains(p)),
            },
            max_concurrent: row
                .max_concurrent
                .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            rate: KeyRate::of(row.rate_limit_per_second, row.rate_limit_burst),
            expires_at: row.expires_at,
        };
        if let Some(team) = row.team.as_deref().and_then(|t| teams.get(t)) {
            team.fill(&mut key);
        }
        key
    }

    /// Whether it may be used on `route`.
    pub(crate) fn opens(&self, route: &str) -> bool {
        self.routes.is_empty() || self.routes.iter().any(|r| r == route)
    }
}

/// What a presented secret is.
#[derive(Debug)]
pub(crate) enum Found {
    Live(Arc<Key>),
    /// It was a key, and it has expired.
    Expired,
    /// No live key has it (never issued, revoked, or rotated away).
    Unknown,
}

/// The live keys by their secret's SHA-256, as of a change number.
#[derive(Default, Clone)]
struct Table {
    version: Option<i64>,
    by_hash: HashMap<[u8; 32], Arc<Key>>,
    by_id: HashMap<Arc<str>, Arc<Key>>,
    /// The teams kept in the database, config-defined names left out.
    teams: HashMap<Arc<str>, Arc<Team>>,
}

/// The keys of this process: the store, and the table served from.
pub(crate) struct Keys {
    store: Store,
    table: ArcSwap<Table>,
    /// The teams the config defines: theirs, not the database's.
    config_teams: ArcSwap<HashSet<String>>,
    /// Whether the database answered last time (a failure is logged once
    /// per outage).
    up: AtomicBool,
    metrics: DatabaseMetrics,
}

/// The database's parts a running weir holds: the keys served from it,
/// and the usage rows on their way to it.
#[derive(Clone)]
pub(crate) struct Database {
    pub(crate) keys: Arc<Keys>,
    pub(crate) rows: UsageRows,
}

impl Database {
    /// Open the database (its schema brought up to date), read the keys,
    /// and start the key watcher and the usage writer.
    pub(crate) async fn start(
        settings: &DatabaseSettings,
        metrics: DatabaseMetrics,
    ) -> Result<Database, String> {
        let store = Store::open(&settings.url)
            .await
            .map_err(|e| e.to_string())?;
        let keys = Keys::open(store.clone(), metrics.clone()).await?;
        tokio::spawn(keys.clone().watch());
        let rows = UsageRows::start(
            store,
            settings.usage_queue,
            settings.usage_retention,
            metrics,
        );
        tracing::info!(at = %settings.url.shown(), "database open");
        Ok(Database { keys, rows })
    }
}

/// The SHA-256 of a secret.
pub(crate) fn hash(secret: &str) -> [u8; 32] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

impl Keys {
    /// The keys of `store`, read once now (a database that cannot be read
    /// at start is an error: there is nothing yet to serve from).
    pub(crate) async fn open(store: Store, metrics: DatabaseMetrics) -> Result<Arc<Keys>, String> {
        let keys = Arc::new(Keys {
            store,
            table: ArcSwap::from_pointee(Table::default()),
            config_teams: ArcSwap::from_pointee(HashSet::new()),
            up: AtomicBool::new(true),
            metrics,
        });
        keys.refresh().await.map_err(|e| e.to_string())?;
        keys.metrics.up.set(1);
        Ok(keys)
    }

    /// The key `secret` is, now.
    pub(crate) fn find(&self, secret: &str) -> Found {
        if !secret.starts_with(SECRET_PREFIX) {
            return Found::Unknown;
        }
        let table = self.table.load();
        match table.by_hash.get(&hash(secret)) {
            Some(k) if k.expires_at.is_some_and(|at| at <= unix_now()) => Found::Expired,
            Some(k) => Found::Live(k.clone()),
            None => Found::Unknown,
        }
    }

    /// The change number the table in memory is at: it moves with every
    /// change to keys and teams.
    pub(crate) fn version(&self) -> Option<i64> {
        self.table.load().version
    }

    /// The live key of this id, as served now.
    pub(crate) fn by_id(&self, id: &str) -> Option<Arc<Key>> {
        self.table.load().by_id.get(id).cloned()
    }

    /// Reload the table if the store's change number moved.
    pub(crate) async fn refresh(&self) -> Result<(), crate::store::StoreError> {
        let version = self.store.version().await?;
        if self.table.load().version == Some(version) {
            return Ok(());
        }
        let rows = self.store.keys().await?;
        let config = self.config_teams.load();
        let teams: HashMap<Arc<str>, Arc<Team>> = self
            .store
            .teams()
            .await?
            .iter()
            .filter(|t| !config.contains(&t.name))
            .map(|t| (t.name.as_str().into(), Arc::new(Team::of(t))))
            .collect();
        let mut by_hash = HashMap::with_capacity(rows.len());
        let mut by_id = HashMap::with_capacity(rows.len());
        for row in rows.iter().filter(|r| r.revoked_at.is_none()) {
            let Ok(h) = <[u8; 32]>::try_from(row.hash.as_slice()) else {
                continue;
            };
            let key = Arc::new(Key::of(row, &teams));
            by_id.insert(key.id.clone(), key.clone());
            by_hash.insert(h, key);
        }
        self.metrics.keys.set(by_hash.len() as i64);
        self.table.store(Arc::new(Table {
            version: Some(version),
            by_hash,
            by_id,
            teams,
        }));
        Ok(())
    }

    /// Keep the table fresh until the task is dropped: a read of the
    /// change number on each sign of a change the store gives (PostgreSQL's
    /// notifications, a connection made again) and at its poll interval.
    pub(crate) async fn watch(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.store.poll_every());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = self.store.changed() => {}
            }
            let result = self.refresh().await;
            self.health(result);
        }
    }

    /// Note whether the database answered; log the change, once.
    fn health(&self, result: Result<(), crate::store::StoreError>) {
        match result {
            Ok(()) => {
                self.metrics.up.set(1);
                if !self.up.swap(true, Ordering::Relaxed) {
                    tracing::info!("database: reachable again; keys are up to date");
                }
            }
            Err(e) => {
                self.metrics.up.set(0);
                if self.up.swap(false, Ordering::Relaxed) {
                    tracing::error!(
                        error = %e,
                        "database: unreachable; keys in memory keep serving, changes wait until it answers"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
