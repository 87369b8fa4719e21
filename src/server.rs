//! Assembling a running weir from a validated [`Config`]: bind every socket
//! first (so a bad address fails before anything serves), then start the
//! accept loops and the deadline sweeper; applying a new config to the
//! running server; and the graceful drain on shutdown.
//!
//! What a new config can change while running: the request snapshot
//! (routes, upstreams, per-route limits, trusted proxies, the access-log
//! switch), connection deadlines and the per-IP cap, HTTP/1 and HTTP/2
//! limits for new connections, and TLS certificates. What it cannot: the
//! listeners' addresses, `connections.max`, `server.max_concurrent_requests`
//! and `server.workers`, which size sockets, semaphores and threads.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::acme::{self, Challenges};
use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::conn::ConnSettings;
use crate::conn::deadline::{self, Deadlines};
use crate::conn::registry::Registry;
use crate::conn::tls::Certificates;
use crate::lifecycle::Gateway;
use crate::listen::{BindError, Listener, Shared, budget, handover};
use crate::snapshot::BuildError;
use crate::telemetry::Metrics;
use crate::worker::Workers;

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
}

/// The parts of a running server a new config is applied to, and the
/// config now running. Shared by the signal handler (via [`Running`]) and
/// the admin API.
struct Reloadable {
    gateway: Arc<Gateway>,
    settings: Arc<ArcSwap<ConnSettings>>,
    deadlines: Arc<ArcSwap<Deadlines>>,
    certificates: HashMap<String, Arc<Certificates>>,
    /// ACME certificate keepers, by listener name.
    acme: std::sync::Mutex<HashMap<String, acme::Manager>>,
    challenges: Arc<Challenges>,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    current: std::sync::Mutex<Config>,
    /// The file text the running config came from; held while a reload
    /// runs, so reloads happen one at a time.
    text: std::sync::Mutex<Option<Vec<u8>>>,
    started: std::time::Instant,
    /// When the running config was loaded (Unix seconds).
    loaded_at: std::sync::atomic::AtomicU64,
    listeners: Vec<(String, SocketAddr)>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub generation: u64,
    /// Settings that changed in the file but only take effect at restart.
    pub restart_needed: Vec<&'static str>,
}

impl Reloadable {
    /// Apply a validated config: on error nothing has changed.
    fn apply(&self, config: &Config) -> Result<Reloaded, StartError> {
        // Everything that can fail comes first.
        let mut certificates = Vec::new();
        for l in &config.listeners {
            if let (Some(tls), Some(certs)) = (&l.tls, self.certificates.get(&l.name)) {
                certificates.push((certs, tls));
            }
        }
        let generation = self.gateway.replace(config)?;
        for (certs, tls) in certificates {
            // Cannot fail: validation guarantees a certificate per TLS listener.
            if let Err(source) = certs.replace(tls) {
                tracing::error!(error = %source, "certificates not replaced");
            }
        }
        self.restart_changed_acme(config);
        self.settings.store(Arc::new(ConnSettings::new(config)));
        self.deadlines
            .store(Arc::new(Deadlines::new(&config.connections)));
        self.registry.set_max_per_ip(config.connections.max_per_ip);
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let restart_needed = restart_only_changes(&current, config);
        *current = config.clone();
        self.loaded_at
            .store(unix_now(), std::sync::atomic::Ordering::Relaxed);
        Ok(Reloaded {
            generation,
            restart_needed,
        })
    }

    /// A listener whose `acme` settings changed gets a new keeper (it
    /// finds the certificates already on disk, so nothing is ordered again
    /// unless names were added); one that lost its `acme` table, none.
    fn restart_changed_acme(&self, config: &Config) {
        let mut managers = self.acme.lock().unwrap_or_else(|e| e.into_inner());
        for l in &config.listeners {
            let Some(certs) = self.certificates.get(&l.name) else {
                continue;
            };
            let wanted = l.tls.as_ref().and_then(|t| t.acme.as_ref());
            let running = managers.get(&l.name).map(|m| &m.settings);
            if wanted == running {
                continue;
            }
            managers.remove(&l.name);
            if let Some(settings) = wanted {
                managers.insert(
                    l.name.clone(),
                    start_acme(&l.name, settings, certs, &self.challenges, &self.metrics),
                );
            }
        }
    }

    /// Re-read the running config's file, validate it exactly as `weir
    /// check` does (descriptor budget included), and apply it. On any
    /// problem the running config stays; every problem is returned.
    ///
    /// With `only_if_changed` (the file watcher) an unchanged file is left
    /// alone; SIGHUP and the admin API always reload, since certificates
    /// and key files may have changed on disk while the config did not.
    fn reload_file(&self, only_if_changed: bool) -> Option<Result<Reloaded, Vec<String>>> {
        let mut text = self.text.lock().unwrap_or_else(|e| e.into_inner());
        let source = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .source
            .clone();
        let read = std::fs::read(&source);
        if only_if_changed
            && let Ok(new) = &read
            && text.as_ref() == Some(new)
        {
            return None;
        }
        crate::systemd::reloading();
        let result = read
            .map_err(|e| vec![format!("{}: cannot read the file: {e}", source.display())])
            .and_then(|bytes| {
                let config = std::str::from_utf8(&bytes)
                    .map_err(|e| vec![format!("{}: not UTF-8: {e}", source.display())])
                    .and_then(|t| {
                        Config::parse(&source, t)
                            .map_err(|p| p.0.iter().map(ToString::to_string).collect())
                    })?;
                budget::check(&config, budget::raise_nofile_limit())
                    .map_err(|p| vec![p.to_string()])?;
                let done = self.apply(&config).map_err(|e| vec![e.to_string()])?;
                *text = Some(bytes);
                Ok(done)
            });
        crate::systemd::ready();
        let generation = self.gateway.snapshot().generation;
        self.metrics.config_reload(result.is_ok(), generation);
        // The log lines of a reload, whatever triggered it.
        match &result {
            Ok(r) => {
                tracing::info!(generation = r.generation, "config reloaded");
                for field in &r.restart_needed {
                    tracing::warn!(
                        field,
                        "config reloaded, but `{field}` changed and only takes effect after a restart"
                    );
                }
            }
            Err(problems) => {
                for p in problems {
                    tracing::error!(problem = %p, "config reload failed; the running config stays");
                }
            }
        }
        Some(result)
    }

    /// Every reload the operator asks for (SIGHUP, admin API).
    fn reload_now(&self) -> Result<Reloaded, Vec<String>> {
        self.reload_file(false)
            .unwrap_or_else(|| Err(vec!["reload skipped".into()]))
    }
}

/// Reload when the config file changes: the parent directory is watched,
/// so an editor's write-and-rename and a Kubernetes ConfigMap's symlink
/// swap are seen; events are debounced (editors write in steps) and a
/// file whose text did not change is left alone. The returned watcher
/// must be kept alive.
fn watch_config(reloadable: Arc<Reloadable>, path: PathBuf) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let changed = Arc::new(tokio::sync::Notify::new());
    let signal = changed.clone();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok() {
            signal.notify_one();
        }
    });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the config file; reload with SIGHUP");
            return None;
        }
    };
    if let Err(e) = watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
        tracing::warn!(error = %e, dir = %dir.display(), "cannot watch the config directory; reload with SIGHUP");
        return None;
    }
    tokio::spawn(async move {
        loop {
            changed.notified().await;
            // Quiet for a moment before reading.
            loop {
                tokio::select! {
                    _ = changed.notified() => {}
                    _ = tokio::time::sleep(CONFIG_SETTLE) => break,
                }
            }
            let r = reloadable.clone();
            let _ = tokio::task::spawn_blocking(move || r.reload_file(true)).await;
        }
    });
    Some(watcher)
}

/// How long the config directory must be quiet before a change is read.
const CONFIG_SETTLE: Duration = Duration::from_millis(250);

impl admin::Reload for Reloadable {
    fn reload(&self) -> Result<admin::ReloadReport, Vec<String>> {
        let done = self.reload_now()?;
        Ok(admin::ReloadReport {
            generation: done.generation,
            restart_needed: done.restart_needed,
        })
    }

    fn status(&self) -> serde_json::Value {
        let config = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let routes: Vec<serde_json::Value> = config
            .routes
            .iter()
            .map(|r| {
                let kind = match &r.kind {
                    crate::config::RouteKind::Proxy { .. } => "proxy",
                    crate::config::RouteKind::Llm(l) => l.protocol.name(),
                };
                serde_json::json!({
                    "name": r.name,
                    "kind": kind,
                    "hosts": r.hosts.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "path": r.path,
                })
            })
            .collect();
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_seconds": self.started.elapsed().as_secs(),
            "config": {
                "source": config.source.display().to_string(),
                "generation": self.gateway.snapshot().generation,
                "loaded_at_unix": self.loaded_at.load(std::sync::atomic::Ordering::Relaxed),
            },
            "listeners": self.listeners.iter().map(|(n, a)| serde_json::json!({"name": n, "address": a.to_string()})).collect::<Vec<_>>(),
            "routes": routes,
            "open_connections": self.registry.open(),
            "requests_in_flight": self.metrics.in_flight(),
            "requests_shed": self.metrics.shed_total(),
        })
    }

    fn config(&self) -> String {
        // Secrets (keys, tokens) print as `Secret(..)`; certificate keys
        // are never printed.
        format!(
            "{:#?}\n",
            self.current.lock().unwrap_or_else(|e| e.into_inner())
        )
    }
}

/// Settings fixed at start that differ between `old` and `new`.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let listeners = |c: &Config| -> Vec<(String, SocketAddr, bool, bool)> {
        c.listeners
            .iter()
            .map(|l| {
                (
                    l.name.clone(),
                    l.address,
                    l.tls.is_some(),
                    l.redirect_https.is_some(),
                )
            })
            .collect()
    };
    let mut changed = Vec::new();
    if listeners(old) != listeners(new) {
        changed.push("listener");
    }
    if old.connections.max != new.connections.max {
        changed.push("connections.max");
    }
    if old.server.max_concurrent_requests != new.server.max_concurrent_requests {
        changed.push("server.max_concurrent_requests");
    }
    if old.server.workers != new.server.workers {
        changed.push("server.workers");
    }
    if old.server.max_buffered_body_bytes != new.server.max_buffered_body_bytes {
        changed.push("server.max_buffered_body_bytes");
    }
    if old.server.shutdown_timeout != new.server.shutdown_timeout {
        changed.push("server.shutdown_timeout");
    }
    let admin = |c: &Config| c.admin.as_ref().map(|a| (a.address, a.token.clone()));
    if admin(old) != admin(new) {
        changed.push("admin");
    }
    if old.log.format != new.log.format
        || old.log.level != new.log.level
        || old.log.file != new.log.file
        || old.log.access_file != new.log.access_file
    {
        changed.push("log");
    }
    changed
}

/// A started server: its bound addresses and the handle to stop it.
pub struct Running {
    reloadable: Arc<Reloadable>,
    handover: Vec<(String, std::net::TcpListener)>,
    _watcher: Option<notify::RecommendedWatcher>,
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
    /// Worker threads when there is more than one worker; dropping them
    /// stops them.
    workers: Option<Workers>,
    admin_task: Option<tokio::task::JoinHandle<()>>,
    shutdown_timeout: Duration,
}

/// Serve what is on disk at once, then keep the listener's names certified.
fn start_acme(
    listener: &str,
    settings: &crate::config::AcmeSettings,
    certificates: &Certificates,
    challenges: &Arc<Challenges>,
    metrics: &Arc<Metrics>,
) -> acme::Manager {
    acme::load_stored(settings, certificates.issued(), metrics);
    acme::start(
        listener,
        settings,
        certificates.issued().clone(),
        challenges.clone(),
        metrics.clone(),
    )
}

pub async fn start(config: &Config) -> Result<Running, StartError> {
    let metrics = Arc::new(Metrics::new());
    let challenges = Arc::new(Challenges::default());
    let gateway = Arc::new(Gateway::new(config, metrics.clone(), challenges.clone())?);
    let settings = Arc::new(ArcSwap::from_pointee(ConnSettings::new(config)));
    let deadlines = Arc::new(ArcSwap::from_pointee(Deadlines::new(&config.connections)));
    let registry = Registry::new(config.connections.max, config.connections.max_per_ip);

    // Sockets a previous weir handed over at an upgrade are adopted by name.
    let mut inherited = handover::Inherited::from_env();
    let workers = crate::worker::count(config.server.workers);
    let mut bound = Vec::new();
    for l in &config.listeners {
        bound.push(Listener::bind(l, &mut inherited, &challenges, workers).await?);
    }
    let admin_socket = match &config.admin {
        Some(a) => {
            let bind_error = |source| StartError::AdminBind {
                address: a.address,
                source,
            };
            Some(match inherited.take("admin") {
                Some(s) => {
                    s.set_nonblocking(true).map_err(bind_error)?;
                    TcpListener::from_std(s).map_err(bind_error)?
                }
                None => TcpListener::bind(a.address).await.map_err(bind_error)?,
            })
        }
        None => None,
    };
    // Second descriptors of every listening socket, for an upgrade.
    let mut handover_sockets: Vec<(String, std::net::TcpListener)> =
        bound.iter().flat_map(Listener::handover).collect();
    if let Some(s) = admin_socket
        .as_ref()
        .and_then(crate::listen::socket_handover)
    {
        handover_sockets.push(("admin".into(), s));
    }
    let certificates: HashMap<String, Arc<Certificates>> = bound
        .iter()
        .filter_map(|l| Some((l.name.to_string(), l.certificates.clone()?)))
        .collect();
    // Before the first accept, so stored certificates serve the first
    // handshake; issuance runs in the background and never delays start.
    let mut acme_managers = HashMap::new();
    for l in &config.listeners {
        if let (Some(settings), Some(certs)) = (
            l.tls.as_ref().and_then(|t| t.acme.as_ref()),
            certificates.get(&l.name),
        ) {
            acme_managers.insert(
                l.name.clone(),
                start_acme(&l.name, settings, certs, &challenges, &metrics),
            );
        }
    }

    let (stop_accepting, stop_accepting_rx) = watch::channel(false);
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (sweeper_stop, sweeper_rx) = watch::channel(false);
    tokio::spawn(deadline::sweep(
        registry.clone(),
        deadlines.clone(),
        sweeper_rx,
    ));
    let shared = Arc::new(Shared {
        gateway: gateway.clone(),
        settings: settings.clone(),
        registry: registry.clone(),
        metrics: metrics.clone(),
        stop_accepting: stop_accepting_rx,
        shutdown: shutdown_rx,
    });
    // One worker serves on this runtime; more get a thread each.
    let worker_threads = if workers > 1 {
        Some(Workers::start(workers).map_err(StartError::Workers)?)
    } else {
        None
    };
    let mut accept_loops = JoinSet::new();
    let mut listeners = Vec::new();
    for l in bound {
        if let Some(addr) = l.local_addr() {
            tracing::info!(listener = %l.name, %addr, tls = l.config.tls.is_some(), redirect = l.config.redirect_https.is_some(), workers, inherited = l.inherited, "listening");
            listeners.push((l.name.to_string(), addr));
        }
        for (i, accept_loop) in l.accept_loops(&shared).into_iter().enumerate() {
            match worker_threads.as_ref().and_then(|w| w.handles().get(i)) {
                Some(worker) => accept_loops.spawn_on(accept_loop, worker),
                None => accept_loops.spawn(accept_loop),
            };
        }
    }
    metrics.config_loaded(1);
    let reloadable = Arc::new(Reloadable {
        gateway,
        settings,
        deadlines,
        certificates,
        acme: std::sync::Mutex::new(acme_managers),
        challenges,
        registry: registry.clone(),
        metrics: metrics.clone(),
        current: std::sync::Mutex::new(config.clone()),
        text: std::sync::Mutex::new(std::fs::read(&config.source).ok()),
        started: std::time::Instant::now(),
        loaded_at: unix_now().into(),
        listeners: listeners.clone(),
    });
    let watcher = if config.server.watch_config && config.source.is_file() {
        watch_config(reloadable.clone(), config.source.clone())
    } else {
        None
    };
    let admin_state = Arc::new(AdminState {
        metrics,
        draining: false.into(),
        token: config.admin.as_ref().and_then(|a| a.token.clone()),
        reload: reloadable.clone(),
        auth_failures: Default::default(),
        auth_failures_by_client: admin::auth_failure_limit(),
        auth_blocked: Default::default(),
    });
    let admin = admin_socket.as_ref().and_then(|s| s.local_addr().ok());
    if let Some(addr) = admin {
        tracing::info!(%addr, "admin listening");
    }
    let admin_task = admin_socket.map(|s| tokio::spawn(admin::run(s, admin_state.clone())));
    Ok(Running {
        reloadable,
        handover: handover_sockets,
        _watcher: watcher,
        listeners,
        admin,
        admin_state,
        registry,
        stop_accepting,
        shutdown,
        sweeper_stop,
        accept_loops,
        workers: worker_threads,
        admin_task,
        shutdown_timeout: config.server.shutdown_timeout,
    })
}

impl Running {
    /// Apply a validated config to the running server: a new request
    /// snapshot, connection settings and deadlines, the per-IP cap, and the
    /// certificates of listeners that keep their name. On error nothing has
    /// changed. Returns the new snapshot's generation.
    pub fn apply(&self, config: &Config) -> Result<u64, StartError> {
        self.reloadable.apply(config).map(|r| r.generation)
    }

    /// Reload from the config file (what SIGHUP and `POST /admin/reload`
    /// do): every problem, or what changed.
    pub fn reload(&self) -> Result<Reloaded, Vec<String>> {
        self.reloadable.reload_now()
    }

    /// Start the same binary (or a new one at the same path) with this
    /// process's listening sockets, and wait until it is ready: then this
    /// process should drain and exit. Returns the new process's pid; on
    /// failure the new process is gone and this one keeps serving.
    pub async fn upgrade(&self) -> Result<u32, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find weir's binary: {e}"))?;
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut sockets = Vec::new();
        for (name, socket) in &self.handover {
            let dup = socket
                .try_clone()
                .map_err(|e| format!("cannot duplicate the `{name}` socket: {e}"))?;
            sockets.push((name.clone(), dup));
        }
        // It waits for the new process: off the runtime's threads.
        tokio::task::spawn_blocking(move || handover::start_successor(&sockets, exe, args))
            .await
            .map_err(|e| format!("the upgrade task failed: {e}"))?
    }

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
        // Sockets close before any connection drains: a client told to
        // reconnect (Connection: close, GOAWAY) must not land in the
        // backlog of a socket about to close. The second descriptors kept
        // for an upgrade go first (a successor holds its own): while one
        // is open the socket still listens — a second instance on the
        // port (SO_REUSEPORT) would share new connections with a backlog
        // nobody accepts from, all reset at exit.
        self.handover.clear();
        let _ = self.stop_accepting.send(true);
        while self.accept_loops.join_next().await.is_some() {}
        let _ = self.shutdown.send(true);
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
        // Connections the timeout gave up on go with their worker.
        if let Some(w) = self.workers {
            w.stop();
        }
        drained
    }
}
