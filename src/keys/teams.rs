//! Teams kept in the database (docs/decisions/102): a team's policy read
//! from the admin API's JSON (every problem at once), written through the
//! store, and served from memory beside the keys — loaded by the same
//! refresh, on the same change number, so a change reaches every instance
//! as a key's does.
//!
//! A team the config defines (`[[teams]]`, `[[idp.teams]]`) is the
//! config's: the API refuses to write one of its name, and a row of that
//! name left in the database is not served.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::manage::{Reader, SpecError, failed, time};
use super::{Key, KeyRate, Keys};
use crate::config::{AllowedModels, Budget, SPEND_UNIT};
use crate::store::{BOUNDS, BudgetChange, TeamChange, TeamRow, unix_now};

/// A team's policy, as requests see it.
#[derive(Debug)]
pub(crate) struct Team {
    pub(crate) name: Arc<str>,
    /// What the whole team shares.
    pub(crate) budget: Budget,
    /// Defaults for each member: the models and routes they may use,
    /// their concurrency and their own budget.
    pub(crate) models: AllowedModels,
    pub(crate) routes: Vec<String>,
    pub(crate) max_concurrent: usize,
    /// Each member key's rate, when the key sets none.
    pub(crate) rate: Option<KeyRate>,
    pub(crate) per_person: Budget,
}

impl Team {
    pub(super) fn of(row: &TeamRow) -> Team {
        Team {
            name: row.name.as_str().into(),
            budget: row.budget,
            models: AllowedModels(row.models.clone()),
            routes: row.routes.clone(),
            max_concurrent: row
                .max_concurrent
                .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            rate: KeyRate::of(row.rate_limit_per_second, row.rate_limit_burst),
            per_person: row.per_person,
        }
    }

    /// `key` under this policy: what the key does not set itself (models,
    /// routes, concurrency, rate, its own budget) is the team's.
    pub(crate) fn fill(&self, key: &mut Key) {
        if key.models.0.is_empty() {
            key.models = self.models.clone();
        }
        if key.routes.is_empty() {
            key.routes = self.routes.clone();
        }
        if key.max_concurrent == 0 {
            key.max_concurrent = self.max_concurrent;
        }
        if key.rate.is_none() {
            key.rate = self.rate;
        }
        if key.budget.is_unbounded() && key.budget.warn_at.is_none() {
            key.budget = self.per_person;
        }
    }
}

/// A team's settings to create, or the changes to one.
#[derive(Debug, Default)]
pub(crate) struct TeamSpec {
    name: Option<String>,
    change: TeamChange,
}

const FIELDS: [&str; 8] = [
    "name",
    "models",
    "routes",
    "max_concurrent",
    "rate_limit_per_second",
    "rate_limit_burst",
    "per_person",
    "(and a budget's bounds)",
];

/// A budget's bounds read from `fields`, each its own kind; `what` names
/// the object in problems.
fn budget(r: &mut Reader<'_>) -> BudgetChange {
    BudgetChange(BOUNDS.map(|name| match name {
        "warn_at" => r.percent(name),
        n if n.starts_with("spend_") => r.money(name),
        _ => r.count(name),
    }))
}

impl TeamSpec {
    /// Read a team's settings from a JSON object: every problem at once.
    /// `creating`: the name is required (else it may not be given).
    pub(crate) fn parse(body: &[u8], creating: bool) -> Result<TeamSpec, SpecError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| SpecError(vec![format!("the body is not JSON: {e}")]))?;
        let Some(fields) = value.as_object() else {
            return Err(SpecError(vec!["the body must be a JSON object".into()]));
        };
        let mut r = Reader {
            fields,
            problems: Vec::new(),
        };
        let known = |k: &str| FIELDS[..7].contains(&k) || BOUNDS.contains(&k);
        for name in fields.keys().filter(|k| !known(k)) {
            r.problems.push(format!(
                "unknown field `{name}`; a team has: {}, {}",
                FIELDS.join(", "),
                BOUNDS.join(", ")
            ));
        }
        let name = r.text("name").flatten();
        match (&name, creating) {
            (None, true) if !fields.contains_key("name") => r
                .problems
                .push("`name` is missing: the team as keys and the IdP's groups name it".into()),
            (Some(_), false) => r.problems.push(
                "`name` cannot change: delete the team and create it under the new name".into(),
            ),
            _ => {}
        }
        let per_person = match fields.get("per_person") {
            None => BudgetChange::default(),
            Some(Value::Object(inner)) => {
                let mut inner_r = Reader {
                    fields: inner,
                    problems: Vec::new(),
                };
                for k in inner.keys().filter(|k| !BOUNDS.contains(&k.as_str())) {
                    inner_r.problems.push(format!(
                        "unknown field `{k}`; a budget has: {}",
                        BOUNDS.join(", ")
                    ));
                }
                let b = budget(&mut inner_r);
                r.problems.extend(
                    inner_r
                        .problems
                        .into_iter()
                        .map(|p| format!("per_person: {p}")),
                );
                b
            }
            Some(_) => {
                r.problems
                    .push("`per_person` must be an object of budget bounds".into());
                BudgetChange::default()
            }
        };
        r.burst_needs_rate();
        let change = TeamChange {
            models: r.list("models"),
            routes: r.list("routes"),
            max_concurrent: r.count("max_concurrent"),
            rate_limit_per_second: r.rate("rate_limit_per_second"),
            rate_limit_burst: r.rate("rate_limit_burst"),
            budget: budget(&mut r),
            per_person,
        };
        if r.problems.is_empty() {
            Ok(TeamSpec { name, change })
        } else {
            Err(SpecError(r.problems))
        }
    }
}

/// What a team write came to.
#[derive(Debug)]
pub(crate) enum Written {
    Done(Box<TeamRow>),
    Deleted,
    /// No such team (to change), or one already (to create).
    Missing,
    Exists,
    /// The config defines it.
    Config,
}

impl Keys {
    /// Names of the teams the config defines, set by each configuration
    /// built: the API leaves them alone and their rows are not served.
    /// A change of names makes the next refresh rebuild the table (keys
    /// under a team's policy included).
    pub(crate) fn set_config_teams(&self, names: HashSet<String>) {
        if **self.config_teams.load() == names {
            return;
        }
        self.config_teams.store(Arc::new(names));
        let mut stale = (**self.table.load()).clone();
        stale.version = None;
        self.table.store(Arc::new(stale));
    }

    pub(crate) fn is_config_team(&self, name: &str) -> bool {
        self.config_teams.load().contains(name)
    }

    /// The team `name`'s policy kept in the database, as served now.
    pub(crate) fn team(&self, name: &str) -> Option<Arc<Team>> {
        if self.is_config_team(name) {
            return None;
        }
        self.table.load().teams.get(name).cloned()
    }

    /// Whether the database keeps any team (then an IdP person must be in
    /// a team this gateway serves, as with `[[idp.teams]]`).
    pub(crate) fn has_teams(&self) -> bool {
        !self.table.load().teams.is_empty()
    }

    /// Create a team.
    pub(crate) async fn create_team(&self, spec: TeamSpec) -> Result<Written, String> {
        let Some(name) = spec.name else {
            return Ok(Written::Missing);
        };
        if self.is_config_team(&name) {
            return Ok(Written::Config);
        }
        let now = unix_now();
        let mut row = TeamRow {
            name,
            models: Vec::new(),
            routes: Vec::new(),
            max_concurrent: None,
            rate_limit_per_second: None,
            rate_limit_burst: None,
            budget: Budget::default(),
            per_person: Budget::default(),
            created_at: now,
            updated_at: now,
        };
        spec.change.apply_to(&mut row);
        let made = self.store.insert_team(row).await.map_err(failed)?;
        self.refresh().await.map_err(failed)?;
        Ok(made.map_or(Written::Exists, |r| Written::Done(Box::new(r))))
    }

    /// Change a team's policy.
    pub(crate) async fn change_team(&self, name: &str, spec: TeamSpec) -> Result<Written, String> {
        if self.is_config_team(name) {
            return Ok(Written::Config);
        }
        let row = self
            .store
            .change_team(name, spec.change)
            .await
            .map_err(failed)?;
        self.refresh().await.map_err(failed)?;
        Ok(row.map_or(Written::Missing, |r| Written::Done(Box::new(r))))
    }

    /// Delete a team: its keys keep working, under no team policy.
    pub(crate) async fn delete_team(&self, name: &str) -> Result<Written, String> {
        if self.is_config_team(name) {
            return Ok(Written::Config);
        }
        let gone = self.store.delete_team(name).await.map_err(failed)?;
        self.refresh().await.map_err(failed)?;
        Ok(if gone {
            Written::Deleted
        } else {
            Written::Missing
        })
    }

    /// Every team kept in the database.
    pub(crate) async fn team_rows(&self) -> Result<Vec<TeamRow>, String> {
        self.store.teams().await.map_err(failed)
    }

    /// A team's requests, tokens and spend since `from_ms`, from its
    /// usage rows (every instance's).
    pub(crate) async fn team_used_since(
        &self,
        name: &str,
        from_ms: i64,
    ) -> Result<(u64, u64, u64), String> {
        self.store
            .used_since(crate::store::By::Team, name, from_ms)
            .await
            .map_err(failed)
    }
}

/// A budget as the API shows it: spend in the currency.
pub(crate) fn budget_view(b: &Budget) -> Map<String, Value> {
    let mut m = Map::new();
    for (name, v) in BOUNDS.iter().zip(crate::store::bounds(b)) {
        let shown = match v {
            Some(v) if name.starts_with("spend_") => Value::from(v as f64 / SPEND_UNIT),
            v => Value::from(v),
        };
        m.insert((*name).into(), shown);
    }
    m
}

/// A team as the API shows it.
pub(crate) fn team_view(row: &TeamRow) -> Value {
    let mut v = budget_view(&row.budget);
    v.insert("name".into(), row.name.clone().into());
    v.insert("models".into(), row.models.clone().into());
    v.insert("routes".into(), row.routes.clone().into());
    v.insert("max_concurrent".into(), row.max_concurrent.into());
    v.insert(
        "rate_limit_per_second".into(),
        row.rate_limit_per_second.into(),
    );
    v.insert("rate_limit_burst".into(), row.rate_limit_burst.into());
    v.insert(
        "per_person".into(),
        Value::Object(budget_view(&row.per_person)),
    );
    v.insert("created_at".into(), time(Some(row.created_at)).into());
    v.insert("updated_at".into(), time(Some(row.updated_at)).into());
    Value::Object(v)
}
