//! Logs and metrics: the tracing subscriber, and the Prometheus registry
//! every layer records into; OTLP export of traces and metrics.

pub(crate) mod exposition;
pub(crate) mod logfile;
mod metrics;
mod otlp;
pub(crate) mod otlp_metrics;
pub(crate) mod records;
pub(crate) mod trace;

pub use metrics::ClusterMetrics;
pub use metrics::Metrics;
pub(crate) use metrics::{
    DatabaseMetrics, LlmRouteMetrics, MetricsExports, RouteMetrics, ServerMetrics, TraceSpans,
    UpstreamErrorKind, UsageOf,
};
pub(crate) use records::RecordSink;

use crate::config::{LogFormat, LogSettings};

/// Libraries that log once per connection about what a client sent (rustls
/// warns for every ClientHello with an IP address as SNI): any client could
/// flood the log through them, so they only speak at error level unless the
/// operator's filter names them.
const QUIET_PER_CONNECTION: &[&str] = &["rustls", "h2", "hyper", "hyper_util"];

/// The filter actually installed for an operator's `level`.
pub(crate) fn log_filter(level: &str) -> String {
    let mut filter = level.to_string();
    for target in QUIET_PER_CONNECTION {
        if !level.contains(target) {
            filter.push_str(&format!(",{target}=error"));
        }
    }
    filter
}

type BoxedLayer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// One output: text or JSON lines to `writer`.
fn output<W>(format: LogFormat, writer: W, ansi: bool) -> BoxedLayer
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi)
        .with_target(true);
    match format {
        LogFormat::Text => Box::new(layer),
        LogFormat::Json => Box::new(layer.json().flatten_event(true)),
    }
}

/// The access log's target.
const ACCESS: &str = "weir::access";

/// The filter for access lines. The access log is switched by
/// `log.access_log` (and per route), not by the level: an operator who
/// quiets the error log with `level = "warn"` keeps it. A level that
/// names `weir::access` itself (`"info,weir::access=off"`) is obeyed.
pub(crate) fn access_filter(level: &str) -> String {
    if level.contains(ACCESS) {
        log_filter(level)
    } else {
        format!("{ACCESS}=info")
    }
}

/// Install the global tracing subscriber. Logs go to stderr, or to
/// `log.file`; the access log (the `weir::access` target) goes with them,
/// or to `log.access_file`, whatever the level ([`access_filter`]). Every
/// output is written without blocking (a bounded queue, drops counted)
/// and files can be reopened for logrotate ([`logfile::reopen_all`]). A
/// file that cannot be opened is an error before anything serves.
pub(crate) fn init_logging(settings: &LogSettings) -> Result<(), String> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::{FilterExt, filter_fn};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let level = std::env::var("WEIR_LOG").unwrap_or_else(|_| settings.level.clone());
    let env_filter = |directives: String| {
        tracing_subscriber::EnvFilter::try_new(directives)
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter("info")))
    };
    let filter = || env_filter(log_filter(&level));
    let access = || env_filter(access_filter(&level));
    let open = |p: &std::path::Path| {
        logfile::writer(p).map_err(|e| format!("log file {}: {e}", p.display()))
    };
    let stderr_ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let main = match &settings.file {
        Some(p) => output(settings.format, open(p)?, false),
        None => output(settings.format, logfile::stderr_writer(), stderr_ansi),
    };
    let mut layers: Vec<BoxedLayer> = Vec::new();
    match &settings.access_file {
        Some(p) => {
            let access_out = output(settings.format, open(p)?, false);
            layers.push(Box::new(
                main.with_filter(filter().and(filter_fn(|m| m.target() != ACCESS))),
            ));
            layers.push(Box::new(
                access_out.with_filter(access().and(filter_fn(|m| m.target() == ACCESS))),
            ));
        }
        None => layers.push(Box::new(
            main.with_filter(
                filter()
                    .and(filter_fn(|m| m.target() != ACCESS))
                    .or(access().and(filter_fn(|m| m.target() == ACCESS))),
            ),
        )),
    }
    // A second init (tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry().with(layers).try_init();
    Ok(())
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

    #[test]
    fn the_access_log_ignores_the_level_unless_the_level_names_it() {
        assert_eq!(access_filter("warn"), "weir::access=info");
        assert_eq!(access_filter("error,weir=debug"), "weir::access=info");
        let named = access_filter("info,weir::access=off");
        assert!(named.starts_with("info,weir::access=off"), "{named}");
    }
}
