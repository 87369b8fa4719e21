//! Request admission: a bound on requests in flight, process-wide and per
//! route. Over the bound a request is shed at once with 503 and
//! `Retry-After: 1` — never queued, because a queued request keeps its
//! connection and buffers resident, which defeats the bound.
//!
//! A request's [`Admission`] is held by its response body (see
//! `RequestRecord` in respond) and released when the body ends, fails
//! or is dropped — not when the handler returns — so streams, downloads and
//! tunnels count for as long as they run.
//!
//! A route's client limits — its per-client rate, and on LLM routes a
//! client token's concurrency — are applied by [`limit_client`]: by this
//! process alone, or, when the route shares them with its fleet, by one
//! decision of `crate::cluster` (a Redis script; a lease then lives in the
//! admission like a semaphore permit).

pub(crate) mod auth_failures;
pub(crate) mod fair;
pub(crate) mod rate;
pub(crate) mod tunnels;

use crate::cluster::{Ask, BudgetAsk, Cluster, Decision, Lease, OverBudget, SharedReservation};
pub(crate) use fair::{Gate, Tunnel};
use rate::{Client, RateLimit, Refusal};

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

/// A client token's concurrency bound: this process's own gate, or the
/// fleet's slots in Redis.
#[derive(Clone)]
pub(crate) enum TokenGate {
    Local(Gate),
    Shared {
        cluster: Arc<Cluster>,
        /// The token's lease key.
        key: Arc<str>,
        limit: usize,
    },
}

impl TokenGate {
    /// `limit` slots (0: none), the fleet's when `cluster` is given.
    pub(crate) fn new(limit: usize, shared: Option<(&Arc<Cluster>, Arc<str>)>) -> Self {
        match shared {
            Some((cluster, key)) if limit > 0 => TokenGate::Shared {
                cluster: cluster.clone(),
                key,
                limit,
            },
            _ => TokenGate::Local(Gate::new(limit)),
        }
    }
}

/// A route's client limits for one request, in order: the rate of
/// `client` (`id` names it in the fleet's keys: its address when `None`),
/// then the token's concurrency slot, held by `admission`. Limits the
/// route keeps locally cost what they always did; shared ones cost one
/// Redis round trip for both, or none while Redis is down.
pub(crate) async fn limit_client(
    rate: Option<&RateLimit>,
    client: Client,
    id: Option<&str>,
    gate: Option<&TokenGate>,
    admission: Option<&mut Admission>,
) -> Result<(), Refusal> {
    limit_client_reserving(rate, client, id, (gate, None), admission, None)
        .await
        .map(|_| ())
}

/// What the fleet's budget said, decided with the limits.
pub(crate) enum Budgeted {
    /// No shared budget was asked.
    NotAsked,
    /// Reserved in Redis: settle it when the request ends.
    Reserved(SharedReservation),
    /// The budget has no room; nothing was taken.
    Over(OverBudget),
    /// Redis did not answer (`fail_open`): the caller enforces
    /// 1/`instances` of the budget locally.
    LocalShare { instances: u32 },
}

/// [`limit_client`] and, in the same decision (one Redis round trip), a
/// reservation of a client token's budget kept by the fleet; with a
/// runtime key, the key's own rate (`key_rate`, beside the route's: both
/// must pass) and its concurrency (`gate`, the fleet's with `[cluster]`).
pub(crate) async fn limit_client_reserving(
    rate: Option<&RateLimit>,
    client: Client,
    id: Option<&str>,
    (gate, key_rate): (Option<&TokenGate>, Option<&RateLimit>),
    mut admission: Option<&mut Admission>,
    budget: Option<(&Arc<Cluster>, BudgetAsk<'_>)>,
) -> Result<Budgeted, Refusal> {
    let shared_rate = rate.and_then(|r| Some((r, r.cluster()?)));
    let shared_key_rate = key_rate.and_then(|r| Some((r, r.cluster()?)));
    let shared_gate = match gate {
        Some(TokenGate::Shared {
            cluster,
            key,
            limit,
        }) => Some((cluster, key, *limit)),
        _ => None,
    };
    // The limits this process keeps alone, as without a cluster: the
    // key's own rate first (a key over it leaves the route's untouched).
    if let Some(key_rate) = key_rate
        && shared_key_rate.is_none()
    {
        key_rate.check(client).map_err(Refusal::KeyLimited)?;
    }
    if let Some(rate) = rate
        && shared_rate.is_none()
    {
        rate.check(client).map_err(Refusal::Limited)?;
    }
    let Some(cluster) = shared_rate
        .map(|(_, c)| c)
        .or(shared_key_rate.map(|(_, c)| c))
        .or(shared_gate.map(|(c, _, _)| c))
        .or(budget.map(|(c, _)| c))
    else {
        if let (Some(TokenGate::Local(g)), Some(a)) = (gate, admission) {
            a.enter_token(g).map_err(|_| Refusal::Full)?;
        }
        return Ok(Budgeted::NotAsked);
    };
    let ip_id;
    let id = match id {
        Some(id) => id,
        None => {
            ip_id = client.ip_id().unwrap_or_default();
            &ip_id
        }
    };
    let rate_key = shared_rate.and_then(|(r, _)| r.shared_key(id));
    let key_rate_key = shared_key_rate.and_then(|(r, _)| r.shared_key(id));
    let ask = Ask {
        rate: rate_key.as_ref().map(|(k, g)| (k.as_str(), *g)),
        lease: shared_gate.map(|(_, key, limit)| (key, limit)),
        budget: budget.map(|(_, b)| b),
        key_rate: key_rate_key.as_ref().map(|(k, g)| (k.as_str(), *g)),
    };
    let mut budgeted = Budgeted::NotAsked;
    let lease = match cluster.decide(ask).await {
        Decision::Admitted(lease) => lease,
        Decision::Reserved(lease, reservation) => {
            budgeted = Budgeted::Reserved(reservation);
            lease
        }
        Decision::OverBudget(over) => return Ok(Budgeted::Over(over)),
        Decision::Limited(wait) => {
            let rate = shared_rate.map(|(r, _)| r);
            return Err(Refusal::Limited(rate.map_or(
                rate::Limited {
                    retry_after: 1,
                    log: false,
                },
                |r| r.limited(client, wait),
            )));
        }
        Decision::KeyLimited(wait) => {
            return Err(Refusal::KeyLimited(match shared_key_rate {
                Some((r, _)) => r.limited(client, wait),
                None => rate::Limited {
                    retry_after: 1,
                    log: false,
                },
            }));
        }
        Decision::Full => return Err(Refusal::Full),
        Decision::Closed => return Err(Refusal::Unavailable),
        Decision::Open { instances } => {
            if budget.is_some() {
                budgeted = Budgeted::LocalShare { instances };
            }
            if let Some((key_rate, _)) = shared_key_rate {
                key_rate
                    .check_share(client, instances)
                    .map_err(Refusal::KeyLimited)?;
            }
            if let Some((rate, _)) = shared_rate {
                rate.check_share(client, instances)
                    .map_err(Refusal::Limited)?;
            }
            match shared_gate {
                Some((cluster, key, limit)) => Some(
                    cluster
                        .lease_here(key, share(limit, instances))
                        .ok_or(Refusal::Full)?,
                ),
                None => None,
            }
        }
    };
    // A local token gate beside a shared rate (not made by config today).
    if let (Some(TokenGate::Local(g)), Some(a)) = (gate, admission.as_deref_mut()) {
        a.enter_token(g).map_err(|_| Refusal::Full)?;
    }
    if let (Some(lease), Some(a)) = (lease, admission) {
        a._lease = Some(lease);
    }
    Ok(budgeted)
}

/// One instance's share of `limit` slots in a fleet of `instances`
/// (rounded up: at least one).
fn share(limit: usize, instances: u32) -> usize {
    limit.div_ceil(instances.max(1) as usize).max(1)
}

/// Which gate shed a request, and why: full, or (fair gates) because
/// the client holds the most slots while the gate is nearly full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shed {
    Global,
    GlobalHeaviest,
    Route,
    RouteHeaviest,
    Token,
}

impl Shed {
    /// The `reason` label of `weir_requests_shed_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Shed::Global => "global",
            Shed::GlobalHeaviest => "global_heaviest",
            Shed::Route => "route",
            Shed::RouteHeaviest => "route_heaviest",
            Shed::Token => "token",
        }
    }

    fn of(refused: fair::Refused, full: Shed, heaviest: Shed) -> Shed {
        match refused {
            fair::Refused::Full => full,
            fair::Refused::Heaviest => heaviest,
        }
    }
}

/// A request's place under the gates; dropping it frees the place.
pub(crate) struct Admission {
    /// The client the fair gates count it under.
    client: IpAddr,
    _global: Option<fair::Slot>,
    _route: Option<fair::Slot>,
    _token: Option<fair::Slot>,
    /// A client token's slot in the fleet, given back with the rest.
    _lease: Option<Lease>,
    since: Instant,
    in_flight: Gauge,
    hold_time: Histogram,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.in_flight.dec();
        self.hold_time.observe(self.since.elapsed().as_secs_f64());
    }
}

impl Admission {
    /// Also enter the matched route's gate. On `Err` the caller drops the
    /// admission, which returns the global slot too.
    pub(crate) fn enter_route(&mut self, gate: &Gate) -> Result<(), Shed> {
        self._route = gate
            .try_enter(self.client)
            .map_err(|r| Shed::of(r, Shed::Route, Shed::RouteHeaviest))?;
        Ok(())
    }

    /// Also enter a client token's gate (LLM routes), held as long as the
    /// rest of the admission.
    pub(crate) fn enter_token(&mut self, gate: &Gate) -> Result<(), Shed> {
        self._token = gate.try_enter(self.client).map_err(|_| Shed::Token)?;
        Ok(())
    }

    /// The request became a tunnel: the fair gates it holds slots of may
    /// hand them to a lighter client while it is idle (`tunnel` is then
    /// told to close).
    pub(crate) fn hold_tunnel(&mut self, tunnel: &Arc<Tunnel>) {
        for slot in [&mut self._global, &mut self._route].into_iter().flatten() {
            slot.hold_tunnel(tunnel);
        }
    }
}

/// The process-wide gate plus the metrics every admission reports to (a
/// clone shares them: a WebSocket connection admits each of its turns).
#[derive(Clone)]
pub(crate) struct Admitter {
    global: Gate,
    in_flight: Gauge,
    hold_time: Histogram,
}

impl Admitter {
    pub(crate) fn new(global_limit: usize, in_flight: Gauge, hold_time: Histogram) -> Self {
        Admitter {
            global: Gate::fair(global_limit),
            in_flight,
            hold_time,
        }
    }

    /// Admit a request of `client` through the process-wide gate.
    pub(crate) fn admit(&self, client: IpAddr) -> Result<Admission, Shed> {
        let global = self
            .global
            .try_enter(client)
            .map_err(|r| Shed::of(r, Shed::Global, Shed::GlobalHeaviest))?;
        self.in_flight.inc();
        Ok(Admission {
            client,
            _global: global,
            _route: None,
            _token: None,
            _lease: None,
            since: Instant::now(),
            in_flight: self.in_flight.clone(),
            hold_time: self.hold_time.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));

    fn admitter(limit: usize) -> Admitter {
        Admitter::new(limit, Gauge::default(), Histogram::new([1.0]))
    }

    #[test]
    fn sheds_at_the_limit_and_frees_on_drop() {
        let a = admitter(2);
        let one = a.admit(A).expect("1");
        let _two = a.admit(A).expect("2");
        assert_eq!(a.admit(A).err(), Some(Shed::Global));
        assert_eq!(a.in_flight.get(), 2);
        drop(one);
        assert_eq!(a.in_flight.get(), 1);
        a.admit(A).expect("a slot freed");
    }

    #[test]
    fn route_gate_sheds_and_gives_back_the_global_slot() {
        let a = admitter(10);
        let route = Gate::new(1);
        let mut held = a.admit(A).expect("1");
        held.enter_route(&route).expect("route slot");
        let mut second = a.admit(A).expect("global has room");
        assert_eq!(second.enter_route(&route).err(), Some(Shed::Route));
        drop(second);
        assert_eq!(
            a.global.in_use(10),
            1,
            "the shed request's global slot was returned"
        );
    }

    #[test]
    fn zero_means_no_gate() {
        let a = admitter(0);
        let held: Vec<Admission> = (0..5000).map(|_| a.admit(A).expect("never shed")).collect();
        assert_eq!(held.len(), 5000);
        assert_eq!(a.global.in_use(0), 0);
    }
}
