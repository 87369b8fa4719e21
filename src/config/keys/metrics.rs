//! `[telemetry.metrics]`: weir's metrics pushed to a collector over OTLP.

use super::*;

pub(crate) const METRICS: Key = Key {
    table: "telemetry",
    name: "metrics",
    kind: Kind::Table,
    default: Default::Words("none (no OTLP metrics; `/metrics` serves them)"),
    meaning: "export weir's metrics over OTLP as well",
};

const T: &str = "telemetry.metrics";

// The collector target's keys, as every OTLP exporter has them.
pub(crate) const ENDPOINT: Key = otlp::endpoint(T);
pub(crate) const PROTOCOL: Key = otlp::protocol(T);
pub(crate) const HEADERS: Key = otlp::headers(T);
pub(crate) const CA_FILE: Key = otlp::ca_file(T);
pub(crate) const SERVICE_NAME: Key = otlp::service_name(T);
pub(crate) const EXPORT_INTERVAL: Key = Key {
    table: T,
    name: "export_interval",
    kind: Kind::Duration(Duration::from_millis(100)..=secs(24 * 3600)),
    default: Default::Duration(secs(60)),
    meaning: "how often every metric is exported",
};
pub(crate) const EXPORT_TIMEOUT: Key = Key {
    table: T,
    name: "export_timeout",
    kind: Kind::Duration(Duration::from_millis(1)..=secs(60)),
    default: Default::Duration(secs(10)),
    meaning: "the longest one export may take; then it is counted as failed",
};
