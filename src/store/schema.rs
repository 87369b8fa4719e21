//! The database's schema, as the steps that build it: step `n` takes a
//! database at `user_version` n to n + 1. Every step runs in one
//! transaction with the version bump, so a start cut short leaves the
//! database at a step's boundary. Steps are only ever appended.

/// Each step's SQL, in order.
pub(super) const STEPS: &[&str] = &[
    // 1: keys, the version the refreshers watch, and usage rows.
    "CREATE TABLE keys (
        id TEXT PRIMARY KEY,
        hash BLOB NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        name TEXT NOT NULL,
        user TEXT,
        team TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        routes TEXT NOT NULL DEFAULT '[]',
        models TEXT NOT NULL DEFAULT '[]',
        max_concurrent INTEGER,
        tokens_per_minute INTEGER,
        tokens_per_day INTEGER,
        spend_per_day INTEGER,
        expires_at INTEGER,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        revoked_at INTEGER
     );
     CREATE TABLE changes (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
     INSERT INTO changes (id, version) VALUES (1, 0);
     CREATE TABLE usage (
        at_ms INTEGER NOT NULL,
        request_id TEXT,
        key_id TEXT,
        client TEXT,
        user TEXT,
        team TEXT,
        route TEXT NOT NULL,
        model TEXT,
        model_served TEXT,
        upstream TEXT,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cache_read_tokens INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL,
        spend INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        status INTEGER NOT NULL,
        outcome TEXT NOT NULL
     );
     CREATE INDEX usage_at ON usage (at_ms);",
    // 2: budgets over weeks and months, and the soft limit.
    "ALTER TABLE keys ADD COLUMN tokens_per_week INTEGER;
     ALTER TABLE keys ADD COLUMN spend_per_week INTEGER;
     ALTER TABLE keys ADD COLUMN tokens_per_month INTEGER;
     ALTER TABLE keys ADD COLUMN spend_per_month INTEGER;
     ALTER TABLE keys ADD COLUMN warn_at INTEGER;",
];
