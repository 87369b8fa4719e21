//! A route's upstream: its group of servers, what weir knows of them
//! (health checks, re-resolved names), its retry rule and budget, and the
//! clients that reach each server.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::time::Instant;

use crate::sync::Locked;

use super::balance::{Budget, Group, Member};
use super::dial::connector;
use super::server::{Dialing, Server, pooled_client};
use crate::config::{HashKey, Retry, RouteConfig, UpstreamGroup, UpstreamSettings};
use crate::telemetry::Metrics;

/// Where a route sends its requests: a group of servers, what weir knows
/// of them, and the clients that reach each (one pool per worker, so a
/// worker reuses only connections driven by its own runtime).
pub(crate) struct Upstream {
    /// Replaced whole when a server name resolves to other addresses; a
    /// request works on the group it loaded.
    pub(crate) group: Arc<ArcSwap<Group<Server>>>,
    pub(crate) hash_key: Option<HashKey>,
    /// The group as configured, for logs when no server was picked.
    pub(crate) label: Arc<str>,
    pub(crate) retry: RouteRetry,
}

/// A route's retry rule and what its budget has spent.
pub(crate) struct RouteRetry {
    pub(crate) methods: Vec<http::Method>,
    pub(crate) budget: Budget,
    /// When the spent budget was last logged: once per window.
    warned: std::sync::Mutex<Option<Instant>>,
}

impl RouteRetry {
    fn new(retry: &Retry) -> Self {
        RouteRetry {
            methods: retry.methods.clone(),
            budget: Budget::new(retry.budget, Instant::now()),
            warned: std::sync::Mutex::new(None),
        }
    }

    /// Whether a retry fits the budget; counted and logged when not.
    pub(crate) fn allowed(&self, route: &Arc<str>, metrics: &Metrics) -> bool {
        let now = Instant::now();
        if self.budget.try_retry(now) {
            return true;
        }
        metrics.retry_budget_exhausted(route);
        let window = self.budget.rule().window;
        let mut warned = self.warned.locked();
        if warned.is_none_or(|w| now.saturating_duration_since(w) >= window) {
            *warned = Some(now);
            tracing::warn!(route = %route, "retry budget spent: failures are answered without trying another server");
        }
        false
    }
}

impl Upstream {
    pub(crate) fn new(
        route: &RouteConfig,
        group: &UpstreamGroup,
        settings: &UpstreamSettings,
        tls: &rustls::ClientConfig,
        workers: usize,
        metrics: &Arc<Metrics>,
    ) -> Self {
        let route_name: Arc<str> = route.name.as_str().into();
        let dial = Dialing {
            connect_timeout: route.connect_timeout,
            settings: settings.clone(),
            tls: tls.clone(),
            http: group.http,
            workers,
        };
        // Names are served as the system resolves them per connection until
        // their first lookup gives the addresses.
        let members = group
            .servers
            .iter()
            .map(|m| Member {
                target: Server::new(&m.target, None, &route_name, metrics, &dial),
                weight: m.weight,
                backup: m.backup,
            })
            .collect();
        let label = match &group.servers[..] {
            [one] => one.target.to_string(),
            many => format!("{} servers", many.len()),
        };
        let servers = Arc::new(ArcSwap::from_pointee(Group::new(
            members,
            group.policy,
            group.ejection,
        )));
        if let Some(check) = &group.health_check {
            let client = pooled_client(
                connector(route.connect_timeout, tls, group.http),
                settings,
                group.http,
            );
            super::check::spawn(&servers, check.clone(), route_name.clone(), client);
        }
        super::resolve::spawn(&servers, group, settings, route_name, metrics, dial);
        Upstream {
            group: servers,
            hash_key: group.hash_key.clone(),
            label: label.into(),
            retry: RouteRetry::new(&group.retry),
        }
    }
}
