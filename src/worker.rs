//! Per-core workers, nginx's model: `server.workers = N` (N > 1) runs N
//! threads, each with its own current-thread tokio runtime, its own
//! `SO_REUSEPORT` listening socket per listener (the kernel spreads new
//! connections across them) and its own upstream connection pools. A
//! connection lives and dies on the worker that accepted it, so nothing on
//! the request path crosses threads except the shared state that must be
//! shared: the connection registry and cap, the request gates, rate
//! limits and metrics.
//!
//! One worker (or a machine with one core) serves on the runtime that
//! started the server, with no extra thread. Control work — signals,
//! the admin API, the deadline sweeper, ACME — stays on that runtime in
//! both cases; a config reload is asked for there and run on its blocking
//! pool, so it never stalls the connections that runtime may serve.

use std::cell::Cell;
use std::sync::mpsc;

use tokio::runtime::Handle;
use tokio::sync::watch;

thread_local! {
    /// This thread's worker number; 0 off worker threads.
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The worker running on this thread (0 when there is one worker, and on
/// threads that are not workers).
pub(crate) fn index() -> usize {
    INDEX.with(Cell::get)
}

/// How many workers a configured `server.workers` means: `0` is one per
/// available core.
pub(crate) fn count(configured: usize) -> usize {
    match configured {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// One value per worker — an upstream pool, say — picked by the worker the
/// caller runs on, so a worker only ever uses its own.
#[derive(Debug)]
pub(crate) struct PerWorker<T>(Box<[T]>);

impl<T> PerWorker<T> {
    pub(crate) fn new(workers: usize, mut make: impl FnMut() -> T) -> Self {
        PerWorker((0..workers.max(1)).map(|_| make()).collect())
    }

    /// This worker's value.
    pub(crate) fn get(&self) -> &T {
        // A config reload may build values for a different worker count
        // than is running (the count only changes at restart).
        &self.0[index() % self.0.len()]
    }
}

/// Running worker threads.
pub(crate) struct Workers {
    handles: Vec<Handle>,
    stop: watch::Sender<bool>,
    /// Waited for at shutdown ([`Workers::stop_and_wait`]), joined by
    /// the tests.
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    /// Start `n` worker threads, each running its own current-thread
    /// runtime until [`Workers::stop`].
    pub(crate) fn start(n: usize) -> std::io::Result<Workers> {
        let (stop, stopped) = watch::channel(false);
        let (ready, handles) = mpsc::channel();
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let ready = ready.clone();
            let mut stopped = stopped.clone();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let thread = std::thread::Builder::new()
                .name(format!("weir-worker-{i}"))
                .spawn(move || {
                    INDEX.with(|c| c.set(i));
                    let _ = ready.send((i, runtime.handle().clone()));
                    runtime.block_on(async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    });
                    // Dropping the runtime here cancels what is still
                    // running on it: connections the drain gave up on.
                })?;
            threads.push(thread);
        }
        drop(ready);
        let mut by_index: Vec<(usize, Handle)> = handles.iter().take(n).collect();
        by_index.sort_by_key(|(i, _)| *i);
        Ok(Workers {
            handles: by_index.into_iter().map(|(_, h)| h).collect(),
            stop,
            threads,
        })
    }

    /// The runtime of each worker, in worker order.
    pub(crate) fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// Stop every worker: tasks still running on them are cancelled. Does
    /// not wait for the threads.
    pub(crate) fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Stop every worker and wait, at most `within`, for their runtimes
    /// to be dropped: the connections cut then end their responses (and
    /// write their access lines) before the process exits. Blocks.
    pub(crate) fn stop_and_wait(&self, within: std::time::Duration) {
        self.stop();
        let deadline = std::time::Instant::now() + within;
        while !self.threads.iter().all(|t| t.is_finished()) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Stop and wait for the threads to end.
    #[cfg(test)]
    pub(crate) fn join(mut self) {
        self.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_knows_its_index_and_gets_its_own_value() {
        let workers = Workers::start(3).expect("threads start");
        let values = std::sync::Arc::new(PerWorker::new(3, {
            let mut n = 0;
            move || {
                n += 1;
                n * 10
            }
        }));
        let mut seen = Vec::new();
        for h in workers.handles() {
            let values = values.clone();
            let got = h
                .block_on(async move { h_spawn(values).await })
                .expect("task runs");
            seen.push(got);
        }
        assert_eq!(seen, vec![(0, 10), (1, 20), (2, 30)]);
        assert_eq!(index(), 0, "the test thread is not a worker");
        workers.join();
    }

    async fn h_spawn(
        values: std::sync::Arc<PerWorker<i32>>,
    ) -> Result<(usize, i32), tokio::task::JoinError> {
        tokio::spawn(async move { (index(), *values.get()) }).await
    }

    #[test]
    fn zero_means_one_per_core() {
        assert!(count(0) >= 1);
        assert_eq!(count(3), 3);
    }
}
