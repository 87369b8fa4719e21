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
/// How long the writer waits, once a row has come, for more to write
/// with it. Each transaction costs a commit (a WAL append in SQLite, a
/// round trip in PostgreSQL) and a hop to the database's thread whatever
/// it holds: at 1,000 requests/s, a transaction per row cost each
/// request ~140 µs of CPU in SQLite (bench/usage_rows.sh), batches of
/// ~100 rows a fraction of that. A row is in the database this much
/// later at most; the reports are by the minute.
const LINGER: Duration = Duration::from_millis(100);
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

/// The writer: a batch of what arrives within [`LINGER`] of its first
/// row, retried until the database takes it; at the stop, everything
/// queued.
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
                gather(&mut rx, &mut batch).await;
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

/// Add to `batch` what arrives within [`LINGER`], up to [`BATCH`] rows.
/// The stop is not awaited here: it is seen by the writer's loop once
/// this batch is written, at most `LINGER` later.
async fn gather(rx: &mut mpsc::Receiver<UsageRow>, batch: &mut Vec<UsageRow>) {
    let until = tokio::time::Instant::now() + LINGER;
    while batch.len() < BATCH {
        let room = BATCH - batch.len();
        tokio::select! {
            n = rx.recv_many(batch, room) => if n == 0 { return },
            _ = tokio::time::sleep_until(until) => return,
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
                metrics.batches_written.inc();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DatabaseUrl;

    fn row(at_ms: i64) -> UsageRow {
        UsageRow {
            at_ms,
            route: "claude".into(),
            outcome: "completed".into(),
            ..UsageRow::default()
        }
    }

    /// A writer of a new SQLite file's rows, and its figures.
    async fn writer() -> (tempfile::TempDir, UsageRows, DatabaseMetrics) {
        let dir = tempfile::tempdir().unwrap();
        let url = DatabaseUrl::Sqlite(dir.path().join("weir.db"));
        let store = Store::open(&url).await.unwrap();
        let metrics = DatabaseMetrics::default();
        let year = Duration::from_secs(366 * 86_400);
        let rows = UsageRows::start(store, 100, year, metrics.clone());
        (dir, rows, metrics)
    }

    /// Rows of requests ending a few ms apart (a steady load) go in one
    /// transaction, not one each: red without [`gather`].
    #[tokio::test(start_paused = true)]
    async fn rows_arriving_within_the_linger_are_written_in_one_transaction() {
        let (_dir, rows, metrics) = writer().await;
        for i in 0..20 {
            rows.send(row(i));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        rows.finish(Duration::from_secs(10)).await;
        assert_eq!(metrics.rows_written.get(), 20);
        assert_eq!(metrics.batches_written.get(), 1, "one transaction");
        assert_eq!(metrics.rows_dropped.get(), 0);
    }

    /// The linger ends a batch: rows further apart than it are written
    /// without waiting for more, and a stop writes what is queued.
    #[tokio::test(start_paused = true)]
    async fn a_batch_is_written_once_the_linger_has_passed() {
        let (_dir, rows, metrics) = writer().await;
        rows.send(row(1));
        tokio::time::sleep(LINGER * 3).await;
        assert_eq!(metrics.rows_written.get(), 1, "written within the linger");
        rows.send(row(2));
        rows.finish(Duration::from_secs(10)).await;
        assert_eq!(metrics.rows_written.get(), 2);
        assert_eq!(metrics.batches_written.get(), 2);
    }
}
