//! The store's calls in PostgreSQL's SQL. A key change bumps the change
//! number and `NOTIFY`s in the same transaction, so every instance hears
//! of it exactly when it is committed.

use bytes::BytesMut;
use tokio_postgres::Client;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::super::keys::{COLUMNS, Cell, Cells, cells, columns, from_cells};
use super::super::schema::Dialect;
use super::super::teams::{self, TeamChange, TeamRow};
use super::super::usage::{self, PLACES};
use super::super::{KeyChange, KeyRow, Report, ReportLine, StoreError, UsageRow, unix_now};
use super::{CHANNEL, Postgres};

const D: Dialect = Dialect::Postgres;

impl ToSql for Cell {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Cell::Text(s) => s.to_sql(ty, out),
            Cell::Int(i) => i.to_sql(ty, out),
            Cell::Bytes(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <String as ToSql>::accepts(ty)
            || <i64 as ToSql>::accepts(ty)
            || <Vec<u8> as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

impl Cells for tokio_postgres::Row {
    type Error = tokio_postgres::Error;
    fn text(&self, i: usize) -> Result<Option<String>, Self::Error> {
        self.try_get(i)
    }
    fn int(&self, i: usize) -> Result<Option<i64>, Self::Error> {
        self.try_get(i)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>, Self::Error> {
        self.try_get(i)
    }
}

/// Bump the change number and tell every listener, in `tx`.
async fn bump(tx: &tokio_postgres::Transaction<'_>) -> Result<(), tokio_postgres::Error> {
    tx.execute(
        &format!(
            "WITH v AS (UPDATE changes SET version = version + 1 WHERE id = 1 RETURNING version) \
             SELECT pg_notify('{CHANNEL}', version::text) FROM v"
        ),
        &[],
    )
    .await
    .map(|_| ())
}

/// Insert or replace `k`, in `tx`.
async fn write(
    tx: &tokio_postgres::Transaction<'_>,
    k: &KeyRow,
) -> Result<(), tokio_postgres::Error> {
    let cells = cells(k);
    let params: Vec<String> = (1..=cells.len()).map(|n| D.param(n)).collect();
    let set: Vec<String> = COLUMNS
        .iter()
        .skip(1)
        .map(|c| format!("{c} = EXCLUDED.{c}"))
        .collect();
    let values: Vec<&(dyn ToSql + Sync)> = cells.iter().map(|c| c as &(dyn ToSql + Sync)).collect();
    tx.execute(
        &format!(
            "INSERT INTO keys ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}",
            columns(),
            params.join(", "),
            set.join(", ")
        ),
        &values,
    )
    .await
    .map(|_| ())
}

impl Postgres {
    pub(in super::super) async fn version(&self) -> Result<i64, StoreError> {
        self.with(async |c: &mut Client| {
            c.query_one("SELECT version FROM changes WHERE id = 1", &[])
                .await?
                .try_get(0)
        })
        .await
    }

    pub(in super::super) async fn keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        self.with(async |c: &mut Client| {
            let sql = format!("SELECT {} FROM keys ORDER BY created_at, id", columns());
            c.query(&sql, &[]).await?.iter().map(from_cells).collect()
        })
        .await
    }

    pub(in super::super) async fn key(&self, id: &str) -> Result<Option<KeyRow>, StoreError> {
        self.with(async |c: &mut Client| {
            let sql = format!("SELECT {} FROM keys WHERE id = $1", columns());
            c.query_opt(&sql, &[&id])
                .await?
                .as_ref()
                .map(from_cells)
                .transpose()
        })
        .await
    }

    pub(in super::super) async fn insert_key(&self, key: KeyRow) -> Result<(), StoreError> {
        self.with(async |c: &mut Client| {
            let tx = c.transaction().await?;
            write(&tx, &key).await?;
            bump(&tx).await?;
            tx.commit().await
        })
        .await
    }

    pub(in super::super) async fn change_key(
        &self,
        id: &str,
        change: KeyChange,
        secret: Option<(Vec<u8>, String)>,
    ) -> Result<Option<KeyRow>, StoreError> {
        self.with(async |c: &mut Client| {
            let tx = c.transaction().await?;
            let sql = format!(
                "SELECT {} FROM keys WHERE id = $1 AND revoked_at IS NULL FOR UPDATE",
                columns()
            );
            let Some(found) = tx.query_opt(&sql, &[&id]).await? else {
                return Ok(None);
            };
            let mut row = from_cells(&found)?;
            super::super::changed(&mut row, change, secret);
            write(&tx, &row).await?;
            bump(&tx).await?;
            tx.commit().await?;
            Ok(Some(row))
        })
        .await
    }

    pub(in super::super) async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        self.with(async |c: &mut Client| {
            let tx = c.transaction().await?;
            let n = tx
                .execute(
                    "UPDATE keys SET revoked_at = $1, updated_at = $1 WHERE id = $2 AND revoked_at IS NULL",
                    &[&unix_now(), &id],
                )
                .await?;
            bump(&tx).await?;
            tx.commit().await?;
            Ok(n > 0)
        })
        .await
    }

    pub(in super::super) async fn teams(&self) -> Result<Vec<TeamRow>, StoreError> {
        self.with(async |c: &mut Client| {
            let sql = format!("SELECT {} FROM teams ORDER BY name", teams::COLUMNS);
            c.query(&sql, &[])
                .await?
                .iter()
                .map(teams::from_cells)
                .collect()
        })
        .await
    }

    pub(in super::super) async fn put_team(
        &self,
        name: &str,
        create: Option<TeamRow>,
        change: TeamChange,
    ) -> Result<Option<TeamRow>, StoreError> {
        self.with(async |c: &mut Client| {
            let tx = c.transaction().await?;
            let sql = format!(
                "SELECT {} FROM teams WHERE name = $1 FOR UPDATE",
                teams::COLUMNS
            );
            let found = match tx.query_opt(&sql, &[&name]).await? {
                Some(r) => Some(teams::from_cells(&r)?),
                None => None,
            };
            let Some(row) = super::super::team_written(found, create, change) else {
                return Ok(None);
            };
            let cells = teams::cells(&row);
            let values: Vec<&(dyn ToSql + Sync)> =
                cells.iter().map(|c| c as &(dyn ToSql + Sync)).collect();
            tx.execute(&teams::upsert_sql(D), &values).await?;
            bump(&tx).await?;
            tx.commit().await?;
            Ok(Some(row))
        })
        .await
    }

    pub(in super::super) async fn delete_team(&self, name: &str) -> Result<bool, StoreError> {
        self.with(async |c: &mut Client| {
            let tx = c.transaction().await?;
            let n = tx
                .execute("DELETE FROM teams WHERE name = $1", &[&name])
                .await?;
            bump(&tx).await?;
            tx.commit().await?;
            Ok(n > 0)
        })
        .await
    }

    /// One statement for the whole batch: each column as an array,
    /// `UNNEST`ed back into rows.
    pub(in super::super) async fn insert_usage(
        &self,
        rows: Vec<UsageRow>,
    ) -> Result<(), StoreError> {
        let mut ints: [Vec<i64>; 8] = Default::default();
        let mut texts: [Vec<Option<String>>; 12] = Default::default();
        for r in &rows {
            let (i, t) = usage::cells(r);
            for (column, v) in ints.iter_mut().zip(i) {
                column.push(v);
            }
            for (column, v) in texts.iter_mut().zip(t) {
                column.push(v);
            }
        }
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(PLACES.len());
        let mut casts = Vec::with_capacity(PLACES.len());
        for (n, &(int, i)) in PLACES.iter().enumerate() {
            let (param, cast): (Option<&(dyn ToSql + Sync)>, _) = match int {
                true => (ints.get(i).map(|v| v as _), "BIGINT[]"),
                false => (texts.get(i).map(|v| v as _), "TEXT[]"),
            };
            params.extend(param);
            casts.push(format!("${}::{cast}", n + 1));
        }
        let sql = format!(
            "INSERT INTO usage ({}) SELECT * FROM UNNEST({})",
            usage::COLUMNS,
            casts.join(", ")
        );
        self.with(async |c: &mut Client| c.execute(&sql, &params).await.map(|_| ()))
            .await
    }

    pub(in super::super) async fn used_since(
        &self,
        by: usage::By,
        key_id: &str,
        from_ms: i64,
    ) -> Result<(u64, u64, u64), StoreError> {
        self.with(async |c: &mut Client| {
            let r = c
                .query_one(&usage::used_since_sql(D, by), &[&key_id, &from_ms])
                .await?;
            Ok(usage::used([r.try_get(0)?, r.try_get(1)?, r.try_get(2)?]))
        })
        .await
    }

    pub(in super::super) async fn prune_usage(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.with(async |c: &mut Client| {
            c.execute("DELETE FROM usage WHERE at_ms < $1", &[&before_ms])
                .await
        })
        .await
    }

    pub(in super::super) async fn report(
        &self,
        report: Report,
    ) -> Result<Vec<ReportLine>, StoreError> {
        self.with(async |c: &mut Client| {
            let rows = c
                .query(
                    &usage::report_sql(&report, D),
                    &[&report.from_ms, &report.to_ms],
                )
                .await?;
            let n = report.groups.len();
            let mut lines = Vec::with_capacity(rows.len());
            for r in &rows {
                let values = (0..n).map(|i| r.try_get(i)).collect::<Result<_, _>>()?;
                let mut sums = [None; 7];
                for (i, s) in sums.iter_mut().enumerate() {
                    *s = r.try_get(n + i)?;
                }
                lines.extend(usage::line(&report, values, sums));
            }
            Ok(lines)
        })
        .await
    }
}
