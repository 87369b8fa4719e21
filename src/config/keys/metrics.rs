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

pub(crate) const ENDPOINT: Key = Key {
    table: T,
    name: "endpoint",
    kind: Kind::String,
    default: Default::Words("required"),
    meaning: "the collector's OTLP URL",
};
pub(crate) const PROTOCOL: Key = Key {
    table: T,
    name: "protocol",
    kind: Kind::Choice(&["http/protobuf", "grpc"]),
    default: Default::Str("http/protobuf"),
    meaning: "OTLP over HTTP with protobuf bodies, or over gRPC",
};
pub(crate) const HEADERS: Key = Key {
    table: T,
    name: "headers",
    kind: Kind::List,
    default: Default::Empty,
    meaning: "headers sent with every export, each \"Name: value\"",
};
pub(crate) const CA_FILE: Key = Key {
    table: T,
    name: "ca_file",
    kind: Kind::Path,
    default: Default::Words("none (the web PKI roots)"),
    meaning: "CA certificates an https:// collector may chain to",
};
pub(crate) const SERVICE_NAME: Key = Key {
    table: T,
    name: "service_name",
    kind: Kind::String,
    default: Default::Str("weir"),
    meaning: "the resource's service.name",
};
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
