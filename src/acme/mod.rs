//! Automatic HTTPS: certificates obtained and renewed over ACME (RFC 8555)
//! for TLS listeners, and the challenge answers the CA checks.
//!
//! A leaf beside the data path: it publishes into [`Issued`] (read by a TLS
//! listener's certificate resolver on every handshake) and [`Challenges`]
//! (read by the resolver for tls-alpn-01 and by the lifecycle for http-01)
//! and imports neither. A [`Manager`] per TLS listener runs one task per
//! name that keeps the name certified:
//!
//! 1. load the stored certificate; if it covers the name and has not
//!    expired, serve it at once;
//! 2. sleep until renewal is due (two thirds of the lifetime with jitter,
//!    or inside the CA's ARI window when it offers one);
//! 3. order, answer the challenge, finalize with a fresh key, store
//!    atomically, and swap the new certificate in (connections already
//!    established keep theirs);
//! 4. on failure, log the CA's problem once, count it, and back off
//!    (doubling from `retry_base`, at most 6 hours) while the old
//!    certificate keeps being served.
//!
//! Nothing here blocks start-up: listeners serve from the first moment,
//! and a name without a certificate yet fails its handshake.
//!
//! With `[cluster]` the keeper is one of a fleet ([`shared`]): step 1 also
//! reads Redis (the later-expiring certificate wins, on both sides), step
//! 3 runs only under the name's issuance lock (the other instances wait
//! for the holder's certificate), and every instance answers the
//! challenges of every instance's orders.

mod answers;
mod ca;
mod order;
mod schedule;
mod shared;
mod store;
mod trust;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use instant_acme::CertificateIdentifier;

pub use answers::Challenges;
pub(crate) use answers::{ACME_TLS_ALPN, Issued};

use crate::cluster::Cluster;
use crate::config::AcmeSettings;
use crate::telemetry::Metrics;
use ca::Ca;
use shared::{Fleet, IssuanceLock};
use store::{Store, StoreError, Stored};

/// Why an attempt to obtain a certificate failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AcmeError {
    /// The CA refused (its problem document is in the message) or could
    /// not be reached.
    #[error("{0}")]
    Ca(#[from] instant_acme::Error),
    #[error("{0}")]
    Order(String),
    #[error("state directory: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Setup(String),
}

impl AcmeError {
    /// The CA answered that the account is unknown.
    fn account_unknown(&self) -> bool {
        matches!(self, AcmeError::Ca(instant_acme::Error::Api(p))
            if p.r#type.as_deref() == Some("urn:ietf:params:acme:error:accountDoesNotExist"))
    }
}

/// The certificate keepers of one listener; dropping it stops them (a
/// reload that changes the listener's `acme` settings starts a new one,
/// which finds the certificates already on disk).
pub(crate) struct Manager {
    pub(crate) settings: AcmeSettings,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Start keeping every name of `settings` certified for `listener`; with
/// a `cluster`, as one of a fleet (see [`shared`]).
pub(crate) fn start(
    listener: &str,
    settings: &AcmeSettings,
    issued: Arc<Issued>,
    challenges: Arc<Challenges>,
    metrics: Arc<Metrics>,
    cluster: Option<Arc<Cluster>>,
) -> Manager {
    let fleet = cluster.map(|c| Arc::new(Fleet::new(c, settings.ca_file.clone())));
    let keeper = Arc::new(Keeper {
        listener: listener.into(),
        ca: Ca::new(settings, fleet.clone()),
        issued,
        challenges,
        metrics,
    });
    let names = settings.names.clone();
    let task = tokio::spawn(async move {
        let mut keepers = tokio::task::JoinSet::new();
        if let Some(fleet) = fleet {
            keepers.spawn(shared::mirror_challenges(
                fleet,
                names.clone(),
                keeper.challenges.clone(),
            ));
        }
        for name in names {
            keepers.spawn(keep_certified(keeper.clone(), name));
        }
        while keepers.join_next().await.is_some() {}
    });
    Manager {
        settings: settings.clone(),
        task,
    }
}

/// Load what is on disk and serve it: at start, before any task runs, so
/// a restart serves its certificates from the first handshake.
pub(crate) fn load_stored(settings: &AcmeSettings, issued: &Issued, metrics: &Metrics) {
    let store = Store::new(&settings.state_dir);
    for name in &settings.names {
        if let Ok(Some(s)) = store.load_certificate(name)
            && s.not_after > SystemTime::now()
        {
            issued.install(name, s.key.clone());
            metrics.certificate_installed(name, s.not_after_unix());
        }
    }
}

/// What every name's task of one listener shares.
struct Keeper {
    listener: Arc<str>,
    ca: Ca,
    issued: Arc<Issued>,
    challenges: Arc<Challenges>,
    metrics: Arc<Metrics>,
}

impl Keeper {
    fn serve(&self, name: &str, s: &Stored) {
        self.issued.install(name, s.key.clone());
        self.metrics.certificate_installed(name, s.not_after_unix());
    }
}

/// How an order for a name may go ahead in a fleet.
enum Go {
    /// Alone: no fleet, or Redis is down and waiting is worse.
    Alone,
    /// Under the fleet's lock for the name.
    Locked(IssuanceLock),
    /// Not now: look again (another instance's order ended or its
    /// certificate arrived).
    Later,
}

async fn keep_certified(k: Arc<Keeper>, name: String) {
    let listener = &k.listener;
    let mut failures = 0u32;
    let mut waiting_for_redis = Duration::ZERO;
    loop {
        let mut stored = match k.ca.store.load_certificate(&name) {
            Ok(s) => s.filter(|s| s.not_after > SystemTime::now()),
            Err(e) => {
                tracing::warn!(listener = %listener, name = %name, error = %e, "stored certificate unusable; ordering a new one");
                None
            }
        };
        if let Some(fleet) = &k.ca.fleet {
            stored = reconcile(fleet, &k.ca.store, &name, stored).await;
        }
        if let Some(s) = &stored {
            k.serve(&name, s);
            let (due, recheck) = renewal_due(&k.ca, s).await;
            let now = SystemTime::now();
            if due > now {
                let wait = due.duration_since(now).unwrap_or_default();
                tracing::debug!(name = %name, renew_in = ?wait, "certificate valid");
                tokio::time::sleep(wait.min(recheck)).await;
                continue;
            }
        }
        let lock = match &k.ca.fleet {
            None => None,
            Some(fleet) => match permission(fleet, &name, stored.as_ref()).await {
                Ok(Go::Alone) => None,
                Ok(Go::Locked(lock)) => Some(lock),
                Ok(Go::Later) => {
                    waiting_for_redis = Duration::ZERO;
                    continue;
                }
                Err(e) => {
                    if waiting_for_redis.is_zero() {
                        tracing::warn!(listener = %listener, name = %name, error = %e, "renewal waits for Redis, so that the fleet orders once");
                    }
                    waiting_for_redis =
                        (waiting_for_redis * 2).clamp(shared::WAIT_MAX, MAX_REDIS_WAIT);
                    // Not past the moment this instance would order alone.
                    let until_alone = shared::alone_from(stored.as_ref())
                        .duration_since(SystemTime::now())
                        .unwrap_or_default();
                    tokio::time::sleep(waiting_for_redis.min(until_alone)).await;
                    continue;
                }
            },
        };
        waiting_for_redis = Duration::ZERO;
        k.metrics.certificate_attempt(&name);
        tracing::info!(listener = %listener, name = %name, directory = %k.ca.settings.directory, challenge = k.ca.settings.challenge.name(), renewal = stored.is_some(), "ordering a certificate");
        let mut lost = false;
        let result = match &lock {
            // Renewed while the order runs; an order whose lock another
            // instance took over is abandoned.
            Some(l) => tokio::select! {
                r = obtain(&k, &name, stored.as_ref()) => r,
                () = l.keep() => {
                    lost = true;
                    Err(AcmeError::Order("the issuance lock was lost".into()))
                }
            },
            None => obtain(&k, &name, stored.as_ref()).await,
        };
        // (Not after losing the lock: the answer there may be the new
        // holder's.)
        if let Some(fleet) = &k.ca.fleet
            && !lost
            && fleet.withdraw(&name).await.is_err()
        {
            tracing::debug!(name = %name, "the challenge answer in Redis expires on its own");
        }
        match result {
            Ok(new) => {
                failures = 0;
                k.serve(&name, &new);
                if let Some(fleet) = &k.ca.fleet
                    && let Err(e) = fleet.offer_certificate(&name, &new).await
                {
                    tracing::warn!(listener = %listener, name = %name, error = %e, "the new certificate is not in Redis yet; it is offered again at the next check");
                }
                if let Some(lock) = lock {
                    lock.release().await;
                }
                tracing::info!(listener = %listener, name = %name, not_after = %humantime::format_rfc3339_seconds(new.not_after), "certificate issued and in service");
            }
            Err(e) => {
                failures += 1;
                k.metrics.certificate_failure(&name);
                if e.account_unknown() {
                    k.ca.forget_account().await;
                }
                let wait = schedule::backoff(k.ca.settings.retry_base, failures);
                // The lock is kept for the back-off: the fleet retries at
                // one instance's pace, not at N times it.
                if let Some(lock) = &lock {
                    let _ = lock.extend(wait).await;
                }
                tracing::error!(listener = %listener, name = %name, error = %e, attempt = failures, retry_in = ?wait, "certificate not issued");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The longest a renewal waits between looks at a Redis that is down.
const MAX_REDIS_WAIT: Duration = Duration::from_secs(60);

/// The newer of this instance's certificate and the fleet's (by notAfter),
/// written to the other side. Redis down: this instance's.
async fn reconcile(
    fleet: &Fleet,
    store: &Store,
    name: &str,
    local: Option<Stored>,
) -> Option<Stored> {
    let shared = match fleet.certificate(name).await {
        Ok(s) => s,
        Err(_) => return local,
    };
    match (local, shared) {
        (local, Some(s)) if local.as_ref().is_none_or(|l| s.not_after > l.not_after) => {
            if let Err(e) = store.save_parsed(name, &s) {
                tracing::warn!(name = %name, error = %e, "the fleet's certificate is not in the state directory");
            }
            tracing::info!(name = %name, not_after = %humantime::format_rfc3339_seconds(s.not_after), "certificate loaded from Redis");
            Some(s)
        }
        (Some(l), s) => {
            if s.is_none_or(|s| l.not_after > s.not_after) {
                let _ = fleet.offer_certificate(name, &l).await;
            }
            Some(l)
        }
        (None, _) => None,
    }
}

/// May this instance order `name` now? With the lock, yes (unless the
/// fleet's certificate turned out newer meanwhile); without it, wait for
/// the holder's certificate or for the lock to go. `Err` when Redis is
/// down and the certificate can wait for it.
async fn permission(
    fleet: &Arc<Fleet>,
    name: &str,
    current: Option<&Stored>,
) -> Result<Go, shared::Unavailable> {
    match fleet.lock(name).await {
        Ok(Some(lock)) => match fleet.certificate(name).await {
            // Another instance stored a newer one just before.
            Ok(Some(s)) if current.is_none_or(|c| s.not_after > c.not_after) => {
                lock.release().await;
                Ok(Go::Later)
            }
            _ => Ok(Go::Locked(lock)),
        },
        Ok(None) => {
            wait_for_holder(fleet, name, current.map(|c| c.not_after)).await;
            Ok(Go::Later)
        }
        Err(e) if shared::alone_from(current) <= SystemTime::now() => {
            tracing::warn!(name = %name, error = %e, "Redis is down and this instance has no certificate to serve for the name (or it expires soon): ordering alone");
            Ok(Go::Alone)
        }
        Err(e) => Err(e),
    }
}

/// Another instance holds the lock for `name`: wait (polling with a
/// bounded back-off) until the fleet has a certificate newer than
/// `current`, or the lock is gone (the order failed and its back-off
/// ended, or its instance died and the lease expired), or Redis is.
async fn wait_for_holder(fleet: &Fleet, name: &str, current: Option<SystemTime>) {
    tracing::info!(name = %name, "another instance is ordering the certificate; waiting for it");
    let mut wait = shared::WAIT_MIN;
    loop {
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(shared::WAIT_MAX);
        match fleet.certificate(name).await {
            Ok(Some(s)) if current.is_none_or(|c| s.not_after > c) => return,
            Err(_) => return,
            _ => {}
        }
        if !matches!(fleet.locked(name).await, Ok(true)) {
            return;
        }
    }
}

/// One order, stored; the stored certificate is only replaced on success.
async fn obtain(k: &Keeper, name: &str, current: Option<&Stored>) -> Result<Stored, AcmeError> {
    let ca = &k.ca;
    let account = ca.account().await?;
    // RFC 9773 §5: say which certificate this one replaces, when the CA
    // takes part in ARI.
    let replaces = current
        .filter(|_| ca.ari.load(std::sync::atomic::Ordering::Relaxed))
        .and_then(|s| CertificateIdentifier::try_from(&s.leaf).ok())
        .map(CertificateIdentifier::into_owned);
    let issued = order::order(
        &account,
        name,
        ca.settings.challenge,
        &k.challenges,
        replaces,
        ca.fleet.as_deref(),
    )
    .await?;
    Ok(ca
        .store
        .save_certificate(name, &issued.chain_pem, &issued.key_pem)?)
}

/// When to renew `s`, and how long to sleep at most before asking again.
/// The CA's renewal window wins when it offers one (it moves renewals
/// earlier when certificates must be replaced, e.g. after a mis-issuance);
/// otherwise two thirds of the lifetime.
async fn renewal_due(ca: &Ca, s: &Stored) -> (SystemTime, Duration) {
    let by_lifetime = schedule::renew_at(s.not_before, s.not_after, s.seed());
    let Some(account) = ca.existing_account().await else {
        return (by_lifetime, schedule::ARI_RECHECK);
    };
    let Ok(id) = CertificateIdentifier::try_from(&s.leaf) else {
        return (by_lifetime, schedule::ARI_RECHECK_MAX);
    };
    match account.renewal_info(&id).await {
        Ok((info, hint)) => {
            ca.ari.store(true, std::sync::atomic::Ordering::Relaxed);
            let at = schedule::in_window(
                info.suggested_window.start.into(),
                info.suggested_window.end.into(),
                SystemTime::now(),
                s.seed(),
            );
            (
                at,
                hint.clamp(schedule::ARI_RECHECK_MIN, schedule::ARI_RECHECK_MAX),
            )
        }
        // No ARI at this CA: the lifetime rule, and no reason to ask again.
        Err(instant_acme::Error::Unsupported(_)) => (by_lifetime, schedule::ARI_RECHECK_MAX),
        Err(e) => {
            tracing::debug!(error = %e, "renewal information unavailable");
            (by_lifetime, schedule::ARI_RECHECK)
        }
    }
}
