//! `[telemetry]` and `[telemetry.traces]`.

use super::*;

pub(crate) const TRACES: Key = Key {
    table: "telemetry",
    name: "traces",
    kind: Kind::Table,
    default: Default::Words("none (no traces)"),
    meaning: "export OpenTelemetry traces over OTLP",
};

const T: &str = "telemetry.traces";

// The collector target's keys, as every OTLP exporter has them.
pub(crate) const ENDPOINT: Key = otlp::endpoint(T);
pub(crate) const PROTOCOL: Key = otlp::protocol(T);
pub(crate) const HEADERS: Key = otlp::headers(T);
pub(crate) const CA_FILE: Key = otlp::ca_file(T);
pub(crate) const SERVICE_NAME: Key = otlp::service_name(T);
pub(crate) const SAMPLING_RATIO: Key = Key {
    table: T,
    name: "sampling_ratio",
    kind: Kind::Number { max: 1.0 },
    default: Default::Words("`1.0` (every trace)"),
    meaning: "the share of new traces recorded; a trusted parent's choice is followed",
};
pub(crate) const TRUST_CLIENT_CONTEXT: Key = Key {
    table: T,
    name: "trust_client_context",
    kind: Kind::Bool,
    default: Default::Bool(false),
    meaning: "continue a client's traceparent instead of starting a trace",
};
pub(crate) const QUEUE_SIZE: Key = Key {
    table: T,
    name: "queue_size",
    kind: Kind::Uint { max: 1 << 20 },
    default: Default::Uint(2048),
    meaning: "spans waiting for export; more are dropped and counted",
};
pub(crate) const BATCH_SIZE: Key = Key {
    table: T,
    name: "batch_size",
    kind: Kind::Uint { max: 1 << 16 },
    default: Default::Uint(512),
    meaning: "the most spans in one export",
};
pub(crate) const BATCH_INTERVAL: Key = Key {
    table: T,
    name: "batch_interval",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(5)),
    meaning: "the longest a span waits for its batch to fill",
};
pub(crate) const EXPORT_TIMEOUT: Key = Key {
    table: T,
    name: "export_timeout",
    kind: Kind::Duration(Duration::from_millis(1)..=secs(60)),
    default: Default::Duration(secs(10)),
    meaning: "the longest one export may take; then its spans are dropped",
};
pub(crate) const CAPTURE_CONTENT: Key = Key {
    table: T,
    name: "capture_content",
    kind: Kind::Bool,
    default: Default::Bool(false),
    meaning: "put LLM prompts in the spans",
};
pub(crate) const MAX_CONTENT_SIZE: Key = Key {
    table: T,
    name: "max_content_size",
    kind: Kind::Size {
        min: 1,
        max: 16 * MIB,
    },
    default: Default::Size(4 * KIB),
    meaning: "the most of a prompt a span carries",
};
