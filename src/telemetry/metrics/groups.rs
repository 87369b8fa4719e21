//! The servers of upstream groups (proxy routes' and LLM routes'): up,
//! picks, ejections, retries and name lookups.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Metrics, RouteLabels, RouteName};

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

/// Every reason a server is taken out for ([`Metrics::server_ejected`]).
const EJECTION_REASONS: [&str; 4] = ["failing", "rate_limited", "overloaded", "unreachable"];

pub(super) struct GroupFamilies {
    up: Family<ServerLabels, Gauge>,
    picks: Family<ServerLabels, Counter>,
    ejections: Family<EjectionLabels, Counter>,
    retries: Family<RetryLabels, Counter>,
    retry_budget_exhausted: Family<RouteLabels, Counter>,
    dns_failures: Family<HostLabels, Counter>,
}

impl GroupFamilies {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let m = GroupFamilies {
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
pub(crate) struct ServerMetrics {
    pub(crate) up: Gauge,
    pub(crate) picks: Counter,
    pub(crate) ejections: Counter,
}

impl Metrics {
    /// The metrics of `server` in `route`'s group; it starts up.
    pub(crate) fn server_metrics(&self, route: &Arc<str>, server: &Arc<str>) -> ServerMetrics {
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

    /// `server` left `route`'s group (its address left the name's
    /// answer): its series go.
    pub(crate) fn forget_server(&self, route: &Arc<str>, server: &Arc<str>) {
        let labels = ServerLabels {
            route: RouteName(route.clone()),
            server: RouteName(server.clone()),
        };
        self.groups.up.remove(&labels);
        self.groups.picks.remove(&labels);
        for reason in EJECTION_REASONS {
            self.groups.ejections.remove(&EjectionLabels {
                route: labels.route.clone(),
                server: labels.server.clone(),
                reason,
            });
        }
    }

    /// `server` of `route`'s group was taken out for `reason` (the
    /// passive ejections of [`ServerMetrics::ejections`] are `failing`).
    pub(crate) fn server_ejected(&self, route: &Arc<str>, server: &Arc<str>, reason: &'static str) {
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
    pub(crate) fn upstream_retry(&self, route: &Arc<str>, reason: &'static str) {
        self.groups
            .retries
            .get_or_create(&RetryLabels {
                route: RouteName(route.clone()),
                reason,
            })
            .inc();
    }

    /// A retry `route`'s budget did not allow.
    pub(crate) fn retry_budget_exhausted(&self, route: &Arc<str>) {
        self.groups
            .retry_budget_exhausted
            .get_or_create(&RouteLabels {
                route: RouteName(route.clone()),
            })
            .inc();
    }

    /// A lookup of `host`, a server name of `route`'s group, failed.
    pub(crate) fn dns_failure(&self, route: &Arc<str>, host: &str) {
        self.groups
            .dns_failures
            .get_or_create(&HostLabels {
                route: RouteName(route.clone()),
                host: host.to_string(),
            })
            .inc();
    }
}
