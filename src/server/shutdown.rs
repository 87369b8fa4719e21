//! How a running server ends: handing its listening sockets to a new
//! binary (an upgrade, after which this process drains), and the graceful
//! drain itself.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Running;
use crate::listen::handover;

/// How long an exit waits for Redis to take the queued budget settles
/// (three of the cluster's background waits: a stalled call, a reconnect
/// and the re-send).
const SETTLE_FLUSH_WAIT: Duration = Duration::from_secs(3);

/// How long exit waits for the usage rows still queued to be written.
const ROWS_FLUSH_WAIT: Duration = Duration::from_secs(10);

/// How long exit waits for the spans still queued to be exported.
const TRACE_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// How long exit waits for the worker threads to drop the connections the
/// shutdown timeout cut (each ends its response and logs it then).
const WORKERS_STOP: Duration = Duration::from_secs(1);

impl Running {
    /// Start the same binary (or a new one at the same path) with this
    /// process's listening sockets, and wait until it is ready: then this
    /// process should drain and exit. Returns the new process's pid; on
    /// failure the new process is gone and this one keeps serving.
    pub(crate) async fn upgrade(&self) -> Result<u32, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find weir's binary: {e}"))?;
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut sockets = Vec::new();
        for (name, socket) in &self.handover {
            let dup = socket
                .try_clone()
                .map_err(|e| format!("cannot duplicate the `{name}` socket: {e}"))?;
            sockets.push((name.clone(), dup));
        }
        // It waits for the new process: off the runtime's threads.
        tokio::task::spawn_blocking(move || handover::start_successor(&sockets, exe, args))
            .await
            .map_err(|e| format!("the upgrade task failed: {e}"))?
    }

    /// Stop accepting, then drain connections within the shutdown timeout
    /// (requests in flight or arriving are answered; idle HTTP/1.1
    /// connections close after `server.drain_grace` with nothing arriving;
    /// tunnels close at once — docs/operations.md has the rules), then
    /// stop. Returns false when the timeout cut the drain short.
    pub async fn shutdown(mut self) -> bool {
        self.admin_state.draining.store(true, Ordering::Relaxed);
        // Sockets close before any connection drains: a client told to
        // reconnect (Connection: close, GOAWAY) must not land in the
        // backlog of a socket about to close. The second descriptors kept
        // for an upgrade go first (a successor holds its own): while one
        // is open the socket still listens — a second instance on the
        // port (SO_REUSEPORT) would share new connections with a backlog
        // nobody accepts from, all reset at exit.
        self.handover.clear();
        let _ = self.stop_accepting.send(true);
        while self.accept_loops.join_next().await.is_some() {}
        let _ = self.shutdown.send(true);
        tracing::info!(open_connections = self.registry.open(), timeout = ?self.shutdown_timeout, "draining");
        let registry = self.registry.clone();
        let drained = tokio::time::timeout(self.shutdown_timeout, async move {
            while registry.open() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .is_ok();
        if drained {
            tracing::info!("drained");
        } else {
            tracing::warn!(
                open_connections = self.registry.open(),
                "shutdown timeout reached with requests still in flight"
            );
        }
        let _ = self.sweeper_stop.send(true);
        if let Some(t) = self.admin_task {
            t.abort();
        }
        // Connections the timeout gave up on go with their worker; their
        // access lines are written before the process exits.
        if let Some(w) = self.workers {
            let _ = tokio::task::spawn_blocking(move || w.stop_and_wait(WORKERS_STOP)).await;
        }
        // The last requests' budget settles are queued as they end: the
        // fleet's budgets get them before the process goes.
        if let Some(cluster) = self.reloadable.gateway.cluster() {
            cluster.flush_settles(SETTLE_FLUSH_WAIT).await;
        }
        // Every ended request's usage row is in the queue by now.
        if let Some(database) = &self.database {
            database.rows.finish(ROWS_FLUSH_WAIT).await;
        }
        // The last requests' spans, to the collector if it takes them soon.
        if let Some(tracer) = self.reloadable.gateway.tracer() {
            tracer.flush(TRACE_FLUSH_WAIT).await;
        }
        // The last counts, to the collector if it takes them soon.
        if let Some(export) = self.reloadable.gateway.metrics_export() {
            export.flush(TRACE_FLUSH_WAIT).await;
        }
        drained
    }
}
