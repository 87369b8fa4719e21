//! Starting weir from a validated config: bind every socket first (so a
//! bad address fails before anything serves), load stored certificates,
//! then start the deadline sweeper, the workers and their accept loops,
//! the config watcher and the admin listener.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::reload::{Reloadable, unix_now, watch_config};
use super::{Running, StartError, start_acme};
use crate::acme::Challenges;
use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::conn::ConnSettings;
use crate::conn::deadline::{self, Deadlines};
use crate::conn::registry::Registry;
use crate::conn::tls::Certificates;
use crate::lifecycle::Gateway;
use crate::listen::{Listener, Shared, handover};
use crate::telemetry::Metrics;
use crate::worker::Workers;

pub async fn start(config: &Config) -> Result<Running, StartError> {
    let metrics = Arc::new(Metrics::new());
    let challenges = Arc::new(Challenges::default());
    let database = match &config.database {
        Some(d) => Some(
            crate::keys::Database::start(d, metrics.database.clone())
                .await
                .map_err(StartError::Database)?,
        ),
        None => None,
    };
    let idp = match &config.idp {
        Some(settings) => Some(
            crate::idp::Idp::start(settings, database.as_ref().map(|d| d.keys.clone()))
                .map_err(StartError::Database)?,
        ),
        None => None,
    };
    let gateway = Arc::new(Gateway::new(
        config,
        metrics.clone(),
        challenges.clone(),
        crate::snapshot::People {
            database: database.clone(),
            idp,
        },
    )?);
    if let Some(cluster) = gateway.cluster() {
        // Decide by Redis from the first request when it is there; a Redis
        // that is not delays the start by at most this.
        cluster.settled(std::time::Duration::from_secs(2)).await;
    }
    let settings = Arc::new(ArcSwap::from_pointee(ConnSettings::new(
        &config.http1,
        &config.http2,
        config.server.drain_grace,
    )));
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
                start_acme(
                    &l.name,
                    settings,
                    certs,
                    &challenges,
                    &metrics,
                    gateway.cluster(),
                ),
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
        handler: gateway.clone(),
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
        text: std::sync::Mutex::new(
            crate::config::Sources::read(&config.source)
                .ok()
                .map(|s| s.fingerprint()),
        ),
        rejected: std::sync::Mutex::new(None),
        started: std::time::Instant::now(),
        loaded_at: unix_now().into(),
        listeners: listeners.clone(),
    });
    let watcher = if config.server.watch_config && config.source.is_file() {
        watch_config(reloadable.clone(), &config.watched)
    } else {
        None
    };
    let admin_state = Arc::new(AdminState {
        metrics,
        draining: false.into(),
        token: config.admin.as_ref().and_then(|a| a.token.clone()),
        view_token: config.admin.as_ref().and_then(|a| a.view_token.clone()),
        series: admin::dashboard::Series::default(),
        dashboard_interval: config
            .admin
            .as_ref()
            .map_or(Duration::from_secs(5), |a| a.dashboard_interval),
        reload: reloadable.clone(),
        auth_failures: Default::default(),
        auth_failures_by_client: admin::auth_failure_limit(),
        database: database.clone(),
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
        database,
    })
}
