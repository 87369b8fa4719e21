//! Spans to the collector, off the request path: a bounded queue a
//! request pushes to without waiting (a full one drops the span and counts
//! it), and one task that takes batches from it and exports each as an
//! OTLP `ExportTraceServiceRequest` — over HTTP (a protobuf POST) or gRPC
//! (`TraceService/Export`) — one export at a time, each bounded by the
//! export timeout. Whatever the collector does (down, slow, refusing),
//! serving never waits for it: spans are dropped and counted instead.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::encode;
use super::span::Span;
use crate::config::{OtlpProtocol, TraceSettings};
use crate::telemetry::TraceSpans;

/// gRPC's path for trace exports.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
/// The most of a collector's answer read (OTLP answers are small).
const MAX_ANSWER: usize = 64 * 1024;

enum Item {
    Span(Box<Span>),
    /// Export what came before, then say so.
    Flush(oneshot::Sender<()>),
}

/// The request path's end of the queue.
pub(super) struct Queue {
    tx: mpsc::Sender<Item>,
    counters: TraceSpans,
}

impl Queue {
    /// A queue nobody reads (for tests of what comes before it).
    #[cfg(test)]
    pub(super) fn closed() -> Self {
        let (tx, _) = mpsc::channel(1);
        Queue {
            tx,
            counters: TraceSpans::default(),
        }
    }

    /// Queue `span` for export, or drop and count it when the queue is
    /// full (never waits).
    pub(super) fn push(&self, span: Span) {
        if self.tx.try_send(Item::Span(Box::new(span))).is_err() {
            self.counters.dropped.inc();
        }
    }

    /// Wait, at most `wait`, until what was queued before has been
    /// exported (or given up on).
    pub(super) async fn flush(&self, wait: Duration) {
        let (done, exported) = oneshot::channel();
        let _ = tokio::time::timeout(wait, async {
            if self.tx.send(Item::Flush(done)).await.is_ok() {
                let _ = exported.await;
            }
        })
        .await;
    }
}

/// Start the exporter's task on the current runtime; the queue it reads.
pub(super) fn start(settings: &TraceSettings, counters: TraceSpans) -> Result<Queue, String> {
    let exporter = Exporter::new(settings, counters.clone())?;
    let (tx, rx) = mpsc::channel(settings.queue_size);
    let batching = Batching {
        size: settings.batch_size,
        interval: settings.batch_interval,
    };
    tokio::spawn(run(rx, exporter, batching));
    Ok(Queue { tx, counters })
}

struct Batching {
    size: usize,
    interval: Duration,
}

/// Batches out of the queue, exported one after another, until every
/// sender is gone.
async fn run(mut rx: mpsc::Receiver<Item>, exporter: Exporter, batching: Batching) {
    loop {
        let first = match rx.recv().await {
            None => return,
            Some(Item::Flush(done)) => {
                let _ = done.send(());
                continue;
            }
            Some(Item::Span(span)) => span,
        };
        let mut batch = vec![*first];
        let deadline = Instant::now() + batching.interval;
        let mut flushed = None;
        while batch.len() < batching.size {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(Item::Span(span))) => batch.push(*span),
                Ok(Some(Item::Flush(done))) => {
                    flushed = Some(done);
                    break;
                }
                Ok(None) | Err(_) => break,
            }
        }
        exporter.export(batch).await;
        if let Some(done) = flushed {
            let _ = done.send(());
        }
    }
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// One collector, and how to reach it.
struct Exporter {
    client: Client<Https, Full<Bytes>>,
    uri: http::Uri,
    protocol: OtlpProtocol,
    headers: Vec<(http::HeaderName, HeaderValue)>,
    timeout: Duration,
    service: String,
    counters: TraceSpans,
}

impl Exporter {
    fn new(settings: &TraceSettings, counters: TraceSpans) -> Result<Self, String> {
        let tls = crate::pki::client_config(settings.ca_file.as_deref())
            .map_err(|e| format!("telemetry.traces.ca_file: {e}"))?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(settings.export_timeout));
        connector.enforce_http(false);
        let grpc = settings.protocol == OtlpProtocol::Grpc;
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let https = match grpc {
            true => builder.enable_http2().wrap_connector(connector),
            false => builder.enable_http1().wrap_connector(connector),
        };
        let client = Client::builder(TokioExecutor::new())
            .http2_only(grpc)
            .build(https);
        let uri = match grpc {
            true => grpc_uri(&settings.endpoint)?,
            false => settings.endpoint.clone(),
        };
        Ok(Exporter {
            client,
            uri,
            protocol: settings.protocol,
            headers: settings.headers.clone(),
            timeout: settings.export_timeout,
            service: settings.service_name.clone(),
            counters,
        })
    }

    /// Export `batch`; counted as exported when the collector took it,
    /// else as dropped (there is no retry: the next batch is waiting).
    async fn export(&self, batch: Vec<Span>) {
        let n = batch.len() as u64;
        let message = encode::request(&self.service, batch);
        let sent = tokio::time::timeout(self.timeout, self.send(&message)).await;
        match sent {
            Ok(Ok(())) => {
                self.counters.exported.inc_by(n);
            }
            Ok(Err(why)) => {
                self.counters.dropped.inc_by(n);
                tracing::debug!(spans = n, error = %why, "trace export failed; spans dropped");
            }
            Err(_) => {
                self.counters.dropped.inc_by(n);
                tracing::debug!(spans = n, "trace export timed out; spans dropped");
            }
        }
    }

    async fn send(&self, message: &ExportTraceServiceRequest) -> Result<(), String> {
        let (body, content_type) = match self.protocol {
            OtlpProtocol::HttpProtobuf => {
                (message.encode_to_vec().into(), "application/x-protobuf")
            }
            OtlpProtocol::Grpc => (grpc_frame(message), "application/grpc"),
        };
        let mut req = http::Request::post(self.uri.clone())
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        if self.protocol == OtlpProtocol::Grpc {
            *req.version_mut() = http::Version::HTTP_2;
            req.headers_mut()
                .insert(header::TE, HeaderValue::from_static("trailers"));
        }
        let h = req.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        for (name, value) in &self.headers {
            h.insert(name.clone(), value.clone());
        }
        let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let head_grpc = grpc_status(resp.headers());
        let answer = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("the collector answered {status}"));
        }
        if self.protocol == OtlpProtocol::Grpc {
            let code = head_grpc.or_else(|| answer.trailers().and_then(grpc_status));
            if code != Some(0) {
                return Err(format!("the collector answered grpc-status {code:?}"));
            }
        }
        Ok(())
    }
}

/// A gRPC message: uncompressed flag, length, bytes.
fn grpc_frame(message: &ExportTraceServiceRequest) -> Bytes {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // Encoding into a buffer with room for it cannot fail.
    let _ = message.encode(&mut out);
    out.freeze()
}

fn grpc_status(h: &http::HeaderMap) -> Option<u32> {
    h.get("grpc-status")?.to_str().ok()?.parse().ok()
}

/// The export call's URI at the endpoint's origin.
fn grpc_uri(endpoint: &http::Uri) -> Result<http::Uri, String> {
    let mut parts = endpoint.clone().into_parts();
    parts.path_and_query = Some(http::uri::PathAndQuery::from_static(GRPC_PATH));
    http::Uri::from_parts(parts).map_err(|e| format!("telemetry.traces.endpoint: {e}"))
}
