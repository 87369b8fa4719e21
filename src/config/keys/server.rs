//! `[server]`.

use super::*;
const T: &str = "server";

pub(crate) const SHUTDOWN_TIMEOUT: Key = Key {
    table: T,
    name: "shutdown_timeout",
    kind: Kind::Duration(TIMER_OR_ZERO),
    default: Default::Duration(secs(30)),
    meaning: "after SIGTERM/SIGINT, how long in-flight requests may finish",
};
pub(crate) const DRAIN_GRACE: Key = Key {
    table: T,
    name: "drain_grace",
    kind: Kind::Duration(Duration::ZERO..=secs(60)),
    default: Default::Duration(secs(1)),
    meaning: "in a drain, how long an idle HTTP/1.1 connection is kept open",
};
pub(crate) const ERROR_PAGES: Key = Key {
    table: T,
    name: "error_pages",
    kind: Kind::List,
    default: Default::Empty,
    meaning: "error pages for answers before routing and for routes without their own",
};
pub(crate) const TRUSTED_PROXIES: Key = Key {
    table: T,
    name: "trusted_proxies",
    kind: Kind::List,
    default: Default::Empty,
    meaning: "peers whose X-Forwarded-* headers are kept and appended to",
};
pub(crate) const WORKERS: Key = Key {
    table: T,
    name: "workers",
    kind: Kind::Uint { max: 1024 },
    default: Default::Uint(0),
    meaning: "worker threads, each with its own runtime; 0: one per core",
};
pub(crate) const BUDGET_TIME_ZONE: Key = Key {
    table: T,
    name: "budget_time_zone",
    kind: Kind::String,
    default: Default::Str("UTC"),
    meaning: "the IANA time zone whose midnights start budget days, weeks and months",
};
pub(crate) const WATCH_CONFIG: Key = Key {
    table: T,
    name: "watch_config",
    kind: Kind::Bool,
    default: Default::Bool(true),
    meaning: "reload when the config file changes",
};
pub(crate) const TOKEN_ID_KEY_FILE: Key = Key {
    table: T,
    name: "token_id_key_file",
    kind: Kind::Path,
    default: Default::Words("none (a key made at start)"),
    meaning: "a file holding the key unnamed client tokens are named with",
};
pub(crate) const TOKEN_ID_KEY_ENV: Key = Key {
    table: T,
    name: "token_id_key_env",
    kind: Kind::String,
    default: Default::Words("none"),
    meaning: "an environment variable holding that key",
};
pub(crate) const MAX_BUFFERED_BODY_BYTES: Key = Key {
    table: T,
    name: "max_buffered_body_bytes",
    kind: Kind::Size {
        min: 0,
        max: MAX_SIZE,
    },
    default: Default::Size(256 * MIB),
    meaning: "request-body bytes LLM routes may hold in memory at once; 0: no bound",
};
pub(crate) const MAX_CONCURRENT_REQUESTS: Key = Key {
    table: T,
    name: "max_concurrent_requests",
    kind: Kind::Uint {
        max: MAX_SEMAPHORE_PERMITS,
    },
    default: Default::Uint(1024),
    meaning: "requests in flight, process-wide; 0: no gate",
};
pub(crate) const MAX_OPEN_STATIC_FILES: Key = Key {
    table: T,
    name: "max_open_static_files",
    kind: Kind::Uint { max: 65_536 },
    default: Default::Uint(256),
    meaning: "files static routes may have open at once, process-wide (503 past it)",
};
pub(crate) const BODY_READ_TIMEOUT: Key = Key {
    table: T,
    name: "body_read_timeout",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(120)),
    meaning: "the whole time an LLM route may take to read a request body (408 after)",
};
