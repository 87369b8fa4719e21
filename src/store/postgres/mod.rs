//! The PostgreSQL store: one connection, kept by a task that makes it
//! again with back-off when it is lost, and that `LISTEN`s on it for key
//! changes (docs/decisions/087, 088).
//!
//! A call never waits for a connection: while there is none it fails at
//! once (the keys in memory keep serving, usage rows wait in their queue).
//! Calls take the connection in turn (a transaction needs it to itself),
//! each within [`CALL_TIMEOUT`]; one that runs over drops the connection,
//! so a server that went silent is noticed and reconnected.

mod queries;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard, Notify};
use tokio_postgres::{AsyncMessage, Client};

use super::schema::{Dialect, STEPS};
use super::{StoreError, check_step};
use crate::config::PostgresUrl;

/// The fallback read of the change number: notifications are what make a
/// change reach every instance within a second; this catches one missed.
pub(crate) const POLL: Duration = Duration::from_secs(2);
/// The channel key changes are notified on.
const CHANNEL: &str = "weir_keys";
/// The longest one call may take before its connection is dropped.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Reconnection waits this long at first, doubling up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// The advisory lock migrations run under (any fixed number; "weir" in ASCII).
const MIGRATION_LOCK: i64 = 0x7765_6972;

/// The connection as the calls share it.
struct Shared {
    config: tokio_postgres::Config,
    tls: tls::Tls,
    /// Where, for messages (never the password).
    shown: String,
    client: Mutex<Option<Client>>,
    /// The task driving the connection, to end it when a call hangs.
    driver: std::sync::Mutex<Option<tokio::task::AbortHandle>>,
    /// Woken on a notification, and when the connection is lost or made.
    changed: Notify,
}

/// A PostgreSQL database.
#[derive(Clone)]
pub(crate) struct Postgres(Arc<Shared>);

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("at", &self.0.shown)
            .finish()
    }
}

/// A driver error as text: the server's message when it sent one, else
/// the error with its causes (a TLS handshake's says what the certificate
/// lacks).
fn text(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        // The driver's own text sometimes ends with its cause already.
        if !text.ends_with(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

impl Postgres {
    /// Connect (failing when the server does not answer: there is nothing
    /// to serve keys from yet), migrate under the advisory lock, and start
    /// the task that keeps the connection.
    pub(super) async fn open(url: &PostgresUrl) -> Result<Postgres, StoreError> {
        let mut config: tokio_postgres::Config = url.url.parse().map_err(|e| StoreError {
            at: "postgres".into(),
            what: format!("the URL: {e}"),
        })?;
        let (tls, mode) = tls::Tls::new(url).map_err(|e| StoreError {
            at: "postgres".into(),
            what: format!("TLS (`sslrootcert`): {e}"),
        })?;
        config
            .ssl_mode(mode)
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .application_name("weir");
        let shown = shown(&config);
        let shared = Arc::new(Shared {
            config,
            tls,
            shown,
            client: Mutex::new(None),
            driver: std::sync::Mutex::new(None),
            changed: Notify::new(),
        });
        let db = Postgres(shared.clone());
        let (client, driver) = db.connect().await.map_err(|e| db.fail(&e))?;
        migrate(&client).await.map_err(|what| db.error(what))?;
        db.serve(client, &driver).await;
        tokio::spawn(keep(Arc::downgrade(&shared), Some(driver)));
        Ok(db)
    }

    fn error(&self, what: String) -> StoreError {
        StoreError {
            at: self.0.shown.clone(),
            what,
        }
    }

    fn fail(&self, e: &tokio_postgres::Error) -> StoreError {
        self.error(text(e))
    }

    /// A new connection, its driver task started and `LISTEN` sent.
    async fn connect(
        &self,
    ) -> Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error> {
        let (client, mut connection) = self.0.config.connect(self.0.tls.clone()).await?;
        let weak = Arc::downgrade(&self.0);
        let driver = tokio::spawn(async move {
            // Notifications (and notices) come through the connection's
            // stream; it ends when the connection does.
            while let Some(m) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match (m, weak.upgrade()) {
                    (Ok(AsyncMessage::Notification(_)), Some(shared)) => {
                        shared.changed.notify_one();
                    }
                    (Ok(_), _) => {}
                    (Err(e), _) => {
                        tracing::debug!(error = %e, "database: the connection ended");
                        break;
                    }
                }
            }
        });
        if let Err(e) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
            driver.abort();
            return Err(e);
        }
        Ok((client, driver))
    }

    /// Let the calls use `client`, whose connection `driver` drives.
    async fn serve(&self, client: Client, driver: &tokio::task::JoinHandle<()>) {
        *self.0.client.lock().await = Some(client);
        if let Ok(mut d) = self.0.driver.lock() {
            *d = Some(driver.abort_handle());
        }
    }

    /// Wait for a notification, or the connection lost or made again.
    pub(super) async fn changed(&self) {
        self.0.changed.notified().await;
    }

    /// Run `call` with the connection to itself, within [`CALL_TIMEOUT`];
    /// at once an error when there is no connection.
    async fn with<T, F>(&self, call: F) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&mut Client) -> Result<T, tokio_postgres::Error>,
    {
        let run = async {
            let guard = self.0.client.lock().await;
            let Ok(mut client): Result<MappedMutexGuard<'_, Client>, _> =
                MutexGuard::try_map(guard, Option::as_mut)
            else {
                return Err(self.error("not connected (reconnecting)".into()));
            };
            call(&mut client).await.map_err(|e| self.fail(&e))
        };
        match tokio::time::timeout(CALL_TIMEOUT, run).await {
            Ok(r) => r,
            Err(_) => {
                // A silent server: end the connection; `keep` makes another.
                if let Some(driver) = self.0.driver.lock().ok().and_then(|mut d| d.take()) {
                    driver.abort();
                }
                Err(self.error(format!(
                    "no answer within {}s; reconnecting",
                    CALL_TIMEOUT.as_secs()
                )))
            }
        }
    }
}

/// Host, port and database of `config`, for messages.
fn shown(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{host}:{port}/{db}")
}

/// Keep a connection for as long as the store is held: serve it until it
/// ends, then make another, waiting longer after each failure. `first`
/// drives the connection [`Postgres::open`] made and already serves.
async fn keep(shared: std::sync::Weak<Shared>, mut first: Option<tokio::task::JoinHandle<()>>) {
    let mut pause = FIRST_PAUSE;
    loop {
        let Some(db) = shared.upgrade().map(Postgres) else {
            return;
        };
        let driver = match first.take() {
            Some(driver) => Ok(driver),
            None => match db.connect().await {
                Ok((client, driver)) => {
                    db.serve(client, &driver).await;
                    // Read the keys now: changes made while it was away
                    // were notified to no one.
                    db.0.changed.notify_one();
                    Ok(driver)
                }
                Err(e) => Err(e),
            },
        };
        drop(db);
        match driver {
            Ok(driver) => {
                pause = FIRST_PAUSE;
                let _ = driver.await;
                let Some(db) = shared.upgrade().map(Postgres) else {
                    return;
                };
                *db.0.client.lock().await = None;
                db.0.changed.notify_one();
            }
            Err(e) => tracing::debug!(error = %text(&e), "database: reconnecting failed"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// Bring the schema to [`STEPS`]' end, under an advisory lock so that
/// instances starting together take turns (the second finds it done).
async fn migrate(client: &Client) -> Result<(), String> {
    let e = |e: tokio_postgres::Error| text(&e);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(e)?;
    let result = steps(client).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(e);
    result.and(unlocked.map(|_| ()))
}

async fn steps(client: &Client) -> Result<(), String> {
    let e = |e: tokio_postgres::Error| text(&e);
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS weir_schema (id BIGINT PRIMARY KEY CHECK (id = 1), step BIGINT NOT NULL);
             INSERT INTO weir_schema (id, step) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;",
        )
        .await
        .map_err(e)?;
    let at: i64 = client
        .query_one("SELECT step FROM weir_schema WHERE id = 1", &[])
        .await
        .map_err(e)?
        .get(0);
    check_step(at)?;
    for (step, sql) in STEPS.iter().enumerate().skip(at.max(0) as usize) {
        let n = (step + 1) as i64;
        let sql = format!(
            "BEGIN; {}; UPDATE weir_schema SET step = {n} WHERE id = 1; COMMIT;",
            Dialect::Postgres.step(sql)
        );
        if let Err(err) = client.batch_execute(&sql).await {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(format!("schema step {n}: {}", text(&err)));
        }
    }
    Ok(())
}
