//! What is known about the connection a request arrived on, handed to the
//! request path with every request.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use super::registry::Slot;
use crate::config::RedirectSettings;

pub(crate) struct ConnInfo {
    pub(crate) peer: SocketAddr,
    pub(crate) tls: bool,
    /// Set on listeners that only redirect to HTTPS.
    pub(crate) redirect: Option<RedirectSettings>,
    /// The connection's place under the cap; an upgraded tunnel keeps it.
    pub(crate) slot: Arc<Slot>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// The peer's address as header text, made on the first request that
    /// forwards it and reused by the rest of the connection's requests.
    pub(crate) peer_text: std::sync::OnceLock<http::HeaderValue>,
}

impl ConnInfo {
    /// The peer's IP as a header value (`X-Forwarded-For`, `X-Real-IP`).
    pub(crate) fn peer_header(&self) -> &http::HeaderValue {
        self.peer_text.get_or_init(|| {
            http::HeaderValue::from_str(&self.peer.ip().to_string())
                .unwrap_or_else(|_| http::HeaderValue::from_static("unknown"))
        })
    }
}
