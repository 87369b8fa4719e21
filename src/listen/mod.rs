//! Listening sockets and their accept loops.
//!
//! Each accepted connection becomes its own task running [`crate::conn::serve`].
//! The loop stops when shutdown begins, which closes the listening socket so
//! new clients are refused by the kernel rather than left in the backlog.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::config::ListenerConfig;
use crate::conn::{self, ConnSettings};
use crate::lifecycle::{ConnInfo, Gateway};

/// A bound listener, ready to accept.
pub struct Listener {
    pub name: String,
    pub config: ListenerConfig,
    socket: TcpListener,
    tls: Option<TlsAcceptor>,
}

impl Listener {
    /// Bind the socket and prepare TLS; errors name the listener.
    pub async fn bind(config: &ListenerConfig) -> Result<Self, String> {
        let tls = match &config.tls {
            Some(t) => Some(TlsAcceptor::from(
                conn::tls::server_config(t)
                    .map_err(|e| format!("listener {}: {e}", config.name))?,
            )),
            None => None,
        };
        let socket = TcpListener::bind(config.address).await.map_err(|e| {
            format!(
                "listener {}: cannot bind {}: {e}",
                config.name, config.address
            )
        })?;
        Ok(Listener {
            name: config.name.clone(),
            config: config.clone(),
            socket,
            tls,
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket.local_addr().ok()
    }

    /// Accept until `stop` turns true.
    pub async fn run(
        self,
        gateway: Arc<Gateway>,
        settings: Arc<ConnSettings>,
        graceful: Arc<GracefulShutdown>,
        mut stop: watch::Receiver<bool>,
    ) {
        loop {
            let accepted = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                accepted = self.socket.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let info = ConnInfo {
                        peer,
                        tls: self.tls.is_some(),
                        redirect: self.config.redirect_https,
                    };
                    tokio::spawn(conn::serve(
                        stream,
                        info,
                        self.tls.clone(),
                        gateway.clone(),
                        settings.clone(),
                        graceful.watcher(),
                    ));
                }
                Err(e) => {
                    // The full accept-error policy (EMFILE reserve, backoff,
                    // de-duplicated logs) belongs to the connection-defence work.
                    tracing::warn!(listener = %self.name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        tracing::info!(listener = %self.name, "stopped accepting");
    }
}
