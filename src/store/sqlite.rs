//! The SQLite store: one connection to a file, shared under a lock, every
//! call on the blocking pool (never on a serving thread).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::types::{ToSqlOutput, Value};
use rusqlite::{Connection, OptionalExtension, params_from_iter};

use super::keys::{Cell, Cells, cells, columns, from_cells};
use super::schema::{Dialect, STEPS};
use super::teams::{self, TeamChange, TeamRow};
use super::usage::{self, PLACES};
use super::{KeyChange, KeyRow, Report, ReportLine, StoreError, UsageRow, unix_now};
use crate::sync::Locked;

const D: Dialect = Dialect::Sqlite;

/// One SQLite connection, shared.
#[derive(Clone)]
pub(crate) struct Sqlite {
    conn: Arc<Mutex<Connection>>,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for Sqlite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sqlite").field("path", &self.path).finish()
    }
}

impl rusqlite::ToSql for Cell {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Cell::Text(Some(s)) => ToSqlOutput::from(s.as_str()),
            Cell::Int(Some(i)) => ToSqlOutput::from(*i),
            Cell::Bytes(b) => ToSqlOutput::from(b.as_slice()),
            Cell::Text(None) | Cell::Int(None) => ToSqlOutput::Owned(Value::Null),
        })
    }
}

impl Cells for rusqlite::Row<'_> {
    type Error = rusqlite::Error;
    fn text(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.get(i)
    }
    fn int(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.get(i)
    }
    fn bytes(&self, i: usize) -> rusqlite::Result<Vec<u8>> {
        self.get(i)
    }
}

impl Sqlite {
    /// Open (creating it if needed) the database at `path` and bring its
    /// schema up to this binary's.
    pub(super) async fn open(path: &Path) -> Result<Sqlite, StoreError> {
        let owned = path.to_path_buf();
        let fail = |what: String| StoreError {
            at: path.display().to_string(),
            what,
        };
        let conn = match tokio::task::spawn_blocking(move || open_blocking(&owned)).await {
            Ok(r) => r.map_err(fail)?,
            Err(e) => return Err(fail(e.to_string())),
        };
        Ok(Sqlite {
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
            at: self.path.display().to_string(),
            what,
        };
        match tokio::task::spawn_blocking(move || f(&mut conn.locked())).await {
            Ok(r) => r.map_err(|e| fail(e.to_string())),
            Err(e) => Err(fail(e.to_string())),
        }
    }

    pub(super) async fn version(&self) -> Result<i64, StoreError> {
        self.call(|c| c.query_row("SELECT version FROM changes WHERE id = 1", [], |r| r.get(0)))
            .await
    }

    pub(super) async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        self.call(|c| {
            let mut q = c.prepare(&format!(
                "SELECT {} FROM keys ORDER BY created_at, id",
                columns()
            ))?;
            q.query_map([], |r| from_cells(r))?.collect()
        })
        .await
    }

    pub(super) async fn key(&self, id: &str) -> Result<Option<KeyRow>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            c.query_row(
                &format!("SELECT {} FROM keys WHERE id = ?1", columns()),
                [id],
                |r| from_cells(r),
            )
            .optional()
        })
        .await
    }

    pub(super) async fn insert_key(&self, key: KeyRow) -> Result<(), StoreError> {
        self.call(move |c| {
            let tx = writing(c)?;
            write(&tx, &key)?;
            bump(&tx)?;
            tx.commit()
        })
        .await
    }

    pub(super) async fn change_key(
        &self,
        id: &str,
        change: KeyChange,
        secret: Option<(Vec<u8>, String)>,
    ) -> Result<Option<KeyRow>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            let tx = writing(c)?;
            let found = tx
                .query_row(
                    &format!(
                        "SELECT {} FROM keys WHERE id = ?1 AND revoked_at IS NULL",
                        columns()
                    ),
                    [&id],
                    |r| from_cells(r),
                )
                .optional()?;
            let Some(mut row) = found else {
                return Ok(None);
            };
            super::changed(&mut row, change, secret);
            write(&tx, &row)?;
            bump(&tx)?;
            tx.commit()?;
            Ok(Some(row))
        })
        .await
    }

    pub(super) async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            let tx = writing(c)?;
            let now = unix_now();
            let n = tx.execute(
                "UPDATE keys SET revoked_at = ?1, updated_at = ?1 WHERE id = ?2 AND revoked_at IS NULL",
                rusqlite::params![now, id],
            )?;
            bump(&tx)?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    pub(super) async fn insert_usage(&self, rows: Vec<UsageRow>) -> Result<(), StoreError> {
        self.call(move |c| {
            let tx = writing(c)?;
            {
                let params = (1..=PLACES.len()).map(|n| D.param(n)).collect::<Vec<_>>();
                let mut q = tx.prepare_cached(&format!(
                    "INSERT INTO usage ({}) VALUES ({})",
                    usage::COLUMNS,
                    params.join(", ")
                ))?;
                for r in &rows {
                    let (ints, texts) = usage::cells(r);
                    let values = PLACES.iter().map(|&(int, i)| match int {
                        true => Cell::Int(ints.get(i).copied()),
                        false => Cell::Text(texts.get(i).cloned().flatten()),
                    });
                    q.execute(params_from_iter(values))?;
                }
            }
            tx.commit()
        })
        .await
    }

    pub(super) async fn used_since(
        &self,
        by: usage::By,
        key_id: &str,
        from_ms: i64,
    ) -> Result<(u64, u64, u64), StoreError> {
        let key_id = key_id.to_string();
        self.call(move |c| {
            c.query_row(
                &usage::used_since_sql(D, by),
                rusqlite::params![key_id, from_ms],
                |r| Ok(usage::used([r.get(0)?, r.get(1)?, r.get(2)?])),
            )
        })
        .await
    }

    pub(super) async fn prune_usage(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.call(move |c| c.execute("DELETE FROM usage WHERE at_ms < ?1", [before_ms]))
            .await
            .map(|n| n as u64)
    }

    pub(super) async fn report(&self, report: Report) -> Result<Vec<ReportLine>, StoreError> {
        self.call(move |c| {
            let mut q = c.prepare(&usage::report_sql(&report, D))?;
            let n = report.groups.len();
            let lines = q.query_map(params_from_iter([report.from_ms, report.to_ms]), |r| {
                let values = (0..n).map(|i| r.get(i)).collect::<rusqlite::Result<_>>()?;
                let mut sums = [None; 7];
                for (i, s) in sums.iter_mut().enumerate() {
                    *s = r.get(n + i)?;
                }
                Ok(usage::line(&report, values, sums))
            })?;
            let lines: rusqlite::Result<Vec<Option<ReportLine>>> = lines.collect();
            Ok(lines?.into_iter().flatten().collect())
        })
        .await
    }
}

impl Sqlite {
    pub(super) async fn teams(&self) -> Result<Vec<TeamRow>, StoreError> {
        self.call(|c| {
            let mut q = c.prepare(&format!(
                "SELECT {} FROM teams ORDER BY name",
                teams::COLUMNS
            ))?;
            q.query_map([], |r| teams::from_cells(r))?.collect()
        })
        .await
    }

    /// Write a team (new, or as changed by `change`) in one transaction
    /// that moves the change number: `None` when `change` found no team,
    /// or `create` found one.
    pub(super) async fn put_team(
        &self,
        name: &str,
        create: Option<TeamRow>,
        change: TeamChange,
    ) -> Result<Option<TeamRow>, StoreError> {
        let name = name.to_string();
        self.call(move |c| {
            let tx = writing(c)?;
            let found = tx
                .query_row(
                    &format!("SELECT {} FROM teams WHERE name = ?1", teams::COLUMNS),
                    [&name],
                    |r| teams::from_cells(r),
                )
                .optional()?;
            let Some(row) = super::team_written(found, create, change) else {
                return Ok(None);
            };
            tx.execute(&teams::upsert_sql(D), params_from_iter(teams::cells(&row)))?;
            bump(&tx)?;
            tx.commit()?;
            Ok(Some(row))
        })
        .await
    }

    pub(super) async fn delete_team(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_string();
        self.call(move |c| {
            let tx = writing(c)?;
            let n = tx.execute("DELETE FROM teams WHERE name = ?1", [name])?;
            bump(&tx)?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }
}

/// A transaction that writes, begun `IMMEDIATE`: it takes the write
/// lock first (waiting for it under the busy timeout). A deferred one
/// that reads and then writes fails at once with `SQLITE_BUSY` when
/// another process (an instance sharing the file) wrote in between, and
/// the busy timeout does not apply to that.
fn writing(c: &mut Connection) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
}

fn bump(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute("UPDATE changes SET version = version + 1 WHERE id = 1", [])
        .map(|_| ())
}

fn write(tx: &rusqlite::Transaction<'_>, k: &KeyRow) -> rusqlite::Result<()> {
    let cells = cells(k);
    let params = (1..=cells.len()).map(|n| D.param(n)).collect::<Vec<_>>();
    tx.execute(
        &format!(
            "INSERT OR REPLACE INTO keys ({}) VALUES ({})",
            columns(),
            params.join(", ")
        ),
        params_from_iter(cells),
    )
    .map(|_| ())
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

/// Bring the schema to [`STEPS`]' end; refuse a database a newer weir
/// made (its steps are unknown here).
fn migrate(conn: &mut Connection) -> Result<(), String> {
    let at: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    super::check_step(at)?;
    for (step, sql) in STEPS.iter().enumerate().skip(at.max(0) as usize) {
        let tx = writing(conn).map_err(|e| e.to_string())?;
        tx.execute_batch(&D.step(sql))
            .map_err(|e| format!("schema step {}: {e}", step + 1))?;
        tx.pragma_update(None, "user_version", (step + 1) as i64)
            .map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())?;
    }
    Ok(())
}
