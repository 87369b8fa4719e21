//! The seams the integration tests, examples and fuzz targets reach into,
//! in one clearly named place: everything else in the crate is
//! `pub(crate)`, so nothing outside can come to depend on it by accident.
//!
//! What is here is here because a test drives it from outside: the config
//! loader (parsing and the validated types a test builds by hand), the
//! server's start and reload, the demo's upstream and mock providers (the
//! stand-ins every test serves through), the fleet's Redis script
//! decisions, the metrics a test reads, the PROXY-header parser, the rate
//! limiter's key table, the TLS acceptor and the connection registry for
//! the scale examples. Adding to it is a decision: prefer driving the real
//! binary.

/// The config: TOML in, a validated [`config::Config`] (or every problem)
/// out, and the settings types a test builds directly.
pub mod config {
    pub use crate::config::{
        AcmeSettings, Certificate, ClusterSettings, Config, ConnectionSettings, FailureMode,
        Problems, Secret, TlsSettings,
    };
}

/// Starting weir in-process and applying a new config to it.
pub mod server {
    pub use crate::listen::BindError;
    pub use crate::server::{Running, StartError, start};
    pub use crate::snapshot::BuildError;
}

/// The demo's upstream and its mock LLM providers, which the tests serve
/// through.
pub mod demo {
    pub use crate::demo::{llm, upstream};
}

/// The fleet's decisions in Redis, run by a test against a real Redis.
pub mod cluster {
    pub use crate::cluster::{
        Ask, BudgetAsk, BudgetBook, Cluster, Decision, Gcra, Lease, OverBudget, SharedReservation,
    };
}

/// The process's metrics, read by the fleet tests.
pub mod telemetry {
    pub use crate::telemetry::{ClusterMetrics, Metrics};
}

/// Per-client rate limits, for the memory example and the fleet tests.
pub mod rate {
    pub use crate::admit::rate::{Client, Limited, MAX_KEYS, RateLimit};
}

/// Hosts and paths as they are routed and forwarded, for the property
/// tests and the fuzz target.
pub mod route {
    pub use crate::route::normal::{Host, Path, Refused, host, path};
}

/// The listener's PROXY-protocol parser and the descriptor budget.
pub mod listen {
    pub use crate::listen::budget::{FdLimit, raise_nofile_limit};
    pub use crate::listen::proxy_protocol::{
        Framing, Invalid, Signature, V1_MAX, V2_FIXED, V2_MAX_PAYLOAD, V2_SIGNATURE, frame, parse,
        signature,
    };
}

/// The connection layer's TLS acceptor, registry and deadlines, for the
/// TLS test and the registry scale example.
pub mod conn {
    pub use crate::acme::Challenges;
    pub use crate::conn::deadline::{Deadlines, sweep_once};
    pub use crate::conn::registry::{Refused, Registry, Slot};
    pub use crate::conn::state::{CloseReason, ConnState, Phase};
    pub use crate::conn::tls::{Certificates, acceptor};
}

/// Reading a certificate and key from files.
pub mod pki {
    pub use crate::pki::{PkiError, load_certificate};
}
