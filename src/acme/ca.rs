//! The CA as one listener sees it: an HTTP client that trusts the web PKI
//! plus the configured root, and the account, loaded from the state
//! directory or created on first use.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use instant_acme::{
    Account, BodyWrapper, BytesResponse, ExternalAccountKey, HttpClient, NewAccount,
};

use super::AcmeError;
use super::store::Store;
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

pub struct Ca {
    pub settings: AcmeSettings,
    pub store: Store,
    account: tokio::sync::Mutex<Option<Account>>,
    /// The CA answered a renewal-information request (RFC 9773), so
    /// orders may name the certificate they replace.
    pub ari: std::sync::atomic::AtomicBool,
}

impl Ca {
    pub fn new(settings: &AcmeSettings) -> Self {
        Ca {
            store: Store::new(&settings.state_dir),
            settings: settings.clone(),
            account: tokio::sync::Mutex::new(None),
            ari: false.into(),
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
    pub async fn existing_account(&self) -> Option<Account> {
        let mut cell = self.account.lock().await;
        if let Some(a) = &*cell {
            return Some(a.clone());
        }
        let credentials = self.store.load_account(&self.settings.directory).ok()??;
        let account = Account::builder_with_http(self.http().ok()?)
            .from_credentials(credentials)
            .await
            .ok()?;
        *cell = Some(account.clone());
        Some(account)
    }

    /// The account, from the state directory or newly registered. Orders
    /// for several names share it; only one task creates it.
    pub async fn account(&self) -> Result<Account, AcmeError> {
        let mut cell = self.account.lock().await;
        if let Some(a) = &*cell {
            return Ok(a.clone());
        }
        let directory = &self.settings.directory;
        let account = match self.store.load_account(directory)? {
            Some(credentials) => {
                Account::builder_with_http(self.http()?)
                    .from_credentials(credentials)
                    .await?
            }
            None => {
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
                account
            }
        };
        *cell = Some(account.clone());
        Ok(account)
    }

    /// The CA no longer knows the stored account (a test CA restarted, an
    /// account deactivated): forget it so the next attempt registers anew.
    pub async fn forget_account(&self) {
        *self.account.lock().await = None;
        if let Err(e) = self.store.remove_account(&self.settings.directory) {
            tracing::warn!(error = %e, "cannot remove the stale ACME account");
        }
    }
}
