//! Usage rows on their way to the database: a bounded queue a request
//! puts its row in without waiting, and a writer task that inserts them
//! in batches. A full queue drops the row and counts it; a database that
//! fails keeps the batch and tries again (rows wait in the queue, up to
//! its bound); at shutdown what is queued is written before the process
//! ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::{Store, UsageRow};
use crate::sync::Locked;
use crate::telemetry::DatabaseMetrics;

/// Rows written in one transaction, at most.
const BATCH: usize = 512;
/// How often rows older than the retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Where usage rows go; off without a database.
#[derive(Clone, Default)]
pub(crate) struct UsageRows(Option<Arc<Writer>>);

struct Writer {
    queue: mpsc::Sender<UsageRow>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    metrics: DatabaseMetrics,
}

impl UsageRows {
    /// Start the writer of `store`'s usage rows.
    pub(crate) fn start(
        store: Store,
        queue: usize,
        retention: Duration,
        metrics: DatabaseMetrics,
    ) -> UsageRows {
        let (tx, rx) = mpsc::channel(queue.max(1));
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(write(store, rx, stopped, retention, metrics.clone()));
        UsageRows(Some(Arc::new(Writer {
            queue: tx,
            stop,
            task: Mutex::new(Some(task)),
            metrics,
        })))
    }

    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Queue a row; never waits (a full queue drops it, counted).
    pub(crate) fn send(&self, row: UsageRow) {
        if let Some(w) = &self.0
            && w.queue.try_send(row).is_err()
        {
            w.metrics.rows_dropped.inc();
        }
    }

    /// Write what is queued and stop, within `within`.
    pub(crate) async fn finish(&self, within: Duration) {
        let Some(w) = &self.0 else {
            return;
        };
        let _ = w.stop.send(true);
        let task = w.task.locked().take();
        if let Some(task) = task
            && tokio::time::timeout(within, task).await.is_err()
        {
            tracing::warn!("database: usage rows still queued at shutdown were not all written");
        }
    }
}

/// The writer: a batch as soon as rows arrive, retried until the
/// database takes it; at the stop, everything queued.
async fn write(
    store: Store,
    mut rx: mpsc::Receiver<UsageRow>,
    mut stop: watch::Receiver<bool>,
    retention: Duration,
    metrics: DatabaseMetrics,
) {
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => {
                if n == 0 {
                    return;
                }
                insert(&store, &mut batch, &metrics, &stop).await;
            }
            _ = prune.tick() => {
                let before = crate::store::unix_now()
                    .saturating_sub(retention.as_secs() as i64)
                    .saturating_mul(1000);
                if let Err(e) = store.prune_usage(before).await {
                    tracing::warn!(error = %e, "database: old usage rows not deleted");
                }
            }
            _ = stop.changed() => {
                loop {
                    while batch.len() < BATCH {
                        match rx.try_recv() {
                            Ok(row) => batch.push(row),
                            Err(_) => break,
                        }
                    }
                    if batch.is_empty() {
                        return;
                    }
                    insert(&store, &mut batch, &metrics, &stop).await;
                }
            }
        }
    }
}

/// Insert `batch`, retrying with a growing pause while the database
/// refuses (and giving up only at the stop); empty afterwards.
async fn insert(
    store: &Store,
    batch: &mut Vec<UsageRow>,
    metrics: &DatabaseMetrics,
    stop: &watch::Receiver<bool>,
) {
    let mut pause = Duration::from_millis(100);
    loop {
        match store.insert_usage(batch.clone()).await {
            Ok(()) => {
                metrics.rows_written.inc_by(batch.len() as u64);
                batch.clear();
                return;
            }
            Err(e) if *stop.borrow() => {
                tracing::error!(error = %e, rows = batch.len(), "database: usage rows lost at shutdown");
                metrics.rows_dropped.inc_by(batch.len() as u64);
                batch.clear();
                return;
            }
            Err(e) => {
                if pause == Duration::from_millis(100) {
                    tracing::warn!(error = %e, rows = batch.len(), "database: usage rows not written yet; retrying until it answers");
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}
