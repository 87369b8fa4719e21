//! Why forwarding failed: what the client is told, the name an access
//! log and a span give it, and how an upstream client's error is read.

use http::StatusCode;

use crate::respond::{Counted, Rescue};
use crate::telemetry::UpstreamErrorKind;
use crate::upstream::{BodyTooLarge, BodyTooSlow, BodyUnreadable, SendError};

/// Why forwarding failed, and what the client is told.
#[derive(Debug)]
pub(crate) enum ProxyError {
    /// The upstream could not be reached or misbehaved.
    Upstream(UpstreamErrorKind),
    /// The client's body crossed the route's limit mid-stream.
    BodyTooLarge,
    /// The client sent its body slower than the minimum data rate.
    BodyTooSlow,
    /// The request could not be turned into an upstream request, or its
    /// body could not be read.
    BadRequest,
    /// Every server of the group is out; the first is back in this many
    /// seconds.
    NoServer { retry_after: u64 },
    /// An upgrade from a client at its `max_tunnels_per_ip`.
    TunnelCap,
}

impl ProxyError {
    /// How the client is answered. A body failure leaves the rest of the
    /// body on the wire, so that connection cannot be reused.
    pub(crate) fn rescue(&self) -> Rescue {
        match self {
            ProxyError::Upstream(kind) => Rescue::upstream(*kind),
            ProxyError::BodyTooLarge => Rescue::status(StatusCode::PAYLOAD_TOO_LARGE).closing(),
            ProxyError::BodyTooSlow => Rescue::status(StatusCode::REQUEST_TIMEOUT)
                .closing()
                .counting(Counted::ConnectionClosed("body_rate")),
            ProxyError::BadRequest => Rescue::status(StatusCode::BAD_REQUEST).closing(),
            ProxyError::NoServer { retry_after } => Rescue::no_server(*retry_after),
            ProxyError::TunnelCap => Rescue::shed("tunnels_per_ip"),
        }
    }
}

/// An attempt's failure as its span names it (`error.type`).
pub(super) fn failed_name(failed: &ProxyError) -> &'static str {
    match failed {
        ProxyError::Upstream(UpstreamErrorKind::Connect) => "connect",
        ProxyError::Upstream(UpstreamErrorKind::ConnectTimeout) => "connect_timeout",
        ProxyError::Upstream(UpstreamErrorKind::Tls) => "tls",
        ProxyError::Upstream(UpstreamErrorKind::ResponseTimeout) => "response_timeout",
        ProxyError::Upstream(_) => "protocol",
        ProxyError::BodyTooLarge => "body_too_large",
        ProxyError::BodyTooSlow => "body_too_slow",
        _ => "failed",
    }
}

/// Map a client error to what went wrong, by walking its causes.
pub(super) fn classify(err: &SendError) -> ProxyError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut timed_out = false;
    let mut tls = false;
    while let Some(e) = source {
        if e.is::<BodyTooLarge>() {
            return ProxyError::BodyTooLarge;
        }
        if e.is::<BodyTooSlow>() {
            return ProxyError::BodyTooSlow;
        }
        if e.is::<BodyUnreadable>() {
            return ProxyError::BadRequest;
        }
        tls |= e.is::<rustls::Error>();
        // io::Error's `source()` skips the error it wraps; descend by hand.
        source = match e.downcast_ref::<std::io::Error>() {
            Some(io) => {
                timed_out |= io.kind() == std::io::ErrorKind::TimedOut;
                match io.get_ref() {
                    Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                    None => e.source(),
                }
            }
            None => e.source(),
        };
    }
    let kind = if err.is_connect() {
        if timed_out {
            UpstreamErrorKind::ConnectTimeout
        } else if tls {
            UpstreamErrorKind::Tls
        } else {
            UpstreamErrorKind::Connect
        }
    } else {
        UpstreamErrorKind::Protocol
    };
    ProxyError::Upstream(kind)
}
