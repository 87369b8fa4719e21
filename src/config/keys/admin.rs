//! `[admin]`.

use super::*;
const T: &str = "admin";

pub(crate) const ADDRESS: Key = Key {
    table: T,
    name: "address",
    kind: Kind::String,
    default: Default::Words("required"),
    meaning: "IP:port of the admin listener",
};
pub(crate) const TOKEN_FILE: Key = Key {
    table: T,
    name: "token_file",
    kind: Kind::Path,
    default: Default::Words("none"),
    meaning: "a file holding the admin API's bearer token",
};
pub(crate) const TOKEN_ENV: Key = Key {
    table: T,
    name: "token_env",
    kind: Kind::String,
    default: Default::Words("none"),
    meaning: "an environment variable holding the admin API's bearer token",
};
pub(crate) const VIEW_TOKEN_FILE: Key = Key {
    table: T,
    name: "view_token_file",
    kind: Kind::Path,
    default: Default::Words("none"),
    meaning: "a file holding a read-only token: it may only read the dashboard's JSON",
};
pub(crate) const VIEW_TOKEN_ENV: Key = Key {
    table: T,
    name: "view_token_env",
    kind: Kind::String,
    default: Default::Words("none"),
    meaning: "an environment variable holding the read-only dashboard token",
};
pub(crate) const DASHBOARD_INTERVAL: Key = Key {
    table: T,
    name: "dashboard_interval",
    kind: Kind::Duration(Duration::from_secs(1)..=Duration::from_secs(60)),
    default: Default::Duration(Duration::from_secs(5)),
    meaning: "how often the dashboard samples the metrics for its charts",
};
