//! Log files that logrotate can rotate: the file is written through a
//! bounded, non-blocking queue (a request task never waits on the disk;
//! when the disk stalls, lines are dropped and counted), and it can be
//! reopened by path (SIGUSR1, `POST /admin/reopen-logs`) after logrotate
//! has moved it away. stderr and stdout are written the same way. A
//! write that fails (a full disk, `ENOSPC`) is counted; what is queued is
//! written out at exit ([`flush_all`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use prometheus_client::metrics::counter::Counter;

use crate::sync::Locked;
use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};

/// Lines queued for one file before new ones are dropped.
const QUEUE_LINES: usize = 64 * 1024;

/// An append-only log file that can be reopened at the same path.
#[derive(Clone)]
pub(crate) struct LogFile {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl LogFile {
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        Ok(LogFile {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new(open(path)?)),
        })
    }

    /// Start writing to whatever is at the path now (a new file after a
    /// rotation).
    pub(crate) fn reopen(&self) -> io::Result<()> {
        let fresh = open(&self.path)?;
        *self.file.locked() = fresh;
        Ok(())
    }
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.locked().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.locked().flush()
    }
}

/// Writes that failed (the disk full, the file gone bad), over every log
/// writer: `weir_log_write_errors_total`. The writer thread drops what it
/// could not write; this says that it happened.
pub(crate) static WRITE_ERRORS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// A writer whose failures are counted in [`WRITE_ERRORS`].
struct Counted<W>(W);

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).inspect_err(|_| {
            WRITE_ERRORS.inc();
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().inspect_err(|_| {
            WRITE_ERRORS.inc();
        })
    }
}

struct Open {
    files: Vec<LogFile>,
    dropped: Vec<ErrorCounter>,
    /// Dropping one writes out its queue and stops its thread.
    guards: Vec<WorkerGuard>,
}

static OPEN: OnceLock<Mutex<Open>> = OnceLock::new();

fn open_files() -> &'static Mutex<Open> {
    OPEN.get_or_init(|| {
        Mutex::new(Open {
            files: Vec::new(),
            dropped: Vec::new(),
            guards: Vec::new(),
        })
    })
}

/// A non-blocking writer to `path`, registered for reopening.
pub(crate) fn writer(path: &Path) -> io::Result<NonBlocking> {
    let file = LogFile::open(path)?;
    let writer = queued(file.clone());
    open_files().locked().files.push(file);
    Ok(writer)
}

/// `out` behind a bounded, lossy queue and its own writer thread; its
/// dropped lines counted and its guard kept for [`flush_all`].
fn queued<W: Write + Send + 'static>(out: W) -> NonBlocking {
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(QUEUE_LINES)
        .finish(Counted(out));
    let mut open = open_files().locked();
    open.dropped.push(writer.error_counter());
    open.guards.push(guard);
    writer
}

/// Write out every line still queued, waiting (at most a second per
/// writer, the queue's own bound) for each writer thread to finish. At
/// exit: a line logged after it is lost.
pub(crate) fn flush_all() {
    let guards = std::mem::take(&mut open_files().locked().guards);
    drop(guards);
}

/// Reopen every log file (after logrotate moved them); the problems, if
/// any, one per file.
pub(crate) fn reopen_all() -> Vec<String> {
    let open = open_files().locked();
    open.files
        .iter()
        .filter_map(|f| {
            f.reopen()
                .err()
                .map(|e| format!("{}: {e}", f.path.display()))
        })
        .collect()
}

/// Log lines dropped because a file's queue was full (the disk stalled).
pub(crate) fn dropped_lines() -> u64 {
    let open = open_files().locked();
    open.dropped.iter().map(|c| c.dropped_lines() as u64).sum()
}

/// A non-blocking writer to stdout (the usage records' default sink),
/// lossy like the files' writers.
pub(crate) fn stdout_writer() -> NonBlocking {
    queued(io::stdout())
}

/// A non-blocking writer to stderr (the logs' default): a serving thread
/// never waits on a slow terminal or a full pipe.
pub(crate) fn stderr_writer() -> NonBlocking {
    queued(io::stderr())
}
