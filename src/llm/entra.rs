//! Entra ID access tokens for an Azure OpenAI upstream, as a [`Source`]
//! the refresher keeps fresh (docs/decisions/090): an app registration's
//! client credentials grant (its secret, or the federated token of a
//! workload identity as its assertion) at the tenant's token endpoint,
//! or the instance metadata service's token for the machine's managed
//! identity. What each exchange's bytes are is the wire crate's
//! ([`weir_wire::entra`]); this is the I/O.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;
use weir_wire::entra::{self, METADATA};

use super::oauth::{self, Reader, TokenClient};
use super::refresh::{Fresh, Source};
use crate::config::EntraCredentials;

/// How Entra's (and IMDS's) answers are read.
const READER: Reader = Reader {
    token: entra::read_token,
    refusal: entra::refusal,
};

/// Where one upstream's tokens come from, and the client that asks.
pub(crate) struct Entra {
    credentials: EntraCredentials,
    client: TokenClient,
}

impl Entra {
    pub(crate) fn new(credentials: &EntraCredentials, tls: &rustls::ClientConfig) -> Entra {
        Entra {
            credentials: credentials.clone(),
            client: oauth::client(tls),
        }
    }

    /// What the log names the credential by: the app and its token
    /// endpoint, or the metadata service (never the secret).
    pub(crate) fn label(credentials: &EntraCredentials) -> String {
        match credentials {
            EntraCredentials::Secret {
                token_url,
                client_id,
                ..
            } => format!("entra app {client_id} at {token_url}"),
            EntraCredentials::Federated {
                token_url,
                client_id,
                ..
            } => format!("entra workload identity {client_id} at {token_url}"),
            EntraCredentials::Managed { url, client_id, .. } => match client_id {
                Some(id) => format!("azure managed identity {id} at {url}"),
                None => format!("azure managed identity at {url}"),
            },
        }
    }

    async fn fetch_token(&self) -> Result<Fresh<str>, String> {
        let req = match &self.credentials {
            EntraCredentials::Secret {
                token_url,
                client_id,
                secret,
                scope,
            } => post(token_url, entra::secret_form(client_id, &secret.0, scope))?,
            EntraCredentials::Federated {
                token_url,
                client_id,
                token_file,
                scope,
            } => {
                // Re-read each time: the kubelet rotates it.
                let assertion = tokio::fs::read_to_string(token_file)
                    .await
                    .map_err(|e| format!("{}: {e}", token_file.display()))?;
                let form = entra::assertion_form(client_id, assertion.trim(), scope);
                post(token_url, form)?
            }
            EntraCredentials::Managed {
                url,
                client_id,
                scope,
            } => Request::builder()
                .method(Method::GET)
                .uri(format!(
                    "{url}{}",
                    entra::imds_path(scope, client_id.as_deref())
                ))
                .header(METADATA, "true")
                .body(Full::new(Bytes::new()))
                .map_err(|e| format!("the metadata service's address makes no request: {e}"))?,
        };
        oauth::exchange(&self.client, req, &READER).await
    }
}

impl Source<str> for Entra {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Fresh<str>, String>> + Send + '_>> {
        Box::pin(self.fetch_token())
    }
}

/// A form posted to a token endpoint.
fn post(url: &str, form: String) -> Result<Request<Full<Bytes>>, String> {
    Request::builder()
        .method(Method::POST)
        .uri(url)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from(form)))
        .map_err(|e| format!("the token endpoint {url} makes no request: {e}"))
}
