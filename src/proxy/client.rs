//! The one place a request to an upstream is sent: HTTP/1.1 through
//! weir's own pools ([`super::pool`]), HTTP/2 (and ALPN's choice) through
//! hyper-util's client, and what went wrong in words both say alike.

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::Connect;

use super::pool::H1Pool;
use crate::respond::BoxError;

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

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// No connection: refused, timed out, TLS failed.
    #[error("connecting to the upstream failed")]
    Connect(#[source] BoxError),
    /// The request never left (a pooled connection closed before it was
    /// written) or was refused unprocessed (an HTTP/2 REFUSED_STREAM):
    /// safe to send again.
    #[error("the request was not sent")]
    NotSent(#[source] BoxError),
    /// Failed after the request (or some of it) was sent.
    #[error("the upstream exchange failed")]
    Failed(#[source] BoxError),
}

impl SendError {
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, SendError::Connect(_))
    }

    pub(crate) fn never_sent(&self) -> bool {
        matches!(self, SendError::NotSent(_))
    }

    /// hyper-util's error, sorted by walking its causes.
    fn from_hyper_util(err: hyper_util::client::legacy::Error) -> Self {
        if err.is_connect() {
            return SendError::Connect(err.into());
        }
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
        let mut unsent = false;
        while let Some(e) = source {
            // The client gave the request back unsent.
            unsent |= e
                .downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_canceled);
            // An HTTP/2 server that refuses a stream (at its stream limit,
            // or going away) says it did not process it (RFC 9113 §8.7).
            unsent |= e
                .downcast_ref::<h2::Error>()
                .is_some_and(|h| h.reason() == Some(h2::Reason::REFUSED_STREAM));
            source = e.source();
        }
        match unsent {
            true => SendError::NotSent(err.into()),
            false => SendError::Failed(err.into()),
        }
    }
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
