//! What can go wrong sending to an upstream, in words both clients (weir's
//! HTTP/1.1 pools and hyper-util's) say alike. A leaf.

/// Any error, boxed: what bodies and clients carry.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
    pub(super) fn from_hyper_util(err: hyper_util::client::legacy::Error) -> Self {
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
