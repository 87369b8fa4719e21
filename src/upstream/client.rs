//! The one place a request to an upstream is sent: HTTP/1.1 through
//! weir's own pools ([`super::pool`]), HTTP/2 (and ALPN's choice) through
//! hyper-util's client, and what went wrong in words both say alike.

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::Connect;

use super::error::{BoxError, SendError};
use super::pool::H1Pool;

/// A worker's client for the servers of an upstream.
pub(crate) enum UpstreamClient<C, B> {
    /// HTTP/1.1: one pool per server (a proxy route's server has one; an
    /// LLM upstream one per endpoint), chosen by the request's scheme and
    /// authority when there are several.
    Http1(Box<[H1Pool<B>]>),
    /// HTTP/2 or ALPN's choice: hyper-util's pooled client (boxed: it is
    /// ten times the size of the other).
    Hyper(Box<Client<C, B>>),
}

impl<C, B> UpstreamClient<C, B>
where
    C: Connect + Clone + Send + Sync + 'static,
    B: http_body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    pub(crate) async fn request(&self, req: Request<B>) -> Result<Response<Incoming>, SendError> {
        match self {
            UpstreamClient::Http1(pools) => {
                let pool = match &pools[..] {
                    [one] => Some(one),
                    many => many.iter().find(|p| p.reaches(req.uri())),
                };
                match pool {
                    Some(p) => p.request(req).await,
                    None => Err(SendError::Connect(
                        format!("no connections to {}", req.uri()).into(),
                    )),
                }
            }
            UpstreamClient::Hyper(client) => client
                .request(req)
                .await
                .map_err(SendError::from_hyper_util),
        }
    }
}
