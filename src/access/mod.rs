//! Who may use a route: its address rules (nginx's `allow`/`deny`), then
//! basic authentication ([`basic`]). Checked in the lifecycle's route
//! policy phase, after the route's rate limit and gate; a route with
//! neither has no [`RouteAccess`] and pays one `None` check.
//!
//! The client's address is the peer's — after the PROXY protocol, so a
//! balancer's client — or, when the peer is one of `trusted_proxies`, the
//! right-most `X-Forwarded-For` address that is not (what `X-Real-IP`
//! carries upstream, nginx's `real_ip_recursive`).

pub(crate) mod basic;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use http::{HeaderMap, StatusCode, header};
use ipnet::IpNet;

use crate::config::{AddressRules, RouteConfig};
use crate::respond::Rescue;
use crate::sync::Locked;

/// One snapshot's access checks of one route.
pub(crate) struct RouteAccess {
    addresses: Option<AddressRules>,
    basic: Option<basic::Guard>,
}

/// The request facts the checks read.
pub(crate) struct Asking<'a> {
    pub(crate) peer: IpAddr,
    pub(crate) trusted_proxies: &'a [IpNet],
    pub(crate) route: &'a str,
    pub(crate) host: &'a str,
}

impl RouteAccess {
    /// Let the request on, or say how it is answered: 403 for an address
    /// the rules deny, 401/429/503 from basic auth. A credential that
    /// passed is removed: it was for weir, not the upstream.
    pub(crate) async fn check(
        &self,
        headers: &mut HeaderMap,
        a: &Asking<'_>,
    ) -> Result<(), Rescue> {
        if let Some(rules) = &self.addresses {
            let client = client_address(a.peer, headers, a.trusted_proxies);
            if !rules.allows(client) {
                tracing::debug!(route = a.route, %client, "address denied");
                return Err(Rescue::status(StatusCode::FORBIDDEN));
            }
        }
        if let Some(guard) = &self.basic {
            let asker = basic::Asker {
                peer: a.peer,
                route: a.route,
                host: a.host,
            };
            guard.authenticate(headers, &asker).await?;
            headers.remove(header::AUTHORIZATION);
        }
        Ok(())
    }
}

/// The client a request is from: the peer, or behind trusted proxies the
/// right-most forwarded address that is not one of them.
fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(&ip.to_canonical()));
    if trusted.is_empty() || !is_trusted(&peer) {
        return peer;
    }
    let forwarded: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        .collect();
    forwarded
        .into_iter()
        .rev()
        .find(|ip| !is_trusted(ip))
        .unwrap_or(peer)
}

/// What access checks keep across snapshots: per route, basic auth's
/// failures and cache; process-wide, the verifier.
pub(crate) struct Standing {
    verifier: Arc<basic::Verifier>,
    routes: std::sync::Mutex<HashMap<String, Arc<basic::Kept>>>,
}

impl Standing {
    pub(crate) fn new() -> Self {
        Standing {
            verifier: Arc::new(basic::Verifier::new()),
            routes: Default::default(),
        }
    }

    /// The route's checks for a new snapshot, keeping what its basic auth
    /// learnt; `None` when it checks nothing.
    pub(crate) fn route(&self, route: &RouteConfig) -> Option<Arc<RouteAccess>> {
        let access = route.access.as_deref()?;
        let basic = access.basic_auth.as_ref().map(|auth| {
            let kept = self
                .routes
                .locked()
                .entry(route.name.clone())
                .or_insert_with(|| Arc::new(basic::Kept::new()))
                .clone();
            basic::Guard::new(auth, kept, self.verifier.clone())
        });
        Some(Arc::new(RouteAccess {
            addresses: access.addresses.clone(),
            basic,
        }))
    }

    /// Forget the routes a new config no longer has.
    pub(crate) fn retain(&self, routes: &[RouteConfig]) {
        self.routes
            .locked()
            .retain(|name, _| routes.iter().any(|r| r.name == *name && r.access.is_some()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_trusted_proxies_the_first_untrusted_forwarded_address_is_the_client() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            "198.51.100.1, 203.0.113.5, 10.0.0.2"
                .parse()
                .expect("value"),
        );
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(
            client_address(ip("10.0.0.1"), &h, &trusted),
            ip("203.0.113.5")
        );
        assert_eq!(
            client_address(ip("192.0.2.9"), &h, &trusted),
            ip("192.0.2.9"),
            "an untrusted peer's header is not believed"
        );
        assert_eq!(client_address(ip("10.0.0.1"), &h, &[]), ip("10.0.0.1"));
    }
}
