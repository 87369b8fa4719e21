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
