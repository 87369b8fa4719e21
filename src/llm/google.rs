//! Google access tokens for a Vertex AI upstream, as a [`Source`] the
//! refresher keeps fresh: a service account key's signed JWT grant
//! exchanged at its `token_uri`, or the metadata server's token for the
//! machine's own account. What each exchange's bytes are is the wire
//! crate's ([`weir_wire::google`]); this is the I/O.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use weir_wire::google::{self, METADATA_FLAVOR, METADATA_TOKEN_PATH, ServiceAccount};
use weir_wire::vertex::SCOPE;

use super::refresh::{Fresh, Source};
use crate::config::{GoogleCredentials, UpstreamHttp};
use crate::upstream::connector;

/// How long one token exchange may take, connecting included.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest token answer read.
const MAX_ANSWER: usize = 64 << 10;

/// Where one upstream's tokens come from, and the client that asks.
pub(crate) struct Google {
    credentials: GoogleCredentials,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Google {
    pub(crate) fn new(credentials: &GoogleCredentials, tls: &rustls::ClientConfig) -> Google {
        let connector = connector(EXCHANGE_TIMEOUT, tls, UpstreamHttp::Http1);
        Google {
            credentials: credentials.clone(),
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// What the log names the credential by: the account, or the metadata
    /// server.
    pub(crate) fn label(credentials: &GoogleCredentials) -> String {
        match credentials {
            GoogleCredentials::Key(sa) => format!("google service account {}", sa.client_email),
            GoogleCredentials::Metadata(url) => format!("google metadata server {url}"),
        }
    }

    async fn fetch_token(&self) -> Result<Fresh<str>, String> {
        let req = match &self.credentials {
            GoogleCredentials::Key(sa) => grant(sa)?,
            GoogleCredentials::Metadata(base) => Request::builder()
                .method(Method::GET)
                .uri(format!("{base}{METADATA_TOKEN_PATH}"))
                .header(METADATA_FLAVOR, "Google")
                .body(Full::new(Bytes::new()))
                .map_err(|e| format!("the metadata server's address makes no request: {e}"))?,
        };
        let uri = req.uri().clone();
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| {
                format!("cannot reach the token endpoint {uri}: {}", error_chain(&e))
            })?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|_| format!("the token endpoint {uri}'s answer broke or is too long"))?
                .to_bytes();
            if !status.is_success() {
                return Err(format!(
                    "the token endpoint {uri} answered {status}: {}",
                    google::refusal(&body)
                ));
            }
            let (token, lifetime) = google::read_token(&body)
                .ok_or_else(|| format!("the token endpoint {uri} answered no access token"))?;
            Ok(Fresh {
                value: Arc::from(token),
                lifetime,
            })
        };
        tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("the token endpoint {uri} did not answer in time")))
    }
}

impl Source<str> for Google {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Fresh<str>, String>> + Send + '_>> {
        Box::pin(self.fetch_token())
    }
}

/// The JWT grant for `sa`'s token endpoint, signed now.
fn grant(sa: &ServiceAccount) -> Result<Request<Full<Bytes>>, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let assertion = sa.assertion(SCOPE, now)?;
    Request::builder()
        .method(Method::POST)
        .uri(&sa.token_uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from(google::grant_form(&assertion))))
        .map_err(|e| format!("the key's token_uri makes no request: {e}"))
}

/// An error and its causes, in one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
