//! The `keys` table: what a runtime key is, as stored. The secret is
//! never here, only its SHA-256 (`hash`) and its first characters
//! (`prefix`) to tell keys apart.

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{Store, StoreError, unix_now};

/// One key, as the table holds it. Budgets' spend is in 10⁻¹² of the
/// currency, as the price table's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct KeyRow {
    pub(crate) id: String,
    #[serde(skip)]
    pub(crate) hash: Vec<u8>,
    pub(crate) prefix: String,
    pub(crate) name: String,
    pub(crate) user: Option<String>,
    pub(crate) team: Option<String>,
    pub(crate) metadata: serde_json::Value,
    pub(crate) routes: Vec<String>,
    pub(crate) models: Vec<String>,
    pub(crate) max_concurrent: Option<u64>,
    pub(crate) tokens_per_minute: Option<u64>,
    pub(crate) tokens_per_day: Option<u64>,
    pub(crate) spend_per_day: Option<u64>,
    pub(crate) tokens_per_week: Option<u64>,
    pub(crate) spend_per_week: Option<u64>,
    pub(crate) tokens_per_month: Option<u64>,
    pub(crate) spend_per_month: Option<u64>,
    /// The soft limit, a percent of each bound.
    pub(crate) warn_at: Option<u64>,
    pub(crate) expires_at: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) revoked_at: Option<i64>,
}

/// A change to a key's settings: each field set replaces the key's.
/// (`Some(None)` clears an optional one.)
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyChange {
    pub(crate) name: Option<String>,
    pub(crate) user: Option<Option<String>>,
    pub(crate) team: Option<Option<String>>,
    pub(crate) metadata: Option<serde_json::Value>,
    pub(crate) routes: Option<Vec<String>>,
    pub(crate) models: Option<Vec<String>>,
    pub(crate) max_concurrent: Option<Option<u64>>,
    pub(crate) tokens_per_minute: Option<Option<u64>>,
    pub(crate) tokens_per_day: Option<Option<u64>>,
    pub(crate) spend_per_day: Option<Option<u64>>,
    pub(crate) tokens_per_week: Option<Option<u64>>,
    pub(crate) spend_per_week: Option<Option<u64>>,
    pub(crate) tokens_per_month: Option<Option<u64>>,
    pub(crate) spend_per_month: Option<Option<u64>>,
    pub(crate) warn_at: Option<Option<u64>>,
    pub(crate) expires_at: Option<Option<i64>>,
}

impl KeyChange {
    /// Set on `row` every field this change sets.
    pub(crate) fn apply_to(self, row: &mut KeyRow) {
        fn set<T>(to: &mut T, from: Option<T>) {
            if let Some(v) = from {
                *to = v;
            }
        }
        set(&mut row.name, self.name);
        set(&mut row.user, self.user);
        set(&mut row.team, self.team);
        set(&mut row.metadata, self.metadata);
        set(&mut row.routes, self.routes);
        set(&mut row.models, self.models);
        set(&mut row.max_concurrent, self.max_concurrent);
        set(&mut row.tokens_per_minute, self.tokens_per_minute);
        set(&mut row.tokens_per_day, self.tokens_per_day);
        set(&mut row.spend_per_day, self.spend_per_day);
        set(&mut row.tokens_per_week, self.tokens_per_week);
        set(&mut row.spend_per_week, self.spend_per_week);
        set(&mut row.tokens_per_month, self.tokens_per_month);
        set(&mut row.spend_per_month, self.spend_per_month);
        set(&mut row.warn_at, self.warn_at);
        set(&mut row.expires_at, self.expires_at);
    }
}

const COLUMNS: &str = "id, hash, prefix, name, user, team, metadata, routes, models, \
    max_concurrent, tokens_per_minute, tokens_per_day, spend_per_day, expires_at, \
    created_at, updated_at, revoked_at, tokens_per_week, spend_per_week, tokens_per_month, \
    spend_per_month, warn_at";

fn list(text: String) -> Vec<String> {
    serde_json::from_str(&text).unwrap_or_default()
}

/// A stored amount back as a count: a negative one (written by hand) is
/// no bound at all rather than a wrapped huge one.
fn amount(v: Option<i64>) -> Option<u64> {
    v.and_then(|v| u64::try_from(v).ok())
}

fn stored(v: Option<u64>) -> Option<i64> {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<KeyRow> {
    Ok(KeyRow {
        id: r.get(0)?,
        hash: r.get(1)?,
        prefix: r.get(2)?,
        name: r.get(3)?,
        user: r.get(4)?,
        team: r.get(5)?,
        metadata: serde_json::from_str(&r.get::<_, String>(6)?).unwrap_or_default(),
        routes: list(r.get(7)?),
        models: list(r.get(8)?),
        max_concurrent: amount(r.get(9)?),
        tokens_per_minute: amount(r.get(10)?),
        tokens_per_day: amount(r.get(11)?),
        spend_per_day: amount(r.get(12)?),
        expires_at: r.get(13)?,
        created_at: r.get(14)?,
        updated_at: r.get(15)?,
        revoked_at: r.get(16)?,
        tokens_per_week: amount(r.get(17)?),
        spend_per_week: amount(r.get(18)?),
        tokens_per_month: amount(r.get(19)?),
        spend_per_month: amount(r.get(20)?),
        warn_at: amount(r.get(21)?),
    })
}

fn bump(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute("UPDATE changes SET version = version + 1 WHERE id = 1", [])
        .map(|_| ())
}

fn write(tx: &rusqlite::Transaction<'_>, k: &KeyRow) -> rusqlite::Result<()> {
    tx.execute(
        &format!(
            "INSERT OR REPLACE INTO keys ({COLUMNS}) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"
        ),
        params![
            k.id,
            k.hash,
            k.prefix,
            k.name,
            k.user,
            k.team,
            k.metadata.to_string(),
            serde_json::Value::from(k.routes.clone()).to_string(),
            serde_json::Value::from(k.models.clone()).to_string(),
            stored(k.max_concurrent),
            stored(k.tokens_per_minute),
            stored(k.tokens_per_day),
            stored(k.spend_per_day),
            k.expires_at,
            k.created_at,
            k.updated_at,
            k.revoked_at,
            stored(k.tokens_per_week),
            stored(k.spend_per_week),
            stored(k.tokens_per_month),
            stored(k.spend_per_month),
            stored(k.warn_at),
        ],
    )
    .map(|_| ())
}

impl Store {
    /// Every key, revoked ones included, oldest first.
    pub(crate) async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        self.call(|c| {
            let mut q = c.prepare(&format!(
                "SELECT {COLUMNS} FROM keys ORDER BY created_at, id"
            ))?;
            q.query_map([], from_row)?.collect()
        })
        .await
    }

    /// One key by id.
    pub(crate) async fn key(&self, id: &str) -> Result<Option<KeyRow>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            c.query_row(
                &format!("SELECT {COLUMNS} FROM keys WHERE id = ?1"),
                [id],
                from_row,
            )
            .optional()
        })
        .await
    }

    /// Add a new key.
    pub(crate) async fn insert_key(&self, key: KeyRow) -> Result<(), StoreError> {
        self.call(move |c| {
            let tx = c.transaction()?;
            write(&tx, &key)?;
            bump(&tx)?;
            tx.commit()
        })
        .await
    }

    /// Change a key that is not revoked: the key as it now is, or `None`
    /// when there is no such key (or it is revoked).
    pub(crate) async fn change_key(
        &self,
        id: &str,
        change: KeyChange,
        secret: Option<(Vec<u8>, String)>,
    ) -> Result<Option<KeyRow>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            let tx = c.transaction()?;
            let found = tx
                .query_row(
                    &format!("SELECT {COLUMNS} FROM keys WHERE id = ?1 AND revoked_at IS NULL"),
                    [&id],
                    from_row,
                )
                .optional()?;
            let Some(mut row) = found else {
                return Ok(None);
            };
            change.apply_to(&mut row);
            if let Some((hash, prefix)) = secret {
                row.hash = hash;
                row.prefix = prefix;
            }
            row.updated_at = unix_now();
            write(&tx, &row)?;
            bump(&tx)?;
            tx.commit()?;
            Ok(Some(row))
        })
        .await
    }

    /// Revoke a key: whether it was live.
    pub(crate) async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            let tx = c.transaction()?;
            let now = unix_now();
            let n = tx.execute(
                "UPDATE keys SET revoked_at = ?1, updated_at = ?1 WHERE id = ?2 AND revoked_at IS NULL",
                params![now, id],
            )?;
            bump(&tx)?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }
}
