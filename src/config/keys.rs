//! Config keys, each declared once: its table, name, kind (with the bound
//! a value must be within), default and meaning.
//!
//! The reader's getters take a [`Key`], so a loader names a key only
//! through its declaration, and the bound it checks and the default it
//! falls back to are the declaration's. The settings' `Default` impls take
//! their values from here, and the docs test checks every declaration
//! against the key tables in docs/configuration.md (the key is in its
//! table, with this default) and every documented key of a declared table
//! against the declarations.
//!
//! Declared so far: `[server]`, `[connections]`, `[http1]`, `[http2]`,
//! `[log]`, `[admin]`, `[upstream]`, `[cluster]`, and `[[listener]]` with
//! its `tls`, `certificates`, `acme` and `external_account` tables (see
//! [`ALL`]). The route tables' keys are still named in their getters'
//! calls.

use std::ops::RangeInclusive;
use std::time::Duration;

/// One key of one table.
#[derive(Debug)]
pub(crate) struct Key {
    /// The table it is in, by path without indices (`route.upstreams`).
    pub(crate) table: &'static str,
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) default: Default,
    /// What it is for, in a line (the docs say more).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) meaning: &'static str,
}

/// What a key holds, with the bound its value must be within.
#[derive(Debug)]
pub(crate) enum Kind {
    /// A duration string (`"10s"`) within the range.
    Duration(RangeInclusive<Duration>),
    /// A byte size (an integer or `"10MiB"`) from `min` to `max`.
    Size {
        min: u64,
        max: u64,
    },
    /// A whole number from 0 to `max`.
    Uint {
        max: u64,
    },
    Bool,
    String,
    /// One of these names (the loader maps each to its value).
    #[cfg_attr(not(test), allow(dead_code))]
    Choice(&'static [&'static str]),
    /// A path, resolved against the config file's directory.
    Path,
    /// A list of strings (a single string is a list of one).
    List,
    /// A sub-table (`[a.b]` or `b = { ... }`), declared in its own right.
    Table,
    /// An array of tables (`[[a.b]]`), each declared in its own right.
    Tables,
}

/// What a key is when it is not set.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Default {
    Duration(Duration),
    Size(u64),
    Uint(u64),
    Bool(bool),
    Str(&'static str),
    /// The empty list, `[]`.
    Empty,
    /// No value: what happens instead, as the docs' default cell says it
    /// (`"required"`, `"none (stderr)"`).
    #[cfg_attr(not(test), allow(dead_code))]
    Words(&'static str),
}

impl Key {
    /// The default of a duration key.
    pub(crate) const fn duration(&self) -> Duration {
        match self.default {
            Default::Duration(d) => d,
            _ => panic!("not a duration default"),
        }
    }

    /// The default of a size key, in bytes.
    pub(crate) const fn size(&self) -> u64 {
        match self.default {
            Default::Size(n) => n,
            _ => panic!("not a size default"),
        }
    }

    /// The default of a whole-number key.
    pub(crate) const fn uint(&self) -> u64 {
        match self.default {
            Default::Uint(n) => n,
            _ => panic!("not a whole-number default"),
        }
    }

    /// The default of a true-or-false key.
    pub(crate) const fn flag(&self) -> bool {
        match self.default {
            Default::Bool(b) => b,
            _ => panic!("not a true-or-false default"),
        }
    }

    /// The default of a string or choice key.
    pub(crate) const fn text(&self) -> &'static str {
        match self.default {
            Default::Str(s) => s,
            _ => panic!("not a string default"),
        }
    }
}

/// Every timer (timeouts, intervals, periods): more than zero and at most a
/// day. No deadline weir computes from one can then overflow, and a value
/// beyond a day is a mistake (a unit written wrong) rather than a wish.
pub(crate) const TIMER: RangeInclusive<Duration> =
    Duration::from_millis(1)..=Duration::from_secs(24 * 3600);
/// Timers where zero means "at once" (`shutdown_timeout`,
/// `pool_idle_timeout`), with the same upper bound.
pub(crate) const TIMER_OR_ZERO: RangeInclusive<Duration> =
    Duration::ZERO..=Duration::from_secs(24 * 3600);
/// A byte size with no tighter bound of its own: a body limit or a memory
/// budget beyond 1 TiB is a mistake.
pub(crate) const MAX_SIZE: u64 = 1 << 40;
/// The request gate is a semaphore; tokio's holds at most this many permits.
pub(crate) const MAX_SEMAPHORE_PERMITS: u64 = (usize::MAX >> 3) as u64;

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// `[server]`.
pub(crate) mod server {
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
}

/// `[connections]`.
pub(crate) mod connections {
    use super::*;
    const T: &str = "connections";

    pub(crate) const MAX: Key = Key {
        table: T,
        name: "max",
        kind: Kind::Uint {
            max: MAX_SEMAPHORE_PERMITS,
        },
        default: Default::Uint(1024),
        meaning: "client connections, process-wide; 0: no cap",
    };
    pub(crate) const MAX_PER_IP: Key = Key {
        table: T,
        name: "max_per_ip",
        kind: Kind::Uint {
            max: MAX_SEMAPHORE_PERMITS,
        },
        default: Default::Uint(0),
        meaning: "connections per client address (IPv6 per /64); 0: off",
    };
    pub(crate) const TLS_HANDSHAKE_TIMEOUT: Key = Key {
        table: T,
        name: "tls_handshake_timeout",
        kind: Kind::Duration(TIMER),
        default: Default::Duration(secs(10)),
        meaning: "time to complete the TLS handshake",
    };
    pub(crate) const REQUEST_HEAD_TIMEOUT: Key = Key {
        table: T,
        name: "request_head_timeout",
        kind: Kind::Duration(TIMER),
        default: Default::Duration(secs(10)),
        meaning: "total time to receive a request head",
    };
    pub(crate) const KEEPALIVE_TIMEOUT: Key = Key {
        table: T,
        name: "keepalive_timeout",
        kind: Kind::Duration(TIMER),
        default: Default::Duration(secs(60)),
        meaning: "idle time between requests, or with no open stream",
    };
    pub(crate) const MAX_REQUESTS: Key = Key {
        table: T,
        name: "max_requests",
        kind: Kind::Uint { max: u64::MAX },
        default: Default::Uint(1000),
        meaning: "requests per connection; 0: no limit",
    };
    pub(crate) const MIN_BODY_RATE: Key = Key {
        table: T,
        name: "min_body_rate",
        // A minimum above 1 GiB/s would cut every client.
        kind: Kind::Size {
            min: 0,
            max: 1 << 30,
        },
        default: Default::Size(KIB),
        meaning: "minimum request-body rate in bytes per second; 0: off",
    };
    pub(crate) const BODY_RATE_PERIOD: Key = Key {
        table: T,
        name: "body_rate_period",
        kind: Kind::Duration(TIMER),
        default: Default::Duration(secs(10)),
        meaning: "the window for min_body_rate",
    };
    pub(crate) const SEND_TIMEOUT: Key = Key {
        table: T,
        name: "send_timeout",
        kind: Kind::Duration(TIMER),
        default: Default::Duration(secs(30)),
        meaning: "how long a client may take nothing before it is disconnected",
    };
    pub(crate) const PRESSURE_THRESHOLD: Key = Key {
        table: T,
        name: "pressure_threshold",
        // 0 is refused by the loader, with its own message.
        kind: Kind::Uint { max: 100 },
        default: Default::Uint(80),
        meaning: "percent of max at which deadlines shrink to pressure_timeout",
    };
    pub(crate) const PRESSURE_TIMEOUT: Key = Key {
        table: T,
        name: "pressure_timeout",
        kind: Kind::Duration(TIMER),
        default: Default::Duration(secs(1)),
        meaning: "the shrunk deadline under pressure",
    };
    pub(crate) const TUNNEL_IDLE_TIMEOUT: Key = Key {
        table: T,
        name: "tunnel_idle_timeout",
        kind: Kind::Duration(TIMER),
        default: Default::Duration(secs(60)),
        meaning: "an upgraded tunnel (WebSocket) carrying no byte either way this long is closed",
    };
    pub(crate) const TUNNEL_MAX_LIFETIME: Key = Key {
        table: T,
        name: "tunnel_max_lifetime",
        kind: Kind::Duration(TIMER_OR_ZERO),
        default: Default::Duration(Duration::ZERO),
        meaning: "a tunnel is closed this long after it opened, busy or not; 0: no cap",
    };
    pub(crate) const MAX_TUNNELS_PER_IP: Key = Key {
        table: T,
        name: "max_tunnels_per_ip",
        kind: Kind::Uint {
            max: MAX_SEMAPHORE_PERMITS,
        },
        default: Default::Uint(256),
        meaning: "open tunnels per client address (IPv6 per /64); 0: off",
    };
}

/// Request heads (HTTP/1.1) and header lists (HTTP/2): hyper's read
/// buffer cannot be smaller than 8 KiB, and 16 MiB of headers is an attack.
const HEAD_SIZE_MAX: u64 = 16 * MIB;

/// `[http1]`.
pub(crate) mod http1 {
    use super::*;
    const T: &str = "http1";

    pub(crate) const MAX_HEADERS: Key = Key {
        table: T,
        name: "max_headers",
        kind: Kind::Uint { max: 10_000 },
        default: Default::Uint(100),
        meaning: "header fields per request",
    };
    pub(crate) const MAX_HEAD_SIZE: Key = Key {
        table: T,
        name: "max_head_size",
        kind: Kind::Size {
            min: 8 * KIB,
            max: HEAD_SIZE_MAX,
        },
        default: Default::Size(64 * KIB),
        meaning: "request line plus headers, in bytes",
    };
}

/// `[http2]`.
pub(crate) mod http2 {
    use super::*;
    const T: &str = "http2";

    pub(crate) const MAX_CONCURRENT_STREAMS: Key = Key {
        table: T,
        name: "max_concurrent_streams",
        kind: Kind::Uint {
            max: u32::MAX as u64,
        },
        default: Default::Uint(100),
        meaning: "streams open at once per connection",
    };
    pub(crate) const MAX_HEADER_LIST_SIZE: Key = Key {
        table: T,
        name: "max_header_list_size",
        kind: Kind::Size {
            min: 0,
            max: HEAD_SIZE_MAX,
        },
        default: Default::Size(64 * KIB),
        meaning: "decoded header block size per request",
    };
    pub(crate) const MAX_PENDING_RESETS: Key = Key {
        table: T,
        name: "max_pending_resets",
        kind: Kind::Uint { max: 1_000_000 },
        default: Default::Uint(20),
        meaning: "streams a client may open and reset before weir accepts them",
    };
    pub(crate) const MAX_CONTROL_FRAMES_PER_SECOND: Key = Key {
        table: T,
        name: "max_control_frames_per_second",
        kind: Kind::Uint {
            max: u32::MAX as u64,
        },
        default: Default::Uint(1000),
        meaning: "PING, SETTINGS, PRIORITY and RST_STREAM frames a client may send per second",
    };
}

/// `[log]`.
pub(crate) mod log {
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
}

/// `[admin]`.
pub(crate) mod admin {
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
}

/// `[upstream]`.
pub(crate) mod upstream {
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
}

/// `[cluster]`.
pub(crate) mod cluster {
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
}

/// `[[listener]]`.
pub(crate) mod listener {
    use super::*;
    const T: &str = "listener";

    pub(crate) const NAME: Key = Key {
        table: T,
        name: "name",
        kind: Kind::String,
        default: Default::Words("the address"),
        meaning: "the name used in logs",
    };
    pub(crate) const ADDRESS: Key = Key {
        table: T,
        name: "address",
        kind: Kind::String,
        default: Default::Words("required"),
        meaning: "IP:port to listen on",
    };
    pub(crate) const TLS: Key = Key {
        table: T,
        name: "tls",
        kind: Kind::Table,
        default: Default::Words("none"),
        meaning: "makes this an HTTPS listener",
    };
    pub(crate) const REDIRECT_HTTPS: Key = Key {
        table: T,
        name: "redirect_https",
        kind: Kind::Bool,
        default: Default::Bool(false),
        meaning: "only answer with redirects to https://",
    };
    pub(crate) const HTTPS_PORT: Key = Key {
        table: T,
        name: "https_port",
        kind: Kind::Uint { max: 65535 },
        default: Default::Uint(443),
        meaning: "the port written in redirects",
    };
    pub(crate) const PROXY_PROTOCOL_FROM: Key = Key {
        table: T,
        name: "proxy_protocol_from",
        kind: Kind::List,
        default: Default::Empty,
        meaning: "load balancers that open every connection with a PROXY header",
    };
    pub(crate) const ACCESS: Key = Key {
        table: T,
        name: "access",
        kind: Kind::List,
        default: Default::Empty,
        meaning: "allow/deny rules by client address, checked before TLS",
    };
}

/// `[listener.tls]`.
pub(crate) mod tls {
    use super::*;
    const T: &str = "listener.tls";

    pub(crate) const CERTIFICATES: Key = Key {
        table: T,
        name: "certificates",
        kind: Kind::Tables,
        default: Default::Words("required unless `acme` is set"),
        meaning: "certificates from files, chosen by SNI",
    };
    pub(crate) const ACME: Key = Key {
        table: T,
        name: "acme",
        kind: Kind::Table,
        default: Default::Words("none"),
        meaning: "obtain and renew certificates over ACME",
    };
}

/// `[[listener.tls.certificates]]`.
pub(crate) mod certificate {
    use super::*;
    const T: &str = "listener.tls.certificates";

    pub(crate) const CERT: Key = Key {
        table: T,
        name: "cert",
        kind: Kind::Path,
        default: Default::Words("required"),
        meaning: "PEM file: the certificate, then its chain",
    };
    pub(crate) const KEY: Key = Key {
        table: T,
        name: "key",
        kind: Kind::Path,
        default: Default::Words("required"),
        meaning: "PEM file: the certificate's private key",
    };
}

/// `[listener.tls.acme]`.
pub(crate) mod acme {
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
}

/// `[listener.tls.acme.external_account]`.
pub(crate) mod external_account {
    use super::*;
    const T: &str = "listener.tls.acme.external_account";

    pub(crate) const KEY_ID: Key = Key {
        table: T,
        name: "key_id",
        kind: Kind::String,
        default: Default::Words("required"),
        meaning: "the key id (kid) the CA issued",
    };
    pub(crate) const HMAC_KEY_FILE: Key = Key {
        table: T,
        name: "hmac_key_file",
        kind: Kind::Path,
        default: Default::Words("required unless `hmac_key_env`"),
        meaning: "a file holding the HMAC key",
    };
    pub(crate) const HMAC_KEY_ENV: Key = Key {
        table: T,
        name: "hmac_key_env",
        kind: Kind::String,
        default: Default::Words("none"),
        meaning: "an environment variable holding the HMAC key",
    };
}

/// Every declared key, table by table.
#[cfg(test)]
pub(crate) const ALL: &[&Key] = &[
    &server::SHUTDOWN_TIMEOUT,
    &server::DRAIN_GRACE,
    &server::TRUSTED_PROXIES,
    &server::ERROR_PAGES,
    &server::WORKERS,
    &server::WATCH_CONFIG,
    &server::TOKEN_ID_KEY_FILE,
    &server::TOKEN_ID_KEY_ENV,
    &server::MAX_BUFFERED_BODY_BYTES,
    &server::MAX_CONCURRENT_REQUESTS,
    &server::MAX_OPEN_STATIC_FILES,
    &server::BODY_READ_TIMEOUT,
    &connections::MAX,
    &connections::MAX_PER_IP,
    &connections::TLS_HANDSHAKE_TIMEOUT,
    &connections::REQUEST_HEAD_TIMEOUT,
    &connections::KEEPALIVE_TIMEOUT,
    &connections::MAX_REQUESTS,
    &connections::MIN_BODY_RATE,
    &connections::BODY_RATE_PERIOD,
    &connections::SEND_TIMEOUT,
    &connections::PRESSURE_THRESHOLD,
    &connections::PRESSURE_TIMEOUT,
    &connections::TUNNEL_IDLE_TIMEOUT,
    &connections::TUNNEL_MAX_LIFETIME,
    &connections::MAX_TUNNELS_PER_IP,
    &http1::MAX_HEADERS,
    &http1::MAX_HEAD_SIZE,
    &http2::MAX_CONCURRENT_STREAMS,
    &http2::MAX_HEADER_LIST_SIZE,
    &http2::MAX_PENDING_RESETS,
    &http2::MAX_CONTROL_FRAMES_PER_SECOND,
    &log::FORMAT,
    &log::LEVEL,
    &log::ACCESS_LOG,
    &log::FILE,
    &log::ACCESS_FILE,
    &log::USAGE_LOG,
    &log::USAGE_FILE,
    &admin::ADDRESS,
    &admin::TOKEN_FILE,
    &admin::TOKEN_ENV,
    &upstream::POOL_IDLE_TIMEOUT,
    &upstream::POOL_MAX_IDLE_PER_HOST,
    &upstream::CA_FILE,
    &upstream::NAMESERVERS,
    &upstream::RESOLVE_INTERVAL,
    &cluster::URL,
    &cluster::PASSWORD_FILE,
    &cluster::PASSWORD_ENV,
    &cluster::KEY_PREFIX,
    &cluster::TIMEOUT,
    &cluster::ON_FAILURE,
    &cluster::CA_FILE,
    &cluster::LEASE_TTL,
    &listener::NAME,
    &listener::ADDRESS,
    &listener::TLS,
    &listener::REDIRECT_HTTPS,
    &listener::HTTPS_PORT,
    &listener::PROXY_PROTOCOL_FROM,
    &listener::ACCESS,
    &tls::CERTIFICATES,
    &tls::ACME,
    &certificate::CERT,
    &certificate::KEY,
    &acme::DIRECTORY,
    &acme::CA_FILE,
    &acme::EMAIL,
    &acme::NAMES,
    &acme::CHALLENGE,
    &acme::STATE_DIR,
    &acme::EXTERNAL_ACCOUNT,
    &acme::RETRY_BASE,
    &external_account::KEY_ID,
    &external_account::HMAC_KEY_FILE,
    &external_account::HMAC_KEY_ENV,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each default is of its key's kind and within its bound, and no key
    /// is declared twice.
    #[test]
    fn every_default_fits_its_key() {
        let mut seen = std::collections::BTreeSet::new();
        for k in ALL {
            assert!(
                seen.insert((k.table, k.name)),
                "{}.{} twice",
                k.table,
                k.name
            );
            assert!(!k.meaning.is_empty(), "{}.{}", k.table, k.name);
            let fits = match (&k.kind, k.default) {
                (Kind::Duration(range), Default::Duration(d)) => range.contains(&d),
                (Kind::Size { min, max }, Default::Size(n)) => (*min..=*max).contains(&n),
                (Kind::Uint { max }, Default::Uint(n)) => n <= *max,
                (Kind::Bool, Default::Bool(_)) => true,
                (Kind::String | Kind::Path, Default::Str(_)) => true,
                (Kind::Choice(names), Default::Str(s)) => names.contains(&s),
                (Kind::List, Default::Empty) => true,
                (_, Default::Words(_)) => true,
                _ => false,
            };
            assert!(
                fits,
                "{}.{}: {:?} for {:?}",
                k.table, k.name, k.default, k.kind
            );
        }
    }
}
