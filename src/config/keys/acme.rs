//! `[listener.tls.acme]`.

use super::*;
const T: &str = "listener.tls.acme";

pub(crate) const DIRECTORY: Key = Key {
    table: T,
    name: "directory",
    kind: Kind::String,
    default: Default::Words("Let's Encrypt production"),
    meaning: "the CA's ACME directory URL, or a shorthand",
};
pub(crate) const CA_FILE: Key = Key {
    table: T,
    name: "ca_file",
    kind: Kind::Path,
    default: Default::Words("none"),
    meaning: "extra roots trusted for reaching the directory, and that certificates shared in Redis may chain to",
};
pub(crate) const EMAIL: Key = Key {
    table: T,
    name: "email",
    kind: Kind::String,
    default: Default::Words("none"),
    meaning: "contact address registered with the account",
};
pub(crate) const NAMES: Key = Key {
    table: T,
    name: "names",
    kind: Kind::List,
    default: Default::Words("every exact `host` of every route"),
    meaning: "DNS names to certify, one certificate each",
};
pub(crate) const CHALLENGE: Key = Key {
    table: T,
    name: "challenge",
    kind: Kind::Choice(&["tls-alpn-01", "http-01"]),
    default: Default::Str("tls-alpn-01"),
    meaning: "how the CA's challenges are answered",
};
pub(crate) const STATE_DIR: Key = Key {
    table: T,
    name: "state_dir",
    kind: Kind::Path,
    default: Default::Str("/var/lib/weir/acme"),
    meaning: "where the account key and certificates are kept",
};
pub(crate) const EXTERNAL_ACCOUNT: Key = Key {
    table: T,
    name: "external_account",
    kind: Kind::Table,
    default: Default::Words("none"),
    meaning: "External Account Binding, for CAs that require it",
};
pub(crate) const RETRY_BASE: Key = Key {
    table: T,
    name: "retry_base",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(60)),
    meaning: "the wait after a failed order, doubled per failure in a row",
};
