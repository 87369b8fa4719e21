//! Assembling a running weir from a validated [`Config`]: bind every socket
//! first (so a bad address fails before anything serves), then start the
//! accept loops and the deadline sweeper; and the graceful drain on
//! shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::conn::ConnSettings;
use crate::conn::deadline::{self, Deadlines};
use crate::lifecycle::Gateway;
use crate::listen::registry::Registry;
use crate::listen::{Listener, Shared};
use crate::telemetry::Metrics;

/// A started server: its bound addresses and the handle to stop it.
pub struct Running {
    listeners: Vec<(String, SocketAddr)>,
    admin: Option<SocketAddr>,
    admin_state: Arc<AdminState>,
    registry: Arc<Registry>,
    /// Tells accept loops, connections and tunnels that shutdown began.
    shutdown: watch::Sender<bool>,
    /// Stops the deadline sweeper once the drain is over.
    sweeper_stop: watch::Sender<bool>,
    accept_loops: JoinSet<()>,
    admin_task: Option<tokio::task::JoinHandle<()>>,
    shutdown_timeout: Duration,
}

pub async fn start(config: &Config) -> Result<Running, String> {
    let metrics = Arc::new(Metrics::new());
    let gateway = Arc::new(Gateway::new(config, metrics.clone())?);
    let settings = Arc::new(ConnSettings::new(config));
    let registry = Registry::new(config.connections.max, config.connections.max_per_ip);

    let mut bound = Vec::new();
    for l in &config.listeners {
        bound.push(Listener::bind(l).await?);
    }
    let admin_socket = match &config.admin {
        Some(a) => Some(
            TcpListener::bind(a.address)
                .await
                .map_err(|e| format!("admin: cannot bind {}: {e}", a.address))?,
        ),
        None => None,
    };

    let (shutdown, shutdown_rx) = watch::channel(false);
    let (sweeper_stop, sweeper_rx) = watch::channel(false);
    tokio::spawn(deadline::sweep(
        registry.clone(),
        Deadlines::new(&config.connections),
        sweeper_rx,
    ));
    let shared = Arc::new(Shared {
        gateway,
        settings,
        registry: registry.clone(),
        metrics: metrics.clone(),
        shutdown: shutdown_rx,
    });
    let mut accept_loops = JoinSet::new();
    let mut listeners = Vec::new();
    for l in bound {
        if let Some(addr) = l.local_addr() {
            tracing::info!(listener = %l.name, %addr, tls = l.config.tls.is_some(), redirect = l.config.redirect_https.is_some(), "listening");
            listeners.push((l.name.to_string(), addr));
        }
        accept_loops.spawn(l.run(shared.clone()));
    }
    let admin_state = Arc::new(AdminState {
        metrics,
        draining: false.into(),
    });
    let admin = admin_socket.as_ref().and_then(|s| s.local_addr().ok());
    if let Some(addr) = admin {
        tracing::info!(%addr, "admin listening");
    }
    let admin_task = admin_socket.map(|s| tokio::spawn(admin::run(s, admin_state.clone())));
    Ok(Running {
        listeners,
        admin,
        admin_state,
        registry,
        shutdown,
        sweeper_stop,
        accept_loops,
        admin_task,
        shutdown_timeout: config.server.shutdown_timeout,
    })
}

impl Running {
    /// The bound address of a listener, by name.
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// Client connections currently open (all listeners).
    pub fn open_connections(&self) -> usize {
        self.registry.open()
    }

    /// Stop accepting, let in-flight requests finish within the shutdown
    /// timeout (idle keep-alive connections and tunnels are closed at once),
    /// then stop. Returns false when the timeout cut the drain short.
    pub async fn shutdown(mut self) -> bool {
        self.admin_state.draining.store(true, Ordering::Relaxed);
        let _ = self.shutdown.send(true);
        while self.accept_loops.join_next().await.is_some() {}
        tracing::info!(open_connections = self.registry.open(), timeout = ?self.shutdown_timeout, "draining");
        let registry = self.registry.clone();
        let drained = tokio::time::timeout(self.shutdown_timeout, async move {
            while registry.open() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .is_ok();
        if drained {
            tracing::info!("drained");
        } else {
            tracing::warn!(
                open_connections = self.registry.open(),
                "shutdown timeout reached with requests still in flight"
            );
        }
        let _ = self.sweeper_stop.send(true);
        if let Some(t) = self.admin_task {
            t.abort();
        }
        drained
    }
}
