//! A credential weir gets itself and keeps fresh off the request path: a
//! [`Source`] is asked for a value that lives for a while (an OAuth access
//! token), and a background task asks it again before the value expires
//! ([`refresh_after`]), retrying with a growing back-off while it fails.
//! The request path only reads the current value from memory
//! ([`Refreshed::current`]); only a request that comes before the first
//! answer waits for it ([`Refreshed::get`]).
//!
//! Nothing here knows whose credential it is or what it looks like (a
//! token, a set of temporary keys): Google's access tokens are a
//! `Source<str>` in [`super::google`], AWS's temporary keys from STS a
//! `Source<AwsKeys>` in [`super::aws`] (decisions 080, 081).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// A value a source gave and how long it lives from now.
pub(crate) struct Fresh<T: ?Sized> {
    pub(crate) value: Arc<T>,
    pub(crate) lifetime: Duration,
}

/// What gives a credential: each call one fetch, or why it failed (for
/// the log and the client's 503).
pub(crate) trait Source<T: ?Sized>: Send + Sync + 'static {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Fresh<T>, String>> + Send + '_>>;
}

/// The longest the request that comes first waits for the first value.
pub(crate) const FIRST_WAIT: Duration = Duration::from_secs(15);
/// The first retry after a failed fetch; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The least time between two fetches a renewal asks for.
const MIN_RENEW: Duration = Duration::from_secs(1);

/// When to fetch again, counted from when a value of `lifetime` came:
/// five minutes before it expires, or at half its life when it is short.
pub(crate) fn refresh_after(lifetime: Duration) -> Duration {
    const AHEAD: Duration = Duration::from_secs(300);
    if lifetime >= AHEAD * 2 {
        lifetime - AHEAD
    } else {
        lifetime / 2
    }
}

/// How long a value of `lifetime` is sent for: not in its last quarter
/// (at most its last minute), so none reaches the service expired.
fn usable_for(lifetime: Duration) -> Duration {
    lifetime - (lifetime / 4).min(Duration::from_secs(60))
}

struct Current<T: ?Sized> {
    value: Option<(Arc<T>, Instant)>,
    /// Why the last fetch failed; None after a success.
    error: Option<Arc<str>>,
    /// Whether any fetch has ended yet.
    tried: bool,
}

impl<T: ?Sized> Current<T> {
    fn empty() -> Self {
        Current {
            value: None,
            error: None,
            tried: false,
        }
    }

    fn usable(&self, now: Instant) -> Option<Arc<T>> {
        self.value
            .as_ref()
            .filter(|(_, until)| now < *until)
            .map(|(v, _)| v.clone())
    }
}

/// A credential kept fresh by a task of its own, which ends when this is
/// dropped (a reload that replaces the upstream).
pub(crate) struct Refreshed<T: ?Sized> {
    current: watch::Receiver<Current<T>>,
    /// Asks the task for a new value before its time.
    renew: Arc<Notify>,
    task: tokio::task::AbortHandle,
}

impl<T: ?Sized> Drop for Refreshed<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<T: ?Sized> std::fmt::Debug for Refreshed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Refreshed")
    }
}

impl<T: ?Sized + Send + Sync + 'static> Refreshed<T> {
    /// Start keeping `source`'s value fresh, on the runtime this runs in;
    /// None when there is none. `label` names it in the log.
    pub(crate) fn spawn(label: Arc<str>, source: impl Source<T>) -> Option<Refreshed<T>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (tx, rx) = watch::channel(Current::empty());
        let renew = Arc::new(Notify::new());
        let task = runtime.spawn(keep_fresh(label, source, tx, renew.clone()));
        Some(Refreshed {
            current: rx,
            renew,
            task: task.abort_handle(),
        })
    }

    /// The service refused the current value (revoked before its time):
    /// fetch a new one now — at most one fetch a second however many
    /// refusals ask; requests keep the current value meanwhile.
    pub(crate) fn renew(&self) {
        self.renew.notify_one();
    }

    /// The current value, when there is one still good to send (never
    /// waiting: what signs a request reads it here).
    pub(crate) fn current(&self) -> Option<Arc<T>> {
        self.current.borrow().usable(Instant::now())
    }

    /// The current value; before the first fetch has ended, that fetch's
    /// (waiting at most `wait`). Without a good value, why not.
    pub(crate) async fn get(&self, wait: Duration) -> Result<Arc<T>, Arc<str>> {
        let mut rx = self.current.clone();
        let waited = tokio::time::timeout(wait, rx.wait_for(|c| c.tried))
            .await
            .map(|r| r.is_ok());
        let now = Instant::now();
        let c = rx.borrow();
        match (waited, c.usable(now)) {
            (_, Some(v)) => Ok(v),
            (Err(_), None) => Err("no credential yet: the first fetch has not answered".into()),
            (Ok(_), None) => Err(c
                .error
                .clone()
                .unwrap_or_else(|| "the credential expired and is being fetched again".into())),
        }
    }
}

/// The background task: fetch, publish, sleep until the refresh is due
/// (or the back-off after a failure), again; each failure logged, and the
/// recovery after failures.
async fn keep_fresh<T: ?Sized + Send + Sync + 'static>(
    label: Arc<str>,
    source: impl Source<T>,
    tx: watch::Sender<Current<T>>,
    renew: Arc<Notify>,
) {
    let mut backoff = FIRST_BACKOFF;
    let mut failing = false;
    loop {
        let fetched = Instant::now();
        let mut next = match source.fetch().await {
            Ok(fresh) => {
                let now = Instant::now();
                let until = now + usable_for(fresh.lifetime);
                tx.send_replace(Current {
                    value: Some((fresh.value, until)),
                    error: None,
                    tried: true,
                });
                if std::mem::take(&mut failing) {
                    tracing::info!(
                        credential = &*label,
                        "credential fetched again after failures"
                    );
                }
                backoff = FIRST_BACKOFF;
                // Never sooner than a second: a value that barely lives
                // must not make the task ask its source in a tight loop.
                now + refresh_after(fresh.lifetime).max(MIN_RENEW)
            }
            Err(why) => {
                let still = tx.borrow().usable(Instant::now()).is_some();
                tracing::warn!(
                    credential = &*label,
                    error = %why,
                    retry_in_ms = backoff.as_millis() as u64,
                    current_still_good = still,
                    "cannot fetch the upstream's credential"
                );
                failing = true;
                tx.send_modify(|c| {
                    c.error = Some(why.into());
                    c.tried = true;
                });
                let next = Instant::now() + backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                next
            }
        };
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next) => break,
                () = renew.notified() => next = next.min(fetched + MIN_RENEW),
                () = tx.closed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn refreshes_are_due_well_before_expiry() {
        let hour = Duration::from_secs(3600);
        assert_eq!(refresh_after(hour), Duration::from_secs(3300));
        assert_eq!(
            refresh_after(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
        assert_eq!(usable_for(hour), Duration::from_secs(3540));
        assert_eq!(
            usable_for(Duration::from_secs(2)),
            Duration::from_millis(1500)
        );
        assert!(refresh_after(hour) < usable_for(hour));
    }

    /// Fails `fail` times, then gives `v{n}` tokens living `life`.
    struct Counting {
        calls: Arc<AtomicUsize>,
        fail: usize,
        life: Duration,
    }

    impl Source<str> for Counting {
        fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Fresh<str>, String>> + Send + '_>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let (fail, life) = (self.fail, self.life);
            Box::pin(async move {
                if n < fail {
                    return Err(format!("down ({n})"));
                }
                Ok(Fresh {
                    value: format!("v{n}").into(),
                    lifetime: life,
                })
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_value_is_refreshed_before_it_expires_and_failures_recover() {
        let calls = Arc::new(AtomicUsize::new(0));
        let source = Counting {
            calls: calls.clone(),
            fail: 1,
            life: Duration::from_secs(60),
        };
        let r = Refreshed::spawn("t".into(), source).expect("runtime");
        // The first fetch fails: the first request is told why, at once.
        let err = r.get(FIRST_WAIT).await.expect_err("down");
        assert!(err.contains("down (0)"), "{err}");
        assert!(r.current().is_none());
        // The retry comes after the back-off, off the request path.
        tokio::time::sleep(FIRST_BACKOFF + Duration::from_millis(1)).await;
        assert_eq!(r.current().as_deref(), Some("v1"));
        // Refreshed at half life, before the value stops being sent.
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(r.current().as_deref(), Some("v2"));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // A refusal renews it at once (a second after the last fetch at
        // the soonest), long before it is due.
        r.renew();
        tokio::time::sleep(MIN_RENEW + Duration::from_millis(1)).await;
        assert_eq!(r.current().as_deref(), Some("v3"));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        drop(r);
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            4,
            "the task ends with its owner"
        );
    }

    /// Gives `v{n}` living `life` while `up`, else fails.
    struct Switched {
        up: Arc<std::sync::atomic::AtomicBool>,
        calls: Arc<AtomicUsize>,
        life: Duration,
    }

    impl Source<str> for Switched {
        fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Fresh<str>, String>> + Send + '_>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let (up, life) = (self.up.load(Ordering::SeqCst), self.life);
            Box::pin(async move {
                if !up {
                    return Err("STS refused: the role cannot be assumed".into());
                }
                Ok(Fresh {
                    value: format!("v{n}").into(),
                    lifetime: life,
                })
            })
        }
    }

    /// Refreshes fail from before the expiry until past it, then recover:
    /// through the gap every one of many concurrent requests is told why
    /// at once (none waits for a fetch), and the first refresh that
    /// succeeds serves them all again, with no request having to ask.
    #[tokio::test(start_paused = true)]
    async fn refreshes_failing_past_expiry_answer_at_once_and_recover() {
        let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let calls = Arc::new(AtomicUsize::new(0));
        let source = Switched {
            up: up.clone(),
            calls: calls.clone(),
            life: Duration::from_secs(60),
        };
        let r = Arc::new(Refreshed::spawn("t".into(), source).expect("runtime"));
        assert_eq!(r.get(FIRST_WAIT).await.as_deref().ok(), Some("v0"));
        // The source goes down before the refresh is due (30 s) and stays
        // down past the value's last usable moment (45 s).
        up.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(40)).await;
        assert_eq!(r.current().as_deref(), Some("v0"), "still good: sent");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(r.current().is_none(), "past its usable life: never sent");
        let before = Instant::now();
        let load: Vec<_> = (0..200)
            .map(|_| {
                let r = r.clone();
                tokio::spawn(async move { r.get(FIRST_WAIT).await })
            })
            .collect();
        for h in load {
            let err = h
                .await
                .expect("task")
                .expect_err("no credential in the gap");
            assert!(err.contains("STS refused"), "{err}");
        }
        assert_eq!(before, Instant::now(), "no request waited in the gap");
        let failed = calls.load(Ordering::SeqCst);
        assert!(failed >= 3, "retried while failing: {failed} fetches");
        // Back: the next retry (at most MAX_BACKOFF away) serves again.
        up.store(true, Ordering::SeqCst);
        tokio::time::sleep(MAX_BACKOFF + Duration::from_millis(1)).await;
        let back = r.current();
        assert!(back.as_deref().is_some_and(|v| v != "v0"), "{back:?}");
        assert_eq!(r.get(FIRST_WAIT).await.ok(), back);
    }

    #[tokio::test(start_paused = true)]
    async fn a_value_that_barely_lives_is_not_fetched_in_a_tight_loop() {
        let calls = Arc::new(AtomicUsize::new(0));
        let source = Counting {
            calls: calls.clone(),
            fail: 0,
            life: Duration::ZERO,
        };
        let r = Refreshed::spawn("t".into(), source).expect("runtime");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let n = calls.load(Ordering::SeqCst);
        assert!((10..=11).contains(&n), "{n} fetches in 10 s");
        assert!(r.current().is_none(), "a value of no life is never sent");
    }
}
