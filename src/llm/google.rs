//! Google access tokens for a Vertex AI upstream, as a [`Source`] the
//! refresher keeps fresh: a service account key's signed JWT grant
//! exchanged at its `token_uri`, or the metadata server's token for the
//! machine's own account. What each exchange's bytes are is the wire
//! crate's ([`weir_wire::google`]); this is the I/O.

use std::future::Future;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;
use weir_wire::google::{self, METADATA_FLAVOR, METADATA_TOKEN_PATH, ServiceAccount};
use weir_wire::vertex::SCOPE;

use super::oauth::{self, Reader, TokenClient};
use super::refresh::{Fresh, Source};
use crate::config::GoogleCredentials;

/// How Google's answers are read.
const READER: Reader = Reader {
    token: google::read_token,
    refusal: google::refusal,
};

/// Where one upstream's tokens come from, and the client that asks.
pub(crate) struct Google {
    credentials: GoogleCredentials,
    client: TokenClient,
}

impl Google {
    pub(crate) fn new(credentials: &GoogleCredentials, tls: &rustls::ClientConfig) -> Google {
        Google {
            credentials: credentials.clone(),
            client: oauth::client(tls),
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
        oauth::exchange(&self.client, req, &READER).await
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
