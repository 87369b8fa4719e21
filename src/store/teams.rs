//! The `teams` table: a team's policy, kept at runtime (docs/decisions/102)
//! — the budget its members share, the models and routes they may use,
//! each person's concurrency and own budget. Both budgets are stored as a
//! JSON object of their bounds (spend in 10⁻¹² of the currency, as the
//! price table's), so a bound added later is not a schema step.

use serde_json::{Map, Value};

use super::keys::{Cell, Cells};
use crate::config::Budget;

/// One team, as the table holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TeamRow {
    pub(crate) name: String,
    /// Model patterns its members may use; empty = every model.
    pub(crate) models: Vec<String>,
    /// Routes its members' keys may be used on; empty = every route.
    pub(crate) routes: Vec<String>,
    /// Each member's requests in flight.
    pub(crate) max_concurrent: Option<u64>,
    /// Each member's requests a second, sustained and at once.
    pub(crate) rate_limit_per_second: Option<u64>,
    pub(crate) rate_limit_burst: Option<u64>,
    /// What the whole team shares.
    pub(crate) budget: Budget,
    /// Each member's own, when their key sets none (and each IdP person's).
    pub(crate) per_person: Budget,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
}

/// A change to a team: each field set replaces the team's; a budget's
/// bounds each on their own (`Some(None)` clears one).
#[derive(Debug, Clone, Default)]
pub(crate) struct TeamChange {
    pub(crate) models: Option<Vec<String>>,
    pub(crate) routes: Option<Vec<String>>,
    pub(crate) max_concurrent: Option<Option<u64>>,
    pub(crate) rate_limit_per_second: Option<Option<u64>>,
    pub(crate) rate_limit_burst: Option<Option<u64>>,
    pub(crate) budget: BudgetChange,
    pub(crate) per_person: BudgetChange,
}

/// A change to a budget's bounds, in [`BOUNDS`]' order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BudgetChange(pub(crate) [Option<Option<u64>>; 8]);

/// A budget's bounds by name, as the API, the CLI and the stored JSON
/// name them (`warn_at` last: a percent, not a bound).
pub(crate) const BOUNDS: [&str; 8] = [
    "tokens_per_minute",
    "tokens_per_day",
    "spend_per_day",
    "tokens_per_week",
    "spend_per_week",
    "tokens_per_month",
    "spend_per_month",
    "warn_at",
];

/// `budget`'s bounds in [`BOUNDS`]' order.
pub(crate) fn bounds(b: &Budget) -> [Option<u64>; 8] {
    [
        b.tokens_per_minute,
        b.tokens_per_day,
        b.spend_per_day,
        b.tokens_per_week,
        b.spend_per_week,
        b.tokens_per_month,
        b.spend_per_month,
        b.warn_at.map(u64::from),
    ]
}

/// A budget from its bounds in [`BOUNDS`]' order (a `warn_at` outside
/// 1–99 is none).
pub(crate) fn budget(v: [Option<u64>; 8]) -> Budget {
    Budget {
        tokens_per_minute: v[0],
        tokens_per_day: v[1],
        spend_per_day: v[2],
        tokens_per_week: v[3],
        spend_per_week: v[4],
        tokens_per_month: v[5],
        spend_per_month: v[6],
        warn_at: v[7]
            .and_then(|p| u8::try_from(p).ok())
            .filter(|p| (1..100).contains(p)),
    }
}

impl BudgetChange {
    fn apply_to(&self, b: &mut Budget) {
        let mut v = bounds(b);
        for (to, from) in v.iter_mut().zip(&self.0) {
            if let Some(from) = from {
                *to = *from;
            }
        }
        *b = budget(v);
    }
}

impl TeamChange {
    /// Set on `row` every field this change sets.
    pub(crate) fn apply_to(self, row: &mut TeamRow) {
        if let Some(m) = self.models {
            row.models = m;
        }
        if let Some(r) = self.routes {
            row.routes = r;
        }
        if let Some(c) = self.max_concurrent {
            row.max_concurrent = c;
        }
        if let Some(r) = self.rate_limit_per_second {
            row.rate_limit_per_second = r;
        }
        if let Some(b) = self.rate_limit_burst {
            row.rate_limit_burst = b;
        }
        self.budget.apply_to(&mut row.budget);
        self.per_person.apply_to(&mut row.per_person);
    }
}

/// The columns of `teams`, in the order [`cells`] and [`from_cells`] use.
pub(super) const COLUMNS: &str = "name, models, routes, max_concurrent, budget, per_person, \
     created_at, updated_at, rate_limit_per_second, rate_limit_burst";

/// A budget as stored: its set bounds only.
fn budget_text(b: &Budget) -> String {
    let mut m = Map::new();
    for (name, v) in BOUNDS.iter().zip(bounds(b)) {
        if let Some(v) = v {
            m.insert((*name).into(), v.into());
        }
    }
    Value::Object(m).to_string()
}

/// A stored budget back; a bound that is not a count is none.
fn budget_of(text: Option<String>) -> Budget {
    let v: Value = text
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    budget(BOUNDS.map(|name| v.get(name).and_then(Value::as_u64)))
}

fn list(text: Option<String>) -> Vec<String> {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// A team read back from its cells, in `COLUMNS`' order.
pub(super) fn from_cells<C: Cells>(r: &C) -> Result<TeamRow, C::Error> {
    Ok(TeamRow {
        name: r.text(0)?.unwrap_or_default(),
        models: list(r.text(1)?),
        routes: list(r.text(2)?),
        max_concurrent: r.int(3)?.and_then(|n| u64::try_from(n).ok()),
        budget: budget_of(r.text(4)?),
        per_person: budget_of(r.text(5)?),
        created_at: r.int(6)?.unwrap_or_default(),
        updated_at: r.int(7)?.unwrap_or_default(),
        rate_limit_per_second: r.int(8)?.and_then(|n| u64::try_from(n).ok()),
        rate_limit_burst: r.int(9)?.and_then(|n| u64::try_from(n).ok()),
    })
}

/// A team's cells, in `COLUMNS`' order.
pub(super) fn cells(t: &TeamRow) -> Vec<Cell> {
    let text = |s: String| Cell::Text(Some(s));
    let int = |n: Option<u64>| Cell::Int(n.map(|n| i64::try_from(n).unwrap_or(i64::MAX)));
    vec![
        text(t.name.clone()),
        text(Value::from(t.models.clone()).to_string()),
        text(Value::from(t.routes.clone()).to_string()),
        int(t.max_concurrent),
        text(budget_text(&t.budget)),
        text(budget_text(&t.per_person)),
        Cell::Int(Some(t.created_at)),
        Cell::Int(Some(t.updated_at)),
        int(t.rate_limit_per_second),
        int(t.rate_limit_burst),
    ]
}

/// The upsert of a team's row, in dialect `d`.
pub(super) fn upsert_sql(d: super::schema::Dialect) -> String {
    let count = COLUMNS.split(", ").count();
    let params: Vec<String> = (1..=count).map(|n| d.param(n)).collect();
    let set: Vec<String> = COLUMNS
        .split(", ")
        .skip(1)
        .map(|c| format!("{c} = EXCLUDED.{c}"))
        .collect();
    format!(
        "INSERT INTO teams ({COLUMNS}) VALUES ({}) ON CONFLICT (name) DO UPDATE SET {}",
        params.join(", "),
        set.join(", ")
    )
}
