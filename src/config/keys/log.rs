//! `[log]`.

use super::*;
const T: &str = "log";

pub(crate) const FORMAT: Key = Key {
    table: T,
    name: "format",
    kind: Kind::Choice(&["text", "json"]),
    default: Default::Str("text"),
    meaning: "plain text, or one JSON object per line",
};
pub(crate) const LEVEL: Key = Key {
    table: T,
    name: "level",
    kind: Kind::String,
    default: Default::Str("info"),
    meaning: "a tracing filter",
};
pub(crate) const ACCESS_LOG: Key = Key {
    table: T,
    name: "access_log",
    kind: Kind::Bool,
    default: Default::Bool(true),
    meaning: "one line per request",
};
pub(crate) const FILE: Key = Key {
    table: T,
    name: "file",
    kind: Kind::Path,
    default: Default::Words("none (stderr)"),
    meaning: "write logs to this file instead of stderr",
};
pub(crate) const ACCESS_FILE: Key = Key {
    table: T,
    name: "access_file",
    kind: Kind::Path,
    default: Default::Words("none (with the other logs)"),
    meaning: "write the access log to its own file",
};
pub(crate) const USAGE_LOG: Key = Key {
    table: T,
    name: "usage_log",
    kind: Kind::Bool,
    default: Default::Bool(false),
    meaning: "one JSON usage record per request on an LLM route",
};
pub(crate) const USAGE_FILE: Key = Key {
    table: T,
    name: "usage_file",
    kind: Kind::Path,
    default: Default::Words("none (stdout)"),
    meaning: "write the usage records to this file instead of stdout",
};
