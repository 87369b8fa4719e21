//! The `usage` table: one row per LLM request, written in batches, and
//! the report that sums them over a period by the groups asked for.

use serde::Serialize;

use super::schema::Dialect;

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
    /// The coding agent's session (Claude Code's, Codex's), when it said.
    pub(crate) session: Option<String>,
    /// The (sub)agent within the session, when it said.
    pub(crate) agent: Option<String>,
}

/// Whose rows a sum of use is over: a key's (by id) or a team's (by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum By {
    Key,
    Team,
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
    Session,
    Agent,
    Day,
}

impl Group {
    pub(crate) const ALL: [Group; 10] = [
        Group::Key,
        Group::Client,
        Group::User,
        Group::Team,
        Group::Route,
        Group::Model,
        Group::Upstream,
        Group::Session,
        Group::Agent,
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
            Group::Session => "session",
            Group::Agent => "agent",
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
    fn sql(self, dialect: Dialect) -> &'static str {
        match self {
            Group::Key => "key_id",
            Group::Client => "client",
            Group::User => "\"user\"",
            Group::Team => "team",
            Group::Route => "route",
            Group::Model => "model",
            Group::Upstream => "upstream",
            Group::Session => "session",
            Group::Agent => "agent",
            Group::Day => match dialect {
                Dialect::Sqlite => "strftime('%Y-%m-%d', at_ms / 1000, 'unixepoch')",
                Dialect::Postgres => {
                    "to_char(to_timestamp(at_ms / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
                }
            },
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

/// A stored sum back as a count (never negative).
fn count(v: Option<i64>) -> u64 {
    v.map_or(0, |v| v.max(0) as u64)
}

/// The columns of `usage`, in the order [`cells`] gives them.
pub(super) const COLUMNS: &str = "at_ms, request_id, key_id, client, \"user\", team, route, model, \
    model_served, upstream, input_tokens, output_tokens, cache_read_tokens, \
    cache_write_tokens, spend, duration_ms, status, outcome, session, agent";

/// A row's values in `COLUMNS`' order: integers, then texts, split so
/// each database binds them its own way.
pub(super) fn cells(r: &UsageRow) -> ([i64; 8], [Option<String>; 12]) {
    let big = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    (
        [
            r.at_ms,
            big(r.tokens[0]),
            big(r.tokens[1]),
            big(r.tokens[2]),
            big(r.tokens[3]),
            big(r.spend),
            big(r.duration_ms),
            i64::from(r.status),
        ],
        [
            r.request_id.clone(),
            r.key_id.clone(),
            r.client.clone(),
            r.user.clone(),
            r.team.clone(),
            Some(r.route.clone()),
            r.model.clone(),
            r.model_served.clone(),
            r.upstream.clone(),
            Some(r.outcome.clone()),
            r.session.clone(),
            r.agent.clone(),
        ],
    )
}

/// Where each of `COLUMNS` is in [`cells`]' two lists: `(is_int, index)`.
pub(super) const PLACES: [(bool, usize); 20] = [
    (true, 0),
    (false, 0),
    (false, 1),
    (false, 2),
    (false, 3),
    (false, 4),
    (false, 5),
    (false, 6),
    (false, 7),
    (false, 8),
    (true, 1),
    (true, 2),
    (true, 3),
    (true, 4),
    (true, 5),
    (true, 6),
    (true, 7),
    (false, 9),
    (false, 10),
    (false, 11),
];

/// A key's requests, tokens and spend since a time (parameters: the key,
/// the time in ms).
pub(super) fn used_since_sql(d: Dialect, by: By) -> String {
    let column = match by {
        By::Key => "key_id",
        By::Team => "team",
    };
    format!(
        "SELECT COUNT(*), CAST(SUM(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS BIGINT), \
         CAST(SUM(spend) AS BIGINT) FROM usage WHERE {column} = {} AND at_ms >= {}",
        d.param(1),
        d.param(2)
    )
}

/// The sums [`used_since_sql`] answers, as counts.
pub(super) fn used(sums: [Option<i64>; 3]) -> (u64, u64, u64) {
    (count(sums[0]), count(sums[1]), count(sums[2]))
}

/// The report's query: the groups' columns, then seven sums (parameters:
/// from and to, in ms).
pub(super) fn report_sql(report: &Report, d: Dialect) -> String {
    let groups: Vec<&str> = report.groups.iter().map(|g| g.sql(d)).collect();
    let select = groups.iter().map(|g| format!("{g}, ")).collect::<String>();
    let group_by = if groups.is_empty() {
        String::new()
    } else {
        format!("GROUP BY {}", groups.join(", "))
    };
    format!(
        "SELECT {select} COUNT(*), CAST(SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END) AS BIGINT), \
         CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), \
         CAST(SUM(cache_read_tokens) AS BIGINT), CAST(SUM(cache_write_tokens) AS BIGINT), \
         CAST(SUM(spend) AS BIGINT) \
         FROM usage WHERE at_ms >= {} AND at_ms < {} {group_by} \
         ORDER BY SUM(spend) DESC, COUNT(*) DESC LIMIT {MAX_REPORT_LINES}",
        d.param(1),
        d.param(2)
    )
}

/// One report line from its group's values and the seven sums; `None`
/// for the line of zeros a query over no rows at all answers.
pub(super) fn line(
    report: &Report,
    values: Vec<Option<String>>,
    sums: [Option<i64>; 7],
) -> Option<ReportLine> {
    let group = report
        .groups
        .iter()
        .map(|g| g.name().to_string())
        .zip(values)
        .collect();
    let line = ReportLine {
        group,
        requests: count(sums[0]),
        errors: count(sums[1]),
        input_tokens: count(sums[2]),
        output_tokens: count(sums[3]),
        cache_read_tokens: count(sums[4]),
        cache_write_tokens: count(sums[5]),
        spend: count(sums[6]),
    };
    (line.requests > 0).then_some(line)
}
