//! Prometheus metrics, via `prometheus-client` (the Prometheus project's own
//! Rust client: no global registry, no HTTP server of its own, few deps).
//!
//! One file per family of figures: [`server`] (requests, connections,
//! admission), [`llm`] (LLM routes and their clients), [`groups`] (the
//! servers of upstream groups), [`cluster`] (the fleet's Redis) and
//! [`acme`] (managed certificates); the process's own (config reloads,
//! log lines) are here.

mod acme;
mod cluster;
mod database;
mod groups;
mod llm;
mod server;

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use cluster::ClusterMetrics;
pub(crate) use database::DatabaseMetrics;
pub(crate) use groups::ServerMetrics;
pub(crate) use llm::{LlmRouteMetrics, UsageOf};
pub(crate) use server::{RouteMetrics, UpstreamErrorKind};

/// A route name as a label value: shared, so recording a request's metrics
/// does not allocate.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct RouteName(Arc<str>);

impl EncodeLabelValue for RouteName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&&*self.0, encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: RouteName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The most handles one [`Lazy`] table keeps (16 bytes each): a config
/// whose label combinations pass it has them looked up each time instead.
const MAX_CACHED: usize = 4096;

/// Handles looked up in their family the first time they are used, kept
/// by index, so a request counts with an atomic add: no label set built,
/// hashed and compared, no lock on the family. A series still appears only
/// once something is counted in it.
struct Lazy<T>(Box<[OnceLock<T>]>);

impl<T: Clone> Lazy<T> {
    /// Room for `n` handles (none when there would be more than
    /// [`MAX_CACHED`]).
    fn new(n: Option<usize>) -> Self {
        let n = n.filter(|n| *n <= MAX_CACHED).unwrap_or(0);
        Lazy((0..n).map(|_| OnceLock::new()).collect())
    }

    /// The handle at `at`, looked up by `resolve` the first time; one
    /// outside the table is looked up each time.
    fn get(&self, at: Option<usize>, resolve: impl FnOnce() -> T) -> Cow<'_, T> {
        cached(at.and_then(|i| self.0.get(i)), resolve)
    }
}

/// The handle in `slot`, looked up by `resolve` the first time; without a
/// slot, looked up now.
fn cached<T: Clone>(slot: Option<&OnceLock<T>>, resolve: impl FnOnce() -> T) -> Cow<'_, T> {
    match slot {
        Some(slot) => Cow::Borrowed(slot.get_or_init(resolve)),
        None => Cow::Owned(resolve()),
    }
}

/// The place of a combination of label values in a table of every
/// combination: each part is a value's index and how many values its
/// label has. `None` when an index is out of its range.
fn place(parts: &[(usize, usize)]) -> Option<usize> {
    parts.iter().try_fold(0usize, |at, &(i, n)| {
        if i >= n {
            return None;
        }
        at.checked_mul(n)?.checked_add(i)
    })
}

/// How many combinations labels with `counts` values make.
fn combinations(counts: &[usize]) -> Option<usize> {
    counts.iter().try_fold(1usize, |all, &n| all.checked_mul(n))
}

/// Tokens of one request: OpenTelemetry's advised buckets for
/// `gen_ai.client.token.usage`, 1 to 4^13 by fours.
fn token_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 14))
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

pub struct Metrics {
    registry: Registry,
    server: server::ServerFamilies,
    llm: llm::LlmFamilies,
    groups: groups::GroupFamilies,
    cluster: cluster::ClusterFamilies,
    config_reloads: Family<ResultLabels, Counter>,
    config_generation: Gauge,
    log_lines_dropped: Gauge,
    certificates: acme::CertificateFamilies,
    pub(crate) database: DatabaseMetrics,
    trace_spans: TraceSpans,
    metrics_exports: MetricsExports,
}

/// What became of the spans `telemetry::trace` made.
#[derive(Clone, Default)]
pub(crate) struct TraceSpans {
    /// Queue full, or the export failed or timed out.
    pub(crate) dropped: Counter,
    /// Taken by the collector.
    pub(crate) exported: Counter,
}

/// What became of the OTLP metric exports (`telemetry::otlp_metrics`).
#[derive(Clone, Default)]
pub(crate) struct MetricsExports {
    /// Taken by the collector.
    pub(crate) exported: Counter,
    /// Refused, failed or timed out.
    pub(crate) failed: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("weir");
        let server = server::ServerFamilies::register(&mut registry);
        let llm = llm::LlmFamilies::register(&mut registry);
        let groups = groups::GroupFamilies::register(&mut registry);
        let cluster = cluster::ClusterFamilies::register(&mut registry);
        let config_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "config_reloads",
            "Config reloads (SIGHUP, admin API), by result: ok, failed (the running config stayed)",
            config_reloads.clone(),
        );
        let config_generation = Gauge::default();
        registry.register(
            "config_generation",
            "The running config's generation: 1 at start, +1 per successful reload",
            config_generation.clone(),
        );
        let log_lines_dropped = Gauge::default();
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because a log file's queue was full (the disk stalled)",
            log_lines_dropped.clone(),
        );
        registry.register(
            "log_write_errors",
            "Writes to a log output (file, stderr, stdout) that failed, such as on a full disk; what failed is lost",
            super::logfile::WRITE_ERRORS.clone(),
        );
        let certificates = acme::CertificateFamilies::register(&mut registry);
        let database = DatabaseMetrics::register(&mut registry);
        let trace_spans = TraceSpans::default();
        registry.register(
            "trace_spans_dropped",
            "Trace spans dropped: the export queue was full, or an export failed or timed out (the collector down, slow or refusing)",
            trace_spans.dropped.clone(),
        );
        registry.register(
            "trace_spans_exported",
            "Trace spans the collector took",
            trace_spans.exported.clone(),
        );
        let metrics_exports = MetricsExports::default();
        registry.register(
            "metrics_exports",
            "OTLP metric exports the collector took ([telemetry.metrics])",
            metrics_exports.exported.clone(),
        );
        registry.register(
            "metrics_exports_failed",
            "OTLP metric exports that failed: the collector down, refusing, or not answering within export_timeout",
            metrics_exports.failed.clone(),
        );
        Metrics {
            registry,
            server,
            llm,
            groups,
            cluster,
            config_reloads,
            config_generation,
            log_lines_dropped,
            certificates,
            database,
            trace_spans,
            metrics_exports,
        }
    }

    /// The OTLP metrics exporter's counters.
    pub(crate) fn metrics_exports(&self) -> MetricsExports {
        self.metrics_exports.clone()
    }

    /// The trace exporter's counters.
    pub(crate) fn trace_spans(&self) -> TraceSpans {
        self.trace_spans.clone()
    }

    /// A reload finished; `generation` is the running one afterwards.
    pub(crate) fn config_reload(&self, ok: bool, generation: u64) {
        self.config_reloads
            .get_or_create(&ResultLabels {
                result: if ok { "ok" } else { "failed" },
            })
            .inc();
        self.config_generation.set(generation as i64);
    }

    pub(crate) fn config_loaded(&self, generation: u64) {
        self.config_generation.set(generation as i64);
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        self.log_lines_dropped
            .set(super::logfile::dropped_lines() as i64);
        self.certificates.refresh_expiry();
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_unique_per_combination_and_none_out_of_range() {
        let counts = [3, 2, 4];
        let mut seen = Vec::new();
        for a in 0..3 {
            for b in 0..2 {
                for c in 0..4 {
                    seen.push(place(&[(a, 3), (b, 2), (c, 4)]).expect("in range"));
                }
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..24).collect::<Vec<_>>());
        assert_eq!(combinations(&counts), Some(24));
        assert_eq!(place(&[(1, 3), (2, 2)]), None);
        assert_eq!(combinations(&[usize::MAX, 2]), None);
    }

    #[test]
    fn a_table_past_its_bound_looks_each_handle_up() {
        let family = Family::<RouteLabels, Counter>::default();
        let labels = RouteLabels {
            route: RouteName("r".into()),
        };
        let lookups = std::cell::Cell::new(0);
        let resolve = || {
            lookups.set(lookups.get() + 1);
            family.get_or_create(&labels).clone()
        };
        let table = Lazy::new(Some(2));
        table.get(Some(1), resolve).inc();
        table.get(Some(1), resolve).inc();
        assert_eq!(lookups.get(), 1, "kept after the first use");
        let too_big = Lazy::new(Some(MAX_CACHED + 1));
        too_big.get(Some(1), resolve).inc();
        too_big.get(Some(1), resolve).inc();
        assert_eq!(lookups.get(), 3, "no table: looked up each time");
        assert_eq!(family.get_or_create(&labels).get(), 4, "one series");
    }
}
