//! Background load for the tests that change something under traffic
//! (reloads, upgrades): tasks that repeat one request until stopped,
//! counting the right answers and keeping every failure to show.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

/// Right answers counted, failures kept.
#[derive(Clone, Default)]
pub struct Tally {
    ok: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Tally {
    /// Right answers so far.
    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    fn record(&self, result: Result<(), String>) {
        match result {
            Ok(()) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => self.failures.lock().expect("lock").push(why),
        }
    }

    /// Fail the test if any request failed, showing the first few.
    pub fn assert_no_failures(&self) {
        let failures = self.failures.lock().expect("lock");
        assert!(
            failures.is_empty(),
            "{} failures: {:?}",
            failures.len(),
            &failures[..failures.len().min(10)]
        );
    }
}

/// Tasks repeating a request until [`Load::stop`].
#[derive(Default)]
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Load {
    /// A task calling `one` again and again, each result recorded in `tally`:
    /// `Ok` a right answer, `Err` what went wrong.
    pub fn spawn<F, Fut>(&mut self, tally: &Tally, one: F)
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send,
    {
        let (stop, tally) = (self.stop.clone(), tally.clone());
        self.tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                tally.record(one().await);
            }
        }));
    }

    /// Stop every task once its request in hand is done.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.expect("load task");
        }
    }
}
