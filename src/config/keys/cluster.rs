//! `[cluster]`.

use super::*;
const T: &str = "cluster";

pub(crate) const URL: Key = Key {
    table: T,
    name: "url",
    kind: Kind::String,
    default: Default::Words("required"),
    meaning: "the Redis, redis:// or rediss://",
};
pub(crate) const PASSWORD_FILE: Key = Key {
    table: T,
    name: "password_file",
    kind: Kind::Path,
    default: Default::Words("none"),
    meaning: "a file holding the Redis password",
};
pub(crate) const PASSWORD_ENV: Key = Key {
    table: T,
    name: "password_env",
    kind: Kind::String,
    default: Default::Words("none"),
    meaning: "an environment variable holding the Redis password",
};
pub(crate) const KEY_PREFIX: Key = Key {
    table: T,
    name: "key_prefix",
    kind: Kind::String,
    default: Default::Str("weir:"),
    meaning: "put before every key weir writes",
};
pub(crate) const TIMEOUT: Key = Key {
    table: T,
    name: "timeout",
    // A wait longer than a second would stall serving on Redis, which
    // `[cluster]` exists never to do.
    kind: Kind::Duration(Duration::from_millis(1)..=secs(1)),
    default: Default::Duration(Duration::from_millis(20)),
    meaning: "the longest a request waits for Redis's decision",
};
pub(crate) const ON_FAILURE: Key = Key {
    table: T,
    name: "on_failure",
    kind: Kind::Choice(&["fail_open", "fail_closed"]),
    default: Default::Str("fail_open"),
    meaning: "what a shared limit does while Redis is slow or down",
};
pub(crate) const CA_FILE: Key = Key {
    table: T,
    name: "ca_file",
    kind: Kind::Path,
    default: Default::Words("none"),
    meaning: "extra CA certificates a rediss:// Redis's certificate may chain to",
};
pub(crate) const LEASE_TTL: Key = Key {
    table: T,
    name: "lease_ttl",
    // Renewed three times per TTL: under a second, renewals would be
    // most of the traffic; over a day, a crashed instance's slots
    // would stay taken for as long.
    kind: Kind::Duration(secs(1)..=secs(24 * 3600)),
    default: Default::Duration(secs(15)),
    meaning: "how long a concurrency slot outlives the instance holding it",
};
