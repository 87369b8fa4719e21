//! Request admission: a bound on requests in flight, process-wide and per
//! route. Over the bound a request is shed at once with 503 and
//! `Retry-After: 1` — never queued, because a queued request keeps its
//! connection and buffers resident, which defeats the bound.
//!
//! A request's [`Admission`] is held by its response body (see
//! `RequestRecord` in respond) and released when the body ends, fails
//! or is dropped — not when the handler returns — so streams, downloads and
//! tunnels count for as long as they run.

pub mod rate;

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A bound on concurrent requests. `None` inside means no bound at all: no
/// semaphore, no atomic operations, exactly as without a gate.
#[derive(Clone, Default)]
pub struct Gate(Option<Arc<Semaphore>>);

impl Gate {
    /// A gate for `limit` requests; 0 disables it.
    pub fn new(limit: usize) -> Self {
        Gate((limit > 0).then(|| Arc::new(Semaphore::new(limit))))
    }

    /// Take a slot, or `Err` when full. `Ok(None)` when there is no gate.
    fn try_enter(&self) -> Result<Option<OwnedSemaphorePermit>, Full> {
        match &self.0 {
            None => Ok(None),
            Some(s) => s.clone().try_acquire_owned().map(Some).map_err(|_| Full),
        }
    }

    /// Slots in use (for tests and the admin view).
    pub fn in_use(&self, limit: usize) -> usize {
        self.0.as_ref().map_or(0, |s| limit - s.available_permits())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Full;

/// Which gate shed a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shed {
    Global,
    Route,
    Token,
}

impl Shed {
    pub fn label(self) -> &'static str {
        match self {
            Shed::Global => "global",
            Shed::Route => "route",
            Shed::Token => "token",
        }
    }
}

/// A request's place under the gates; dropping it frees the place.
pub struct Admission {
    _global: Option<OwnedSemaphorePermit>,
    _route: Option<OwnedSemaphorePermit>,
    _token: Option<OwnedSemaphorePermit>,
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
    pub fn enter_route(&mut self, gate: &Gate) -> Result<(), Shed> {
        self._route = gate.try_enter().map_err(|_| Shed::Route)?;
        Ok(())
    }

    /// Also enter a client token's gate (LLM routes), held as long as the
    /// rest of the admission.
    pub fn enter_token(&mut self, gate: &Gate) -> Result<(), Shed> {
        self._token = gate.try_enter().map_err(|_| Shed::Token)?;
        Ok(())
    }
}

/// The process-wide gate plus the metrics every admission reports to.
pub struct Admitter {
    global: Gate,
    in_flight: Gauge,
    hold_time: Histogram,
}

impl Admitter {
    pub fn new(global_limit: usize, in_flight: Gauge, hold_time: Histogram) -> Self {
        Admitter {
            global: Gate::new(global_limit),
            in_flight,
            hold_time,
        }
    }

    /// Admit a request through the process-wide gate.
    pub fn admit(&self) -> Result<Admission, Shed> {
        let global = self.global.try_enter().map_err(|_| Shed::Global)?;
        self.in_flight.inc();
        Ok(Admission {
            _global: global,
            _route: None,
            _token: None,
            since: Instant::now(),
            in_flight: self.in_flight.clone(),
            hold_time: self.hold_time.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitter(limit: usize) -> Admitter {
        Admitter::new(limit, Gauge::default(), Histogram::new([1.0]))
    }

    #[test]
    fn sheds_at_the_limit_and_frees_on_drop() {
        let a = admitter(2);
        let one = a.admit().expect("1");
        let _two = a.admit().expect("2");
        assert_eq!(a.admit().err(), Some(Shed::Global));
        assert_eq!(a.in_flight.get(), 2);
        drop(one);
        assert_eq!(a.in_flight.get(), 1);
        a.admit().expect("a slot freed");
    }

    #[test]
    fn route_gate_sheds_and_gives_back_the_global_slot() {
        let a = admitter(10);
        let route = Gate::new(1);
        let mut held = a.admit().expect("1");
        held.enter_route(&route).expect("route slot");
        let mut second = a.admit().expect("global has room");
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
        let held: Vec<Admission> = (0..5000).map(|_| a.admit().expect("never shed")).collect();
        assert_eq!(held.len(), 5000);
        assert!(a.global.0.is_none());
    }
}
