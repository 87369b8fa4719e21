//! `[upstream]`.

use super::*;
const T: &str = "upstream";

pub(crate) const POOL_IDLE_TIMEOUT: Key = Key {
    table: T,
    name: "pool_idle_timeout",
    kind: Kind::Duration(TIMER_OR_ZERO),
    default: Default::Duration(secs(90)),
    meaning: "idle upstream connections are closed after this",
};
pub(crate) const POOL_MAX_IDLE_PER_HOST: Key = Key {
    table: T,
    name: "pool_max_idle_per_host",
    kind: Kind::Uint { max: 1_000_000 },
    default: Default::Uint(64),
    meaning: "idle connections kept per upstream host; 0: no reuse",
};
pub(crate) const CA_FILE: Key = Key {
    table: T,
    name: "ca_file",
    kind: Kind::Path,
    default: Default::Words("none"),
    meaning: "extra CA certificates trusted for https:// upstreams",
};
pub(crate) const NAMESERVERS: Key = Key {
    table: T,
    name: "nameservers",
    kind: Kind::List,
    default: Default::Words("the system's (`/etc/resolv.conf`, and `/etc/hosts`)"),
    meaning: "DNS servers asked for the names of proxy routes' servers",
};
pub(crate) const RESOLVE_INTERVAL: Key = Key {
    table: T,
    name: "resolve_interval",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(30)),
    meaning: "how often server names are looked up again",
};
