//! The `keys` table: what a runtime key is, as stored. The secret is
//! never here, only its SHA-256 (`hash`) and its first characters
//! (`prefix`) to tell keys apart.

use serde::Serialize;

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
    /// Requests a second, sustained, and at once (docs/decisions/106).
    pub(crate) rate_limit_per_second: Option<u64>,
    pub(crate) rate_limit_burst: Option<u64>,
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
    pub(crate) rate_limit_per_second: Option<Option<u64>>,
    pub(crate) rate_limit_burst: Option<Option<u64>>,
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
        set(&mut row.rate_limit_per_second, self.rate_limit_per_second);
        set(&mut row.rate_limit_burst, self.rate_limit_burst);
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

/// The columns of `keys`, in the order [`cells`] and [`from_cells`] use.
pub(super) const COLUMNS: &[&str] = &[
    "id",
    "hash",
    "prefix",
    "name",
    "\"user\"",
    "team",
    "metadata",
    "routes",
    "models",
    "max_concurrent",
    "tokens_per_minute",
    "tokens_per_day",
    "spend_per_day",
    "expires_at",
    "created_at",
    "updated_at",
    "revoked_at",
    "tokens_per_week",
    "spend_per_week",
    "tokens_per_month",
    "spend_per_month",
    "warn_at",
    "rate_limit_per_second",
    "rate_limit_burst",
];

/// `COLUMNS` as a select list.
pub(super) fn columns() -> String {
    COLUMNS.join(", ")
}

/// One value to store: what both databases' parameters are made from.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
    Bytes(Vec<u8>),
}

/// What a stored row's cells are read through, whichever the database.
pub(super) trait Cells {
    type Error;
    fn text(&self, i: usize) -> Result<Option<String>, Self::Error>;
    fn int(&self, i: usize) -> Result<Option<i64>, Self::Error>;
    fn bytes(&self, i: usize) -> Result<Vec<u8>, Self::Error>;
}

fn list(text: Option<String>) -> Vec<String> {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// A stored amount back as a count: a negative one (written by hand) is
/// no bound at all rather than a wrapped huge one.
fn amount(v: Option<i64>) -> Option<u64> {
    v.and_then(|v| u64::try_from(v).ok())
}

fn stored(v: Option<u64>) -> Cell {
    Cell::Int(v.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
}

/// A key read back from its cells, in `COLUMNS`' order.
pub(super) fn from_cells<C: Cells>(r: &C) -> Result<KeyRow, C::Error> {
    Ok(KeyRow {
        id: r.text(0)?.unwrap_or_default(),
        hash: r.bytes(1)?,
        prefix: r.text(2)?.unwrap_or_default(),
        name: r.text(3)?.unwrap_or_default(),
        user: r.text(4)?,
        team: r.text(5)?,
        metadata: r
            .text(6)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        routes: list(r.text(7)?),
        models: list(r.text(8)?),
        max_concurrent: amount(r.int(9)?),
        tokens_per_minute: amount(r.int(10)?),
        tokens_per_day: amount(r.int(11)?),
        spend_per_day: amount(r.int(12)?),
        expires_at: r.int(13)?,
        created_at: r.int(14)?.unwrap_or_default(),
        updated_at: r.int(15)?.unwrap_or_default(),
        revoked_at: r.int(16)?,
        tokens_per_week: amount(r.int(17)?),
        spend_per_week: amount(r.int(18)?),
        tokens_per_month: amount(r.int(19)?),
        spend_per_month: amount(r.int(20)?),
        warn_at: amount(r.int(21)?),
        rate_limit_per_second: amount(r.int(22)?),
        rate_limit_burst: amount(r.int(23)?),
    })
}

/// A key's cells, in `COLUMNS`' order.
pub(super) fn cells(k: &KeyRow) -> Vec<Cell> {
    let text = |s: &str| Cell::Text(Some(s.to_string()));
    vec![
        text(&k.id),
        Cell::Bytes(k.hash.clone()),
        text(&k.prefix),
        text(&k.name),
        Cell::Text(k.user.clone()),
        Cell::Text(k.team.clone()),
        text(&k.metadata.to_string()),
        text(&serde_json::Value::from(k.routes.clone()).to_string()),
        text(&serde_json::Value::from(k.models.clone()).to_string()),
        stored(k.max_concurrent),
        stored(k.tokens_per_minute),
        stored(k.tokens_per_day),
        stored(k.spend_per_day),
        Cell::Int(k.expires_at),
        Cell::Int(Some(k.created_at)),
        Cell::Int(Some(k.updated_at)),
        Cell::Int(k.revoked_at),
        stored(k.tokens_per_week),
        stored(k.spend_per_week),
        stored(k.tokens_per_month),
        stored(k.spend_per_month),
        stored(k.warn_at),
        stored(k.rate_limit_per_second),
        stored(k.rate_limit_burst),
    ]
}
