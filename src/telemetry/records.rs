//! The usage records' sink: one JSON object per line, to `log.usage_file`
//! or to stdout, written through the same bounded non-blocking queue as
//! the log files (a request never waits on the disk; when it stalls, lines
//! are dropped and counted in `weir_log_lines_dropped`), and reopened with
//! them (SIGUSR1, `POST /admin/reopen-logs`).

use std::io::Write;

use tracing_appender::non_blocking::NonBlocking;

use crate::config::LogSettings;

/// Where usage records go; off unless `log.usage_log` is set.
#[derive(Clone, Default)]
pub(crate) struct RecordSink(Option<NonBlocking>);

impl RecordSink {
    /// The sink `log` asks for.
    pub(crate) fn open(log: &LogSettings) -> std::io::Result<Self> {
        if !log.usage_log {
            return Ok(RecordSink(None));
        }
        Ok(RecordSink(Some(match &log.usage_file {
            Some(path) => super::logfile::writer(path)?,
            None => super::logfile::stdout_writer(),
        })))
    }

    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Write one record as one line (one write: never interleaved).
    pub(crate) fn write(&self, record: &serde_json::Value) {
        if let Some(w) = &self.0 {
            let mut line = record.to_string();
            line.push('\n');
            // The queue never blocks; a full one drops and counts the line.
            let _ = w.clone().write_all(line.as_bytes());
        }
    }
}
