//! The server's own figures: requests by route and status, their latency,
//! upstream errors, client connections, and what admission shed or held.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{HistogramFamily, Lazy, Metrics, RouteLabels, RouteName, latency_histogram};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: RouteName,
    status: u16,
}

/// Why a request to an upstream failed.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub(crate) enum UpstreamErrorKind {
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
    pub(crate) fn before_sending(self) -> bool {
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShedLabels {
    reason: &'static str,
    route: RouteName,
}

pub(super) struct ServerFamilies {
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
    tunnels_closed: Family<ReasonLabels, Counter>,
    admission_hold: Histogram,
    /// Sheds by any gate, for the admin status.
    shed_total: AtomicU64,
    no_route: Arc<str>,
}

impl ServerFamilies {
    pub(super) fn register(registry: &mut Registry) -> Self {
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
            "Requests answered 503 by a request gate or a cap, by reason (global, global_heaviest, \
             route, route_heaviest, token, tunnels_per_ip, llm_body_budget, llm_body_heaviest, ...) and route",
            requests_shed.clone(),
        );
        let tunnels_closed = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "tunnels_closed",
            "Upgraded tunnels (WebSocket) ended, by reason (closed, idle_timeout, max_lifetime, \
             reclaimed, shutdown, connection)",
            tunnels_closed.clone(),
        );
        let admission_hold = latency_histogram();
        registry.register(
            "admission_hold_seconds",
            "How long requests held their admission slot (until the response body ended)",
            admission_hold.clone(),
        );
        ServerFamilies {
            requests,
            request_duration,
            upstream_errors,
            connections_open,
            connections_accepted,
            worker_connections_accepted,
            connections_refused,
            connections_closed,
            accept_errors,
            requests_in_flight,
            connections_parked,
            connection_parks,
            requests_shed,
            tunnels_closed,
            admission_hold,
            shed_total: AtomicU64::new(0),
            no_route: "-".into(),
        }
    }
}

/// One route's request counters and latency histogram, held by the route.
pub(crate) struct RouteMetrics {
    duration: Histogram,
    requests: Family<RequestLabels, Counter>,
    route: RouteName,
    /// The counter of each status (100–599), looked up in the family the
    /// first time the status is seen.
    by_status: Lazy<Counter>,
}

impl RouteMetrics {
    pub(crate) fn record(&self, status: u16, seconds: f64) {
        self.duration.observe(seconds);
        let labels = || RequestLabels {
            route: self.route.clone(),
            status,
        };
        self.by_status
            .get(usize::from(status).checked_sub(100), || {
                self.requests.get_or_create(&labels()).clone()
            })
            .inc();
    }
}

impl Metrics {
    /// A route's request metrics, resolved once (when the route table is
    /// built), so recording a request takes no lock on a metric family.
    pub(crate) fn route_metrics(&self, route: &Arc<str>) -> Arc<RouteMetrics> {
        let name = RouteName(route.clone());
        Arc::new(RouteMetrics {
            duration: self
                .server
                .request_duration
                .get_or_create(&RouteLabels {
                    route: name.clone(),
                })
                .clone(),
            requests: self.server.requests.clone(),
            by_status: Lazy::new(Some(500)),
            route: name,
        })
    }

    /// `route` is `None` for requests that matched no route (label `-`).
    pub(crate) fn record_request(&self, route: Option<&Arc<str>>, status: u16, seconds: f64) {
        let s = &self.server;
        let route = RouteName(route.unwrap_or(&s.no_route).clone());
        s.request_duration
            .get_or_create(&RouteLabels {
                route: route.clone(),
            })
            .observe(seconds);
        s.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
    }

    pub(crate) fn record_upstream_error(&self, route: &Arc<str>, kind: UpstreamErrorKind) {
        self.server
            .upstream_errors
            .get_or_create(&UpstreamErrorLabels {
                route: RouteName(route.clone()),
                kind,
            })
            .inc();
    }

    pub(crate) fn in_flight_gauge(&self) -> Gauge {
        self.server.requests_in_flight.clone()
    }

    pub(crate) fn admission_hold_histogram(&self) -> Histogram {
        self.server.admission_hold.clone()
    }

    /// `route` is `None` when shed before routing (label `-`).
    pub(crate) fn request_shed(&self, reason: &'static str, route: Option<&Arc<str>>) {
        let s = &self.server;
        s.shed_total.fetch_add(1, Ordering::Relaxed);
        s.requests_shed
            .get_or_create(&ShedLabels {
                reason,
                route: RouteName(route.unwrap_or(&s.no_route).clone()),
            })
            .inc();
    }

    /// A tunnel ended, for `reason`.
    pub(crate) fn tunnel_closed(&self, reason: &'static str) {
        self.server
            .tunnels_closed
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// Requests shed by any gate since start.
    pub(crate) fn shed_total(&self) -> u64 {
        self.server.shed_total.load(Ordering::Relaxed)
    }

    /// Requests admitted and not yet finished.
    /// Idle connections parked now (see `conn::serve`).
    pub(crate) fn parked_gauge(&self) -> &Gauge {
        &self.server.connections_parked
    }

    pub(crate) fn connection_parked(&self) {
        self.server.connection_parks.inc();
    }

    pub(crate) fn in_flight(&self) -> i64 {
        self.server.requests_in_flight.get()
    }

    /// The open-connections gauge of a listener (held by each connection).
    pub(crate) fn open_connections(&self, listener: &str) -> Gauge {
        self.server
            .connections_open
            .get_or_create(&ListenerLabels {
                listener: listener.to_string(),
            })
            .clone()
    }

    /// The accepted-connections counter of a listener, resolved once per
    /// accept loop.
    pub(crate) fn connections_accepted(&self, listener: &str) -> Counter {
        self.server
            .connections_accepted
            .get_or_create(&ListenerLabels {
                listener: listener.to_string(),
            })
            .clone()
    }

    /// The accepted-connections counter of a worker.
    pub(crate) fn worker_accepted(&self, worker: usize) -> Counter {
        self.server
            .worker_connections_accepted
            .get_or_create(&WorkerLabels { worker })
            .clone()
    }

    pub(crate) fn connection_refused(&self, reason: &'static str) {
        self.server
            .connections_refused
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub(crate) fn connection_closed(&self, reason: &'static str) {
        self.server
            .connections_closed
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub(crate) fn accept_error(&self, kind: &'static str) {
        self.server
            .accept_errors
            .get_or_create(&KindLabels { kind })
            .inc();
    }
}
