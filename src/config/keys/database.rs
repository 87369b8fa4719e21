//! `[database]`.

use super::*;
const T: &str = "database";

pub(crate) const URL: Key = Key {
    table: T,
    name: "url",
    kind: Kind::String,
    default: Default::Str("sqlite:weir.db"),
    meaning: "the database: sqlite:PATH (relative to the config's directory), or postgres://USER:PASSWORD@HOST:PORT/DB for a fleet",
};
pub(crate) const USAGE_RETENTION: Key = Key {
    table: T,
    name: "usage_retention",
    kind: Kind::Duration(secs(3600)..=secs(10 * 366 * 86_400)),
    default: Default::Duration(secs(400 * 86_400)),
    meaning: "how long usage rows are kept",
};
pub(crate) const USAGE_QUEUE: Key = Key {
    table: T,
    name: "usage_queue",
    kind: Kind::Uint { max: 1_000_000 },
    default: Default::Uint(10_000),
    meaning: "usage rows waiting to be written, at most; past it rows are dropped and counted",
};
