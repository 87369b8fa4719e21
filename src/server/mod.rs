//! A running weir, from a validated [`Config`] to its exit, one concern per
//! file:
//!
//! - `start`: bind every socket first (so a bad address fails before
//!   anything serves), then start the accept loops, the deadline sweeper,
//!   ACME, the config watcher and the admin listener.
//! - `reload`: applying a new config while serving — one function for
//!   SIGHUP, the admin API and the file watcher, off the serving runtime —
//!   and the settings that only take effect at restart.
//! - `shutdown`: the upgrade (handing the listening sockets to a new
//!   binary) and the graceful drain.
//!
//! [`Config`]: crate::config::Config

mod reload;
mod shutdown;
mod start;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin::AdminState;
use crate::conn::registry::Registry;
use crate::listen::BindError;
use crate::snapshot::BuildError;
use crate::worker::Workers;
use reload::Reloadable;

pub use start::start;

/// Why weir could not start, or a new config could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("admin: cannot bind {address}: {source}")]
    AdminBind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("cannot start the worker threads: {0}")]
    Workers(std::io::Error),
    #[error("{0}")]
    Database(String),
}

/// A started server: its bound addresses and the handle to reload, upgrade
/// and stop it.
pub struct Running {
    reloadable: Arc<Reloadable>,
    handover: Vec<(String, std::net::TcpListener)>,
    _watcher: Option<Arc<std::sync::Mutex<notify::RecommendedWatcher>>>,
    listeners: Vec<(String, SocketAddr)>,
    admin: Option<SocketAddr>,
    admin_state: Arc<AdminState>,
    registry: Arc<Registry>,
    /// Tells the accept loops to stop: the first step of a shutdown.
    stop_accepting: watch::Sender<bool>,
    /// Tells connections and tunnels to drain, once no socket accepts.
    shutdown: watch::Sender<bool>,
    /// Stops the deadline sweeper once the drain is over.
    sweeper_stop: watch::Sender<bool>,
    accept_loops: JoinSet<()>,
    /// Runtime keys and usage rows, with `[database]`: the rows queued
    /// are written before the process ends.
    database: Option<crate::keys::Database>,
    /// Worker threads when there is more than one worker; dropping them
    /// stops them.
    workers: Option<Workers>,
    admin_task: Option<tokio::task::JoinHandle<()>>,
    shutdown_timeout: Duration,
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
}

/// Serve what is on disk at once, then keep the listener's names certified.
pub(super) fn start_acme(
    listener: &str,
    settings: &crate::config::AcmeSettings,
    certificates: &crate::conn::tls::Certificates,
    challenges: &Arc<crate::acme::Challenges>,
    metrics: &Arc<crate::telemetry::Metrics>,
    cluster: Option<&Arc<crate::cluster::Cluster>>,
) -> crate::acme::Manager {
    crate::acme::load_stored(settings, certificates.issued(), metrics);
    crate::acme::start(
        listener,
        settings,
        certificates.issued().clone(),
        challenges.clone(),
        metrics.clone(),
        cluster.cloned(),
    )
}
