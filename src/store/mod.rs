//! The system of record: runtime keys and usage rows, in an SQLite file
//! (one instance) or PostgreSQL (a fleet) — docs/decisions/083 and 087.
//!
//! Nothing on the request path calls it: keys are served from memory
//! (`keys`), usage rows are queued and written in batches (`rows`). Both
//! databases are behind one [`Store`], so its callers do not know which;
//! every call answers a [`StoreError`] rather than panicking on anything
//! the database holds.

mod keys;
mod postgres;
mod rows;
mod schema;
mod sqlite;
mod teams;
mod usage;

pub(crate) use keys::{KeyChange, KeyRow};
pub(crate) use rows::UsageRows;
pub(crate) use teams::{BOUNDS, BudgetChange, TeamChange, TeamRow, bounds};
pub(crate) use usage::{By, Group, Report, ReportLine, UsageRow};

use crate::config::DatabaseUrl;
use postgres::Postgres;
use sqlite::Sqlite;

/// A store call that failed: where, and what the database said.
#[derive(Debug, thiserror::Error)]
#[error("database {at}: {what}")]
pub(crate) struct StoreError {
    at: String,
    what: String,
}

/// The database.
#[derive(Clone, Debug)]
pub(crate) enum Store {
    Sqlite(Sqlite),
    Postgres(Postgres),
}

/// Call the same method on whichever database it is.
macro_rules! either {
    ($store:expr, $db:ident => $call:expr) => {
        match $store {
            Store::Sqlite($db) => $call.await,
            Store::Postgres($db) => $call.await,
        }
    };
}

impl Store {
    /// Open (an SQLite file is created if needed) the database at `url`
    /// and bring its schema up to this binary's.
    pub(crate) async fn open(url: &DatabaseUrl) -> Result<Store, StoreError> {
        Ok(match url {
            DatabaseUrl::Sqlite(path) => Store::Sqlite(Sqlite::open(path).await?),
            DatabaseUrl::Postgres(url) => Store::Postgres(Postgres::open(url).await?),
        })
    }

    /// The schema step the database is at (after [`Store::open`], this
    /// binary's last).
    pub(crate) fn schema_step() -> usize {
        schema::STEPS.len()
    }

    /// How often the change number is read: SQLite has nothing else to
    /// tell of a change; PostgreSQL notifies, so its read is the fallback.
    pub(crate) fn poll_every(&self) -> std::time::Duration {
        match self {
            Store::Sqlite(_) => std::time::Duration::from_millis(250),
            Store::Postgres(_) => postgres::POLL,
        }
    }

    /// Wait for a sign that the keys may have changed (a notification, or
    /// the connection lost or made again); never, for SQLite.
    pub(crate) async fn changed(&self) {
        match self {
            Store::Sqlite(_) => std::future::pending().await,
            Store::Postgres(p) => p.changed().await,
        }
    }

    /// The number every change to the keys moves on.
    pub(crate) async fn version(&self) -> Result<i64, StoreError> {
        either!(self, db => db.version())
    }

    /// Every key, revoked ones included, oldest first.
    pub(crate) async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        either!(self, db => db.keys())
    }

    /// One key by id.
    pub(crate) async fn key(&self, id: &str) -> Result<Option<KeyRow>, StoreError> {
        either!(self, db => db.key(id))
    }

    /// Add a new key.
    pub(crate) async fn insert_key(&self, key: KeyRow) -> Result<(), StoreError> {
        either!(self, db => db.insert_key(key))
    }

    /// Change a key that is not revoked: the key as it now is, or `None`
    /// when there is no such key (or it is revoked).
    pub(crate) async fn change_key(
        &self,
        id: &str,
        change: KeyChange,
        secret: Option<(Vec<u8>, String)>,
    ) -> Result<Option<KeyRow>, StoreError> {
        either!(self, db => db.change_key(id, change, secret))
    }

    /// Revoke a key: whether it was live.
    pub(crate) async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        either!(self, db => db.revoke_key(id))
    }

    /// Every team, by name.
    pub(crate) async fn teams(&self) -> Result<Vec<TeamRow>, StoreError> {
        either!(self, db => db.teams())
    }

    /// Add `team`: it, or `None` when a team of its name is there.
    pub(crate) async fn insert_team(&self, team: TeamRow) -> Result<Option<TeamRow>, StoreError> {
        let name = team.name.clone();
        either!(self, db => db.put_team(&name, Some(team), TeamChange::default()))
    }

    /// Change a team: it as it now is, or `None` when there is none.
    pub(crate) async fn change_team(
        &self,
        name: &str,
        change: TeamChange,
    ) -> Result<Option<TeamRow>, StoreError> {
        either!(self, db => db.put_team(name, None, change))
    }

    /// Delete a team: whether there was one.
    pub(crate) async fn delete_team(&self, name: &str) -> Result<bool, StoreError> {
        either!(self, db => db.delete_team(name))
    }

    /// Write `rows` in one transaction.
    pub(crate) async fn insert_usage(&self, rows: Vec<UsageRow>) -> Result<(), StoreError> {
        either!(self, db => db.insert_usage(rows))
    }

    /// A key's (by id) or a team's (by name) requests, tokens and spend
    /// since `from_ms`.
    pub(crate) async fn used_since(
        &self,
        by: By,
        id: &str,
        from_ms: i64,
    ) -> Result<(u64, u64, u64), StoreError> {
        either!(self, db => db.used_since(by, id, from_ms))
    }

    /// Delete rows older than `before_ms`: how many.
    pub(crate) async fn prune_usage(&self, before_ms: i64) -> Result<u64, StoreError> {
        either!(self, db => db.prune_usage(before_ms))
    }

    /// Sum the rows of `report`'s period by its groups, the dearest first.
    pub(crate) async fn report(&self, report: Report) -> Result<Vec<ReportLine>, StoreError> {
        either!(self, db => db.report(report))
    }
}

/// `row` with `change` and a new secret applied, as of now.
fn changed(row: &mut KeyRow, change: KeyChange, secret: Option<(Vec<u8>, String)>) {
    change.apply_to(row);
    if let Some((hash, prefix)) = secret {
        row.hash = hash;
        row.prefix = prefix;
    }
    row.updated_at = unix_now();
}

/// The team row to write: `create` when there is none yet, else `found`
/// with `change` applied, as of now; `None` when neither applies.
fn team_written(
    found: Option<TeamRow>,
    create: Option<TeamRow>,
    change: TeamChange,
) -> Option<TeamRow> {
    match (found, create) {
        (None, Some(new)) => Some(new),
        (Some(mut row), None) => {
            change.apply_to(&mut row);
            row.updated_at = unix_now();
            Some(row)
        }
        _ => None,
    }
}

/// Refuse a database a newer weir made (its steps are unknown here).
fn check_step(at: i64) -> Result<(), String> {
    let known = schema::STEPS.len() as i64;
    if at > known {
        return Err(format!(
            "its schema is at step {at}, newer than this weir's {known}: run the weir that made it, or restore a backup made before it"
        ));
    }
    Ok(())
}

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
