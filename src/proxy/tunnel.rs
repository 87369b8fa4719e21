//! HTTP/1.1 Upgrade (WebSocket, or a protocol the route allows): once the
//! upstream answers 101, both connections are handed over by hyper and
//! bytes are copied both ways until either side closes. The tunnel keeps
//! its client connection's slot under the connection cap, its request's
//! admission and its place under the per-address tunnel cap, and ends
//! when:
//! - it carried no byte either way for `tunnel_idle_timeout`;
//! - it reached `tunnel_max_lifetime`, if set;
//! - a fair gate handed its slot to a lighter client while it was idle
//!   (`admit::fair`), or the connection registry reclaimed its connection
//!   at the cap (`conn::registry`);
//! - shutdown begins, or the connection is asked to close.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::admit::Admission;
use crate::admit::Tunnel;
use crate::admit::tunnels::{CapTicket, TunnelLimits};
use crate::conn::registry::Slot;
use crate::conn::state::{CloseReason, ConnState};
use crate::telemetry::Metrics;

/// What a tunnel holds while it is open, given back when it ends.
pub(crate) struct Holds {
    pub(crate) admission: Option<Admission>,
    pub(crate) _cap: Option<CapTicket>,
}

pub(crate) fn spawn(
    client: OnUpgrade,
    upstream: OnUpgrade,
    slot: Arc<Slot>,
    mut shutdown: watch::Receiver<bool>,
    mut holds: Holds,
    limits: TunnelLimits,
    metrics: Arc<Metrics>,
) {
    let tunnel = Tunnel::new();
    if let Some(a) = &mut holds.admission {
        a.hold_tunnel(&tunnel);
    }
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(both) => both,
            Err(e) => {
                tracing::debug!(error = %e, "upgrade did not complete");
                return;
            }
        };
        let opened = Instant::now();
        let mut client = Watched::new(TokioIo::new(client), &tunnel, &slot.state);
        let mut upstream = Watched::new(TokioIo::new(upstream), &tunnel, &slot.state);
        let lifetime = async {
            match limits.max_lifetime {
                Some(max) => tokio::time::sleep_until(opened + max).await,
                None => std::future::pending().await,
            }
        };
        let reason = tokio::select! {
            copied = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                if let Err(e) = copied {
                    tracing::debug!(error = %e, "upgraded connection ended with an error");
                }
                "closed"
            }
            () = idle(&tunnel, limits.idle) => "idle_timeout",
            () = lifetime => "max_lifetime",
            () = tunnel.reclaimed() => "reclaimed",
            _ = shutdown.wait_for(|s| *s) => "shutdown",
            closed = slot.state.close_requested(CloseReason::None) => match closed {
                CloseReason::Reclaimed => "reclaimed",
                _ => "connection",
            },
        };
        tracing::debug!(reason, "tunnel closed");
        metrics.tunnel_closed(reason);
        drop(holds);
    });
}

/// Resolves once the tunnel has carried no byte for `timeout`.
async fn idle(tunnel: &Tunnel, timeout: std::time::Duration) {
    loop {
        let due = tunnel.last_active() + timeout;
        if Instant::now() >= due {
            return;
        }
        tokio::time::sleep_until(due).await;
    }
}

/// One side of a tunnel: every byte read marks the tunnel (and its client
/// connection) active.
struct Watched<'a, T> {
    io: T,
    tunnel: &'a Tunnel,
    conn: &'a ConnState,
}

impl<'a, T> Watched<'a, T> {
    fn new(io: T, tunnel: &'a Tunnel, conn: &'a ConnState) -> Self {
        Watched { io, tunnel, conn }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<'_, T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.tunnel.touch();
            self.conn.tunnel_active();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<'_, T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
