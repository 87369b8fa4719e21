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

mod answers;
mod ca;
mod order;
mod schedule;
mod store;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use instant_acme::CertificateIdentifier;

pub use answers::{ACME_TLS_ALPN, Challenges, Issued};

use crate::config::AcmeSettings;
use crate::telemetry::Metrics;
use ca::Ca;
use store::{Store, StoreError, Stored};

/// Why an attempt to obtain a certificate failed.
#[derive(Debug, thiserror::Error)]
pub enum AcmeError {
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
pub struct Manager {
    pub settings: AcmeSettings,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Start keeping every name of `settings` certified for `listener`.
pub fn start(
    listener: &str,
    settings: &AcmeSettings,
    issued: Arc<Issued>,
    challenges: Arc<Challenges>,
    metrics: Arc<Metrics>,
) -> Manager {
    let ca = Arc::new(Ca::new(settings));
    let listener: Arc<str> = listener.into();
    let names = settings.names.clone();
    let task = tokio::spawn(async move {
        let mut keepers = tokio::task::JoinSet::new();
        for name in names {
            keepers.spawn(keep_certified(
                listener.clone(),
                name,
                ca.clone(),
                issued.clone(),
                challenges.clone(),
                metrics.clone(),
            ));
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
pub fn load_stored(settings: &AcmeSettings, issued: &Issued, metrics: &Metrics) {
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

async fn keep_certified(
    listener: Arc<str>,
    name: String,
    ca: Arc<Ca>,
    issued: Arc<Issued>,
    challenges: Arc<Challenges>,
    metrics: Arc<Metrics>,
) {
    let mut failures = 0u32;
    loop {
        let stored = match ca.store.load_certificate(&name) {
            Ok(s) => s.filter(|s| s.not_after > SystemTime::now()),
            Err(e) => {
                tracing::warn!(listener = %listener, name = %name, error = %e, "stored certificate unusable; ordering a new one");
                None
            }
        };
        if let Some(s) = &stored {
            issued.install(&name, s.key.clone());
            metrics.certificate_installed(&name, s.not_after_unix());
            let (due, recheck) = renewal_due(&ca, s).await;
            let now = SystemTime::now();
            if due > now {
                let wait = due.duration_since(now).unwrap_or_default();
                tracing::debug!(name = %name, renew_in = ?wait, "certificate valid");
                tokio::time::sleep(wait.min(recheck)).await;
                continue;
            }
        }
        metrics.certificate_attempt(&name);
        tracing::info!(listener = %listener, name = %name, directory = %ca.settings.directory, challenge = ca.settings.challenge.name(), renewal = stored.is_some(), "ordering a certificate");
        match obtain(&ca, &name, stored.as_ref(), &challenges).await {
            Ok(new) => {
                failures = 0;
                issued.install(&name, new.key.clone());
                metrics.certificate_installed(&name, new.not_after_unix());
                tracing::info!(listener = %listener, name = %name, not_after = %humantime::format_rfc3339_seconds(new.not_after), "certificate issued and in service");
            }
            Err(e) => {
                failures += 1;
                metrics.certificate_failure(&name);
                if e.account_unknown() {
                    ca.forget_account().await;
                }
                let wait = schedule::backoff(ca.settings.retry_base, failures);
                tracing::error!(listener = %listener, name = %name, error = %e, attempt = failures, retry_in = ?wait, "certificate not issued");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// One order, stored; the stored certificate is only replaced on success.
async fn obtain(
    ca: &Ca,
    name: &str,
    current: Option<&Stored>,
    challenges: &Challenges,
) -> Result<Stored, AcmeError> {
    let account = ca.account().await?;
    // RFC 9773 §5: say which certificate this one replaces, when the CA
    // takes part in ARI.
    let replaces = current
        .filter(|_| ca.ari.load(std::sync::atomic::Ordering::Relaxed))
        .and_then(|s| CertificateIdentifier::try_from(&s.leaf).ok())
        .map(CertificateIdentifier::into_owned);
    let issued = order::order(&account, name, ca.settings.challenge, challenges, replaces).await?;
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
