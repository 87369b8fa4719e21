//! The connection to Redis, and the work beside the request path: the
//! heartbeat that counts the fleet, lease renewal, and releases.
//!
//! One supervisor task per process, on the main runtime. It connects (a
//! redis-rs multiplexed connection: every worker's requests are pipelined
//! on it), loads the scripts, writes the heartbeat, renews the leases held
//! and sends pending releases — only then is Redis "up" and asked on the
//! request path. It then beats every second, renews every third of the
//! lease TTL and sends releases as they come. Any failure, here or on the
//! request path, drops the connection: "down", logged once, and the
//! supervisor reconnects with a doubling back-off (50 ms to 2 s, jittered).
//!
//! The same loop owns the fleet's holds ([`super::holds`]): each
//! connection comes with a subscriber connection on the holds' channel
//! (opened, then the current holds read, before Redis is "up"), whose
//! announcements it applies as they arrive and whose end drops the
//! connection like any failure; and it sends the holds learnt here from
//! their queue.

use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::{MultiplexedConnection, PubSubStream};
use redis::{AsyncConnectionConfig, ConnectionInfo, IntoConnectionInfo};

use super::holds::{self, Outbox};
use super::{BACKGROUND_TIMEOUT, DOWN, Inner, RENEW_CHUNK, UP};
use crate::sync::Locked;

/// How often this instance says it is alive.
pub(super) const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long an instance counts as live after its last heartbeat.
pub(super) const INSTANCE_TTL: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

type Failed = String;

pub(super) async fn supervise(weak: Weak<Inner>, mut outbox: Outbox) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let kick = inner.kick.clone();
        match connect(&inner).await {
            Ok((conn, announcements)) => {
                backoff = BACKOFF_MIN;
                let conn = Arc::new(conn);
                inner.conn.store(Some(conn.clone()));
                inner.set_state(UP, "");
                drop(inner);
                let why = serve(&weak, &kick, &conn, announcements, &mut outbox).await;
                match weak.upgrade() {
                    Some(inner) => inner.down(&conn, &why),
                    None => return,
                }
            }
            Err(why) => {
                inner.set_state(DOWN, &why);
                drop(inner);
                let jitter = fastrand::u64(0..=backoff.as_millis() as u64 / 2);
                tokio::time::sleep(backoff + Duration::from_millis(jitter)).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// A connection ready for the request path: scripts loaded, this instance
/// counted, its leases renewed (re-created if Redis lost them), pending
/// releases sent; and the fleet's holds subscribed to, then read.
async fn connect(inner: &Inner) -> Result<(MultiplexedConnection, Option<PubSubStream>), Failed> {
    let mut info = inner
        .url
        .as_str()
        .into_connection_info()
        .map_err(|e| e.to_string())?;
    if let Some(password) = &inner.password {
        let settings = info.redis_settings().clone().set_password(&password.0);
        info = info.set_redis_settings(settings);
    }
    let client = client(inner, info)?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(BACKGROUND_TIMEOUT))
        .set_response_timeout(None);
    let mut conn = bounded(client.get_multiplexed_async_connection_with_config(&config)).await?;
    for script in inner.scripts.all() {
        bounded(script.load_async(&mut conn)).await?;
    }
    heartbeat(inner, &mut conn).await?;
    renew(inner, &mut conn).await?;
    release(inner, &mut conn).await?;
    super::budgets::renew(inner, &mut conn).await?;
    super::budgets::flush(inner, &mut conn).await?;
    // Subscribed before the read: a hold is either in the keys read or
    // announced after.
    let announcements = holds::subscribe(&client, &inner.prefix).await?;
    inner.holds.read_all(&mut conn, &inner.prefix).await?;
    Ok((conn, announcements))
}

/// The client for `info`; over TLS, trusting what weir's other TLS
/// clients trust: the web PKI roots, and `ca_file`'s.
fn client(inner: &Inner, info: ConnectionInfo) -> Result<redis::Client, Failed> {
    if !inner.url.starts_with("rediss://") {
        return redis::Client::open(info).map_err(|e| e.to_string());
    }
    // redis-rs builds its TLS config from the process's default provider;
    // weir's is the one its other TLS clients use.
    let _ = Arc::unwrap_or_clone(crate::pki::provider()).install_default();
    let client = match &inner.roots {
        // Given roots replace the client's own (which would be the host's
        // bundle), so they are all of them: the web PKI's and `ca_file`'s.
        Ok(pem) => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            },
        ),
        Err(why) => return Err(format!("ca_file: {why}")),
    };
    client.map_err(|e| e.to_string())
}

/// Keep the connection's background work going until it fails (or the
/// request path drops it); returns why.
async fn serve(
    weak: &Weak<Inner>,
    kick: &tokio::sync::Notify,
    conn: &Arc<MultiplexedConnection>,
    mut announcements: Option<PubSubStream>,
    outbox: &mut Outbox,
) -> Failed {
    let Some(lease_ttl) = weak.upgrade().map(|i| i.lease_ttl) else {
        return "stopped".into();
    };
    let start = tokio::time::Instant::now();
    let mut beat = tokio::time::interval_at(start + HEARTBEAT, HEARTBEAT);
    let mut renewal = tokio::time::interval_at(start + lease_ttl / 3, lease_ttl / 3);
    for timer in [&mut beat, &mut renewal] {
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    let mut c = (**conn).clone();
    loop {
        enum Work {
            Beat,
            Renew,
            Release,
            Publish(holds::Outgoing),
        }
        let work = tokio::select! {
            _ = beat.tick() => Work::Beat,
            _ = renewal.tick() => Work::Renew,
            _ = kick.notified() => Work::Release,
            Some(hold) = outbox.recv() => Work::Publish(hold),
            message = holds::next(&mut announcements) => match (message, weak.upgrade()) {
                (Some(m), Some(inner)) => {
                    inner.holds.announced(m.get_payload_bytes());
                    continue;
                }
                (None, _) => return "the subscription to holds ended".into(),
                (_, None) => return "stopped".into(),
            },
        };
        let Some(inner) = weak.upgrade() else {
            return "stopped".into();
        };
        let current = inner.conn.load();
        if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            return "a request found Redis silent".into();
        }
        drop(current);
        let done = match work {
            Work::Beat => heartbeat(&inner, &mut c).await,
            Work::Renew => match renew(&inner, &mut c).await {
                Ok(()) => super::budgets::renew(&inner, &mut c).await,
                failed => failed,
            },
            Work::Release => match release(&inner, &mut c).await {
                Ok(()) => super::budgets::flush(&inner, &mut c).await,
                failed => failed,
            },
            Work::Publish(hold) => inner.holds.send(&mut c, &inner.prefix, hold).await,
        };
        if let Err(why) = done {
            return why;
        }
    }
}

/// This instance is alive; learn how many are.
async fn heartbeat(inner: &Inner, conn: &mut MultiplexedConnection) -> Result<(), Failed> {
    let n: u32 = bounded(
        inner
            .scripts
            .heartbeat
            .key(format!("{}instances", inner.prefix))
            .arg(&inner.instance)
            .arg(INSTANCE_TTL.as_millis() as u64)
            .invoke_async(conn),
    )
    .await?;
    let n = n.max(1);
    let was = inner
        .instances
        .swap(n, std::sync::atomic::Ordering::Relaxed);
    inner.metrics.instances.set(i64::from(n));
    if was != n && inner.state.load(std::sync::atomic::Ordering::Relaxed) == UP {
        tracing::info!(target: "weir::cluster", instances = n, "cluster: the fleet has {n} live instances");
    }
    Ok(())
}

/// Every lease held gets a fresh expiry.
async fn renew(inner: &Inner, conn: &mut MultiplexedConnection) -> Result<(), Failed> {
    let held = inner.leases.locked().all();
    let ttl = inner.lease_ttl.as_millis() as u64;
    for chunk in held.chunks(RENEW_CHUNK) {
        let mut invocation = inner.scripts.renew.prepare_invoke();
        invocation.arg(ttl);
        for (key, id) in chunk {
            invocation.key(&**key).arg(inner.lease_name(*id));
        }
        bounded(invocation.invoke_async::<i64>(conn)).await?;
    }
    Ok(())
}

/// Remove the leases given back since the last call, in one pipeline.
async fn release(inner: &Inner, conn: &mut MultiplexedConnection) -> Result<(), Failed> {
    let released = inner.leases.locked().take_released();
    if released.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for (key, id) in &released {
        pipe.zrem(&**key, inner.lease_name(*id)).ignore();
    }
    match tokio::time::timeout(BACKGROUND_TIMEOUT, pipe.query_async::<()>(conn)).await {
        Ok(Ok(())) => Ok(()),
        // Redis ran every command and refused one (a key of the wrong
        // type): the others are done, and that one cannot be.
        Ok(Err(e)) if super::answered(&e) => Ok(()),
        failed => {
            inner.leases.locked().requeue(released);
            Err(match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "no answer to the releases".into(),
            })
        }
    }
}

/// A Redis call off the request path, under [`BACKGROUND_TIMEOUT`].
async fn bounded<T>(
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, Failed> {
    match tokio::time::timeout(BACKGROUND_TIMEOUT, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "no answer within {}",
            humantime::format_duration(BACKGROUND_TIMEOUT)
        )),
    }
}
