//! One OAuth 2 token exchange, as every access token weir gets itself
//! is fetched (Google's for Vertex AI, [`super::google`]; Entra ID's for
//! Azure OpenAI, [`super::entra`]): one request to the token endpoint
//! (or metadata service), its answer read bounded and in time, a refusal
//! told in a line. What the request and the answer mean is the caller's
//! (the wire crate's); this is the I/O.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::refresh::Fresh;
use crate::config::UpstreamHttp;
use crate::upstream::connector;

/// How long one token exchange may take, connecting included.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest token answer read.
const MAX_ANSWER: usize = 64 << 10;

/// The client a credential's exchanges go out on.
pub(crate) type TokenClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

pub(crate) fn client(tls: &rustls::ClientConfig) -> TokenClient {
    let connector = connector(EXCHANGE_TIMEOUT, tls, UpstreamHttp::Http1);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// How the caller reads an answer: the token and its lifetime from a
/// success, a line from a refusal.
pub(crate) struct Reader {
    pub(crate) token: fn(&[u8]) -> Option<(String, Duration)>,
    pub(crate) refusal: fn(&[u8]) -> String,
}

/// Send `req` and read the access token it is answered with, or why
/// there is none (for the log and the client's 503).
pub(crate) async fn exchange(
    client: &TokenClient,
    req: Request<Full<Bytes>>,
    read: &Reader,
) -> Result<Fresh<str>, String> {
    let uri = req.uri().clone();
    let exchange = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| format!("cannot reach the token endpoint {uri}: {}", error_chain(&e)))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|_| format!("the token endpoint {uri}'s answer broke or is too long"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "the token endpoint {uri} answered {status}: {}",
                (read.refusal)(&body)
            ));
        }
        let (token, lifetime) = (read.token)(&body)
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
