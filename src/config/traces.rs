//! `[telemetry.traces]` and `[telemetry.metrics]`: OpenTelemetry traces
//! and metrics exported over OTLP. Only data: the spans and their export
//! are `crate::telemetry::trace`'s, the metrics' export
//! `crate::telemetry::otlp_metrics`'s.

use std::path::PathBuf;
use std::time::Duration;

/// How spans reach the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OtlpProtocol {
    /// A POST of an `ExportTraceServiceRequest` as protobuf.
    HttpProtobuf,
    /// The `TraceService/Export` call over HTTP/2.
    Grpc,
}

/// `[telemetry.traces]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TraceSettings {
    /// Where exports go: for HTTP the whole URL (`/v1/traces` added to a
    /// bare origin), for gRPC the origin.
    pub(crate) endpoint: http::Uri,
    pub(crate) protocol: OtlpProtocol,
    /// Sent with every export (marked sensitive: never printed).
    pub(crate) headers: Vec<(http::HeaderName, http::HeaderValue)>,
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) service_name: String,
    /// The share of new traces recorded, 0 to 1.
    pub(crate) sampling_ratio: f64,
    /// A client's `traceparent` is continued (and its sampled flag
    /// followed); otherwise every request starts a trace.
    pub(crate) trust_client_context: bool,
    pub(crate) queue_size: usize,
    pub(crate) batch_size: usize,
    pub(crate) batch_interval: Duration,
    pub(crate) export_timeout: Duration,
    /// LLM prompts in the spans, at most `max_content_size` bytes each.
    pub(crate) capture_content: bool,
    pub(crate) max_content_size: usize,
}

/// `[telemetry.metrics]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MetricsExportSettings {
    /// For HTTP the whole URL (`/v1/metrics` added to a bare origin), for
    /// gRPC the origin.
    pub(crate) endpoint: http::Uri,
    pub(crate) protocol: OtlpProtocol,
    /// Sent with every export (marked sensitive: never printed).
    pub(crate) headers: Vec<(http::HeaderName, http::HeaderValue)>,
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) service_name: String,
    pub(crate) export_interval: Duration,
    pub(crate) export_timeout: Duration,
}
