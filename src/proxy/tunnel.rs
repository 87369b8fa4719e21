//! HTTP/1.1 Upgrade (WebSocket and friends): once the upstream answers 101,
//! both connections are handed over by hyper and bytes are copied both ways
//! until either side closes. The tunnel keeps its client connection's slot
//! under the connection cap and its request's admission, and ends when
//! shutdown begins or the connection is asked to close.

use std::sync::Arc;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;

use crate::admit::Admission;
use crate::conn::registry::Slot;
use crate::conn::state::CloseReason;

pub(crate) fn spawn(
    client: OnUpgrade,
    upstream: OnUpgrade,
    slot: Arc<Slot>,
    mut shutdown: watch::Receiver<bool>,
    admission: Option<Admission>,
) {
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(both) => both,
            Err(e) => {
                tracing::debug!(error = %e, "upgrade did not complete");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        tokio::select! {
            copied = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                if let Err(e) = copied {
                    tracing::debug!(error = %e, "upgraded connection ended with an error");
                }
            }
            _ = shutdown.wait_for(|s| *s) => {}
            _ = slot.state.close_requested(CloseReason::None) => {}
        }
        drop(admission);
    });
}
