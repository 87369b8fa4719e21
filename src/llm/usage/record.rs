//! The usage record (`[llm] usage_log`) and the usage row (`[database]`)
//! of an ended request.

use std::time::Duration;

use super::Settled;
use super::charge::Usage;
use crate::config::SPEND_UNIT;
use crate::keys::Key;
use crate::llm::facts::LlmFacts;
use crate::llm::ledger::Amount;
use crate::store::UsageRow;

use super::Books;

/// What an ended request's record and row say.
pub(super) struct Ended<'a> {
    pub(super) f: &'a LlmFacts,
    pub(super) status: u16,
    pub(super) elapsed: Duration,
    pub(super) outcome: &'static str,
    pub(super) key: Option<&'a Key>,
    pub(super) usage: &'a Usage,
    pub(super) spend: Option<u64>,
    /// What was reserved, when anything was.
    pub(super) reserved: Option<Amount>,
    pub(super) charged: Amount,
    pub(super) settled: Settled,
}

/// Write the record and send the row, each when on.
pub(super) fn write(books: &Books, route: &str, e: &Ended<'_>) {
    if books.records.is_on() {
        books.records.write(&record(route, e));
    }
    if books.rows.is_on() {
        books.rows.send(row(route, e));
    }
}

/// The usage record: one JSON line.
fn record(route: &str, e: &Ended<'_>) -> serde_json::Value {
    let (f, status, elapsed, usage, spend, outcome) =
        (e.f, e.status, e.elapsed, e.usage, e.spend, e.outcome);
    let (reserved, charged, settled) = (e.reserved, e.charged, e.settled);
    let start = std::time::SystemTime::now() - elapsed;
    serde_json::json!({
        "time": humantime::format_rfc3339_millis(start).to_string(),
        "request_id": f.request_id,
        "route": route,
        "client": f.client.as_deref().unwrap_or("-"),
        "key": e.key.map(|k| &*k.id),
        "user": e.key.and_then(|k| k.user.as_deref()),
        "team": e.key.and_then(|k| k.team.as_deref()),
        "model": f.model.as_deref().map(bounded),
        "model_served": f
            .served_model
            .as_deref()
            .or(f.model.as_deref())
            .filter(|_| f.upstream_index.is_some())
            .map(bounded),
        "upstream": f.upstream.as_deref(),
        "status": status,
        "outcome": outcome,
        "stream": f.stream,
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_read_tokens": usage.cache_read,
        "cache_write_tokens": usage.cache_write,
        "spend": spend.map(|s| s as f64 / SPEND_UNIT),
        "reserved_tokens": reserved.map(|r| r.tokens),
        "charged_tokens": reserved.map(|_| charged.tokens),
        "charged_spend": reserved.map(|_| charged.spend as f64 / SPEND_UNIT),
        "settled": settled.name(),
        "duration_ms": elapsed.as_millis() as u64,
        "first_token_ms": f.first_token_ms,
        "failovers": f.failovers,
        "trace_id": f.trace_id,
        "session": f.session,
        "agent": f.agent,
    })
}

/// The usage row.
fn row(route: &str, e: &Ended<'_>) -> UsageRow {
    let (f, status, elapsed, usage, spend, outcome) =
        (e.f, e.status, e.elapsed, e.usage, e.spend, e.outcome);
    let start = std::time::SystemTime::now() - elapsed;
    let at_ms = start
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let text = |s: Option<&str>| s.map(|s| bounded(s).to_string());
    UsageRow {
        at_ms,
        request_id: f.request_id.as_ref().map(|r| r.to_string()),
        key_id: e.key.map(|k| k.id.to_string()),
        client: text(f.client.as_deref()),
        user: e.key.and_then(|k| k.user.as_deref().map(String::from)),
        team: e.key.and_then(|k| k.team.as_deref().map(String::from)),
        route: route.to_string(),
        model: text(f.model.as_deref()),
        model_served: text(
            f.served_model
                .as_deref()
                .or(f.model.as_deref())
                .filter(|_| f.upstream_index.is_some()),
        ),
        upstream: text(f.upstream.as_deref()),
        tokens: [
            usage.input,
            usage.output,
            usage.cache_read,
            usage.cache_write,
        ],
        spend: spend.unwrap_or(0),
        duration_ms: elapsed.as_millis() as u64,
        status,
        outcome: outcome.to_string(),
        session: f.session.clone(),
        agent: f.agent.clone(),
    }
}

/// The outcome a usage record and the per-client metrics give.
pub(super) fn outcome(f: &LlmFacts, status: u16) -> &'static str {
    f.outcome.unwrap_or(if status < 400 {
        "completed"
    } else {
        "rejected"
    })
}

/// A client's text as a record field: at most [`MAX_FIELD`] bytes (a
/// model name is whatever the client sent; a record line stays small).
pub(super) fn bounded(s: &str) -> &str {
    crate::respond::bounded(s, MAX_FIELD)
}

/// The longest client-chosen text a usage record carries.
pub(super) const MAX_FIELD: usize = 256;
