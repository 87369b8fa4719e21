//! The `usage` table: one row per LLM request, written in batches, and
//! the report that sums them over a period by the groups asked for.

use rusqlite::params_from_iter;
use serde::Serialize;

use super::{Store, StoreError};

/// One LLM request's usage. Spend is in 10⁻¹² of the currency.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct UsageRow {
    pub(crate) at_ms: i64,
    pub(crate) request_id: Option<String>,
    pub(crate) key_id: Option<String>,
    /// The client's name: a key's or a client token's.
    pub(crate) client: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) team: Option<String>,
    pub(crate) route: String,
    pub(crate) model: Option<String>,
    pub(crate) model_served: Option<String>,
    pub(crate) upstream: Option<String>,
    pub(crate) tokens: [u64; 4],
    pub(crate) spend: u64,
    pub(crate) duration_ms: u64,
    pub(crate) status: u16,
    pub(crate) outcome: String,
}

/// What a report groups by (each a column, or the UTC day).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    Key,
    Client,
    User,
    Team,
    Route,
    Model,
    Upstream,
    Day,
}

impl Group {
    pub(crate) const ALL: [Group; 8] = [
        Group::Key,
        Group::Client,
        Group::User,
        Group::Team,
        Group::Route,
        Group::Model,
        Group::Upstream,
        Group::Day,
    ];

    /// Its name in `group_by` and in a report line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Group::Key => "key",
            Group::Client => "client",
            Group::User => "user",
            Group::Team => "team",
            Group::Route => "route",
            Group::Model => "model",
            Group::Upstream => "upstream",
            Group::Day => "day",
        }
    }

    pub(crate) fn named(name: &str) -> Option<Group> {
        let name = match name {
            "person" => "user",
            other => other,
        };
        Group::ALL.into_iter().find(|g| g.name() == name)
    }

    /// Its SQL expression: a fixed text per variant, never the caller's.
    fn sql(self) -> &'static str {
        match self {
            Group::Key => "key_id",
            Group::Client => "client",
            Group::User => "user",
            Group::Team => "team",
            Group::Route => "route",
            Group::Model => "model",
            Group::Upstream => "upstream",
            Group::Day => "strftime('%Y-%m-%d', at_ms / 1000, 'unixepoch')",
        }
    }
}

/// A report's question: rows from `from_ms` (inclusive) to `to_ms`
/// (exclusive), summed by `groups`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) groups: Vec<Group>,
    pub(crate) from_ms: i64,
    pub(crate) to_ms: i64,
}

/// One line of a report: its group's values and its sums.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ReportLine {
    pub(crate) group: Vec<(String, Option<String>)>,
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cache_read_tokens: u64,
    pub(crate) cache_write_tokens: u64,
    pub(crate) spend: u64,
}

/// The most lines a report answers (a group by key over a year is still
/// one line per key).
pub(crate) const MAX_REPORT_LINES: usize = 10_000;

fn count(v: i64) -> i64 {
    v.max(0)
}

impl Store {
    /// Write `rows` in one transaction.
    pub(crate) async fn insert_usage(&self, rows: Vec<UsageRow>) -> Result<(), StoreError> {
        self.call(move |c| {
            let tx = c.transaction()?;
            {
                let mut q = tx.prepare_cached(
                    "INSERT INTO usage (at_ms, request_id, key_id, client, user, team, route, model, \
                     model_served, upstream, input_tokens, output_tokens, cache_read_tokens, \
                     cache_write_tokens, spend, duration_ms, status, outcome) VALUES \
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
                )?;
                let big = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                for r in &rows {
                    q.execute(rusqlite::params![
                        r.at_ms,
                        r.request_id,
                        r.key_id,
                        r.client,
                        r.user,
                        r.team,
                        r.route,
                        r.model,
                        r.model_served,
                        r.upstream,
                        big(r.tokens[0]),
                        big(r.tokens[1]),
                        big(r.tokens[2]),
                        big(r.tokens[3]),
                        big(r.spend),
                        big(r.duration_ms),
                        r.status,
                        r.outcome,
                    ])?;
                }
            }
            tx.commit()
        })
        .await
    }

    /// A key's requests, tokens and spend since `from_ms`.
    pub(crate) async fn used_since(
        &self,
        key_id: &str,
        from_ms: i64,
    ) -> Result<(u64, u64, u64), StoreError> {
        let key_id = key_id.to_string();
        self.call(move |c| {
            c.query_row(
                "SELECT COUNT(*), SUM(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), SUM(spend) \
                 FROM usage WHERE key_id = ?1 AND at_ms >= ?2",
                rusqlite::params![key_id, from_ms],
                |r| {
                    let n = |i: usize| -> rusqlite::Result<u64> {
                        Ok(count(r.get::<_, Option<i64>>(i)?.unwrap_or(0)) as u64)
                    };
                    Ok((n(0)?, n(1)?, n(2)?))
                },
            )
        })
        .await
    }

    /// Delete rows older than `before_ms`: how many.
    pub(crate) async fn prune_usage(&self, before_ms: i64) -> Result<usize, StoreError> {
        self.call(move |c| c.execute("DELETE FROM usage WHERE at_ms < ?1", [before_ms]))
            .await
    }

    /// Sum the rows of `report`'s period by its groups, the dearest first.
    pub(crate) async fn report(&self, report: Report) -> Result<Vec<ReportLine>, StoreError> {
        self.call(move |c| {
            let groups: Vec<&str> = report.groups.iter().map(|g| g.sql()).collect();
            let select = groups
                .iter()
                .map(|g| format!("{g}, "))
                .collect::<String>();
            let group_by = if groups.is_empty() {
                String::new()
            } else {
                format!("GROUP BY {}", groups.join(", "))
            };
            let sql = format!(
                "SELECT {select} COUNT(*), SUM(status >= 400), SUM(input_tokens), SUM(output_tokens), \
                 SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(spend) \
                 FROM usage WHERE at_ms >= ?1 AND at_ms < ?2 {group_by} \
                 ORDER BY SUM(spend) DESC, COUNT(*) DESC LIMIT {MAX_REPORT_LINES}"
            );
            let mut q = c.prepare(&sql)?;
            let n = groups.len();
            let lines = q.query_map(params_from_iter([report.from_ms, report.to_ms]), |r| {
                let mut group = Vec::with_capacity(n);
                for (i, g) in report.groups.iter().enumerate() {
                    group.push((g.name().to_string(), r.get::<_, Option<String>>(i)?));
                }
                let sum = |i: usize| -> rusqlite::Result<u64> {
                    Ok(count(r.get::<_, Option<i64>>(n + i)?.unwrap_or(0)) as u64)
                };
                Ok(ReportLine {
                    group,
                    requests: sum(0)?,
                    errors: sum(1)?,
                    input_tokens: sum(2)?,
                    output_tokens: sum(3)?,
                    cache_read_tokens: sum(4)?,
                    cache_write_tokens: sum(5)?,
                    spend: sum(6)?,
                })
            })?;
            let lines: rusqlite::Result<Vec<ReportLine>> = lines.collect();
            // No rows at all: no line, rather than one line of zeros.
            Ok(lines?.into_iter().filter(|l| l.requests > 0).collect())
        })
        .await
    }
}
