//! The admin view of each client token's usage against its budget.

use std::time::Duration;

use crate::config::{Budget, SPEND_UNIT};
use crate::llm::ledger::{Bound, Ledger, View, WindowView};

/// Each client token of an LLM route against its budget, as the admin
/// view shows it (only `client` when one is named): the fleet's figures
/// from Redis when the fleet keeps the budget (`"source": "fleet"`), else
/// this process's ledger (`"local"`, or `"local_redis_unavailable"` when
/// the fleet keeps it but Redis did not answer: what this instance
/// counted while Redis was away).
pub(crate) async fn view(
    route: &str,
    llm: &crate::llm::LlmRoute,
    client: Option<&str>,
) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let clients = llm.settings.client_tokens.iter().enumerate();
    for (index, c) in clients.filter(|(_, c)| client.is_none_or(|n| n == c.name)) {
        let Some(ledger) = llm.books.ledgers.get(index) else {
            continue;
        };
        let fleet = match &llm.books.fleet {
            Some(f) if !c.budget.is_unbounded() => match f.keys.get(index) {
                Some(key) => Some(f.cluster.budget_view(key).await),
                None => None,
            },
            _ => None,
        };
        let (v, now, source) = match fleet {
            Some(Some(fb)) => (fleet_view(&fb, &c.budget), fb.now, "fleet"),
            Some(None) => (
                ledger.view(&c.budget),
                unix_now(),
                "local_redis_unavailable",
            ),
            None => (ledger.view(&c.budget), unix_now(), "local"),
        };
        out.push(client_view(route, &c.name, &v, now, source));
    }
    out
}

/// Each runtime key that has a budget and has been used since start,
/// against its budget (this process's ledger), by key id and person.
pub(crate) fn key_views(llm: &crate::llm::LlmRoute) -> Vec<serde_json::Value> {
    let Some(keys) = &llm.books.keys else {
        return Vec::new();
    };
    let now = unix_now();
    let mut out = Vec::new();
    for (id, ledger) in llm.books.key_books.ledgers() {
        let Some(key) = keys.by_id(&id).filter(|k| !k.budget.is_unbounded()) else {
            continue;
        };
        let v = ledger.view(&key.budget);
        out.push(serde_json::json!({
            "kind": "key",
            "key": &*id,
            "client": &*key.name,
            "user": key.user.as_deref(),
            "team": key.team.as_deref(),
            "source": "local",
            "in_flight": v.in_flight,
            "budget": windows(&v, now),
        }));
    }
    out
}

/// Each `[[teams]]` budget, against this process's ledger.
pub(crate) fn team_views(llm: &crate::llm::LlmRoute) -> Vec<serde_json::Value> {
    let now = unix_now();
    let teams = llm.books.teams.all();
    teams
        .iter()
        .map(|t| {
            let v = t.ledger.view(&t.budget);
            serde_json::json!({
                "kind": "team",
                "team": &*t.name,
                "source": "local",
                "in_flight": v.in_flight,
                "budget": windows(&v, now),
            })
        })
        .collect()
}

/// A budget as it stands, with where its figures come from: `"fleet"`
/// (Redis, `[cluster]`), `"local"` (this process's ledger), or
/// `"local_redis_unavailable"` (the fleet keeps it but Redis did not
/// answer: what this instance counted while Redis was away).
pub(crate) struct BookView {
    pub(crate) budget: Budget,
    pub(crate) view: View,
    pub(crate) source: &'static str,
}

impl BookView {
    /// `{source, in_flight, warn_at, windows}` as the views show it.
    pub(crate) fn json(&self, now: u64) -> serde_json::Value {
        serde_json::json!({
            "source": self.source,
            "in_flight": self.view.in_flight,
            "warn_at": self.budget.warn_at,
            "windows": windows(&self.view, now),
        })
    }
}

/// A runtime key's (or person's) budget and its team's, as `/v1/me` and
/// `/admin/keys/<id>` show them: the fleet's figures when the fleet keeps
/// them (`[cluster]`) and Redis answers, else this process's ledgers.
pub(crate) async fn keyed_view(
    books: &super::Books,
    key: &crate::keys::Key,
) -> (BookView, Option<BookView>) {
    let cluster = books.cluster.as_ref();
    let team = match books.teams.of(key.team.as_deref()) {
        Some(team) => {
            let fleet_key = cluster.map(|c| c.team_budget_key(&team.name));
            Some(book_view(cluster, fleet_key, &team.ledger, &team.budget).await)
        }
        None => None,
    };
    let ledger = books.key_books.of(key, cluster).ledger;
    let fleet_key = cluster.map(|c| c.key_budget_key(&key.id));
    let own = book_view(cluster, fleet_key, &ledger, &key.budget).await;
    (own, team)
}

/// One book's budget now, from the fleet when it keeps it.
async fn book_view(
    cluster: Option<&std::sync::Arc<crate::cluster::Cluster>>,
    fleet_key: Option<std::sync::Arc<str>>,
    ledger: &Ledger,
    budget: &Budget,
) -> BookView {
    let (view, source) = match (cluster, fleet_key) {
        (Some(cluster), Some(key)) => match cluster.budget_view(&key).await {
            Some(fb) => (fleet_view(&fb, budget), "fleet"),
            None => (ledger.view(budget), "local_redis_unavailable"),
        },
        _ => (ledger.view(budget), "local"),
    };
    BookView {
        budget: *budget,
        view,
        source,
    }
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The fleet's figures in a ledger's shape, each window ending where the
/// scripts' does (by Redis's clock for the minute, by the calendar for
/// the rest).
pub(crate) fn fleet_view(fb: &crate::cluster::FleetBudget, budget: &Budget) -> View {
    let [_, day, _, week, _, month] = crate::calendar::spans(fb.now, &crate::calendar::zone());
    View {
        windows: std::array::from_fn(|i| {
            let bound = Bound::ALL[i];
            WindowView {
                bound,
                limit: bound.limit(budget),
                used: fb.used.get(i).copied().unwrap_or(0),
                reserved: if bound.is_spend() {
                    fb.reserved_spend
                } else {
                    fb.reserved_tokens
                },
                resets_at: match i {
                    0 => (fb.now - fb.now % 60).saturating_add(60),
                    1 | 2 => day,
                    3 | 4 => week,
                    _ => month,
                },
            }
        }),
        in_flight: fb.in_flight,
    }
}

fn client_view(route: &str, name: &str, v: &View, now: u64, source: &str) -> serde_json::Value {
    serde_json::json!({
        "route": route,
        "client": name,
        "source": source,
        "in_flight": v.in_flight,
        "budget": windows(v, now),
    })
}

/// A ledger's windows as the views show them: the minute and the day
/// always, weeks and months when bounded.
pub(crate) fn windows(v: &View, now: u64) -> serde_json::Map<String, serde_json::Value> {
    let mut windows = serde_json::Map::new();
    // The minute and the day always; weeks and months when bounded.
    for (i, w) in v.windows.into_iter().enumerate() {
        if i >= 3 && w.limit.is_none() {
            continue;
        }
        let spend = w.bound.is_spend();
        let amount = |n: u64| {
            if spend {
                serde_json::json!(n as f64 / SPEND_UNIT)
            } else {
                serde_json::json!(n)
            }
        };
        let remaining = w
            .limit
            .map(|l| amount(l.saturating_sub(w.used.saturating_add(w.reserved))));
        windows.insert(
            w.bound.name().into(),
            serde_json::json!({
                "limit": w.limit.map(amount),
                "used": amount(w.used),
                "reserved": amount(w.reserved),
                "remaining": remaining,
                "resets_at": humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + Duration::from_secs(w.resets_at)
                ).to_string(),
                "resets_in_seconds": w.resets_at.saturating_sub(now),
            }),
        );
    }
    windows
}
