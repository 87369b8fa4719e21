//! The system of record: runtime keys and usage rows, in an SQLite file
//! (docs/decisions/083).
//!
//! Nothing on the request path calls it: keys are served from memory
//! (`keys`), usage rows are queued and written in batches (`rows`). Every
//! call runs on the blocking pool, under the one connection's lock, and
//! answers a [`StoreError`] rather than panicking on anything the file
//! holds.

mod keys;
mod rows;
mod schema;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

pub(crate) use keys::{KeyChange, KeyRow};
pub(crate) use rows::UsageRows;
pub(crate) use usage::{Group, Report, ReportLine, UsageRow};

use crate::sync::Locked;

/// A store call that failed: what was asked and what the database said.
#[derive(Debug, thiserror::Error)]
#[error("database {path}: {what}")]
pub(crate) struct StoreError {
    path: String,
    what: String,
}

/// The database: one SQLite connection, shared.
#[derive(Clone)]
pub(crate) struct Store {
    conn: Arc<Mutex<Connection>>,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating it if needed) the database at `path` and bring its
    /// schema up to this binary's.
    pub(crate) async fn open(path: &Path) -> Result<Store, StoreError> {
        let owned = path.to_path_buf();
        let opened = tokio::task::spawn_blocking(move || open_blocking(&owned)).await;
        let conn = match opened {
            Ok(r) => r.map_err(|what| StoreError {
                path: path.display().to_string(),
                what,
            })?,
            Err(e) => {
                return Err(StoreError {
                    path: path.display().to_string(),
                    what: e.to_string(),
                });
            }
        };
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            path: Arc::new(path.to_path_buf()),
        })
    }

    /// Run `f` on the connection, on the blocking pool.
    async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = self.conn.clone();
        let fail = |what: String| StoreError {
            path: self.path.display().to_string(),
            what,
        };
        match tokio::task::spawn_blocking(move || f(&mut conn.locked())).await {
            Ok(r) => r.map_err(|e| fail(e.to_string())),
            Err(e) => Err(fail(e.to_string())),
        }
    }

    /// The number every change to the keys moves on.
    pub(crate) async fn version(&self) -> Result<i64, StoreError> {
        self.call(|c| c.query_row("SELECT version FROM changes WHERE id = 1", [], |r| r.get(0)))
            .await
    }
}

/// Open, set the pragmas, migrate.
fn open_blocking(path: &Path) -> Result<Connection, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(format!("its directory {} does not exist", dir.display()));
    }
    let mut conn = Connection::open(path).map_err(|e| e.to_string())?;
    // WAL: readers (a report) never block the usage writer; a lock held
    // by another process is waited for up to 5 s, not failed at once.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| e.to_string())?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| e.to_string())?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    migrate(&mut conn)?;
    Ok(conn)
}

/// Bring the schema to [`schema::STEPS`]' end; refuse a database a newer
/// weir made (its steps are unknown here).
fn migrate(conn: &mut Connection) -> Result<(), String> {
    let at: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    let known = schema::STEPS.len() as i64;
    if at > known {
        return Err(format!(
            "its schema is at step {at}, newer than this weir's {known}: run the weir that made it, or restore a backup made before it"
        ));
    }
    for (step, sql) in schema::STEPS.iter().enumerate().skip(at.max(0) as usize) {
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        tx.execute_batch(sql)
            .map_err(|e| format!("schema step {}: {e}", step + 1))?;
        tx.pragma_update(None, "user_version", (step + 1) as i64)
            .map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
