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
mod groups;
mod llm;
mod server;

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use cluster::ClusterMetrics;
pub use groups::ServerMetrics;
pub use llm::ClientUsage;
pub use server::{RouteMetrics, UpstreamErrorKind};

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
        let certificates = acme::CertificateFamilies::register(&mut registry);
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
        }
    }

    /// A reload finished; `generation` is the running one afterwards.
    pub fn config_reload(&self, ok: bool, generation: u64) {
        self.config_reloads
            .get_or_create(&ResultLabels {
                result: if ok { "ok" } else { "failed" },
            })
            .inc();
        self.config_generation.set(generation as i64);
    }

    pub fn config_loaded(&self, generation: u64) {
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
