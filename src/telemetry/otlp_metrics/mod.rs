//! `[telemetry.metrics]`: weir's metrics pushed to an OTLP collector
//! every `export_interval`, besides `/metrics`. One task, off the request
//! path, takes the same snapshot a scrape does (the registry's text
//! exposition, read back by [`families`]: one source of truth) and
//! exports it as an `ExportMetricsServiceRequest` with cumulative
//! temporality, one export at a time, each bounded by `export_timeout`.
//! A collector that is down, slow or refusing costs serving nothing: the
//! export is counted as failed (`weir_metrics_exports_failed_total`), the
//! first failure of an outage is logged, and the next interval tries
//! again with the numbers as they are then (a cumulative sum loses
//! nothing by a missed export).

mod families;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{ResourceMetrics, ScopeMetrics};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior};

use super::otlp::{self, Collector, Target};
use super::{Metrics, MetricsExports};
use crate::config::MetricsExportSettings;

/// gRPC's path for metric exports.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";

/// The running exporter; its task ends when this is dropped.
pub(crate) struct MetricsExport {
    /// Export now, then say so.
    now: mpsc::Sender<oneshot::Sender<()>>,
}

impl MetricsExport {
    /// Start the exporter's task on the current runtime.
    pub(crate) fn start(
        settings: &MetricsExportSettings,
        metrics: Arc<Metrics>,
    ) -> Result<Self, String> {
        let collector = Collector::new(&Target {
            endpoint: &settings.endpoint,
            protocol: settings.protocol,
            headers: &settings.headers,
            ca_file: settings.ca_file.as_deref(),
            connect_timeout: settings.export_timeout,
            grpc_path: GRPC_PATH,
            table: "telemetry.metrics",
        })?;
        let exporter = Exporter {
            collector,
            counters: metrics.metrics_exports(),
            metrics,
            service: settings.service_name.clone(),
            timeout: settings.export_timeout,
            start: super::trace::now(),
            failing: false,
        };
        let (now, asked) = mpsc::channel(1);
        tokio::spawn(run(asked, exporter, settings.export_interval));
        Ok(MetricsExport { now })
    }

    /// One last export, waiting at most `wait` for it: at shutdown, after
    /// the last requests ended, so their counts are not lost.
    pub(crate) async fn flush(&self, wait: Duration) {
        let (done, exported) = oneshot::channel();
        let _ = tokio::time::timeout(wait, async {
            if self.now.send(done).await.is_ok() {
                let _ = exported.await;
            }
        })
        .await;
    }
}

/// An export every `interval` (a slow one delays the next rather than
/// piling up), and one whenever asked, until the handle is dropped.
async fn run(
    mut asked: mpsc::Receiver<oneshot::Sender<()>>,
    mut exporter: Exporter,
    interval: Duration,
) {
    let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let done = tokio::select! {
            _ = tick.tick() => None,
            asked = asked.recv() => match asked {
                Some(done) => Some(done),
                None => return,
            },
        };
        exporter.export().await;
        if let Some(done) = done {
            let _ = done.send(());
        }
    }
}

struct Exporter {
    collector: Collector,
    metrics: Arc<Metrics>,
    counters: MetricsExports,
    service: String,
    timeout: Duration,
    /// When counting began (the process's metrics are made at start).
    start: u64,
    /// The last export failed: the outage is logged already.
    failing: bool,
}

impl Exporter {
    async fn export(&mut self) {
        let times = families::Times {
            start: self.start,
            now: super::trace::now(),
        };
        let (metrics, unread) = families::metrics(&self.metrics.encode(), times);
        if unread > 0 {
            tracing::debug!(
                lines = unread,
                "metrics export: exposition lines not understood"
            );
        }
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(otlp::resource(&self.service)),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(otlp::scope()),
                    metrics,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        let sent = tokio::time::timeout(self.timeout, self.collector.send(&request)).await;
        let failure = match sent {
            Ok(Ok(())) => None,
            Ok(Err(why)) => Some(why),
            Err(_) => Some(format!("no answer within {:?}", self.timeout)),
        };
        match failure {
            None => {
                self.counters.exported.inc();
                if std::mem::take(&mut self.failing) {
                    tracing::info!("metrics export: the collector takes them again");
                }
            }
            Some(why) => {
                self.counters.failed.inc();
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(error = %why, "metrics export failed; counting failures (weir_metrics_exports_failed_total) until the collector takes one again");
                }
            }
        }
    }
}
