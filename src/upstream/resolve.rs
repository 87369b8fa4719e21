//! DNS re-resolution of a group's server names: containers and cloud load
//! balancers change addresses, so an `http://` server given by name is
//! looked up at start and every `resolve_interval` (sooner when the
//! answer's TTL is shorter), and each address it resolves to (A and AAAA)
//! is a server of the group, with the entry's weight and backup flag.
//!
//! When the addresses change, the group is rebuilt with
//! [`Group::carrying`]: servers that stay keep their state, new ones join
//! with slow start, and the ones gone leave when the requests already on
//! them end. A failed lookup keeps the last good answer and says so once
//! per round. Until a name's first answer, the name itself is the server
//! (resolved by the system per connection, as a single upstream always
//! was), so a name that does not resolve at start does not stop weir
//! serving the rest of the group.
//!
//! `https://` names are not expanded: the certificate is checked against
//! the name, which the connector takes from the address it dials, so each
//! address would need its own name-to-address mapping in the TLS
//! connector.

use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::{Resolver, TokioResolver};
use tokio::time::Instant;

use super::balance::{Group, Member};
use super::server::{Dialing, Server, server_label};
use crate::config::{ServerUrl, UpstreamGroup, UpstreamSettings};
use crate::telemetry::Metrics;

/// The shortest time between two lookups, whatever the TTL says (a TTL of
/// 0 would otherwise ask without pause).
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The most servers one name becomes. Each is a server with its own state,
/// pool and metric series: a name answering thousands of addresses (a
/// misconfigured or hostile zone) must not make thousands. Past it the
/// lowest addresses are kept, so every instance keeps the same ones.
pub(crate) const MAX_ADDRS_PER_NAME: usize = 64;

/// One configured server and what its name last resolved to.
struct Entry {
    uri: ServerUrl,
    weight: u32,
    backup: bool,
    /// The name to look up; none for an address, an `https://` URL or a
    /// unix socket.
    name: Option<String>,
    /// The last good answer (none: no answer yet).
    addrs: Option<Vec<IpAddr>>,
    /// The last answer had more than [`MAX_ADDRS_PER_NAME`] (said once).
    capped: bool,
}

/// A server the group should have.
struct Want<'a> {
    uri: &'a ServerUrl,
    addr: Option<IpAddr>,
    label: String,
}

/// Start re-resolving `config`'s server names, if it has any.
pub(crate) fn spawn(
    group: &Arc<ArcSwap<Group<Server>>>,
    config: &UpstreamGroup,
    settings: &UpstreamSettings,
    route: Arc<str>,
    metrics: &Arc<Metrics>,
    dial: Dialing,
) {
    let entries: Vec<Entry> = config
        .servers
        .iter()
        .map(|m| Entry {
            name: name_of(&m.target),
            uri: m.target.clone(),
            weight: m.weight,
            backup: m.backup,
            addrs: None,
            capped: false,
        })
        .collect();
    if entries.iter().all(|e| e.name.is_none()) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(%route, "no runtime to re-resolve server names on; they are resolved per connection");
        return;
    };
    let Some(resolver) = resolver(settings, &route) else {
        return;
    };
    let task = Task {
        group: Arc::downgrade(group),
        entries,
        resolver,
        interval: settings.resolve_interval,
        route,
        metrics: metrics.clone(),
        dial,
    };
    runtime.spawn(task.run());
}

/// The name to look up in `url`, if it is an `http://` URL with a name: a
/// unix socket's `http://localhost` is not one.
fn name_of(url: &ServerUrl) -> Option<String> {
    let uri = &url.uri;
    if url.socket.is_some() || uri.scheme() != Some(&http::uri::Scheme::HTTP) {
        return None;
    }
    let host = uri.host()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_err().then(|| host.to_string())
}

/// The servers an answer makes: its addresses, each once, the lowest
/// [`MAX_ADDRS_PER_NAME`]; and how many distinct addresses it had.
fn servers_of(answer: impl Iterator<Item = IpAddr>) -> (Vec<IpAddr>, usize) {
    // Bounded while reading: a huge answer is never held whole twice.
    let mut addrs: Vec<IpAddr> = Vec::new();
    let mut answered = 0usize;
    for a in answer {
        if let Err(at) = addrs.binary_search(&a) {
            answered = answered.saturating_add(1);
            addrs.insert(at, a);
            addrs.truncate(MAX_ADDRS_PER_NAME);
        }
    }
    (addrs, answered)
}

/// The configured nameservers (UDP, and TCP for answers too long for it),
/// or the system's (resolv.conf, and the hosts file). None when the
/// system's cannot be read: hickory's fallback would be public resolvers,
/// which must not learn internal names.
fn resolver(settings: &UpstreamSettings, route: &str) -> Option<TokioResolver> {
    let provider = TokioConnectionProvider::default();
    let mut builder = if settings.nameservers.is_empty() {
        match Resolver::builder(provider) {
            Ok(b) => b,
            Err(error) => {
                tracing::warn!(route, %error, "the system's DNS configuration is unreadable: server names are resolved per connection, not re-resolved; set `[upstream] nameservers`");
                return None;
            }
        }
    } else {
        let servers: Vec<NameServerConfig> = settings
            .nameservers
            .iter()
            .flat_map(|a| {
                [
                    NameServerConfig::new(*a, Protocol::Udp),
                    NameServerConfig::new(*a, Protocol::Tcp),
                ]
            })
            .collect();
        Resolver::builder_with_config(ResolverConfig::from_parts(None, vec![], servers), provider)
    };
    let opts = builder.options_mut();
    // Every address is a server, not the first family that answers.
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    // A dead nameserver must not hold a round for long: the last answer
    // keeps serving meanwhile.
    opts.timeout = Duration::from_secs(2);
    opts.attempts = 1;
    Some(builder.build())
}

struct Task {
    /// Weak: the task ends when the route's upstream is dropped (a reload
    /// changed or removed it).
    group: Weak<ArcSwap<Group<Server>>>,
    entries: Vec<Entry>,
    resolver: TokioResolver,
    interval: Duration,
    route: Arc<str>,
    metrics: Arc<Metrics>,
    /// How the servers that join are reached.
    dial: Dialing,
}

impl Task {
    async fn run(mut self) {
        loop {
            let next = self.lookup().await;
            let Some(group) = self.group.upgrade() else {
                return;
            };
            self.update(&group);
            drop(group);
            tokio::time::sleep(next).await;
        }
    }

    /// Look every name up; how long until the next round.
    async fn lookup(&mut self) -> Duration {
        let mut next = self.interval;
        for e in &mut self.entries {
            let Some(name) = &e.name else {
                continue;
            };
            match self.resolver.lookup_ip(name.as_str()).await {
                Ok(answer) => {
                    let (addrs, answered) = servers_of(answer.iter());
                    let capped = answered > addrs.len();
                    if capped && !e.capped {
                        tracing::warn!(route = %self.route, host = %name, answered, kept = addrs.len(), "a server name resolved to more addresses than weir makes servers of; the lowest are kept");
                    }
                    e.capped = capped;
                    let ttl = answer
                        .valid_until()
                        .saturating_duration_since(std::time::Instant::now());
                    next = next.min(ttl.max(MIN_INTERVAL));
                    e.addrs = Some(addrs);
                }
                Err(error) => {
                    self.metrics.dns_failure(&self.route, name);
                    let kept = e.addrs.as_ref().map_or(0, Vec::len);
                    tracing::warn!(route = %self.route, host = %name, %error, kept, "server name lookup failed; keeping the servers of its last answer");
                }
            }
        }
        next
    }

    /// Rebuild the group when its servers changed.
    fn update(&self, group: &ArcSwap<Group<Server>>) {
        let mut wants: Vec<Member<Want<'_>>> = Vec::new();
        for e in &self.entries {
            let addrs: Vec<Option<IpAddr>> = match &e.addrs {
                Some(addrs) if e.name.is_some() => addrs.iter().copied().map(Some).collect(),
                _ => vec![None],
            };
            for addr in addrs {
                let label = server_label(&e.uri, addr);
                // Two names may share an address: one server is enough.
                if wants.iter().any(|w| w.target.label == label) {
                    continue;
                }
                wants.push(Member {
                    target: Want {
                        uri: &e.uri,
                        addr,
                        label,
                    },
                    weight: e.weight,
                    backup: e.backup,
                });
            }
        }
        let current = group.load();
        let unchanged = current.len() == wants.len()
            && wants.iter().enumerate().all(|(i, w)| {
                current
                    .member(i)
                    .is_some_and(|m| *m.target.label == *w.target.label)
            });
        if unchanged {
            return;
        }
        let labels: Vec<String> = wants.iter().map(|w| w.target.label.clone()).collect();
        tracing::info!(route = %self.route, servers = ?labels, "group servers changed with DNS");
        let next = Group::carrying(
            &current,
            wants,
            |s, w| *s.label == *w.label,
            |w| Server::new(w.uri, w.addr, &self.route, &self.metrics, &self.dial),
            Instant::now(),
        );
        // Servers gone lose their metric series: addresses come and go
        // (containers, autoscaling), and series for every address ever
        // seen would grow without bound. Requests still on one count into
        // its handles, no longer shown.
        for i in 0..current.len() {
            if let Some(m) = current.member(i)
                && !labels.iter().any(|l| *l == *m.target.label)
            {
                m.target.metrics.up.set(0);
                self.metrics.forget_server(&self.route, &m.target.label);
            }
        }
        group.store(Arc::new(next));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_makes_at_most_the_cap_of_servers_the_lowest_each_once() {
        let v4 = |n: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
        // Ten thousand addresses, high to low, each twice.
        let answer = (0..10_000u32).rev().flat_map(|n| [v4(n), v4(n)]);
        let (kept, answered) = servers_of(answer);
        assert_eq!(answered, 10_000);
        assert_eq!(kept.len(), MAX_ADDRS_PER_NAME);
        assert_eq!(kept, (0..64).map(v4).collect::<Vec<_>>());
        let (few, n) = servers_of([v4(2), v4(1), v4(2)].into_iter());
        assert_eq!((few, n), (vec![v4(1), v4(2)], 2));
    }

    #[test]
    fn only_http_names_are_looked_up() {
        let name = |u: &str| name_of(&ServerUrl::from(u.parse::<http::Uri>().expect("uri")));
        assert_eq!(
            name("http://app.internal:8080"),
            Some("app.internal".into())
        );
        assert_eq!(name("http://10.0.0.1:8080"), None, "an address");
        assert_eq!(name("http://[::1]:8080"), None, "an IPv6 address");
        assert_eq!(
            name("https://api.example.com"),
            None,
            "the certificate is checked against the name"
        );
        let socket = ServerUrl::unix(std::path::Path::new("/run/app.sock").into());
        assert_eq!(name_of(&socket), None, "a unix socket is not resolved");
    }
}
