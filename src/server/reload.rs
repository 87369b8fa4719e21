//! Applying a new config to the running server.
//!
//! Three triggers reload from the config file — SIGHUP (the CLI's signal
//! loop, through [`Running::reload`]), `POST /admin/reload` (through the
//! [`admin::Reload`] trait) and the file watcher ([`watch_config`]) — and
//! all three go through one function, [`reload`]. It reads, validates
//! (exactly as `weir check` does) and applies the file on a blocking
//! thread, never on the runtime that asked: with one worker that runtime
//! also serves connections, and reading and building a config blocks.
//! Reloads run one at a time.
//!
//! What a new config changes while running: the request snapshot (routes,
//! upstreams, per-route limits, trusted proxies, the access-log switch,
//! the per-connection request cap, the body rate), connection deadlines
//! and the per-IP cap, HTTP/1 and HTTP/2 limits for new connections, TLS
//! certificates and ACME settings. What it cannot is [`RESTART_ONLY`]: each
//! of those sizes or owns something built once at start. A change to one
//! is logged as taking effect only after a restart (and listed by the
//! admin API); the rest of the file applies.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::start_acme;
use super::{Running, StartError};
use crate::acme::{self, Challenges};
use crate::admin;
use crate::config::{Config, Sources};
use crate::conn::ConnSettings;
use crate::conn::deadline::Deadlines;
use crate::conn::registry::Registry;
use crate::conn::tls::Certificates;
use crate::lifecycle::Gateway;
use crate::listen::budget;
use crate::sync::Locked;
use crate::telemetry::Metrics;

/// What a reload did.
pub(crate) type Reloaded = admin::ReloadReport;

/// The parts of a running server a new config is applied to, and the
/// config now running. Shared by [`Running`], the admin API and the file
/// watcher.
pub(super) struct Reloadable {
    pub(super) gateway: Arc<Gateway>,
    pub(super) settings: Arc<ArcSwap<ConnSettings>>,
    pub(super) deadlines: Arc<ArcSwap<Deadlines>>,
    pub(super) certificates: HashMap<String, Arc<Certificates>>,
    /// ACME certificate keepers, by listener name.
    pub(super) acme: Mutex<HashMap<String, acme::Manager>>,
    pub(super) challenges: Arc<Challenges>,
    pub(super) registry: Arc<Registry>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) current: Mutex<Config>,
    /// What the running config's files held ([`Sources::fingerprint`]);
    /// held while a reload runs, so reloads happen one at a time.
    pub(super) text: Mutex<Option<Vec<u8>>>,
    /// What the file held when a reload last failed: the watcher tries a
    /// file once per change, not on every event in its directory.
    pub(super) rejected: Mutex<Option<FileSeen>>,
    pub(super) started: std::time::Instant,
    /// When the running config was loaded (Unix seconds).
    pub(super) loaded_at: AtomicU64,
    pub(super) listeners: Vec<(String, SocketAddr)>,
}

/// The config file as a reload found it: its text, or why it could not be
/// read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FileSeen {
    Text(Vec<u8>),
    Unreadable(std::io::ErrorKind),
}

impl FileSeen {
    fn of(read: &std::io::Result<Vec<u8>>) -> Self {
        match read {
            Ok(bytes) => FileSeen::Text(bytes.clone()),
            Err(e) => FileSeen::Unreadable(e.kind()),
        }
    }
}

pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// SIGHUP.
    Signal,
    /// `POST /admin/reload`.
    Admin,
    /// The config file changed.
    Watcher,
}

impl Trigger {
    fn label(self) -> &'static str {
        match self {
            Trigger::Signal => "signal",
            Trigger::Admin => "admin",
            Trigger::Watcher => "watcher",
        }
    }
}

/// Every reload, whatever asked for it: on a blocking thread, so the
/// runtime that asked keeps serving. `None`: the watcher found the file's
/// text unchanged and left it alone.
pub(super) async fn reload(
    reloadable: Arc<Reloadable>,
    trigger: Trigger,
) -> Option<Result<Reloaded, Vec<String>>> {
    tokio::task::spawn_blocking(move || reloadable.reload_file(trigger))
        .await
        .unwrap_or_else(|e| Some(Err(vec![format!("the reload failed: {e}")])))
}

/// A reload an operator asked for (SIGHUP, admin API): never skipped.
async fn reload_now(
    reloadable: Arc<Reloadable>,
    trigger: Trigger,
) -> Result<Reloaded, Vec<String>> {
    reload(reloadable, trigger)
        .await
        .unwrap_or_else(|| Err(vec!["reload skipped".into()]))
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
        self.settings.store(Arc::new(ConnSettings::new(
            &config.http1,
            &config.http2,
            config.server.drain_grace,
        )));
        self.deadlines
            .store(Arc::new(Deadlines::new(&config.connections)));
        self.registry.set_max_per_ip(config.connections.max_per_ip);
        let mut current = self.current.locked();
        let restart_needed = restart_only_changes(&current, config);
        *current = config.clone();
        self.loaded_at.store(unix_now(), Ordering::Relaxed);
        Ok(Reloaded {
            generation,
            restart_needed,
        })
    }

    /// A listener whose `acme` settings changed gets a new keeper (it
    /// finds the certificates already on disk, so nothing is ordered again
    /// unless names were added); one that lost its `acme` table, none.
    fn restart_changed_acme(&self, config: &Config) {
        let mut managers = self.acme.locked();
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
                    start_acme(
                        &l.name,
                        settings,
                        certs,
                        &self.challenges,
                        &self.metrics,
                        self.gateway.cluster(),
                    ),
                );
            }
        }
    }

    /// Re-read the running config's file, validate it exactly as `weir
    /// check` does (descriptor budget included), and apply it. On any
    /// problem the running config stays; every problem is returned.
    ///
    /// The watcher leaves an unchanged file alone; SIGHUP and the admin API
    /// always reload, since certificates and key files may have changed on
    /// disk while the config did not. Blocks: see [`reload`].
    fn reload_file(&self, trigger: Trigger) -> Option<Result<Reloaded, Vec<String>>> {
        let mut text = self.text.locked();
        let source = self.current.locked().source.clone();
        // The file and every file it includes, as they are now.
        let sources = Sources::read(&source);
        let read = match &sources {
            Ok(s) => Ok(s.fingerprint()),
            Err(e) => Err(std::io::Error::from(e.kind())),
        };
        if trigger == Trigger::Watcher && self.seen_before(text.as_ref(), &read) {
            return None;
        }
        crate::systemd::reloading();
        let seen = FileSeen::of(&read);
        let result = sources
            .map_err(|e| vec![format!("{}: cannot read the file: {e}", source.display())])
            .and_then(|sources| {
                let bytes = sources.fingerprint();
                let config = Config::from_sources(&sources)
                    .map_err(|p| p.0.iter().map(ToString::to_string).collect::<Vec<_>>())?;
                budget::check(&config, budget::raise_nofile_limit())
                    .map_err(|p| vec![p.to_string()])?;
                for w in &config.warnings {
                    tracing::warn!("{w}");
                }
                let done = self.apply(&config).map_err(|e| vec![e.to_string()])?;
                *text = Some(bytes);
                Ok(done)
            });
        crate::systemd::ready();
        *self.rejected.locked() = result.is_err().then_some(seen);
        let generation = self.gateway.snapshot().generation;
        self.metrics.config_reload(result.is_ok(), generation);
        // The log lines of a reload, whatever triggered it.
        let trigger = trigger.label();
        match &result {
            Ok(r) => {
                tracing::info!(generation = r.generation, trigger, "config reloaded");
                for field in &r.restart_needed {
                    tracing::warn!(
                        field,
                        "config reloaded, but `{field}` changed and only takes effect after a restart"
                    );
                }
            }
            Err(problems) => {
                for p in problems {
                    tracing::error!(problem = %p, trigger, "config reload failed; the running config stays");
                }
            }
        }
        Some(result)
    }

    /// The watcher's test: the file holds what is running, or what was
    /// last rejected (a broken save is tried once, then again only when
    /// it changes — however it was saved, since the text is compared).
    fn seen_before(&self, running: Option<&Vec<u8>>, read: &std::io::Result<Vec<u8>>) -> bool {
        if let Ok(new) = read
            && running == Some(new)
        {
            return true;
        }
        self.rejected.locked().as_ref() == Some(&FileSeen::of(read))
    }
}

/// Reload when the config file changes: the parent directory is watched,
/// so an editor's write-and-rename and a Kubernetes ConfigMap's symlink
/// swap are seen; events are debounced (editors write in steps) and a
/// file whose text did not change is left alone. The returned watcher
/// must be kept alive.
pub(super) fn watch_config(
    reloadable: Arc<Reloadable>,
    dirs: &[PathBuf],
) -> Option<Arc<Mutex<notify::RecommendedWatcher>>> {
    let changed = Arc::new(tokio::sync::Notify::new());
    let signal = changed.clone();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reading a file (weir's own reload included) changes nothing.
        if event.is_ok_and(|e| !e.kind.is_access()) {
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
    let mut watching = Vec::new();
    watch_dirs(&mut watcher, &mut watching, dirs);
    let watcher = Arc::new(Mutex::new(watcher));
    let kept = Arc::downgrade(&watcher);
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
            reload(reloadable.clone(), Trigger::Watcher).await;
            // An include may name a directory the last config did not.
            let Some(watcher) = kept.upgrade() else { break };
            let dirs = reloadable.current.locked().watched.clone();
            watch_dirs(&mut watcher.locked(), &mut watching, &dirs);
        }
    });
    Some(watcher)
}

/// Watch each of `dirs` not watched yet (a directory that is not there is
/// skipped with a warning: the other files are still watched).
fn watch_dirs(
    watcher: &mut notify::RecommendedWatcher,
    watching: &mut Vec<PathBuf>,
    dirs: &[PathBuf],
) {
    use notify::Watcher;
    for dir in dirs {
        if watching.contains(dir) {
            continue;
        }
        match watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
            Ok(()) => watching.push(dir.clone()),
            Err(e) => {
                tracing::warn!(error = %e, dir = %dir.display(), "cannot watch a config directory; reload with SIGHUP");
            }
        }
    }
}

/// How long the config directory must be quiet before a change is read.
const CONFIG_SETTLE: Duration = Duration::from_millis(250);

impl admin::Reload for Reloadable {
    fn reload(self: Arc<Self>) -> admin::Reloading {
        Box::pin(reload_now(self, Trigger::Admin))
    }

    fn status(&self) -> admin::Status {
        admin::Status {
            config: self.current.locked().clone(),
            generation: self.gateway.snapshot().generation,
            uptime: self.started.elapsed(),
            loaded_at_unix: self.loaded_at.load(Ordering::Relaxed),
            listeners: self.listeners.clone(),
            open_connections: self.registry.open(),
        }
    }

    fn config(&self) -> String {
        // Secrets (keys, tokens) print as `Secret(..)`; certificate keys
        // are never printed.
        format!("{:#?}\n", self.current.locked())
    }

    fn members(&self) -> Vec<admin::dashboard::RouteMembers> {
        let snapshot = self.gateway.snapshot();
        let now = tokio::time::Instant::now();
        let mut out = Vec::new();
        for r in snapshot.router.routes() {
            match &r.target {
                crate::route::Target::Proxy(up) => out.push(admin::dashboard::RouteMembers {
                    route: r.name.to_string(),
                    group: up.label.to_string(),
                    members: up.group.load().views(now, |s| s.label.to_string()),
                }),
                crate::route::Target::Llm(llm) => {
                    out.extend(
                        llm.upstreams
                            .iter()
                            .map(|u| admin::dashboard::RouteMembers {
                                route: r.name.to_string(),
                                group: u.config.name.to_string(),
                                members: u.group.views(now, |m| m.label.to_string()),
                            }),
                    );
                }
                _ => {}
            }
        }
        out
    }

    fn usage(self: Arc<Self>, client: Option<String>) -> admin::UsageView {
        let snapshot = self.gateway.snapshot();
        Box::pin(async move {
            let mut clients = Vec::new();
            for r in snapshot.router.routes() {
                if let crate::route::Target::Llm(llm) = &r.target {
                    clients.extend(crate::llm::usage::view(&r.name, llm, client.as_deref()).await);
                }
            }
            clients
        })
    }

    fn key_budget(self: Arc<Self>, id: String) -> admin::KeyBudgetView {
        let snapshot = self.gateway.snapshot();
        Box::pin(async move {
            // Keys' books are process-wide: any route taking keys has them.
            let llm = snapshot
                .router
                .routes()
                .iter()
                .find_map(|r| match &r.target {
                    crate::route::Target::Llm(llm) if llm.books.keys.is_some() => Some(llm),
                    _ => None,
                })?;
            let key = llm.books.keys.as_ref()?.by_id(&id)?;
            let (own, team) = crate::llm::usage::keyed_view(&llm.books, &key).await;
            let now = crate::llm::usage::unix_now();
            Some(serde_json::json!({
                "budget": own.json(now),
                "team_budget": team.map(|t| t.json(now)),
            }))
        })
    }

    fn keyed_budgets(&self) -> Vec<serde_json::Value> {
        let snapshot = self.gateway.snapshot();
        let llms: Vec<_> = snapshot
            .router
            .routes()
            .iter()
            .filter_map(|r| match &r.target {
                crate::route::Target::Llm(llm) => Some(llm),
                _ => None,
            })
            .collect();
        // Keys' books are process-wide and teams' shared by every route:
        // one route's view of each is all of them.
        let mut out = llms
            .iter()
            .find(|l| l.books.keys.is_some())
            .map(|l| crate::llm::usage::key_views(l))
            .unwrap_or_default();
        if let Some(l) = llms.first() {
            out.extend(crate::llm::usage::team_views(l));
        }
        out
    }
}

/// Whether a setting differs between the running config and a new one.
type Changed = fn(&Config, &Config) -> bool;

/// One `section.key` of the config, named as the file spells it.
macro_rules! setting {
    ($section:ident . $key:ident) => {
        (
            concat!(stringify!($section), ".", stringify!($key)),
            |a: &Config, b: &Config| a.$section.$key != b.$section.$key,
        )
    };
}

/// The settings fixed at start, by the name a reload reports them under,
/// and what each sizes or owns: the listeners' sockets and accept loops
/// (a listener added, removed or renamed, its address, TLS or not, its
/// redirect, the sources it takes PROXY headers from), the connection registry, the request gate and the byte
/// budget (semaphores), the worker threads, the drain's timeout, the config
/// watcher, the admin listener and its token, the log writers.
pub(super) const RESTART_ONLY: &[(&str, Changed)] = &[
    ("listener", |a, b| listeners(a) != listeners(b)),
    setting!(connections.max),
    setting!(server.max_concurrent_requests),
    setting!(server.workers),
    setting!(server.max_buffered_body_bytes),
    setting!(server.max_open_static_files),
    setting!(server.shutdown_timeout),
    setting!(server.watch_config),
    ("admin", |a, b| admin(a) != admin(b)),
    ("log", |a, b| log(a) != log(b)),
    ("cluster", |a, b| a.cluster != b.cluster),
    ("telemetry", |a, b| a.traces != b.traces),
];

type ListenerFixed<'a> = (
    &'a str,
    SocketAddr,
    bool,
    Option<u16>,
    &'a [ipnet::IpNet],
    Option<&'a crate::config::AddressRules>,
);

fn listeners(c: &Config) -> Vec<ListenerFixed<'_>> {
    c.listeners
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.address,
                l.tls.is_some(),
                l.redirect_https.map(|r| r.https_port),
                l.proxy_protocol_from.as_slice(),
                l.access.as_ref(),
            )
        })
        .collect()
}

fn admin(c: &Config) -> impl PartialEq + '_ {
    c.admin.as_ref().map(|a| {
        (
            a.address,
            a.token.as_ref(),
            a.view_token.as_ref(),
            a.dashboard_interval,
        )
    })
}

fn log(c: &Config) -> impl PartialEq + '_ {
    let l = &c.log;
    (
        &l.format,
        &l.level,
        &l.file,
        &l.access_file,
        l.usage_log,
        &l.usage_file,
    )
}

/// Settings fixed at start that differ between `old` and `new`.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    RESTART_ONLY
        .iter()
        .filter(|(_, changed)| changed(old, new))
        .map(|(name, _)| *name)
        .collect()
}

impl Running {
    /// Apply a validated config to the running server: a new request
    /// snapshot, connection settings and deadlines, the per-IP cap, and the
    /// certificates of listeners that keep their name. On error nothing has
    /// changed. Returns the new snapshot's generation.
    pub fn apply(&self, config: &Config) -> Result<u64, StartError> {
        self.reloadable.apply(config).map(|r| r.generation)
    }

    /// Reload from the config file, as SIGHUP asks (the admin API and the
    /// watcher take the same path): every problem, or what changed.
    pub(crate) async fn reload(&self) -> Result<Reloaded, Vec<String>> {
        reload_now(self.reloadable.clone(), Trigger::Signal).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::admin::Reload;

    fn config_text(max_connections: usize, watch: bool) -> String {
        format!(
            "[server]\nwatch_config = {watch}\n[connections]\nmax = {max_connections}\n\
             [[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nupstream = \"http://127.0.0.1:1\"\n"
        )
    }

    fn parse(text: &str) -> Config {
        Config::parse(std::path::Path::new("weir.toml"), text).expect("valid")
    }

    /// Another thread holds the reload lock until released: a reload
    /// blocks on it meanwhile.
    struct Held {
        release: mpsc::Sender<()>,
        /// Whether the test released it (rather than giving up).
        released: std::thread::JoinHandle<bool>,
    }

    fn hold(reloadable: &Arc<Reloadable>) -> Held {
        let reloadable = reloadable.clone();
        let (locked, is_locked) = mpsc::channel();
        let (release, on_release) = mpsc::channel();
        let released = std::thread::spawn(move || {
            let _held = reloadable.text.locked();
            let _ = locked.send(());
            // A reload blocking the test's runtime would keep the test from
            // ever releasing this: give up, so it fails rather than hangs.
            on_release.recv_timeout(Duration::from_secs(10)).is_ok()
        });
        let _ = is_locked.recv();
        Held { release, released }
    }

    /// The default test runtime has one thread, as weir's with one worker:
    /// a reload run on it would stall everything else on it.
    #[tokio::test]
    async fn every_trigger_reloads_off_the_runtime_that_asked_with_the_same_result() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("weir.toml");
        std::fs::write(&path, config_text(100, false)).expect("write");
        let config = Config::load(&path).expect("valid");
        let running = super::super::start(&config).await.expect("starts");
        let triggers = [Trigger::Signal, Trigger::Admin, Trigger::Watcher];
        for (n, trigger) in (1..).zip(triggers) {
            // A changed file (so the watcher reloads too), with a
            // restart-only change in it.
            std::fs::write(&path, config_text(100 + n, false)).expect("write");
            let held = hold(&running.reloadable);
            let reloadable = running.reloadable.clone();
            let (done, ()) = tokio::join!(
                async {
                    match trigger {
                        Trigger::Signal => running.reload().await,
                        Trigger::Admin => reloadable.reload().await,
                        Trigger::Watcher => reload(reloadable, Trigger::Watcher)
                            .await
                            .expect("the file changed"),
                    }
                },
                async {
                    tokio::task::yield_now().await;
                    let _ = held.release.send(());
                }
            );
            let released = held.released.join().expect("no panic");
            assert!(released, "{trigger:?}: the reload stalled its runtime");
            assert_eq!(
                done,
                Ok(Reloaded {
                    generation: 1 + n as u64,
                    restart_needed: vec!["connections.max"],
                }),
                "{trigger:?}"
            );
        }
        // The watcher leaves an unchanged file alone; the others do not.
        assert_eq!(
            reload(running.reloadable.clone(), Trigger::Watcher).await,
            None
        );
        assert!(running.reload().await.is_ok());
    }

    #[test]
    fn a_watch_config_or_redirect_port_change_is_restart_only() {
        let base = parse(&config_text(100, false));
        let watched = parse(&config_text(100, true));
        assert_eq!(
            restart_only_changes(&base, &watched),
            ["server.watch_config"]
        );
        let redirect = |port: u16| {
            parse(&format!(
                "{}[[listener]]\nname = \"r\"\naddress = \"127.0.0.1:0\"\n\
                 redirect_https = true\nhttps_port = {port}\n",
                config_text(100, false)
            ))
        };
        assert_eq!(
            restart_only_changes(&redirect(443), &redirect(8443)),
            ["listener"]
        );
        let proxied = |from: &str| {
            parse(&format!(
                "{}[[listener]]\nname = \"p\"\naddress = \"127.0.0.1:0\"\n\
                 proxy_protocol_from = [{from}]\n",
                config_text(100, false)
            ))
        };
        assert_eq!(
            restart_only_changes(&proxied(""), &proxied("\"10.0.0.0/8\"")),
            ["listener"],
            "PROXY protocol sources are fixed at start"
        );
        assert!(restart_only_changes(&base, &base).is_empty());
    }

    #[test]
    fn the_architecture_doc_names_every_restart_only_setting() {
        let docs = include_str!("../../docs/architecture.md");
        for (name, _) in RESTART_ONLY {
            assert!(
                docs.contains(&format!("`{name}`")),
                "`{name}` is not in docs/architecture.md"
            );
        }
    }
}
