//! Listening sockets, their accept loops, and the process-wide connection
//! registry they share.
//!
//! Each accepted connection is admitted through the
//! [`crate::conn::registry::Registry`]
//! (which may evict an unproductive connection to make room, or refuse),
//! then served in its own task by [`crate::conn::serve`]. Accept errors go
//! through the policy in [`accept`]. The loop stops when shutdown begins,
//! which closes the listening socket so new clients are refused by the
//! kernel rather than left in the backlog.

pub mod accept;
pub mod budget;
pub mod handover;

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::acme::Challenges;
use crate::config::ListenerConfig;
use crate::conn::info::ConnInfo;
use crate::conn::registry::{Refused, Registry};
use crate::conn::state::Phase;
use crate::conn::tls::Certificates;
use crate::conn::{self, ConnSettings};
use crate::lifecycle::Gateway;
use crate::pki::PkiError;
use crate::telemetry::Metrics;
use accept::{AcceptLoop, SpareFd};

/// Why a listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("listener {listener}: cannot bind {address}: {source}")]
    Socket {
        listener: String,
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("listener {listener}: {source}")]
    Tls { listener: String, source: PkiError },
}

/// A bound listener, ready to accept.
pub struct Listener {
    pub name: Arc<str>,
    pub config: ListenerConfig,
    socket: TcpListener,
    tls: Option<TlsAcceptor>,
    /// The TLS listener's certificates, swappable while it serves.
    pub certificates: Option<Arc<Certificates>>,
    /// A second descriptor of the listening socket, to hand to a new
    /// process at an upgrade.
    pub handover: Option<std::net::TcpListener>,
}

/// What every accept loop shares.
pub struct Shared {
    pub gateway: Arc<Gateway>,
    /// Read once per accepted connection, so a reload reaches new ones.
    pub settings: Arc<ArcSwap<ConnSettings>>,
    pub registry: Arc<Registry>,
    pub metrics: Arc<Metrics>,
    pub shutdown: watch::Receiver<bool>,
}

impl Listener {
    /// Bind the socket (or adopt the one inherited under this listener's
    /// name) and prepare TLS; errors name the listener.
    pub async fn bind(
        config: &ListenerConfig,
        inherited: &mut handover::Inherited,
        challenges: &Arc<Challenges>,
    ) -> Result<Self, BindError> {
        let (tls, certificates) = match &config.tls {
            Some(t) => {
                let (acceptor, certs) =
                    conn::tls::acceptor(t, challenges.clone()).map_err(|source| {
                        BindError::Tls {
                            listener: config.name.clone(),
                            source,
                        }
                    })?;
                (Some(acceptor), Some(certs))
            }
            None => (None, None),
        };
        let socket_error = |source| BindError::Socket {
            listener: config.name.clone(),
            address: config.address,
            source,
        };
        let socket = match inherited.take(&config.name) {
            Some(std_socket) => {
                std_socket.set_nonblocking(true).map_err(socket_error)?;
                TcpListener::from_std(std_socket).map_err(socket_error)?
            }
            None => TcpListener::bind(config.address)
                .await
                .map_err(socket_error)?,
        };
        let handover = socket_handover(&socket);
        Ok(Listener {
            name: config.name.as_str().into(),
            config: config.clone(),
            socket,
            tls,
            certificates,
            handover,
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket.local_addr().ok()
    }

    /// Accept until shutdown begins.
    pub async fn run(self, shared: Arc<Shared>) {
        let Listener {
            name,
            config,
            socket,
            tls,
            ..
        } = self;
        let mut accepts = AcceptLoop::new(socket, SpareFd::new(), &name);
        let metrics = shared.metrics.clone();
        accepts.on_error = Box::new(move |kind| metrics.accept_error(kind));
        accepts.wake_on(shared.registry.freed());
        let mut stop = shared.shutdown.clone();
        let open_gauge = shared.metrics.open_connections(&name);
        loop {
            let (stream, peer) = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                accepted = accepts.next() => accepted,
            };
            shared.metrics.connection_accepted(&name);
            let phase = if tls.is_some() {
                Phase::Handshake
            } else {
                Phase::ReadingHead
            };
            let slot = match shared.registry.admit(
                peer.ip(),
                name.clone(),
                phase,
                open_gauge.clone(),
            ) {
                Ok((slot, evicted)) => {
                    if let Some(victim) = evicted {
                        tracing::debug!(peer = %victim.peer, listener = %victim.listener, "reclaimed an unproductive connection at the cap");
                    }
                    slot
                }
                Err(refused) => {
                    let reason = match refused {
                        Refused::Full => "full",
                        Refused::PerIp => "per_ip",
                    };
                    shared.metrics.connection_refused(reason);
                    tracing::debug!(%peer, listener = %name, reason, "connection refused");
                    drop(stream);
                    continue;
                }
            };
            let info = ConnInfo {
                peer,
                tls: tls.is_some(),
                redirect: config.redirect_https,
                slot: Arc::new(slot),
                shutdown: shared.shutdown.clone(),
                peer_text: std::sync::OnceLock::new(),
            };
            tokio::spawn(conn::serve(
                stream,
                info,
                tls.clone(),
                shared.gateway.clone(),
                shared.settings.load_full(),
            ));
        }
        if accepts.shed > 0 {
            tracing::warn!(listener = %name, shed = accepts.shed, "connections closed at once while out of descriptors");
        }
        tracing::info!(listener = %name, "stopped accepting");
    }
}

/// A second descriptor of a listening socket (for a later handover).
pub fn socket_handover(socket: &TcpListener) -> Option<std::net::TcpListener> {
    let fd = std::os::fd::AsFd::as_fd(socket).try_clone_to_owned().ok()?;
    Some(std::net::TcpListener::from(fd))
}
