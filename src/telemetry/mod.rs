//! Logs and metrics: the tracing subscriber, and the Prometheus registry
//! every layer records into.

mod metrics;

pub use metrics::{Metrics, UpstreamErrorKind};

use crate::config::{LogFormat, LogSettings};

/// Libraries that log once per connection about what a client sent (rustls
/// warns for every ClientHello with an IP address as SNI): any client could
/// flood the log through them, so they only speak at error level unless the
/// operator's filter names them.
const QUIET_PER_CONNECTION: &[&str] = &["rustls", "h2", "hyper", "hyper_util"];

/// The filter actually installed for an operator's `level`.
pub fn log_filter(level: &str) -> String {
    let mut filter = level.to_string();
    for target in QUIET_PER_CONNECTION {
        if !level.contains(target) {
            filter.push_str(&format!(",{target}=error"));
        }
    }
    filter
}

/// Install the global tracing subscriber. Logs go to stderr; the access log
/// is the `weir::access` target, so it can be filtered separately.
pub fn init_logging(settings: &LogSettings) {
    let level = std::env::var("WEIR_LOG").unwrap_or_else(|_| settings.level.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(log_filter(&level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter("info")));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_connection_library_warnings_are_quiet_unless_asked_for() {
        assert_eq!(
            log_filter("info"),
            "info,rustls=error,h2=error,hyper=error,hyper_util=error"
        );
        let f = log_filter("debug,rustls=debug");
        assert!(
            f.starts_with("debug,rustls=debug") && !f.contains("rustls=error"),
            "{f}"
        );
        assert!(tracing_subscriber::EnvFilter::try_new(log_filter("weir=debug")).is_ok());
    }
}
