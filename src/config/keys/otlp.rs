//! The keys every OTLP collector target has (`[telemetry.traces]`,
//! `[telemetry.metrics]`), declared once for each table.

use super::*;

pub(super) const fn endpoint(table: &'static str) -> Key {
    Key {
        table,
        name: "endpoint",
        kind: Kind::String,
        default: Default::Words("required"),
        meaning: "the collector's OTLP URL",
    }
}
pub(super) const fn protocol(table: &'static str) -> Key {
    Key {
        table,
        name: "protocol",
        kind: Kind::Choice(&["http/protobuf", "grpc"]),
        default: Default::Str("http/protobuf"),
        meaning: "OTLP over HTTP with protobuf bodies, or over gRPC",
    }
}
pub(super) const fn headers(table: &'static str) -> Key {
    Key {
        table,
        name: "headers",
        kind: Kind::List,
        default: Default::Empty,
        meaning: "headers sent with every export, each \"Name: value\"",
    }
}
pub(super) const fn ca_file(table: &'static str) -> Key {
    Key {
        table,
        name: "ca_file",
        kind: Kind::Path,
        default: Default::Words("none (the web PKI roots)"),
        meaning: "CA certificates an https:// collector may chain to",
    }
}
pub(super) const fn service_name(table: &'static str) -> Key {
    Key {
        table,
        name: "service_name",
        kind: Kind::String,
        default: Default::Str("weir"),
        meaning: "the resource's service.name",
    }
}
