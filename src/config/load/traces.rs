//! `[telemetry.traces]` and `[telemetry.metrics]`: where spans and
//! metrics go, how many spans are kept, which traces are recorded. Only
//! data and validation: the spans are `crate::telemetry::trace`'s, the
//! metrics' export `crate::telemetry::otlp_metrics`'s.

use super::keys::traces::*;
use super::*;
use crate::config::MetricsExportSettings;

/// The keys that say where one kind of export goes: the traces' or the
/// metrics' (the same names, in their own tables).
struct TargetKeys {
    endpoint: &'static Key,
    protocol: &'static Key,
    headers: &'static Key,
    /// OTLP/HTTP's path for this signal (`/v1/traces`).
    path: &'static str,
}

const TRACE_TARGET: TargetKeys = TargetKeys {
    endpoint: &ENDPOINT,
    protocol: &PROTOCOL,
    headers: &HEADERS,
    path: "/v1/traces",
};

/// `[telemetry]`: its traces and its metrics (read from one section, so
/// a key in neither is reported).
pub(super) fn telemetry(
    top: &Section<'_, '_>,
) -> (Option<TraceSettings>, Option<MetricsExportSettings>) {
    match top.table("telemetry") {
        Some(telemetry) => (traces(&telemetry), metrics(&telemetry)),
        None => (None, None),
    }
}

fn traces(telemetry: &Section<'_, '_>) -> Option<TraceSettings> {
    let t = telemetry.table(&TRACES)?;
    let protocol = protocol(&t, &TRACE_TARGET);
    let endpoint = endpoint(&t, protocol, &TRACE_TARGET);
    let headers = headers(&t, &TRACE_TARGET);
    let ca_file = ca_file(&t, &CA_FILE).map(|f| f.value);
    let service_name = t
        .string(&SERVICE_NAME)
        .map_or_else(|| SERVICE_NAME.text().to_string(), |s| s.value);
    let sampling_ratio = match t.raw_present(&SAMPLING_RATIO) {
        true => match SAMPLING_RATIO.kind {
            keys::Kind::Number { max } => t.number(SAMPLING_RATIO.name, max),
            _ => None,
        },
        false => Some(1.0),
    };
    let uint = |key: &Key| t.uint(key).unwrap_or(key.uint()) as usize;
    let duration = |key: &Key| t.duration(key).unwrap_or(key.duration());
    let (queue_size, batch_size) = (uint(&QUEUE_SIZE), uint(&BATCH_SIZE));
    if queue_size == 0 || batch_size == 0 {
        t.problem(
            QUEUE_SIZE.name,
            "`queue_size` and `batch_size` must be at least 1",
            Some("remove them for the defaults, 2048 and 512".into()),
        );
    }
    let trust_client_context = t
        .bool(&TRUST_CLIENT_CONTEXT)
        .unwrap_or(TRUST_CLIENT_CONTEXT.flag());
    let batch_interval = duration(&BATCH_INTERVAL);
    let export_timeout = duration(&EXPORT_TIMEOUT);
    let capture_content = t.bool(&CAPTURE_CONTENT).unwrap_or(CAPTURE_CONTENT.flag());
    let max_content_size = t.size(&MAX_CONTENT_SIZE).unwrap_or(MAX_CONTENT_SIZE.size());
    Some(TraceSettings {
        protocol: protocol?,
        endpoint: endpoint?,
        headers: headers?,
        ca_file,
        service_name,
        sampling_ratio: sampling_ratio?,
        trust_client_context,
        queue_size: queue_size.max(1),
        batch_size: batch_size.max(1),
        batch_interval,
        export_timeout,
        capture_content,
        max_content_size: usize::try_from(max_content_size).unwrap_or(usize::MAX),
    })
}

/// `[telemetry.metrics]`: the same target keys as the traces', and how
/// often the metrics go.
fn metrics(telemetry: &Section<'_, '_>) -> Option<MetricsExportSettings> {
    use super::keys::metrics as m;
    const METRICS_TARGET: TargetKeys = TargetKeys {
        endpoint: &m::ENDPOINT,
        protocol: &m::PROTOCOL,
        headers: &m::HEADERS,
        path: "/v1/metrics",
    };
    let t = telemetry.table(&m::METRICS)?;
    let protocol = protocol(&t, &METRICS_TARGET);
    let endpoint = endpoint(&t, protocol, &METRICS_TARGET);
    let headers = headers(&t, &METRICS_TARGET);
    let ca_file = ca_file(&t, &m::CA_FILE).map(|f| f.value);
    let service_name = t
        .string(&m::SERVICE_NAME)
        .map_or_else(|| m::SERVICE_NAME.text().to_string(), |s| s.value);
    let duration = |key: &Key| t.duration(key).unwrap_or(key.duration());
    let (export_interval, export_timeout) =
        (duration(&m::EXPORT_INTERVAL), duration(&m::EXPORT_TIMEOUT));
    Some(MetricsExportSettings {
        protocol: protocol?,
        endpoint: endpoint?,
        headers: headers?,
        ca_file,
        service_name,
        export_interval,
        export_timeout,
    })
}

/// `protocol`: OTLP/HTTP with protobuf (the default) or gRPC.
fn protocol(t: &Section<'_, '_>, keys: &TargetKeys) -> Option<OtlpProtocol> {
    match t.string(keys.protocol) {
        None => Some(OtlpProtocol::HttpProtobuf),
        Some(p) => match p.value.as_str() {
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            "grpc" => Some(OtlpProtocol::Grpc),
            other => {
                p.problem(
                    t.doc(),
                    format!("`{other}` is not an OTLP protocol weir speaks"),
                    Some("use \"http/protobuf\" or \"grpc\"".into()),
                );
                None
            }
        },
    }
}

/// The collector's URL: http:// or https://, with a host; for HTTP a bare
/// origin gets OTLP's path for the signal (`/v1/traces`, `/v1/metrics`).
fn endpoint(
    t: &Section<'_, '_>,
    protocol: Option<OtlpProtocol>,
    keys: &TargetKeys,
) -> Option<http::Uri> {
    let fix = format!(
        "write it like \"http://127.0.0.1:4318{}\" (gRPC: \"http://127.0.0.1:4317\")",
        keys.path
    );
    if !t.raw_present(keys.endpoint) {
        t.problem(
            keys.endpoint.name,
            "missing",
            Some(format!("add `endpoint`: {fix}")),
        );
        return None;
    }
    let e = t.string(keys.endpoint)?;
    let uri = match e.value.parse::<http::Uri>() {
        Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() => u,
        _ => {
            e.problem(
                t.doc(),
                format!("`{}` is not an http:// or https:// URL", e.value),
                Some(fix),
            );
            return None;
        }
    };
    let bare = uri.path_and_query().is_none_or(|p| p.as_str() == "/");
    if bare && protocol == Some(OtlpProtocol::HttpProtobuf) {
        let mut parts = uri.into_parts();
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static(keys.path));
        return http::Uri::from_parts(parts).ok();
    }
    Some(uri)
}

/// `"Name: value"` entries, each a valid header (the values marked
/// sensitive: an API key is often one).
fn headers(
    t: &Section<'_, '_>,
    keys: &TargetKeys,
) -> Option<Vec<(http::HeaderName, http::HeaderValue)>> {
    let mut out = Vec::new();
    let mut ok = true;
    for entry in t.string_list(keys.headers).unwrap_or_default() {
        let parsed = entry.value.split_once(':').and_then(|(name, value)| {
            let name = http::HeaderName::try_from(name.trim()).ok()?;
            let mut value = http::HeaderValue::try_from(value.trim()).ok()?;
            value.set_sensitive(true);
            Some((name, value))
        });
        match parsed {
            Some(h) => out.push(h),
            None => {
                ok = false;
                entry.problem(
                    t.doc(),
                    "not a header: write it as \"Name: value\"",
                    Some("for example \"x-api-key: ${COLLECTOR_KEY}\"".into()),
                );
            }
        }
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};
    use super::*;

    #[test]
    fn defaults_and_a_bare_origin() {
        let c = parse(
            Path::new("w.toml"),
            &format!("[telemetry.traces]\nendpoint = \"http://127.0.0.1:4318\"\n{MINIMAL}"),
        )
        .expect("valid");
        let s = c.traces.expect("traces");
        assert_eq!(s.endpoint.to_string(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(s.sampling_ratio, 1.0);
        assert!(!s.trust_client_context && !s.capture_content);
        assert_eq!((s.queue_size, s.batch_size), (2048, 512));
        assert_eq!(s.batch_interval, Duration::from_secs(5));
        assert_eq!(s.export_timeout, Duration::from_secs(10));
        assert_eq!(s.max_content_size, 4096);
        assert_eq!(s.service_name, "weir");
        let c = parse(Path::new("w.toml"), MINIMAL).expect("valid");
        assert!(c.traces.is_none());
    }

    #[test]
    fn every_problem_at_once() {
        let p = problems(&format!(
            "[telemetry.traces]\nendpoint = \"collector:4318\"\nprotocol = \"http/json\"\n\
             sampling_ratio = 1.5\nheaders = [\"x-key\"]\nqueue_size = 0\n{MINIMAL}"
        ));
        assert_eq!(p.len(), 5, "{p:#?}");
        assert!(
            p.iter()
                .any(|p| p.contains("telemetry.traces.protocol: `http/json`")),
            "{p:#?}"
        );
        assert!(
            p.iter()
                .any(|p| p.contains("telemetry.traces.endpoint: `collector:4318`")),
            "{p:#?}"
        );
        assert!(
            p.iter()
                .any(|p| p.contains("telemetry.traces.sampling_ratio: out of range")),
            "{p:#?}"
        );
        assert!(
            p.iter()
                .any(|p| p.contains("telemetry.traces.headers[0]: not a header")),
            "{p:#?}"
        );
        assert!(
            p.iter()
                .any(|p| p.contains("telemetry.traces.queue_size: ")),
            "{p:#?}"
        );
        let p = problems(&format!("[telemetry.traces]\n{MINIMAL}"));
        assert!(p[0].contains("telemetry.traces.endpoint: missing"), "{p:?}");
    }

    #[test]
    fn metrics_defaults_a_bare_origin_and_every_problem_at_once() {
        let c = parse(
            Path::new("w.toml"),
            &format!("[telemetry.metrics]\nendpoint = \"http://127.0.0.1:4318\"\n{MINIMAL}"),
        )
        .expect("valid");
        let s = c.metrics_export.expect("metrics");
        assert_eq!(s.endpoint.to_string(), "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(s.export_interval, Duration::from_secs(60));
        assert_eq!(s.export_timeout, Duration::from_secs(10));
        assert_eq!(s.service_name, "weir");
        assert!(c.traces.is_none(), "metrics alone make no traces");
        let p = problems(&format!(
            "[telemetry.metrics]\nendpoint = \"collector:4318\"\nprotocol = \"http/json\"\n\
             headers = [\"x-key\"]\nexport_interval = \"10ms\"\n{MINIMAL}"
        ));
        assert_eq!(p.len(), 4, "{p:#?}");
        for want in [
            "telemetry.metrics.endpoint: `collector:4318`",
            "telemetry.metrics.protocol: `http/json`",
            "telemetry.metrics.headers[0]: not a header",
            "telemetry.metrics.export_interval: `10ms` is shorter",
        ] {
            assert!(p.iter().any(|p| p.contains(want)), "{want}: {p:#?}");
        }
        let p = problems(&format!("[telemetry.metrics]\n{MINIMAL}"));
        assert!(
            p[0].contains("telemetry.metrics.endpoint: missing"),
            "{p:?}"
        );
        assert!(p[0].contains("/v1/metrics"), "{p:?}");
    }
}
