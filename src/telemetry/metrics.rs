//! Prometheus metrics, via `prometheus-client` (the Prometheus project's own
//! Rust client: no global registry, no HTTP server of its own, few deps).

use std::sync::Arc;

use crate::sync::Locked;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A route name as a label value: shared, so recording a request's metrics
/// does not allocate.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct RouteName(Arc<str>);

impl EncodeLabelValue for RouteName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&&*self.0, encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: RouteName,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: RouteName,
}

/// Why a request to an upstream failed.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum UpstreamErrorKind {
    /// TCP connect refused, reset or unreachable.
    Connect,
    /// TCP connect did not finish within `connect_timeout`.
    ConnectTimeout,
    /// TLS handshake with the upstream failed (certificate, protocol).
    Tls,
    /// No response head within `response_timeout`.
    ResponseTimeout,
    /// The upstream broke the protocol or closed the connection early.
    Protocol,
    /// Every server of the route's group is out (ejected); answered at
    /// once, nothing sent.
    NoServer,
}

impl UpstreamErrorKind {
    /// Whether the request failed before any of it reached the server
    /// (so it may go to another, whatever its method).
    pub fn before_sending(self) -> bool {
        matches!(
            self,
            UpstreamErrorKind::Connect | UpstreamErrorKind::ConnectTimeout | UpstreamErrorKind::Tls
        )
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamErrorLabels {
    route: RouteName,
    kind: UpstreamErrorKind,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    worker: usize,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: HistogramFamily<RouteLabels>,
    upstream_errors: Family<UpstreamErrorLabels, Counter>,
    connections_open: Family<ListenerLabels, Gauge>,
    connections_accepted: Family<ListenerLabels, Counter>,
    worker_connections_accepted: Family<WorkerLabels, Counter>,
    connections_refused: Family<ReasonLabels, Counter>,
    connections_closed: Family<ReasonLabels, Counter>,
    accept_errors: Family<KindLabels, Counter>,
    requests_in_flight: Gauge,
    connections_parked: Gauge,
    connection_parks: Counter,
    requests_shed: Family<ShedLabels, Counter>,
    admission_hold: Histogram,
    llm: LlmMetrics,
    groups: GroupMetrics,
    config_reloads: Family<ResultLabels, Counter>,
    config_generation: Gauge,
    log_lines_dropped: Gauge,
    certificates: CertificateMetrics,
    cluster: ClusterFamilies,
    /// Sheds by any gate, for the admin status.
    shed_total: std::sync::atomic::AtomicU64,
    no_route: Arc<str>,
}

/// One route's request counters and latency histogram, held by the route.
pub struct RouteMetrics {
    duration: Histogram,
    requests: Family<RequestLabels, Counter>,
    route: RouteName,
    /// The counter of each status (100–599), looked up in the family the
    /// first time the status is seen.
    by_status: Box<[std::sync::OnceLock<Counter>]>,
}

impl RouteMetrics {
    pub fn record(&self, status: u16, seconds: f64) {
        self.duration.observe(seconds);
        let labels = || RequestLabels {
            route: self.route.clone(),
            status,
        };
        match self.by_status.get(usize::from(status).wrapping_sub(100)) {
            Some(slot) => slot
                .get_or_init(|| self.requests.get_or_create(&labels()).clone())
                .inc(),
            None => self.requests.get_or_create(&labels()).inc(),
        };
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    name: String,
}

/// ACME-managed certificates. The expiry gauge counts down, so it is
/// computed from each certificate's notAfter when metrics are read.
struct CertificateMetrics {
    expiry: Family<NameLabels, Gauge>,
    not_after: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    attempts: Family<NameLabels, Counter>,
    failures: Family<NameLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// LLM routes' own figures. `model` is the configured model entry (or
/// `default`), never a name a client made up, so label sets stay bounded.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmLabels {
    route: RouteName,
    model: RouteName,
    upstream: RouteName,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmFailoverLabels {
    route: RouteName,
    model: RouteName,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmModelLabels {
    route: RouteName,
    model: RouteName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmTokenLabels {
    route: RouteName,
    model: RouteName,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LlmUpstreamLabels {
    route: RouteName,
    upstream: RouteName,
}

/// Usage per client token: `client` is the token's configured name (or
/// `-` on a route without tokens), `upstream` the configured upstream that
/// served (or `-`), so every label is bounded by the config.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabels {
    route: RouteName,
    client: RouteName,
    model: RouteName,
    upstream: RouteName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientOutcomeLabels {
    route: RouteName,
    client: RouteName,
    model: RouteName,
    upstream: RouteName,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientTokenLabels {
    route: RouteName,
    client: RouteName,
    model: RouteName,
    upstream: RouteName,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabels {
    route: RouteName,
    client: RouteName,
    bound: &'static str,
}

/// A usage record's labels, for [`Metrics::llm_client_usage`].
pub struct ClientUsage<'a> {
    pub route: &'a Arc<str>,
    pub client: &'a Arc<str>,
    pub model: &'a Arc<str>,
    pub upstream: &'a Arc<str>,
    pub outcome: &'static str,
}

type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;

struct LlmMetrics {
    client_requests: Family<ClientOutcomeLabels, Counter>,
    client_tokens: Family<ClientTokenLabels, Counter>,
    client_spend: Family<ClientLabels, FloatCounter>,
    budget_refusals: Family<BudgetLabels, Counter>,
    requests: Family<LlmLabels, Counter>,
    failovers: Family<LlmFailoverLabels, Counter>,
    first_token: HistogramFamily<LlmModelLabels>,
    tokens: Family<LlmTokenLabels, Counter>,
    cooldown_until: Family<LlmUpstreamLabels, Gauge>,
}

impl LlmMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = LlmMetrics {
            client_requests: Family::default(),
            client_tokens: Family::default(),
            client_spend: Family::default(),
            budget_refusals: Family::default(),
            requests: Family::default(),
            failovers: Family::default(),
            first_token: Family::new_with_constructor(latency_histogram),
            tokens: Family::default(),
            cooldown_until: Family::default(),
        };
        registry.register(
            "llm_requests",
            "LLM requests by route, model, serving upstream and outcome (completed, upstream_error, client_cancel, relayed_error, rejected)",
            m.requests.clone(),
        );
        registry.register(
            "llm_failovers",
            "Moves to the next upstream before any content, by reason (connect, timeout, broken, status_429, status_5xx, translated_refused, preamble_error, cooling, cannot_serve)",
            m.failovers.clone(),
        );
        registry.register(
            "llm_first_token_seconds",
            "Time from request head to the first content event (streams) or the response head",
            m.first_token.clone(),
        );
        registry.register(
            "llm_tokens",
            "Tokens reported by upstreams, by kind (input, output, cache_read, cache_write)",
            m.tokens.clone(),
        );
        registry.register(
            "llm_client_requests",
            "LLM requests per client token, model, serving upstream and outcome (completed, upstream_error, client_cancel, relayed_error, rejected, over_budget)",
            m.client_requests.clone(),
        );
        registry.register(
            "llm_client_tokens",
            "Tokens reported by upstreams per client token, model and serving upstream, by kind (input, output, cache_read, cache_write; input excludes cached input)",
            m.client_tokens.clone(),
        );
        registry.register(
            "llm_client_spend",
            "Spend per client token, model and serving upstream, from the route's price table, in its currency (requests whose model has no price add nothing)",
            m.client_spend.clone(),
        );
        registry.register(
            "llm_budget_refusals",
            "Requests refused before any upstream because a client token's budget was spent, by bound (tokens_per_minute, tokens_per_day, spend_per_day)",
            m.budget_refusals.clone(),
        );
        registry.register(
            "llm_upstream_cooldown_until_seconds",
            "Unix time until which an LLM upstream member (an upstream, or one endpoint or key of it) is held out (past: back)",
            m.cooldown_until.clone(),
        );
        m
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: &'static str,
}

/// What became of a hold this instance learnt: `sent` to the fleet, or
/// kept local (`queue_full`, `redis_down`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HoldResultLabels {
    result: &'static str,
}

/// How a fleet's hold arrived: `announce` (pub/sub) or `key` (read at a
/// (re)connection).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HoldViaLabels {
    via: &'static str,
}

/// No labels: a family that stays empty (HELP and TYPE only) in a process
/// without `[cluster]`, and holds one value in one with it.
type Unlabelled = Vec<(String, String)>;

/// `[cluster]`'s metrics, registered always and filled only with a
/// cluster, so a weir without one shows no value it does not have.
struct ClusterFamilies {
    redis_up: Family<Unlabelled, Gauge>,
    instances: Family<Unlabelled, Gauge>,
    decisions: Family<ModeLabels, Counter>,
    redis_seconds: HistogramFamily<Unlabelled>,
    holds_published: Family<HoldResultLabels, Counter>,
    holds_received: Family<HoldViaLabels, Counter>,
    budget_settles_pending: Family<Unlabelled, Gauge>,
    budget_settles_dropped: Family<Unlabelled, Counter>,
}

/// The handles a cluster reports to, resolved once.
#[derive(Clone, Debug)]
pub struct ClusterMetrics {
    /// 1 while Redis answers, 0 while limits are decided by the failure mode.
    pub redis_up: Gauge,
    /// Live instances of the fleet (the last known while Redis is down).
    pub instances: Gauge,
    /// Decisions made by Redis.
    pub by_redis: Counter,
    /// Decisions made locally while Redis did not answer, by mode.
    pub fail_open: Counter,
    pub fail_closed: Counter,
    /// Time of a request's round trip to Redis.
    pub redis_seconds: Histogram,
    /// Holds learnt here: sent to the fleet, or kept local.
    pub holds_sent: Counter,
    pub holds_queue_full: Counter,
    pub holds_redis_down: Counter,
    /// Holds learnt from the fleet: announced, or read from their keys.
    pub holds_announced: Counter,
    pub holds_read: Counter,
    /// Budget settles waiting for Redis, and those dropped past the bound.
    pub budget_settles_pending: Gauge,
    pub budget_settles_dropped: Counter,
}

impl ClusterFamilies {
    fn register(registry: &mut Registry) -> Self {
        let m = ClusterFamilies {
            redis_up: Family::default(),
            instances: Family::default(),
            decisions: Family::default(),
            redis_seconds: Family::new_with_constructor(|| {
                // 50 µs .. ~1.6 s
                Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
            }),
            holds_published: Family::default(),
            holds_received: Family::default(),
            budget_settles_pending: Family::default(),
            budget_settles_dropped: Family::default(),
        };
        registry.register(
            "cluster_redis_up",
            "1 while the cluster's Redis answers; 0 while shared limits are decided by the failure mode",
            m.redis_up.clone(),
        );
        registry.register(
            "cluster_instances",
            "Live weir instances sharing the cluster's limits (the last known while Redis is down)",
            m.instances.clone(),
        );
        registry.register(
            "cluster_decisions",
            "Shared-limit decisions, by who made them: redis, or locally by the failure mode (fail_open, fail_closed)",
            m.decisions.clone(),
        );
        registry.register(
            "cluster_redis_seconds",
            "Round trips to the cluster's Redis on the request path",
            m.redis_seconds.clone(),
        );
        registry.register(
            "cluster_holds_published",
            "LLM member holds (429/503/529 with a retry hint) learnt here, by result: sent to the fleet, or kept local (queue_full, redis_down)",
            m.holds_published.clone(),
        );
        registry.register(
            "cluster_holds_received",
            "LLM member holds learnt from other instances, by how: announce (pub/sub) or key (read at a connection)",
            m.holds_received.clone(),
        );
        registry.register(
            "cluster_budget_settles_pending",
            "Budget settles (a reservation ended, usage charged) waiting to be sent to the cluster's Redis",
            m.budget_settles_pending.clone(),
        );
        registry.register(
            "cluster_budget_settles_dropped",
            "Budget settles dropped: past the bound of those waiting while Redis was away, or refused by Redis",
            m.budget_settles_dropped.clone(),
        );
        m
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    route: RouteName,
    server: RouteName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EjectionLabels {
    route: RouteName,
    server: RouteName,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RetryLabels {
    route: RouteName,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabels {
    route: RouteName,
    host: String,
}

/// The servers of upstream groups.
struct GroupMetrics {
    up: Family<ServerLabels, Gauge>,
    picks: Family<ServerLabels, Counter>,
    ejections: Family<EjectionLabels, Counter>,
    retries: Family<RetryLabels, Counter>,
    retry_budget_exhausted: Family<RouteLabels, Counter>,
    dns_failures: Family<HostLabels, Counter>,
}

impl GroupMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = GroupMetrics {
            up: Family::default(),
            picks: Family::default(),
            ejections: Family::default(),
            retries: Family::default(),
            retry_budget_exhausted: Family::default(),
            dns_failures: Family::default(),
        };
        registry.register(
            "upstream_retries",
            "Requests sent again to another server of a group, by reason: `not_sent` (connect failed, or the request never left), `no_response` (an idempotent request got no response head)",
            m.retries.clone(),
        );
        registry.register(
            "upstream_retry_budget_exhausted",
            "Retries not made because the route's retry budget was spent; the failure was answered",
            m.retry_budget_exhausted.clone(),
        );
        registry.register(
            "upstream_dns_failures",
            "Failed lookups of a group's server name; the servers from the last good answer stay",
            m.dns_failures.clone(),
        );
        registry.register(
            "upstream_server_up",
            "1 while a server of a group takes requests; 0 from when it is taken out until it next answers",
            m.up.clone(),
        );
        registry.register(
            "upstream_server_picks",
            "Requests sent to each server of a group (attempts, retries included)",
            m.picks.clone(),
        );
        registry.register(
            "upstream_server_ejections",
            "Times a server was taken out of its group, by reason (failing; on LLM upstreams also rate_limited, overloaded, unreachable)",
            m.ejections.clone(),
        );
        m
    }
}

/// One server's metrics, resolved once when its group is built, so a
/// request counts with an atomic add and no label lookup.
#[derive(Clone, Debug)]
pub struct ServerMetrics {
    pub up: Gauge,
    pub picks: Counter,
    pub ejections: Counter,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShedLabels {
    reason: &'static str,
    route: RouteName,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("weir");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by route and status",
            requests.clone(),
        );
        let request_duration: HistogramFamily<RouteLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "request_duration_seconds",
            "Time from request head to the end of the response body",
            request_duration.clone(),
        );
        let upstream_errors = Family::<UpstreamErrorLabels, Counter>::default();
        registry.register(
            "upstream_errors",
            "Upstream requests that failed, by route and kind",
            upstream_errors.clone(),
        );
        let connections_open = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "connections_open",
            "Client connections open, by listener",
            connections_open.clone(),
        );
        let connections_accepted = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "connections_accepted",
            "Client connections accepted, by listener",
            connections_accepted.clone(),
        );
        let worker_connections_accepted = Family::<WorkerLabels, Counter>::default();
        registry.register(
            "worker_connections_accepted",
            "Client connections accepted, by worker (how evenly SO_REUSEPORT spreads them)",
            worker_connections_accepted.clone(),
        );
        let connections_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_refused",
            "Connections closed at accept: full (cap reached, all busy) or per_ip",
            connections_refused.clone(),
        );
        let connections_closed = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_closed",
            "Connections closed by a defence: reclaimed, handshake_timeout, head_timeout, idle_timeout, send_timeout, body_rate, max_requests, h2_flood",
            connections_closed.clone(),
        );
        let accept_errors = Family::<KindLabels, Counter>::default();
        registry.register(
            "accept_errors",
            "accept() errors, by kind (EMFILE, ENFILE, ENOBUFS, ENOMEM, other)",
            accept_errors.clone(),
        );
        let connections_parked = Gauge::default();
        registry.register(
            "connections_parked",
            "Idle HTTP/1.1 connections holding no HTTP buffers, waiting for their next request",
            connections_parked.clone(),
        );
        let connection_parks = Counter::default();
        registry.register(
            "connection_parks",
            "Times an idle HTTP/1.1 connection gave up its HTTP buffers",
            connection_parks.clone(),
        );
        let requests_in_flight = Gauge::default();
        registry.register(
            "requests_in_flight",
            "Requests admitted and not yet finished (response body still being sent)",
            requests_in_flight.clone(),
        );
        let requests_shed = Family::<ShedLabels, Counter>::default();
        registry.register(
            "requests_shed",
            "Requests answered 503 by a full request gate, by gate (global, route) and route",
            requests_shed.clone(),
        );
        let admission_hold = latency_histogram();
        registry.register(
            "admission_hold_seconds",
            "How long requests held their admission slot (until the response body ended)",
            admission_hold.clone(),
        );
        let llm = LlmMetrics::register(&mut registry);
        let groups = GroupMetrics::register(&mut registry);
        let cluster = ClusterFamilies::register(&mut registry);
        let config_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "config_reloads",
            "Config reloads (SIGHUP, admin API), by result: ok, failed (the running config stayed)",
            config_reloads.clone(),
        );
        let config_generation = Gauge::default();
        registry.register(
            "config_generation",
            "The running config's generation: 1 at start, +1 per successful reload",
            config_generation.clone(),
        );
        let log_lines_dropped = Gauge::default();
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because a log file's queue was full (the disk stalled)",
            log_lines_dropped.clone(),
        );
        let certificates = CertificateMetrics {
            expiry: Family::default(),
            not_after: Default::default(),
            attempts: Family::default(),
            failures: Family::default(),
        };
        registry.register(
            "certificate_expiry_seconds",
            "Seconds until an ACME-managed certificate expires, by name (negative: expired)",
            certificates.expiry.clone(),
        );
        registry.register(
            "certificate_issuance_attempts",
            "ACME orders started, by name (first issuance and renewals)",
            certificates.attempts.clone(),
        );
        registry.register(
            "certificate_issuance_failures",
            "ACME orders that ended without a certificate, by name",
            certificates.failures.clone(),
        );
        Metrics {
            registry,
            llm,
            groups,
            certificates,
            cluster,
            config_reloads,
            config_generation,
            log_lines_dropped,
            shed_total: Default::default(),
            requests_in_flight,
            connections_parked,
            connection_parks,
            requests_shed,
            admission_hold,
            no_route: "-".into(),
            requests,
            request_duration,
            upstream_errors,
            connections_open,
            connections_accepted,
            worker_connections_accepted,
            connections_refused,
            connections_closed,
            accept_errors,
        }
    }

    /// A route's request metrics, resolved once (when the route table is
    /// built), so recording a request takes no lock on a metric family.
    pub fn route_metrics(&self, route: &Arc<str>) -> Arc<RouteMetrics> {
        let name = RouteName(route.clone());
        Arc::new(RouteMetrics {
            duration: self
                .request_duration
                .get_or_create(&RouteLabels {
                    route: name.clone(),
                })
                .clone(),
            requests: self.requests.clone(),
            by_status: (100..600).map(|_| std::sync::OnceLock::new()).collect(),
            route: name,
        })
    }

    /// `route` is `None` for requests that matched no route (label `-`).
    pub fn record_request(&self, route: Option<&Arc<str>>, status: u16, seconds: f64) {
        let route = RouteName(route.unwrap_or(&self.no_route).clone());
        self.request_duration
            .get_or_create(&RouteLabels {
                route: route.clone(),
            })
            .observe(seconds);
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
    }

    pub fn record_upstream_error(&self, route: &Arc<str>, kind: UpstreamErrorKind) {
        self.upstream_errors
            .get_or_create(&UpstreamErrorLabels {
                route: RouteName(route.clone()),
                kind,
            })
            .inc();
    }

    pub fn in_flight_gauge(&self) -> Gauge {
        self.requests_in_flight.clone()
    }

    pub fn admission_hold_histogram(&self) -> Histogram {
        self.admission_hold.clone()
    }

    /// `route` is `None` when shed before routing (label `-`).
    pub fn request_shed(&self, reason: &'static str, route: Option<&Arc<str>>) {
        self.shed_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.requests_shed
            .get_or_create(&ShedLabels {
                reason,
                route: RouteName(route.unwrap_or(&self.no_route).clone()),
            })
            .inc();
    }

    /// Requests shed by any gate since start.
    pub fn shed_total(&self) -> u64 {
        self.shed_total.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Requests admitted and not yet finished.
    /// Idle connections parked now (see `conn::serve`).
    pub fn parked_gauge(&self) -> &Gauge {
        &self.connections_parked
    }

    pub fn connection_parked(&self) {
        self.connection_parks.inc();
    }

    pub fn in_flight(&self) -> i64 {
        self.requests_in_flight.get()
    }

    /// The open-connections gauge of a listener (held by each connection).
    pub fn open_connections(&self, listener: &str) -> Gauge {
        self.connections_open
            .get_or_create(&ListenerLabels {
                listener: listener.to_string(),
            })
            .clone()
    }

    /// The accepted-connections counter of a listener, resolved once per
    /// accept loop.
    pub fn connections_accepted(&self, listener: &str) -> Counter {
        self.connections_accepted
            .get_or_create(&ListenerLabels {
                listener: listener.to_string(),
            })
            .clone()
    }

    /// The accepted-connections counter of a worker.
    pub fn worker_accepted(&self, worker: usize) -> Counter {
        self.worker_connections_accepted
            .get_or_create(&WorkerLabels { worker })
            .clone()
    }

    pub fn connection_refused(&self, reason: &'static str) {
        self.connections_refused
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub fn connection_closed(&self, reason: &'static str) {
        self.connections_closed
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub fn llm_request(
        &self,
        route: &Arc<str>,
        model: &Arc<str>,
        upstream: &Arc<str>,
        outcome: &'static str,
    ) {
        self.llm
            .requests
            .get_or_create(&LlmLabels {
                route: RouteName(route.clone()),
                model: RouteName(model.clone()),
                upstream: RouteName(upstream.clone()),
                outcome,
            })
            .inc();
    }

    pub fn llm_failover(&self, route: &Arc<str>, model: &Arc<str>, reason: &'static str) {
        self.llm
            .failovers
            .get_or_create(&LlmFailoverLabels {
                route: RouteName(route.clone()),
                model: RouteName(model.clone()),
                reason,
            })
            .inc();
    }

    pub fn llm_first_token(&self, route: &Arc<str>, model: &Arc<str>, seconds: f64) {
        self.llm
            .first_token
            .get_or_create(&LlmModelLabels {
                route: RouteName(route.clone()),
                model: RouteName(model.clone()),
            })
            .observe(seconds);
    }

    pub fn llm_tokens(&self, route: &Arc<str>, model: &Arc<str>, kind: &'static str, n: u64) {
        if n > 0 {
            self.llm
                .tokens
                .get_or_create(&LlmTokenLabels {
                    route: RouteName(route.clone()),
                    model: RouteName(model.clone()),
                    kind,
                })
                .inc_by(n);
        }
    }

    /// One LLM request's usage, per client: its outcome, its tokens by
    /// kind, and its spend when its model is priced.
    pub fn llm_client_usage(
        &self,
        labels: ClientUsage<'_>,
        tokens: [(&'static str, u64); 4],
        spend: Option<f64>,
    ) {
        let (route, client, model, upstream) = (
            RouteName(labels.route.clone()),
            RouteName(labels.client.clone()),
            RouteName(labels.model.clone()),
            RouteName(labels.upstream.clone()),
        );
        self.llm
            .client_requests
            .get_or_create(&ClientOutcomeLabels {
                route: route.clone(),
                client: client.clone(),
                model: model.clone(),
                upstream: upstream.clone(),
                outcome: labels.outcome,
            })
            .inc();
        for (kind, n) in tokens.into_iter().filter(|(_, n)| *n > 0) {
            self.llm
                .client_tokens
                .get_or_create(&ClientTokenLabels {
                    route: route.clone(),
                    client: client.clone(),
                    model: model.clone(),
                    upstream: upstream.clone(),
                    kind,
                })
                .inc_by(n);
        }
        if let Some(spend) = spend.filter(|s| *s > 0.0) {
            self.llm
                .client_spend
                .get_or_create(&ClientLabels {
                    route,
                    client,
                    model,
                    upstream,
                })
                .inc_by(spend);
        }
    }

    pub fn llm_budget_refused(&self, route: &Arc<str>, client: &Arc<str>, bound: &'static str) {
        self.llm
            .budget_refusals
            .get_or_create(&BudgetLabels {
                route: RouteName(route.clone()),
                client: RouteName(client.clone()),
                bound,
            })
            .inc();
    }

    pub fn llm_cooldown(&self, route: &Arc<str>, upstream: &Arc<str>, until_unix: i64) {
        self.llm
            .cooldown_until
            .get_or_create(&LlmUpstreamLabels {
                route: RouteName(route.clone()),
                upstream: RouteName(upstream.clone()),
            })
            .set(until_unix);
    }

    /// The metrics of `server` in `route`'s group; it starts up.
    pub fn server_metrics(&self, route: &Arc<str>, server: &Arc<str>) -> ServerMetrics {
        let labels = ServerLabels {
            route: RouteName(route.clone()),
            server: RouteName(server.clone()),
        };
        let m = ServerMetrics {
            up: self.groups.up.get_or_create(&labels).clone(),
            picks: self.groups.picks.get_or_create(&labels).clone(),
            ejections: self
                .groups
                .ejections
                .get_or_create(&EjectionLabels {
                    route: labels.route.clone(),
                    server: labels.server.clone(),
                    reason: "failing",
                })
                .clone(),
        };
        m.up.set(1);
        m
    }

    /// `server` of `route`'s group was taken out for `reason` (the
    /// passive ejections of [`ServerMetrics::ejections`] are `failing`).
    pub fn server_ejected(&self, route: &Arc<str>, server: &Arc<str>, reason: &'static str) {
        self.groups
            .ejections
            .get_or_create(&EjectionLabels {
                route: RouteName(route.clone()),
                server: RouteName(server.clone()),
                reason,
            })
            .inc();
    }

    /// A request went to another server of `route`'s group.
    pub fn upstream_retry(&self, route: &Arc<str>, reason: &'static str) {
        self.groups
            .retries
            .get_or_create(&RetryLabels {
                route: RouteName(route.clone()),
                reason,
            })
            .inc();
    }

    /// A retry `route`'s budget did not allow.
    pub fn retry_budget_exhausted(&self, route: &Arc<str>) {
        self.groups
            .retry_budget_exhausted
            .get_or_create(&RouteLabels {
                route: RouteName(route.clone()),
            })
            .inc();
    }

    /// A lookup of `host`, a server name of `route`'s group, failed.
    pub fn dns_failure(&self, route: &Arc<str>, host: &str) {
        self.groups
            .dns_failures
            .get_or_create(&HostLabels {
                route: RouteName(route.clone()),
                host: host.to_string(),
            })
            .inc();
    }

    /// A reload finished; `generation` is the running one afterwards.
    pub fn config_reload(&self, ok: bool, generation: u64) {
        self.config_reloads
            .get_or_create(&ResultLabels {
                result: if ok { "ok" } else { "failed" },
            })
            .inc();
        self.config_generation.set(generation as i64);
    }

    pub fn config_loaded(&self, generation: u64) {
        self.config_generation.set(generation as i64);
    }

    pub fn accept_error(&self, kind: &'static str) {
        self.accept_errors.get_or_create(&KindLabels { kind }).inc();
    }

    /// An ACME order for `name` started.
    pub fn certificate_attempt(&self, name: &str) {
        self.certificates
            .attempts
            .get_or_create(&NameLabels { name: name.into() })
            .inc();
    }

    /// An ACME order for `name` ended without a certificate.
    pub fn certificate_failure(&self, name: &str) {
        self.certificates
            .failures
            .get_or_create(&NameLabels { name: name.into() })
            .inc();
    }

    /// The certificate now served for `name` expires at `not_after_unix`.
    pub fn certificate_installed(&self, name: &str, not_after_unix: i64) {
        self.certificates
            .not_after
            .locked()
            .insert(name.to_string(), not_after_unix);
    }

    /// Attempts so far for `name` (tests and the admin status).
    pub fn certificate_attempts(&self, name: &str) -> u64 {
        self.certificates
            .attempts
            .get_or_create(&NameLabels { name: name.into() })
            .get()
    }

    /// The cluster's handles (creating its values: call only with a
    /// `[cluster]`).
    pub fn cluster(&self) -> ClusterMetrics {
        let c = &self.cluster;
        let mode = |mode| c.decisions.get_or_create(&ModeLabels { mode }).clone();
        let published = |result| {
            c.holds_published
                .get_or_create(&HoldResultLabels { result })
                .clone()
        };
        let received = |via| {
            c.holds_received
                .get_or_create(&HoldViaLabels { via })
                .clone()
        };
        ClusterMetrics {
            redis_up: c.redis_up.get_or_create(&Vec::new()).clone(),
            instances: c.instances.get_or_create(&Vec::new()).clone(),
            by_redis: mode("redis"),
            fail_open: mode("fail_open"),
            fail_closed: mode("fail_closed"),
            redis_seconds: c.redis_seconds.get_or_create(&Vec::new()).clone(),
            holds_sent: published("sent"),
            holds_queue_full: published("queue_full"),
            holds_redis_down: published("redis_down"),
            holds_announced: received("announce"),
            holds_read: received("key"),
            budget_settles_pending: c.budget_settles_pending.get_or_create(&Vec::new()).clone(),
            budget_settles_dropped: c.budget_settles_dropped.get_or_create(&Vec::new()).clone(),
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        self.log_lines_dropped
            .set(super::logfile::dropped_lines() as i64);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        for (name, not_after) in self.certificates.not_after.locked().iter() {
            self.certificates
                .expiry
                .get_or_create(&NameLabels { name: name.clone() })
                .set(not_after - now);
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
