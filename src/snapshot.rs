//! The two halves of what a request runs against.
//!
//! A [`Snapshot`] is everything that comes from the reloadable part of the
//! configuration — the route table and each route's settings, trusted
//! proxies, log switches, per-request limits — built as a whole and never
//! changed afterwards. A request takes one snapshot when it starts and keeps
//! it to the end, so a reload can never show it half an old config and half
//! a new one.
//!
//! [`Standing`] is the state that must outlive snapshots: the process-wide
//! admission gate, the metrics, and per route (by name) its gate and its
//! upstream connection pool. Building a new snapshot takes a route's gate
//! and pool from here when the route still exists with the same settings,
//! so a reload neither resets a gate's count nor drops warm connections.
//!
//! [`Snapshot::build`] can be called at any time; it fails without touching
//! anything that is serving.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ipnet::IpNet;

use crate::admit::rate::{self, RateLimit};
use crate::admit::tunnels::{TunnelCap, TunnelLimits};
use crate::admit::{Admitter, Gate};
use crate::cluster::Cluster;
use crate::config::{
    ClusterSettings, Config, LlmSettings, RouteConfig, RouteKind, UpstreamGroup, UpstreamSettings,
};
use crate::llm::ledger::Ledger;
use crate::llm::{Books, ByteBudget, LlmRoute, Offload};
use crate::pki::{self, PkiError};
use crate::route::{Route, Router, Target};
use crate::statics::{FileSlots, StaticSite};
use crate::sync::Locked;
use crate::telemetry::{Metrics, RecordSink};
use crate::upstream::{BodyRate, Upstream};

/// Why a snapshot could not be built from a validated config.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("upstream TLS: {0}")]
    UpstreamTls(#[from] PkiError),
    #[error("usage records: {0}")]
    UsageLog(std::io::Error),
    #[error("traces: {0}")]
    Traces(String),
    #[error("metrics export: {0}")]
    MetricsExport(String),
}

/// The reloadable configuration, ready to serve.
pub(crate) struct Snapshot {
    /// Counts up from 1 with every snapshot built.
    pub(crate) generation: u64,
    pub(crate) router: Router<Target>,
    pub(crate) trusted_proxies: Vec<IpNet>,
    pub(crate) access_log: bool,
    /// Requests per connection before it is closed gracefully; 0 = none.
    pub(crate) max_requests_per_connection: u64,
    pub(crate) body_rate: Option<BodyRate>,
    /// The whole time an LLM route may take to read a request body.
    pub(crate) body_read_timeout: Duration,
    pub(crate) tunnel_limits: TunnelLimits,
    /// Pages for weir's answers before a route is known.
    pub(crate) error_pages: Option<Arc<crate::config::ErrorPages>>,
}

/// The upstream CA file and its contents, read once per snapshot: the
/// contents count too, so a renewed CA file means new pools.
type CaFile = Option<(PathBuf, Vec<u8>)>;

/// What makes an upstream pool: when any of it changes, the pool is new.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PoolKey {
    upstream: UpstreamGroup,
    connect_timeout: Duration,
    pool_idle_timeout: Duration,
    pool_max_idle_per_host: usize,
    ca_file: CaFile,
    nameservers: Vec<std::net::SocketAddr>,
    resolve_interval: Duration,
}

impl PoolKey {
    fn new(
        route: &RouteConfig,
        upstream: &UpstreamGroup,
        settings: &UpstreamSettings,
        ca_file: &CaFile,
    ) -> Self {
        PoolKey {
            upstream: upstream.clone(),
            connect_timeout: route.connect_timeout,
            pool_idle_timeout: settings.pool_idle_timeout,
            pool_max_idle_per_host: settings.pool_max_idle_per_host,
            ca_file: ca_file.clone(),
            nameservers: settings.nameservers.clone(),
            resolve_interval: settings.resolve_interval,
        }
    }
}

/// A route's long-lived parts.
struct RouteState {
    limit: usize,
    gate: Gate,
    pool: Option<(PoolKey, Arc<Upstream>)>,
    /// An LLM route's clients, cooldowns and token gates, kept while its
    /// settings (and the shared upstream settings) are unchanged.
    llm: Option<(LlmKey, Arc<LlmRoute>)>,
    /// The rate limit, by its quota and whether the fleet shares it.
    rate: Option<((crate::config::RateQuota, bool), Arc<RateLimit>)>,
}

#[derive(PartialEq)]
struct LlmKey {
    settings: Arc<LlmSettings>,
    /// The fleet shares its token limits.
    shared: bool,
    pool_idle_timeout: Duration,
    pool_max_idle_per_host: usize,
    ca_file: CaFile,
}

impl LlmKey {
    fn new(
        settings: &Arc<LlmSettings>,
        shared: bool,
        upstream: &UpstreamSettings,
        ca_file: &CaFile,
    ) -> Self {
        LlmKey {
            settings: settings.clone(),
            shared,
            pool_idle_timeout: upstream.pool_idle_timeout,
            pool_max_idle_per_host: upstream.pool_max_idle_per_host,
            ca_file: ca_file.clone(),
        }
    }
}

/// State that lives as long as the process, across snapshots.
pub(crate) struct Standing {
    pub(crate) admitter: Admitter,
    /// Open tunnels per client address (its cap reloads).
    pub(crate) tunnel_cap: Arc<TunnelCap>,
    pub(crate) metrics: Arc<Metrics>,
    /// Bytes of request bodies LLM routes may hold at once, process-wide.
    pub(crate) body_budget: ByteBudget,
    /// CPU-heavy work on large LLM bodies, off the serving threads.
    pub(crate) offload: Offload,
    /// Where LLM routes' usage records go (fixed at start).
    pub(crate) records: RecordSink,
    /// Files static routes hold open, process-wide (fixed at start).
    pub(crate) static_files: FileSlots,
    /// Budget ledgers by route and client name: a reload that changes a
    /// budget, or anything else of the route, keeps what was used.
    ledgers: Mutex<HashMap<(String, String), Arc<Ledger>>>,
    /// The fleet's shared limits, with `[cluster]` at start (fixed until
    /// a restart, like the other process-wide parts).
    pub(crate) cluster: Option<Arc<Cluster>>,
    /// Runtime keys and usage rows, with `[database]` at start.
    pub(crate) database: Option<crate::keys::Database>,
    /// The IdP whose tokens identify people, with `[idp]` at start.
    pub(crate) idp: Option<Arc<crate::idp::Idp>>,
    /// Each runtime key's budget ledger and concurrency gate, by key id
    /// (kept across reloads; a key's budget is the key's on every route).
    key_books: Arc<crate::llm::KeyBooks>,
    /// Each team's shared ledger, by name (kept across reloads).
    team_ledgers: crate::llm::TeamLedgers,
    /// With `[telemetry.traces]` at start: who records and exports traces.
    pub(crate) tracer: Option<Arc<crate::telemetry::trace::Tracer>>,
    routes: Mutex<HashMap<String, RouteState>>,
    /// Basic auth's failures and verified credentials per route.
    access: crate::access::Standing,
    generation: Mutex<u64>,
}

/// Who LLM routes know besides their client tokens, fixed at start: the
/// runtime keys of `[database]` and the people of `[idp]`.
#[derive(Default)]
pub(crate) struct People {
    pub(crate) database: Option<crate::keys::Database>,
    pub(crate) idp: Option<Arc<crate::idp::Idp>>,
}

impl Standing {
    /// The global gate is sized once, at start: it bounds memory.
    pub(crate) fn new(
        max_concurrent_requests: usize,
        max_buffered_body_bytes: u64,
        max_open_static_files: usize,
        metrics: Arc<Metrics>,
        records: RecordSink,
        cluster: Option<&ClusterSettings>,
        people: People,
    ) -> Self {
        Standing {
            database: people.database,
            idp: people.idp,
            key_books: Arc::default(),
            team_ledgers: crate::llm::TeamLedgers::default(),
            cluster: cluster.map(|c| Cluster::start(c, metrics.cluster())),
            body_budget: ByteBudget::new(max_buffered_body_bytes),
            offload: Offload::per_core(),
            records,
            static_files: FileSlots::new(max_open_static_files),
            ledgers: Mutex::new(HashMap::new()),
            admitter: Admitter::new(
                max_concurrent_requests,
                metrics.in_flight_gauge(),
                metrics.admission_hold_histogram(),
            ),
            tunnel_cap: TunnelCap::new(0),
            metrics,
            tracer: None,
            routes: Mutex::new(HashMap::new()),
            access: crate::access::Standing::new(),
            generation: Mutex::new(0),
        }
    }
}

impl Snapshot {
    /// Build a snapshot from a validated config, reusing the gates and
    /// pools of routes that still exist unchanged. On error nothing in
    /// `standing` has changed.
    pub(crate) fn build(config: &Config, standing: &Standing) -> Result<Snapshot, BuildError> {
        let tls = pki::client_config(config.upstream.ca_file.as_deref())?;
        let ca_file: CaFile = config
            .upstream
            .ca_file
            .as_ref()
            .map(|p| (p.clone(), std::fs::read(p).unwrap_or_default()));
        // A panic elsewhere while holding these locks leaves maps that are
        // still consistent; keep going.
        let mut states = standing.routes.locked();
        let mut ledgers = standing.ledgers.locked();
        let mut kept_ledgers = HashMap::new();
        let db_keys = standing.database.as_ref().map(|d| d.keys.clone());
        if let Some(keys) = &db_keys {
            // The config's teams are the config's: the database's rows of
            // those names are not served, and the admin API refuses them.
            let idp = config.idp.iter().flat_map(|i| &i.teams).map(|t| &t.name);
            let names = config.teams.iter().map(|t| &t.name).chain(idp);
            keys.set_config_teams(names.cloned().collect());
        }
        let teams = Arc::new(crate::llm::TeamBooks::new(
            &config.teams,
            &standing.team_ledgers,
            db_keys,
        ));
        // Every budget window from now on is placed in this config's zone.
        crate::calendar::set_zone(&config.server.budget_time_zone);
        let workers = crate::worker::count(config.server.workers);
        let mut kept = HashMap::with_capacity(config.routes.len());
        let mut routes = Vec::with_capacity(config.routes.len());
        for r in &config.routes {
            let mut state = states.remove(&r.name).unwrap_or_else(|| RouteState {
                limit: r.max_concurrent_requests,
                gate: Gate::fair(r.max_concurrent_requests),
                pool: None,
                llm: None,
                rate: None,
            });
            if state.limit != r.max_concurrent_requests {
                // Requests holding the old gate release into it and it goes.
                state.limit = r.max_concurrent_requests;
                state.gate = Gate::fair(r.max_concurrent_requests);
            }
            // The fleet's limits when the route shares them and weir
            // started with a cluster (one added by a reload waits for a
            // restart).
            let cluster = standing.cluster.as_ref().filter(|_| r.shared_limits);
            let target = match &r.kind {
                RouteKind::Proxy { upstream: uri } => {
                    let key = PoolKey::new(r, uri, &config.upstream, &ca_file);
                    let upstream = match &state.pool {
                        Some((k, up)) if *k == key => up.clone(),
                        _ => {
                            let up = Arc::new(Upstream::new(
                                r,
                                uri,
                                &config.upstream,
                                &tls,
                                workers,
                                &standing.metrics,
                            ));
                            state.pool = Some((key, up.clone()));
                            up
                        }
                    };
                    Target::Proxy(upstream)
                }
                RouteKind::Llm(settings) => {
                    let key = LlmKey::new(settings, cluster.is_some(), &config.upstream, &ca_file);
                    let books = Books {
                        ledgers: settings
                            .client_tokens
                            .iter()
                            .map(|c| {
                                let k = (r.name.clone(), c.name.clone());
                                let ledger = ledgers.remove(&k).unwrap_or_default();
                                kept_ledgers.insert(k, ledger.clone());
                                ledger
                            })
                            .collect(),
                        records: standing.records.clone(),
                        // Set by the route when it shares its limits.
                        fleet: None,
                        keys: standing
                            .database
                            .as_ref()
                            .filter(|_| settings.runtime_keys)
                            .map(|d| d.keys.clone()),
                        idp: standing.idp.clone().filter(|_| settings.idp_tokens),
                        key_books: standing.key_books.clone(),
                        teams: teams.clone(),
                        rows: standing
                            .database
                            .as_ref()
                            .map(|d| d.rows.clone())
                            .unwrap_or_default(),
                        cluster: standing.cluster.clone(),
                    };
                    let llm = match &state.llm {
                        Some((k, llm)) if *k == key => llm.clone(),
                        _ => {
                            let llm = Arc::new(LlmRoute::new(
                                &r.name.as_str().into(),
                                settings.clone(),
                                &config.upstream,
                                &tls,
                                standing.body_budget.clone(),
                                standing.offload.clone(),
                                books,
                                workers,
                                &standing.metrics,
                                cluster,
                            ));
                            state.llm = Some((key, llm.clone()));
                            llm
                        }
                    };
                    Target::Llm(llm)
                }
                RouteKind::Static(settings) => Target::Static(Arc::new(StaticSite::new(
                    settings.clone(),
                    r,
                    standing.static_files.clone(),
                ))),
                RouteKind::Redirect(redirect) => Target::Redirect(redirect.clone()),
            };
            let rate = match (r.rate_limit, &state.rate) {
                (None, _) => None,
                (Some(q), Some((k, limit))) if *k == (q, cluster.is_some()) => Some(limit.clone()),
                (Some(q), _) => {
                    let mut limit = RateLimit::every(q.interval, q.burst, rate::MAX_KEYS);
                    if let Some(cluster) = cluster {
                        limit = limit.sharing(cluster, &r.name);
                    }
                    let limit = Arc::new(limit);
                    state.rate = Some(((q, cluster.is_some()), limit.clone()));
                    Some(limit)
                }
            };
            let name: Arc<str> = r.name.as_str().into();
            routes.push(Route {
                metrics: standing.metrics.route_metrics(&name),
                name,
                target,
                rate,
                gate: state.gate.clone(),
                access: standing.access.route(r),
                config: r.clone(),
            });
            kept.insert(r.name.clone(), state);
        }
        // Routes that are gone: their gates and pools live on in the
        // snapshots still serving them, then drop.
        *states = kept;
        drop(states);
        standing.access.retain(&config.routes);
        // Clients that are gone take their ledgers with them.
        *ledgers = kept_ledgers;
        drop(ledgers);
        let mut generation = standing.generation.locked();
        *generation += 1;
        let c = &config.connections;
        standing.tunnel_cap.set_max(c.max_tunnels_per_ip);
        Ok(Snapshot {
            generation: *generation,
            router: Router::new(routes),
            trusted_proxies: config.server.trusted_proxies.clone(),
            access_log: config.log.access_log,
            max_requests_per_connection: c.max_requests,
            body_rate: (c.min_body_rate > 0).then_some(BodyRate {
                min_bytes_per_second: c.min_body_rate,
                period: c.body_rate_period,
            }),
            body_read_timeout: config.server.body_read_timeout,
            error_pages: config.server.error_pages.clone(),
            tunnel_limits: TunnelLimits {
                idle: c.tunnel_idle_timeout,
                max_lifetime: (!c.tunnel_max_lifetime.is_zero()).then_some(c.tunnel_max_lifetime),
            },
        })
    }
}
