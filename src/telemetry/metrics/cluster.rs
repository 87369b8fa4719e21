//! `[cluster]`'s figures: the fleet's Redis, its decisions and the holds
//! and budget settles shared through it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::{HistogramFamily, Metrics};

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
pub(super) struct ClusterFamilies {
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
    pub(crate) redis_up: Gauge,
    /// Live instances of the fleet (the last known while Redis is down).
    pub(crate) instances: Gauge,
    /// Decisions made by Redis.
    pub(crate) by_redis: Counter,
    /// Decisions made locally while Redis did not answer, by mode.
    pub(crate) fail_open: Counter,
    pub(crate) fail_closed: Counter,
    /// Time of a request's round trip to Redis.
    pub(crate) redis_seconds: Histogram,
    /// Holds learnt here: sent to the fleet, or kept local.
    pub(crate) holds_sent: Counter,
    pub(crate) holds_queue_full: Counter,
    pub(crate) holds_redis_down: Counter,
    /// Holds learnt from the fleet: announced, or read from their keys.
    pub(crate) holds_announced: Counter,
    pub(crate) holds_read: Counter,
    /// Budget settles waiting for Redis, and those dropped past the bound.
    pub(crate) budget_settles_pending: Gauge,
    pub(crate) budget_settles_dropped: Counter,
}

impl ClusterFamilies {
    pub(super) fn register(registry: &mut Registry) -> Self {
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

impl Metrics {
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
}
