//! CPU-heavy work on a client's body kept off the serving runtime.
//!
//! Counting the tokens of a conversation, or translating one into another
//! API, costs time in proportion to the body, and the body limit allows tens
//! of megabytes. Done inline it would hold the serving thread — at
//! `workers = 1` the whole process, admin `/health` included — for seconds.
//! Work on a body past [`INLINE_MAX`] runs on tokio's blocking pool instead,
//! at most `limit` jobs at once process-wide; when all are taken the request
//! is shed with 503 + `Retry-After`, like every other gate: never queued.

use std::sync::Arc;

use tokio::sync::Semaphore;

/// Bodies up to this size are worked on inline: the cost of a thread
/// hand-off is larger than the work.
pub(crate) const INLINE_MAX: usize = 64 * 1024;

/// The bounded pool for heavy work, shared by every LLM route.
#[derive(Clone)]
pub(crate) struct Offload {
    permits: Arc<Semaphore>,
}

/// Every slot for heavy work is taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Busy;

impl Offload {
    /// At most `limit` jobs at once (at least one).
    pub(crate) fn new(limit: usize) -> Self {
        Offload {
            permits: Arc::new(Semaphore::new(limit.max(1))),
        }
    }

    /// One job per core: more would only take turns on the same cores.
    pub(crate) fn per_core() -> Self {
        Self::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Run `work` on a body of `size` bytes: inline when small, else on the
    /// blocking pool under the limit.
    pub(crate) async fn run<T, F>(&self, size: usize, work: F) -> Result<T, Busy>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.run_inline_up_to(INLINE_MAX, size, work).await
    }

    /// [`Offload::run`] for work cheaper per byte than a parse: inline up
    /// to `inline_max` bytes.
    pub(crate) async fn run_inline_up_to<T, F>(
        &self,
        inline_max: usize,
        size: usize,
        work: F,
    ) -> Result<T, Busy>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        if size <= inline_max {
            return Ok(work());
        }
        let permit = self.permits.clone().try_acquire_owned().map_err(|_| Busy)?;
        let job = tokio::task::spawn_blocking(move || {
            let out = work();
            drop(permit);
            out
        });
        // The job cannot be cancelled once started; if it panicked, the
        // request is answered as busy rather than taking the task down.
        job.await.map_err(|_| Busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn small_work_is_inline_large_work_is_bounded() {
        let pool = Offload::new(1);
        let here = std::thread::current().id();
        let inline = pool.run(10, move || std::thread::current().id()).await;
        assert_eq!(inline, Ok(here));
        let away = pool
            .run(INLINE_MAX + 1, move || std::thread::current().id())
            .await;
        assert!(
            away.is_ok_and(|id| id != here),
            "a large job leaves the serving thread"
        );

        // With the one slot held, the next large job is refused at once.
        let (hold, release) = std::sync::mpsc::channel::<()>();
        let (started, is_started) = tokio::sync::oneshot::channel();
        let busy = pool.clone();
        let first = tokio::spawn(async move {
            busy.run(INLINE_MAX + 1, move || {
                let _ = started.send(());
                let _ = release.recv();
            })
            .await
        });
        is_started.await.expect("first job started");
        assert_eq!(pool.run(INLINE_MAX + 1, || ()).await, Err(Busy));
        assert_eq!(pool.run(1, || 7).await, Ok(7), "small work still runs");
        hold.send(()).expect("release");
        assert_eq!(first.await.expect("join"), Ok(()));
        assert_eq!(
            pool.run(INLINE_MAX + 1, || 8).await,
            Ok(8),
            "the slot came back"
        );
    }
}
