//! The per-address cap on open tunnels (upgraded connections: WebSocket).
//! Only upgrade requests touch it, so a map under a lock is cheap enough;
//! the count is taken when the upgrade is asked for (so concurrent
//! upgrades cannot overshoot) and given back when the tunnel ends or the
//! upgrade did not happen.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::Locked;

/// How long a tunnel may live: closed after `idle` with no byte either
/// way, and after `max_lifetime` whatever it carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TunnelLimits {
    pub(crate) idle: std::time::Duration,
    pub(crate) max_lifetime: Option<std::time::Duration>,
}

/// Tunnels per client address (IPv6 by /64), process-wide.
pub(crate) struct TunnelCap {
    max: AtomicUsize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One tunnel's place under the cap; dropping it frees the place.
pub(crate) struct CapTicket {
    cap: Arc<TunnelCap>,
    key: IpAddr,
}

impl TunnelCap {
    /// `max` tunnels per address; 0: no cap.
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(TunnelCap {
            max: AtomicUsize::new(max),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A reload's new cap: tunnels over a lowered one stay open.
    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// A place for one more tunnel of `client`, or `None` at its cap.
    pub(crate) fn take(self: &Arc<Self>, client: IpAddr) -> Option<CapTicket> {
        let max = self.max.load(Ordering::Relaxed);
        let key = key(client);
        let mut open = self.open.locked();
        let n = open.entry(key).or_insert(0);
        if max > 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(CapTicket {
            cap: self.clone(),
            key,
        })
    }

    /// Tunnels `client` holds now (for tests).
    #[cfg(test)]
    fn held(&self, client: IpAddr) -> usize {
        self.open.locked().get(&key(client)).copied().unwrap_or(0)
    }
}

impl Drop for CapTicket {
    fn drop(&mut self) {
        let mut open = self.cap.open.locked();
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// The address as the cap counts it: IPv4 as is, IPv6 by /64.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !u128::from(u64::MAX),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_counts_by_address_and_frees_on_drop() {
        let cap = TunnelCap::new(2);
        let a: IpAddr = "2001:db8::1".parse().expect("ip");
        let same: IpAddr = "2001:db8::2".parse().expect("ip");
        let one = cap.take(a).expect("1");
        let _two = cap.take(same).expect("2");
        assert!(cap.take(a).is_none(), "the /64 is at its cap");
        assert!(cap.take("192.0.2.1".parse().expect("ip")).is_some());
        drop(one);
        assert_eq!(cap.held(a), 1);
        cap.set_max(0);
        let _many: Vec<_> = (0..10).map(|_| cap.take(a).expect("no cap")).collect();
    }
}
