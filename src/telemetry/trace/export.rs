//! Spans to the collector, off the request path: a bounded queue a
//! request pushes to without waiting (a full one drops the span and counts
//! it), and one task that takes batches from it and exports each as an
//! OTLP `ExportTraceServiceRequest` — over HTTP (a protobuf POST) or gRPC
//! (`TraceService/Export`) — one export at a time, each bounded by the
//! export timeout. Whatever the collector does (down, slow, refusing),
//! serving never waits for it: spans are dropped and counted instead.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::encode;
use super::span::Span;
use crate::config::TraceSettings;
use crate::telemetry::TraceSpans;
use crate::telemetry::otlp::{Collector, Target};

/// gRPC's path for trace exports.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

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

/// One collector, and what its exports are counted as.
struct Exporter {
    collector: Collector,
    timeout: Duration,
    service: String,
    counters: TraceSpans,
}

impl Exporter {
    fn new(settings: &TraceSettings, counters: TraceSpans) -> Result<Self, String> {
        let collector = Collector::new(&Target {
            endpoint: &settings.endpoint,
            protocol: settings.protocol,
            headers: &settings.headers,
            ca_file: settings.ca_file.as_deref(),
            connect_timeout: settings.export_timeout,
            grpc_path: GRPC_PATH,
            table: "telemetry.traces",
        })?;
        Ok(Exporter {
            collector,
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
        let sent = tokio::time::timeout(self.timeout, self.collector.send(&message)).await;
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
}
