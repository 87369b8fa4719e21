//! Logs and metrics: the tracing subscriber, and the Prometheus registry
//! every layer records into.

mod metrics;

pub use metrics::{Metrics, UpstreamErrorKind};

use crate::config::{LogFormat, LogSettings};

/// Install the global tracing subscriber. Logs go to stderr; the access log
/// is the `weir::access` target, so it can be filtered separately.
pub fn init_logging(settings: &LogSettings) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&settings.level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true);
    // A second init (tests, reload) keeps the first subscriber.
    let _ = match settings.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
