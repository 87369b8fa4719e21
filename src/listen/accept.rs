//! The accept-error policy.
//!
//! An accept loop that retries at once on EMFILE spins at full CPU and
//! writes an error line per spin — one incident elsewhere produced six
//! million lines in two hours. Here:
//!
//! - WouldBlock / Interrupted / ECONNABORTED / ECONNRESET on one socket:
//!   retry at once, no log.
//! - EMFILE, ENFILE, ENOBUFS, ENOMEM: back off (1 s, growing ×1.5 while the
//!   error persists, at most 2 s). On EMFILE/ENFILE the spare descriptor is
//!   released so the pending connections can be accepted and closed at once
//!   — their clients get a prompt close instead of hanging in the backlog —
//!   and then the spare is taken back. A back-off also ends early when one
//!   of weir's own connections closes (a descriptor was freed), so serving
//!   resumes as soon as it can, at the latest after 2 s.
//! - Anything else: back off 100 ms.
//!
//! Under a real flood, accepts succeed between failures (a descriptor is
//! freed for a moment, then taken again). A success alone is therefore not
//! recovery: the back-off and the log windows reset only after accepts have
//! gone [`RECOVERY_AFTER`] without a failure.
//!
//! Logs are de-duplicated by error kind: the first occurrence is logged at
//! error level, repeats within a 10 s window are counted, and one summary
//! line per window (at the next occurrence or at recovery) says how many
//! were suppressed and the current backoff — at most one line per 10 s per
//! kind, however the failures and successes interleave.

use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::sync::Locked;
use tokio::sync::Notify;
use tokio::time::Instant;

const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
const BACKOFF_OTHER: Duration = Duration::from_millis(100);
const LOG_WINDOW: Duration = Duration::from_secs(10);
/// How long accepts must go without a failure to count as recovered.
pub(crate) const RECOVERY_AFTER: Duration = Duration::from_secs(5);

/// What to do about an accept error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// Specific to one connection: try again at once.
    Retry,
    /// The process or system is out of a resource.
    Resource {
        descriptors: bool,
    },
    Other,
}

pub(crate) fn classify(e: &io::Error) -> ErrorClass {
    const ENOMEM: i32 = 12;
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    const ENOBUFS: i32 = 105;
    match e.raw_os_error() {
        Some(EMFILE | ENFILE) => return ErrorClass::Resource { descriptors: true },
        Some(ENOBUFS | ENOMEM) => return ErrorClass::Resource { descriptors: false },
        _ => {}
    }
    match e.kind() {
        io::ErrorKind::WouldBlock
        | io::ErrorKind::Interrupted
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionReset => ErrorClass::Retry,
        _ => ErrorClass::Other,
    }
}

/// A short, stable label for an error kind (metrics and de-duplication).
pub(crate) fn error_label(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(12) => "ENOMEM",
        Some(23) => "ENFILE",
        Some(24) => "EMFILE",
        Some(105) => "ENOBUFS",
        _ => match e.kind() {
            io::ErrorKind::ConnectionAborted => "ECONNABORTED",
            io::ErrorKind::ConnectionReset => "ECONNRESET",
            io::ErrorKind::Interrupted => "EINTR",
            io::ErrorKind::WouldBlock => "EAGAIN",
            io::ErrorKind::PermissionDenied => "EPERM",
            _ => "other",
        },
    }
}

/// What the de-duplicator says to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogAction {
    /// The first occurrence in a window: log it in full.
    First,
    /// A repeat inside the window: count it, say nothing.
    Suppressed,
    /// A window ended with repeats: say how many, then this one opens a
    /// new window.
    Summary { suppressed: u64 },
}

#[derive(Debug, Default)]
pub(crate) struct LogDedup {
    windows: HashMap<&'static str, (Instant, u64)>,
}

impl LogDedup {
    pub(crate) fn record(&mut self, kind: &'static str, now: Instant) -> LogAction {
        match self.windows.get_mut(kind) {
            Some((start, suppressed)) if now.duration_since(*start) < LOG_WINDOW => {
                *suppressed += 1;
                LogAction::Suppressed
            }
            Some((start, suppressed)) => {
                let n = std::mem::take(suppressed);
                *start = now;
                if n > 0 {
                    LogAction::Summary { suppressed: n }
                } else {
                    LogAction::First
                }
            }
            None => {
                self.windows.insert(kind, (now, 0));
                LogAction::First
            }
        }
    }

    /// At recovery: the repeats not yet reported, by kind.
    pub(crate) fn drain(&mut self) -> Vec<(&'static str, u64)> {
        self.windows
            .drain()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(k, (_, n))| (k, n))
            .collect()
    }
}

/// A source of connections (a real listener, or a test double).
pub(crate) trait Accept {
    type Conn;
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Conn, SocketAddr)>>;
}

impl Accept for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Conn, SocketAddr)>> {
        tokio::net::TcpListener::poll_accept(self, cx)
    }
}

/// A descriptor held back so that, at EMFILE, there is one to accept with.
pub(crate) trait Reserve {
    fn release(&mut self);
    fn restore(&mut self);
}

/// The real reserve: an open `/dev/null`.
#[derive(Debug)]
pub(crate) struct SpareFd(Option<std::fs::File>);

impl SpareFd {
    pub(crate) fn new() -> Self {
        let mut s = SpareFd(None);
        s.restore();
        s
    }
}

impl Default for SpareFd {
    fn default() -> Self {
        Self::new()
    }
}

impl Reserve for SpareFd {
    fn release(&mut self) {
        self.0 = None;
    }
    fn restore(&mut self) {
        if self.0.is_none() {
            self.0 = std::fs::File::open("/dev/null").ok();
        }
    }
}

/// Accept with the error policy applied; errors never escape.
pub(crate) struct AcceptLoop<L, R> {
    listener: L,
    reserve: R,
    listener_name: String,
    backoff: Option<Duration>,
    /// When the last resource failure happened (for sustained recovery).
    last_failure: Option<Instant>,
    /// Notified when a descriptor is freed: ends a back-off early.
    freed: Option<Arc<Notify>>,
    /// Shared by the accept loops of one listener (one per worker), so
    /// the listener logs once per window, not once per worker.
    dedup: Arc<std::sync::Mutex<LogDedup>>,
    /// Lines written to the log by this loop (for tests and sanity).
    pub(crate) log_lines: u64,
    /// Accept errors seen, by label (mirrored into metrics by the caller).
    pub(crate) on_error: Box<dyn FnMut(&'static str) + Send>,
    /// Connections accepted and closed at once while out of descriptors.
    pub(crate) shed: u64,
}

impl<L: Accept, R: Reserve> AcceptLoop<L, R> {
    pub(crate) fn new(listener: L, reserve: R, listener_name: &str) -> Self {
        AcceptLoop {
            listener,
            reserve,
            listener_name: listener_name.to_string(),
            backoff: None,
            last_failure: None,
            freed: None,
            dedup: Arc::default(),
            log_lines: 0,
            on_error: Box::new(|_| {}),
            shed: 0,
        }
    }

    /// Share log de-duplication with the other accept loops of the same
    /// listener.
    pub(crate) fn log_with(&mut self, dedup: Arc<std::sync::Mutex<LogDedup>>) {
        self.dedup = dedup;
    }

    /// End back-offs early when `freed` is notified (a connection closed).
    pub(crate) fn wake_on(&mut self, freed: Arc<Notify>) {
        self.freed = Some(freed);
    }

    /// The next accepted connection.
    pub(crate) async fn next(&mut self) -> (L::Conn, SocketAddr) {
        loop {
            let result = poll_fn(|cx| self.listener.poll_accept(cx)).await;
            let err = match result {
                Ok(conn) => {
                    self.recovered();
                    return conn;
                }
                Err(e) => e,
            };
            let class = classify(&err);
            if class == ErrorClass::Retry {
                continue;
            }
            let label = error_label(&err);
            (self.on_error)(label);
            self.last_failure = Some(Instant::now());
            let delay = match class {
                ErrorClass::Resource { descriptors } => {
                    if descriptors {
                        self.shed_pending();
                    }
                    let next = match self.backoff {
                        None => BACKOFF_START,
                        Some(d) => (d.mul_f64(1.5)).min(BACKOFF_MAX),
                    };
                    self.backoff = Some(next);
                    next
                }
                _ => BACKOFF_OTHER,
            };
            self.log(label, &err, delay);
            match &self.freed {
                Some(freed) => {
                    let freed = freed.clone();
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = freed.notified() => {}
                    }
                }
                None => tokio::time::sleep(delay).await,
            }
        }
    }

    /// The listener back, when accepting has stopped.
    pub(crate) fn into_listener(self) -> L {
        self.listener
    }

    fn log(&mut self, label: &'static str, err: &io::Error, delay: Duration) {
        let action = self.dedup.locked().record(label, Instant::now());
        match action {
            LogAction::First => {
                self.log_lines += 1;
                tracing::error!(listener = %self.listener_name, error = %err, kind = label, backoff_ms = delay.as_millis() as u64, "accept failed; backing off");
            }
            LogAction::Summary { suppressed } => {
                self.log_lines += 1;
                tracing::error!(listener = %self.listener_name, kind = label, suppressed, backoff_ms = delay.as_millis() as u64, shed = self.shed, "accept still failing; repeats were suppressed");
            }
            LogAction::Suppressed => {}
        }
    }

    /// An accept succeeded: recovery, if none has failed for a while.
    fn recovered(&mut self) {
        let Some(last) = self.last_failure else {
            return;
        };
        if last.elapsed() < RECOVERY_AFTER {
            return;
        }
        self.last_failure = None;
        self.backoff = None;
        let unreported = self.dedup.locked().drain();
        for (kind, suppressed) in unreported {
            self.log_lines += 1;
            tracing::warn!(listener = %self.listener_name, kind, suppressed, "accept recovered; repeats were suppressed");
        }
    }

    /// Out of descriptors: free the spare, accept and close what is
    /// pending, take the spare back.
    fn shed_pending(&mut self) {
        self.reserve.release();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        // Bounded, so a flood cannot keep this loop from backing off.
        for _ in 0..1024 {
            match self.listener.poll_accept(&mut cx) {
                Poll::Ready(Ok((conn, _))) => {
                    drop(conn);
                    self.shed += 1;
                }
                _ => break,
            }
        }
        self.reserve.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A listener that fails with EMFILE until `until`, and has clients
    /// waiting that can only be accepted while the spare is released.
    struct Exhausted {
        until: Instant,
        attempts: usize,
        spare_free: Arc<AtomicBool>,
        waiting: VecDeque<u32>,
        closed: Arc<AtomicUsize>,
    }

    struct Client(Arc<AtomicUsize>);
    impl Drop for Client {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Accept for Exhausted {
        type Conn = Option<Client>;
        fn poll_accept(
            &mut self,
            _cx: &mut Context<'_>,
        ) -> Poll<io::Result<(Self::Conn, SocketAddr)>> {
            let addr: SocketAddr = ([127, 0, 0, 1], 1).into();
            if Instant::now() >= self.until {
                return Poll::Ready(Ok((None, addr)));
            }
            if self.spare_free.load(Ordering::SeqCst) {
                if self.waiting.pop_front().is_some() {
                    return Poll::Ready(Ok((Some(Client(self.closed.clone())), addr)));
                }
            } else {
                self.attempts += 1;
            }
            Poll::Ready(Err(io::Error::from_raw_os_error(24)))
        }
    }

    struct TestReserve(Arc<AtomicBool>, usize);
    impl Reserve for TestReserve {
        fn release(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
        fn restore(&mut self) {
            self.0.store(false, Ordering::SeqCst);
            self.1 += 1;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_hour_of_emfile_backs_off_and_logs_hundreds_of_lines_not_millions() {
        let spare = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let listener = Exhausted {
            until: start + Duration::from_secs(3600),
            attempts: 0,
            spare_free: spare.clone(),
            waiting: (0..5).collect(),
            closed: closed.clone(),
        };
        let mut l = AcceptLoop::new(listener, TestReserve(spare.clone(), 0), "test");
        let (conn, _) = l.next().await;
        assert!(conn.is_none(), "served again once descriptors are back");
        let attempts = l.listener.attempts;
        assert!(
            (1750..=1850).contains(&attempts),
            "backoff caps at 2 s: {attempts} attempts in an hour"
        );
        assert!(
            l.log_lines >= 250 && l.log_lines <= 400,
            "{} log lines",
            l.log_lines
        );
        assert_eq!(
            closed.load(Ordering::SeqCst),
            5,
            "pending clients were accepted and closed"
        );
        assert_eq!(l.shed, 5);
        assert!(!spare.load(Ordering::SeqCst), "the spare was taken back");
        assert!(start.elapsed() >= Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_grows_from_one_second() {
        let spare = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let listener = Exhausted {
            until: start + Duration::from_millis(2600),
            attempts: 0,
            spare_free: spare.clone(),
            waiting: VecDeque::new(),
            closed: Arc::new(AtomicUsize::new(0)),
        };
        let mut l = AcceptLoop::new(listener, TestReserve(spare, 0), "test");
        l.next().await;
        // Attempts at 0 s, 1 s, 2.5 s; the next sleep (capped at 2 s) ends at 4.5 s.
        assert_eq!(l.listener.attempts, 3);
        assert_eq!(start.elapsed(), Duration::from_millis(4500));
    }

    /// Out of descriptors, but each back-off ends with one accept that
    /// succeeds (a descriptor freed for a moment) before the next failure:
    /// what a churning flood looks like.
    struct Churning {
        failures: usize,
        succeed_next: bool,
        until: Instant,
    }

    impl Accept for Churning {
        type Conn = ();
        fn poll_accept(
            &mut self,
            _cx: &mut Context<'_>,
        ) -> Poll<io::Result<(Self::Conn, SocketAddr)>> {
            let addr: SocketAddr = ([127, 0, 0, 1], 1).into();
            if self.succeed_next || Instant::now() >= self.until {
                self.succeed_next = false;
                return Poll::Ready(Ok(((), addr)));
            }
            self.failures += 1;
            self.succeed_next = true;
            // ENOBUFS: out of a resource, without the spare-descriptor
            // dance (which would take the one success for itself).
            Poll::Ready(Err(io::Error::from_raw_os_error(105)))
        }
    }

    struct NoReserve;
    impl Reserve for NoReserve {
        fn release(&mut self) {}
        fn restore(&mut self) {}
    }

    #[tokio::test(start_paused = true)]
    async fn successes_between_failures_are_not_recovery() {
        let start = Instant::now();
        let hour = Duration::from_secs(3600);
        let listener = Churning {
            failures: 0,
            succeed_next: false,
            until: start + hour,
        };
        let mut l = AcceptLoop::new(listener, NoReserve, "test");
        while start.elapsed() < hour {
            l.next().await;
        }
        let failures = l.listener.failures;
        assert!(
            (1750..=1850).contains(&failures),
            "the back-off kept growing to its cap: {failures} failures in an hour"
        );
        assert!(
            l.log_lines <= 361,
            "one line per 10 s window at most: {} lines",
            l.log_lines
        );
        assert_eq!(l.backoff, Some(BACKOFF_MAX), "not reset by a lone success");

        // Accepts that keep succeeding for RECOVERY_AFTER are recovery.
        let recovered_at = Instant::now() + RECOVERY_AFTER;
        while Instant::now() < recovered_at {
            l.next().await;
            tokio::time::advance(Duration::from_millis(500)).await;
        }
        l.next().await;
        assert_eq!(l.backoff, None, "sustained success resets the back-off");
    }

    #[tokio::test(start_paused = true)]
    async fn a_freed_descriptor_ends_the_back_off_early() {
        let start = Instant::now();
        let listener = Churning {
            failures: 0,
            succeed_next: false,
            until: start + Duration::from_secs(3600),
        };
        let mut l = AcceptLoop::new(listener, NoReserve, "test");
        let freed = Arc::new(Notify::new());
        l.wake_on(freed.clone());
        l.next().await; // fails, backs off; the next accept succeeds
        assert_eq!(start.elapsed(), BACKOFF_START);
        let waiting = tokio::spawn(async move {
            let t = Instant::now();
            l.next().await; // fails again, backs off; woken by the notify below
            t.elapsed()
        });
        tokio::time::advance(Duration::from_millis(100)).await;
        freed.notify_waiters();
        let took = waiting.await.expect("join");
        assert!(took < Duration::from_millis(500), "{took:?}");
    }

    #[test]
    fn classification() {
        assert_eq!(
            classify(&io::Error::from_raw_os_error(24)),
            ErrorClass::Resource { descriptors: true }
        );
        assert_eq!(
            classify(&io::Error::from_raw_os_error(105)),
            ErrorClass::Resource { descriptors: false }
        );
        assert_eq!(
            classify(&io::Error::from(io::ErrorKind::ConnectionAborted)),
            ErrorClass::Retry
        );
        assert_eq!(
            classify(&io::Error::from(io::ErrorKind::PermissionDenied)),
            ErrorClass::Other
        );
    }

    #[test]
    fn dedup_windows() {
        let mut d = LogDedup::default();
        let t = Instant::now();
        assert_eq!(d.record("EMFILE", t), LogAction::First);
        assert_eq!(
            d.record("EMFILE", t + Duration::from_secs(1)),
            LogAction::Suppressed
        );
        assert_eq!(
            d.record("ENOBUFS", t + Duration::from_secs(1)),
            LogAction::First,
            "kinds are separate"
        );
        assert_eq!(
            d.record("EMFILE", t + Duration::from_secs(2)),
            LogAction::Suppressed
        );
        assert_eq!(
            d.record("EMFILE", t + Duration::from_secs(11)),
            LogAction::Summary { suppressed: 2 }
        );
        assert_eq!(
            d.record("EMFILE", t + Duration::from_secs(22)),
            LogAction::First,
            "a quiet window starts over"
        );
    }
}
