//! A credential that expires (temporary AWS keys, a cloud access token),
//! fetched when first needed and refreshed before it expires, off the
//! request path: a request takes the current value at once and, when it
//! is within [`MARGIN`] of expiring, starts one refresh in the background.
//! Only a request that finds no valid value waits — the very first, or
//! one after refreshes failed past the expiry — and for at most the wait
//! it is given. What fetches a value is a [`Source`]; this module knows
//! nothing of clouds (docs/decisions/080).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How long before expiry a refresh starts: AWS's SDKs refresh temporary
/// credentials 5 minutes before, Google's libraries tokens about as much.
pub(crate) const MARGIN: Duration = Duration::from_secs(300);
/// How long after a failed fetch the next one may start.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// A fetched value and when it expires, or why there is none.
pub(crate) type Fetched<T> = Result<(T, SystemTime), String>;

/// What fetches a fresh value.
pub(crate) trait Source<T>: Send + Sync + 'static {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Fetched<T>> + Send + '_>>;
    /// What it is, for the log (never a secret).
    fn name(&self) -> &str;
}

struct State<T> {
    current: Option<(Arc<T>, SystemTime)>,
    fetching: bool,
    /// No fetch starts before this, after one failed.
    retry_at: Option<SystemTime>,
}

/// The current value of a [`Source`], refreshed before it expires.
pub(crate) struct Refreshed<T> {
    source: Box<dyn Source<T>>,
    state: Mutex<State<T>>,
    changed: tokio::sync::Notify,
}

impl<T: 'static> std::fmt::Debug for Refreshed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Refreshed({})", self.source.name())
    }
}

impl<T: Send + Sync + 'static> Refreshed<T> {
    pub(crate) fn new(source: Box<dyn Source<T>>) -> Arc<Self> {
        Arc::new(Refreshed {
            source,
            state: Mutex::new(State {
                current: None,
                fetching: false,
                retry_at: None,
            }),
            changed: tokio::sync::Notify::new(),
        })
    }

    /// The value if it is still valid, never waiting; a refresh started
    /// in the background when there is none or it expires within
    /// [`MARGIN`] (one at a time).
    pub(crate) fn current(self: &Arc<Self>) -> Option<Arc<T>> {
        let now = SystemTime::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let valid = (state.current.as_ref())
            .filter(|(_, expires)| *expires > now)
            .map(|(v, _)| v.clone());
        let due = state.current.as_ref().is_none_or(|(_, expires)| {
            expires
                .duration_since(now)
                .map_or(true, |left| left < MARGIN)
        });
        let may = state.retry_at.is_none_or(|at| now >= at);
        if due && may && !state.fetching {
            state.fetching = true;
            let me = self.clone();
            tokio::spawn(async move { me.refresh().await });
        }
        valid
    }

    /// A valid value, waiting at most `wait` for one when there is none.
    pub(crate) async fn ready(self: &Arc<Self>, wait: Duration) -> Option<Arc<T>> {
        let notified = self.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(v) = self.current() {
            return Some(v);
        }
        let _ = tokio::time::timeout(wait, notified).await;
        let now = SystemTime::now();
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (state.current.as_ref())
            .filter(|(_, expires)| *expires > now)
            .map(|(v, _)| v.clone())
    }

    async fn refresh(self: Arc<Self>) {
        let fetched = self.source.fetch().await;
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.fetching = false;
            match fetched {
                Ok((value, expires)) => {
                    tracing::info!(source = self.source.name(), "credentials refreshed");
                    state.current = Some((Arc::new(value), expires));
                    state.retry_at = None;
                }
                Err(why) => {
                    tracing::warn!(
                        source = self.source.name(),
                        error = %why,
                        "credentials could not be refreshed; the current ones (if any) are kept until they expire"
                    );
                    state.retry_at = Some(SystemTime::now() + RETRY_AFTER);
                }
            }
        }
        self.changed.notify_waiters();
    }
}
