//! HTTP/1.1 Upgrade (WebSocket and friends): once the upstream answers 101,
//! both connections are handed over by hyper and bytes are copied both ways
//! until either side closes.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

pub fn spawn(client: OnUpgrade, upstream: OnUpgrade) {
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
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(error = %e, "upgraded connection ended with an error");
        }
    });
}
