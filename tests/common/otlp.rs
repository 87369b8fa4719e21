//! An OpenTelemetry collector stand-in: OTLP/HTTP (`POST /v1/traces`,
//! `POST /v1/metrics`, protobuf) and OTLP/gRPC (`TraceService/Export`,
//! `MetricsService/Export`) on 127.0.0.1:0, as strict as the collector's
//! receiver about what it takes — the content type, a body that decodes as
//! an `ExportTraceServiceRequest` or `ExportMetricsServiceRequest` (with
//! opentelemetry-proto's prost types, not weir's code), ids of the right
//! length, histograms whose buckets add up — and the spans and metric
//! exports it took, for the tests to assert on. It can be told to refuse
//! (503) or to blackhole (take the request, never answer).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::net::TcpListener;

const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
const METRICS_GRPC_PATH: &str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";

/// What the collector does with an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Take,
    /// 503, as a collector whose queue is full.
    Refuse,
    /// Read the request, never answer.
    Blackhole,
}

#[derive(Default)]
struct State {
    spans: Vec<Span>,
    /// Each export's resource `service.name`.
    services: Vec<String>,
    /// Requests it could not take, and why.
    rejected: Vec<String>,
    exports: usize,
    mode: Option<Mode>,
    /// Headers of the last export.
    headers: http::HeaderMap,
    /// Every metrics export taken, in order.
    metric_exports: Vec<ExportMetricsServiceRequest>,
}

#[derive(Clone)]
pub struct Collector {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl Collector {
    pub async fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(take(state, req).await) }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Collector { addr, state }
    }

    /// The OTLP/HTTP endpoint.
    pub fn http_endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }

    /// Every metrics export it took, in order.
    pub fn metric_exports(&self) -> Vec<ExportMetricsServiceRequest> {
        self.state.lock().expect("state").metric_exports.clone()
    }

    pub fn set_mode(&self, mode: Mode) {
        self.state.lock().expect("state").mode = Some(mode);
    }

    pub fn spans(&self) -> Vec<Span> {
        self.state.lock().expect("state").spans.clone()
    }

    pub fn exports(&self) -> usize {
        self.state.lock().expect("state").exports
    }

    pub fn services(&self) -> Vec<String> {
        self.state.lock().expect("state").services.clone()
    }

    pub fn last_headers(&self) -> http::HeaderMap {
        self.state.lock().expect("state").headers.clone()
    }

    /// Panics with every export it could not take.
    pub fn assert_all_taken(&self) {
        let rejected = self.state.lock().expect("state").rejected.clone();
        assert!(rejected.is_empty(), "the collector rejected: {rejected:#?}");
    }

    /// Wait until it holds at least `n` spans.
    pub async fn wait_spans(&self, n: usize, within: Duration) -> Vec<Span> {
        let this = self.clone();
        let got = super::eventually(within, move || this.spans().len() >= n).await;
        let spans = self.spans();
        assert!(got, "wanted {n} spans, got {}: {spans:#?}", spans.len());
        spans
    }
}

async fn take(state: Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let mode = state.lock().expect("state").mode.unwrap_or(Mode::Take);
    let (parts, body) = req.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return answer(StatusCode::BAD_REQUEST, "unreadable body");
    };
    if mode == Mode::Blackhole {
        std::future::pending::<()>().await;
    }
    if mode == Mode::Refuse {
        return answer(StatusCode::SERVICE_UNAVAILABLE, "full");
    }
    let path = parts.uri.path();
    if path == "/v1/metrics" || path == METRICS_GRPC_PATH {
        return take_metrics(&state, parts, body);
    }
    let grpc = parts.uri.path() == GRPC_PATH;
    let content_type = parts.headers.get(http::header::CONTENT_TYPE);
    let decoded = match (grpc, content_type.and_then(|v| v.to_str().ok())) {
        (false, Some("application/x-protobuf")) if parts.uri.path() == "/v1/traces" => {
            ExportTraceServiceRequest::decode(body.clone()).map_err(|e| e.to_string())
        }
        (true, Some("application/grpc")) if parts.version == http::Version::HTTP_2 => {
            grpc_message(body.clone())
        }
        (_, ct) => Err(format!("{} {} as {ct:?}", parts.method, parts.uri.path())),
    };
    let request = match decoded.and_then(checked) {
        Ok(r) => r,
        Err(why) => {
            state.lock().expect("state").rejected.push(why.clone());
            return answer(StatusCode::BAD_REQUEST, "bad export");
        }
    };
    let mut s = state.lock().expect("state");
    s.exports += 1;
    s.headers = parts.headers;
    for rs in request.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref()?.value.clone());
        if let Some(Value::StringValue(name)) = service {
            s.services.push(name);
        }
        for ss in rs.scope_spans {
            s.spans.extend(ss.spans);
        }
    }
    drop(s);
    if grpc {
        return grpc_ok();
    }
    let mut out = Vec::new();
    let _ = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse::default()
        .encode(&mut out);
    let mut resp = Response::new(Full::new(Bytes::from(out)));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-protobuf"),
    );
    resp
}

/// A metrics export, over HTTP or gRPC, decoded and checked.
fn take_metrics(
    state: &Mutex<State>,
    parts: http::request::Parts,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let grpc = parts.uri.path() == METRICS_GRPC_PATH;
    let content_type = parts.headers.get(http::header::CONTENT_TYPE);
    let decoded = match (grpc, content_type.and_then(|v| v.to_str().ok())) {
        (false, Some("application/x-protobuf")) => {
            ExportMetricsServiceRequest::decode(body).map_err(|e| e.to_string())
        }
        (true, Some("application/grpc")) if parts.version == http::Version::HTTP_2 => {
            grpc_message(body)
        }
        (_, ct) => Err(format!("{} {} as {ct:?}", parts.method, parts.uri.path())),
    };
    let mut s = state.lock().expect("state");
    match decoded.and_then(checked_metrics) {
        Ok(request) => {
            s.metric_exports.push(request);
            s.headers = parts.headers;
        }
        Err(why) => {
            s.rejected.push(why);
            return answer(StatusCode::BAD_REQUEST, "bad export");
        }
    }
    drop(s);
    if grpc {
        return grpc_ok();
    }
    let mut out = Vec::new();
    let _ = ExportMetricsServiceResponse::default().encode(&mut out);
    Response::new(Full::new(Bytes::from(out)))
}

/// What the collector refuses in a metrics export: a metric without a
/// name or data, a point before its start, a sum or histogram without a
/// temporality, a histogram whose buckets do not match its bounds or its
/// count.
fn checked_metrics(r: ExportMetricsServiceRequest) -> Result<ExportMetricsServiceRequest, String> {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    for m in r
        .resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
    {
        let bad = || Err(format!("bad metric {m:?}"));
        match &m.data {
            _ if m.name.is_empty() => return bad(),
            Some(Data::Sum(s)) => {
                let times_ok = s
                    .data_points
                    .iter()
                    .all(|p| p.start_time_unix_nano <= p.time_unix_nano && p.value.is_some());
                if s.aggregation_temporality == 0 || !times_ok {
                    return bad();
                }
            }
            Some(Data::Gauge(g)) => {
                if g.data_points.iter().any(|p| p.value.is_none()) {
                    return bad();
                }
            }
            Some(Data::Histogram(h)) => {
                let points_ok = h.data_points.iter().all(|p| {
                    p.bucket_counts.len() == p.explicit_bounds.len() + 1
                        && p.bucket_counts.iter().sum::<u64>() == p.count
                        && p.explicit_bounds.windows(2).all(|w| w[0] < w[1])
                        && p.start_time_unix_nano <= p.time_unix_nano
                });
                if h.aggregation_temporality == 0 || !points_ok {
                    return bad();
                }
            }
            _ => return bad(),
        }
    }
    Ok(r)
}

/// One gRPC message: no compression, its length as said.
fn grpc_message<M: Message + Default>(mut body: Bytes) -> Result<M, String> {
    if body.len() < 5 || body[0] != 0 {
        return Err("not an uncompressed gRPC message".into());
    }
    body.advance(1);
    let len = body.get_u32() as usize;
    if body.len() != len {
        return Err(format!("gRPC length {len}, body {}", body.len()));
    }
    M::decode(body).map_err(|e| e.to_string())
}

/// What the collector refuses in a decoded request: ids of the wrong
/// length, a span without a name or with its end before its start.
fn checked(r: ExportTraceServiceRequest) -> Result<ExportTraceServiceRequest, String> {
    for span in r
        .resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
    {
        let parent_ok = span.parent_span_id.is_empty() || span.parent_span_id.len() == 8;
        if span.trace_id.len() != 16 || span.span_id.len() != 8 || !parent_ok {
            return Err(format!("bad ids in {span:?}"));
        }
        if span.name.is_empty() || span.end_time_unix_nano < span.start_time_unix_nano {
            return Err(format!("bad span {span:?}"));
        }
    }
    Ok(r)
}

fn answer(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r
}

/// An empty `ExportTraceServiceResponse`, `grpc-status: 0` in the head
/// (trailers-only is what a server may send for an empty answer; the
/// message frame is sent for clients that want one).
fn grpc_ok() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])));
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    h.insert("grpc-status", http::HeaderValue::from_static("0"));
    r
}

/// A span's attribute, as text (strings as they are, numbers written out).
pub fn attr(span: &Span, key: &str) -> Option<String> {
    let v = span.attributes.iter().find(|kv| kv.key == key)?;
    Some(match v.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(n) => n.to_string(),
        Value::DoubleValue(n) => n.to_string(),
        Value::BoolValue(b) => b.to_string(),
        // A list of texts, as `a,b`.
        Value::ArrayValue(list) => list
            .values
            .iter()
            .filter_map(|v| match v.value.as_ref()? {
                Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(","),
        other => format!("{other:?}"),
    })
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `[telemetry.traces]` table exporting to `endpoint`, quickly, plus
/// `extra` keys.
pub fn traces_table(endpoint: &str, extra: &str) -> String {
    format!("[telemetry.traces]\nendpoint = \"{endpoint}\"\nbatch_interval = \"20ms\"\n{extra}\n")
}
