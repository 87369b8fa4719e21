//! weir's spans as OTLP's protobuf messages (`opentelemetry-proto`).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{self as proto, ResourceSpans, ScopeSpans};

use super::span::{Event, Kind, Span, Status, Value};
use crate::telemetry::otlp;

/// One export: weir's resource, its scope, the spans.
pub(super) fn request(service: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(otlp::resource(service)),
            scope_spans: vec![ScopeSpans {
                scope: Some(otlp::scope()),
                spans: spans.into_iter().map(span).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn span(s: Span) -> proto::Span {
    let kind = match s.kind {
        Kind::Server => proto::span::SpanKind::Server,
        Kind::Client => proto::span::SpanKind::Client,
    };
    let status = match s.status {
        Status::Unset => None,
        Status::Error(message) => Some(proto::Status {
            message,
            code: proto::status::StatusCode::Error as i32,
        }),
    };
    proto::Span {
        trace_id: s.trace_id.to_vec(),
        span_id: s.span_id.to_vec(),
        trace_state: s.trace_state,
        parent_span_id: s.parent.map(|p| p.to_vec()).unwrap_or_default(),
        // W3C trace flags: sampled (every exported span is).
        flags: 1,
        name: s.name,
        kind: kind as i32,
        start_time_unix_nano: s.start,
        end_time_unix_nano: s.end,
        attributes: attributes(s.attributes),
        events: s.events.into_iter().map(event).collect(),
        status,
        ..Default::default()
    }
}

fn event(e: Event) -> proto::span::Event {
    proto::span::Event {
        time_unix_nano: e.at,
        name: e.name.into(),
        attributes: attributes(e.attributes),
        dropped_attributes_count: 0,
    }
}

fn attributes(a: Vec<(&'static str, Value)>) -> Vec<KeyValue> {
    a.into_iter().map(|(k, v)| key_value(k, v)).collect()
}

fn key_value(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(any(value)),
        ..Default::default()
    }
}

fn any(value: Value) -> AnyValue {
    let value = match value {
        Value::Str(s) => any_value::Value::StringValue(s),
        Value::Int(n) => any_value::Value::IntValue(n),
        Value::Float(n) => any_value::Value::DoubleValue(n),
        Value::Bool(b) => any_value::Value::BoolValue(b),
        Value::StrList(list) => any_value::Value::ArrayValue(ArrayValue {
            values: list.into_iter().map(|s| any(Value::Str(s))).collect(),
        }),
    };
    AnyValue { value: Some(value) }
}
