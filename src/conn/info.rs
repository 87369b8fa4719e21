//! What is known about the connection a request arrived on, handed to the
//! request path with every request.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use super::registry::Slot;
use crate::config::RedirectSettings;

pub struct ConnInfo {
    pub peer: SocketAddr,
    pub tls: bool,
    /// Set on listeners that only redirect to HTTPS.
    pub redirect: Option<RedirectSettings>,
    /// The connection's place under the cap; an upgraded tunnel keeps it.
    pub slot: Arc<Slot>,
    pub shutdown: watch::Receiver<bool>,
}
