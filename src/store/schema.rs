//! The database's schema, as the steps that build it: step `n` takes a
//! database at version n to n + 1. Every step runs in one transaction with
//! the version bump, so a start cut short leaves the database at a step's
//! boundary. Steps are only ever appended.
//!
//! One list serves both databases: a step names its integer and byte
//! types `{int}` and `{blob}`, written for each dialect by [`Dialect::step`]
//! (SQLite's `INTEGER` is already 64 bits; PostgreSQL's is not). SQLite
//! keeps the version in `PRAGMA user_version`, PostgreSQL in the table
//! `weir_schema`.

/// Which SQL a statement is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// Step `sql` written for this database.
    pub(super) fn step(self, sql: &str) -> String {
        let (int, blob) = match self {
            Dialect::Sqlite => ("INTEGER", "BLOB"),
            Dialect::Postgres => ("BIGINT", "BYTEA"),
        };
        sql.replace("{int}", int).replace("{blob}", blob)
    }

    /// The `n`th (from 1) statement parameter.
    pub(super) fn param(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }
}

/// Each step's SQL, in order. (`"user"` is quoted: PostgreSQL reserves
/// the word; to SQLite it is the same column.)
pub(super) const STEPS: &[&str] = &[
    // 1: keys, the version the refreshers watch, and usage rows.
    "CREATE TABLE keys (
        id TEXT PRIMARY KEY,
        hash {blob} NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        name TEXT NOT NULL,
        \"user\" TEXT,
        team TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        routes TEXT NOT NULL DEFAULT '[]',
        models TEXT NOT NULL DEFAULT '[]',
        max_concurrent {int},
        tokens_per_minute {int},
        tokens_per_day {int},
        spend_per_day {int},
        expires_at {int},
        created_at {int} NOT NULL,
        updated_at {int} NOT NULL,
        revoked_at {int}
     );
     CREATE TABLE changes (id {int} PRIMARY KEY CHECK (id = 1), version {int} NOT NULL);
     INSERT INTO changes (id, version) VALUES (1, 0);
     CREATE TABLE usage (
        at_ms {int} NOT NULL,
        request_id TEXT,
        key_id TEXT,
        client TEXT,
        \"user\" TEXT,
        team TEXT,
        route TEXT NOT NULL,
        model TEXT,
        model_served TEXT,
        upstream TEXT,
        input_tokens {int} NOT NULL,
        output_tokens {int} NOT NULL,
        cache_read_tokens {int} NOT NULL,
        cache_write_tokens {int} NOT NULL,
        spend {int} NOT NULL,
        duration_ms {int} NOT NULL,
        status {int} NOT NULL,
        outcome TEXT NOT NULL
     );
     CREATE INDEX usage_at ON usage (at_ms);",
    // 2: budgets over weeks and months, and the soft limit.
    "ALTER TABLE keys ADD COLUMN tokens_per_week {int};
     ALTER TABLE keys ADD COLUMN spend_per_week {int};
     ALTER TABLE keys ADD COLUMN tokens_per_month {int};
     ALTER TABLE keys ADD COLUMN spend_per_month {int};
     ALTER TABLE keys ADD COLUMN warn_at {int};",
    // 3: the coding agent's session and agent a request came from (its
    // hint headers), so a session's and a subagent's spend can be summed.
    "ALTER TABLE usage ADD COLUMN session TEXT;
     ALTER TABLE usage ADD COLUMN agent TEXT;",
    // 4: teams' policies, kept at runtime (docs/decisions/102); a change
    // moves `changes.version` as a key's does.
    "CREATE TABLE teams (
        name TEXT PRIMARY KEY,
        models TEXT NOT NULL DEFAULT '[]',
        routes TEXT NOT NULL DEFAULT '[]',
        max_concurrent {int},
        budget TEXT NOT NULL DEFAULT '{}',
        per_person TEXT NOT NULL DEFAULT '{}',
        created_at {int} NOT NULL,
        updated_at {int} NOT NULL
     );",
    // 5: a key's request rate and its burst, and a team's default of
    // both for its keys (docs/decisions/106).
    "ALTER TABLE keys ADD COLUMN rate_limit_per_second {int};
     ALTER TABLE keys ADD COLUMN rate_limit_burst {int};
     ALTER TABLE teams ADD COLUMN rate_limit_per_second {int};
     ALTER TABLE teams ADD COLUMN rate_limit_burst {int};",
];
