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
//! `[log]`, `[admin]`, `[upstream]`, `[cluster]`, `[telemetry.traces]`, `[telemetry.metrics]`, and `[[listener]]` with
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
    /// A number (integer or decimal) from 0 to `max`.
    Number {
        max: f64,
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
pub(crate) mod server;

/// `[connections]`.
pub(crate) mod connections;

/// Request heads (HTTP/1.1) and header lists (HTTP/2): hyper's read
/// buffer cannot be smaller than 8 KiB, and 16 MiB of headers is an attack.
const HEAD_SIZE_MAX: u64 = 16 * MIB;

/// `[http1]`.
pub(crate) mod http1;

/// `[http2]`.
pub(crate) mod http2;

/// `[log]`.
pub(crate) mod log;

/// `[admin]`.
pub(crate) mod admin;

/// `[upstream]`.
pub(crate) mod upstream;

/// `[cluster]`.
pub(crate) mod cluster;

/// `[database]`.
pub(crate) mod database;

/// `[idp]`.
pub(crate) mod idp;
/// `[telemetry.metrics]`.
pub(crate) mod metrics;
/// The collector target keys of `[telemetry.*]`.
mod otlp;
/// `[telemetry]` and `[telemetry.traces]`.
pub(crate) mod traces;

/// `[[listener]]`.
pub(crate) mod listener;

/// `[listener.tls]`.
pub(crate) mod tls;

/// `[[listener.tls.certificates]]`.
pub(crate) mod certificate;

/// `[listener.tls.acme]`.
pub(crate) mod acme;

/// `[listener.tls.acme.external_account]`.
pub(crate) mod external_account;

/// Every declared key, table by table.
#[cfg(test)]
pub(crate) const ALL: &[&Key] = &[
    &server::SHUTDOWN_TIMEOUT,
    &server::DRAIN_GRACE,
    &server::TRUSTED_PROXIES,
    &server::ERROR_PAGES,
    &server::WORKERS,
    &server::WATCH_CONFIG,
    &server::BUDGET_TIME_ZONE,
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
    &admin::VIEW_TOKEN_FILE,
    &admin::VIEW_TOKEN_ENV,
    &admin::DASHBOARD_INTERVAL,
    &upstream::POOL_IDLE_TIMEOUT,
    &upstream::POOL_MAX_IDLE_PER_HOST,
    &upstream::CA_FILE,
    &upstream::NAMESERVERS,
    &upstream::RESOLVE_INTERVAL,
    &database::URL,
    &database::USAGE_RETENTION,
    &database::USAGE_QUEUE,
    &idp::ISSUER,
    &idp::AUDIENCE,
    &idp::JWKS_URL,
    &idp::USER_CLAIM,
    &idp::TEAM_CLAIM,
    &idp::LEEWAY,
    &idp::REFRESH,
    &idp::CA_FILE,
    &idp::TEAMS,
    &cluster::URL,
    &cluster::PASSWORD_FILE,
    &cluster::PASSWORD_ENV,
    &cluster::KEY_PREFIX,
    &cluster::TIMEOUT,
    &cluster::ON_FAILURE,
    &cluster::CA_FILE,
    &cluster::LEASE_TTL,
    &traces::TRACES,
    &traces::ENDPOINT,
    &traces::PROTOCOL,
    &traces::HEADERS,
    &traces::CA_FILE,
    &traces::SERVICE_NAME,
    &traces::SAMPLING_RATIO,
    &traces::TRUST_CLIENT_CONTEXT,
    &traces::QUEUE_SIZE,
    &traces::BATCH_SIZE,
    &traces::BATCH_INTERVAL,
    &traces::EXPORT_TIMEOUT,
    &traces::CAPTURE_CONTENT,
    &traces::MAX_CONTENT_SIZE,
    &metrics::METRICS,
    &metrics::ENDPOINT,
    &metrics::PROTOCOL,
    &metrics::HEADERS,
    &metrics::CA_FILE,
    &metrics::SERVICE_NAME,
    &metrics::EXPORT_INTERVAL,
    &metrics::EXPORT_TIMEOUT,
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
