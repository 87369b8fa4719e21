//! The CA as one listener sees it: an HTTP client that trusts the web PKI
//! plus the configured root, and the account, loaded from the state
//! directory or created on first use.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use instant_acme::{
    Account, AccountCredentials, BodyWrapper, BytesResponse, ExternalAccountKey, HttpClient,
    NewAccount,
};

use super::AcmeError;
use super::shared::{self, Fleet};
use super::store::{self, Store};
use crate::config::AcmeSettings;

/// A CA that does not answer within this is treated as failing.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// instant-acme's HTTP client: hyper over rustls with weir's roots (the
/// crate's own default would use the platform verifier, and could not add
/// a private CA's root to the public ones).
struct Http(Client<HttpsConnector<HttpConnector>, BodyWrapper<Bytes>>);

impl HttpClient for Http {
    fn request(
        &self,
        req: Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, instant_acme::Error>> + Send>> {
        let response = self.0.request(req);
        Box::pin(async move {
            match tokio::time::timeout(REQUEST_TIMEOUT, response).await {
                Ok(Ok(r)) => Ok(BytesResponse::from(r)),
                Ok(Err(e)) => Err(instant_acme::Error::Other(Box::new(e))),
                Err(_) => Err(instant_acme::Error::Other(
                    format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()).into(),
                )),
            }
        })
    }
}

pub(crate) struct Ca {
    pub(crate) settings: AcmeSettings,
    pub(crate) store: Store,
    account: tokio::sync::Mutex<Option<Account>>,
    /// The CA answered a renewal-information request (RFC 9773), so
    /// orders may name the certificate they replace.
    pub(crate) ari: std::sync::atomic::AtomicBool,
    /// With `[cluster]`: the fleet's account and certificates in Redis.
    pub(crate) fleet: Option<Arc<Fleet>>,
}

/// How many times an instance looks for the fleet's account (between
/// waits for another instance registering it) before giving up this try.
const ACCOUNT_ROUNDS: u32 = 30;

impl Ca {
    pub(crate) fn new(settings: &AcmeSettings, fleet: Option<Arc<Fleet>>) -> Self {
        Ca {
            store: Store::new(&settings.state_dir),
            settings: settings.clone(),
            account: tokio::sync::Mutex::new(None),
            ari: false.into(),
            fleet,
        }
    }

    fn http(&self) -> Result<Box<dyn HttpClient>, AcmeError> {
        let tls = crate::pki::client_config(self.settings.ca_file.as_deref())
            .map_err(|e| AcmeError::Setup(e.to_string()))?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(REQUEST_TIMEOUT));
        connector.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .wrap_connector(connector);
        Ok(Box::new(Http(
            Client::builder(TokioExecutor::new()).build(https),
        )))
    }

    /// The account if one is registered already (never registers one).
    pub(crate) async fn existing_account(&self) -> Option<Account> {
        let mut cell = self.account.lock().await;
        if let Some(a) = &*cell {
            return Some(a.clone());
        }
        let directory = &self.settings.directory;
        let credentials = match self.store.load_account(directory).ok()? {
            Some(c) => c,
            None => {
                let fleet = self.fleet.as_ref()?;
                let json = fleet.account(&store::account_id(directory)).await.ok()??;
                serde_json::from_str(&json).ok()?
            }
        };
        let account = Account::builder_with_http(self.http().ok()?)
            .from_credentials(credentials)
            .await
            .ok()?;
        *cell = Some(account.clone());
        Some(account)
    }

    /// The account, from the state directory (or, in a fleet, Redis) or
    /// newly registered. Orders for several names share it; only one task
    /// creates it.
    pub(crate) async fn account(&self) -> Result<Account, AcmeError> {
        let mut cell = self.account.lock().await;
        if let Some(a) = &*cell {
            return Ok(a.clone());
        }
        let account = match &self.fleet {
            Some(fleet) => self.fleet_account(fleet).await?,
            None => self.own_account().await?,
        };
        *cell = Some(account.clone());
        Ok(account)
    }

    /// The account of this instance alone: the stored one, or a new one.
    async fn own_account(&self) -> Result<Account, AcmeError> {
        let directory = &self.settings.directory;
        match self.store.load_account(directory)? {
            Some(credentials) => Ok(Account::builder_with_http(self.http()?)
                .from_credentials(credentials)
                .await?),
            None => Ok(self.register().await?.0),
        }
    }

    /// The fleet's one account: Redis's when it has one (written to the
    /// state directory too), else this instance's stored one, shared; else
    /// registered by whichever instance takes the account lock while the
    /// others wait for it. Redis down: this instance's own.
    async fn fleet_account(&self, fleet: &Arc<Fleet>) -> Result<Account, AcmeError> {
        let directory = &self.settings.directory;
        let id = store::account_id(directory);
        let mut wait = shared::WAIT_MIN;
        for _ in 0..ACCOUNT_ROUNDS {
            let shared = match fleet.account(&id).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "the fleet's ACME account is out of reach; using this instance's");
                    return self.own_account().await;
                }
            };
            if let Some(json) = shared {
                let credentials: AccountCredentials = serde_json::from_str(&json)
                    .map_err(|e| AcmeError::Setup(format!("the account in Redis: {e}")))?;
                let account = Account::builder_with_http(self.http()?)
                    .from_credentials(credentials)
                    .await?;
                let credentials: AccountCredentials = serde_json::from_str(&json)
                    .map_err(|e| AcmeError::Setup(format!("the account in Redis: {e}")))?;
                self.store.save_account(directory, &credentials)?;
                return Ok(account);
            }
            if let Some(local) = self.store.load_account(directory)? {
                // Shared unless another instance shared one first; then
                // the next round takes that.
                let json =
                    serde_json::to_string(&local).map_err(|e| AcmeError::Setup(e.to_string()))?;
                let _ = fleet.offer_account(&id, &json).await;
                continue;
            }
            match fleet.lock(&format!("account:{id}")).await {
                Ok(Some(lock)) => {
                    // Registered by another just before the lock was taken?
                    if matches!(fleet.account(&id).await, Ok(Some(_))) {
                        lock.release().await;
                        continue;
                    }
                    let registered = self.register().await;
                    if let Ok((_, credentials)) = &registered
                        && let Ok(json) = serde_json::to_string(credentials)
                        && let Err(e) = fleet.offer_account(&id, &json).await
                    {
                        tracing::warn!(error = %e, "the new ACME account is not shared");
                    }
                    lock.release().await;
                    return Ok(registered?.0);
                }
                Ok(None) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(shared::WAIT_MAX);
                }
                Err(_) => return self.own_account().await,
            }
        }
        Err(AcmeError::Setup(
            "another instance is registering the fleet's ACME account; retrying later".into(),
        ))
    }

    /// Register a new account and store it.
    async fn register(&self) -> Result<(Account, AccountCredentials), AcmeError> {
        let directory = &self.settings.directory;
        let contact: Vec<String> = self
            .settings
            .email
            .iter()
            .map(|e| format!("mailto:{e}"))
            .collect();
        let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
        let eab = match &self.settings.external_account {
            Some(e) => {
                use base64::Engine;
                let key = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(e.hmac_key.0.trim_end_matches('='))
                    .map_err(|e| AcmeError::Setup(format!("EAB HMAC key: {e}")))?;
                Some(ExternalAccountKey::new(e.key_id.clone(), &key))
            }
            None => None,
        };
        let (account, credentials) = Account::builder_with_http(self.http()?)
            .create(
                &NewAccount {
                    contact: &contact,
                    terms_of_service_agreed: true,
                    only_return_existing: false,
                },
                directory.clone(),
                eab.as_ref(),
            )
            .await?;
        self.store.save_account(directory, &credentials)?;
        tracing::info!(directory = %directory, account = account.id(), "ACME account registered");
        Ok((account, credentials))
    }

    /// The CA no longer knows the stored account (a test CA restarted, an
    /// account deactivated): forget it so the next attempt registers anew.
    pub(crate) async fn forget_account(&self) {
        *self.account.lock().await = None;
        let directory = &self.settings.directory;
        if let Some(fleet) = &self.fleet
            && let Ok(Some(local)) = self.store.load_account(directory)
            && let Ok(json) = serde_json::to_string(&local)
            && let Err(e) = fleet
                .forget_account(&store::account_id(directory), &json)
                .await
        {
            tracing::warn!(error = %e, "cannot remove the stale ACME account from Redis");
        }
        if let Err(e) = self.store.remove_account(&self.settings.directory) {
            tracing::warn!(error = %e, "cannot remove the stale ACME account");
        }
    }
}
