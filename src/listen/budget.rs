//! The file-descriptor budget.
//!
//! The incident this guards against: a connection cap equal to the FD limit
//! leaves no descriptors for upstream sockets, so under load every accept
//! and every upstream connect fails at once. At start weir raises its soft
//! RLIMIT_NOFILE to the hard limit, then requires that the connection cap
//! plus everything else weir may hold open fits under it:
//!
//! ```text
//! needed = connections.max                       client sockets
//!        + max_concurrent_requests (or the cap)   upstream sockets in use
//!        + routes × workers × pool_max_idle_per_host   idle pooled upstream sockets
//!        + listeners × workers (+ admin)          listening sockets
//!        + listeners × workers                    one spare FD each (EMFILE reserve)
//!        + 64                                     runtime, logs, stdio, cert and config reads
//! ```
//!
//! `weir run` and `weir check` both enforce it (so run `weir check` under
//! the same limits as the service, e.g. as systemd's ExecStartPre).

use crate::config::{Config, Problem};

/// Descriptors for the runtime (epoll, eventfds), stdio, logs, and files
/// read at start or reload.
pub(crate) const FIXED_RESERVE: u64 = 64;

/// The process's descriptor limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    pub(crate) soft: Option<u64>,
    pub(crate) hard: Option<u64>,
}

/// Raise the soft RLIMIT_NOFILE to the hard limit; returns the limits now
/// in force.
pub fn raise_nofile_limit() -> FdLimit {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let current = getrlimit(Resource::Nofile);
    if current.current != current.maximum {
        let raised = rustix::process::Rlimit {
            current: current.maximum,
            maximum: current.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, "could not raise the soft descriptor limit to the hard limit");
        }
    }
    let now = getrlimit(Resource::Nofile);
    FdLimit {
        soft: now.current,
        hard: now.maximum,
    }
}

/// What the config needs, term by term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    pub(crate) clients: u64,
    pub(crate) upstream_active: u64,
    pub(crate) upstream_idle: u64,
    pub(crate) listeners: u64,
    pub(crate) spares: u64,
    pub(crate) reserve: u64,
}

impl Need {
    pub(crate) fn of(config: &Config) -> Need {
        let clients = config.connections.max as u64;
        // One upstream socket per request in flight. The request gate bounds
        // those; without it, assume one per client connection (HTTP/2 can
        // exceed that, which is one reason the gate exists).
        let gate = config.server.max_concurrent_requests as u64;
        let upstream_active = if gate > 0 { gate } else { clients };
        // Each worker has its own socket, spare descriptor and pools.
        let workers = crate::worker::count(config.server.workers) as u64;
        let listeners = config.listeners.len() as u64 * workers;
        // One pool per proxy route, one per upstream of an LLM route, per
        // worker.
        let pools: u64 = config
            .routes
            .iter()
            .map(|r| match &r.kind {
                crate::config::RouteKind::Proxy { .. } => 1,
                crate::config::RouteKind::Llm(llm) => llm.upstreams.len() as u64,
                // A file open is a request in flight's one descriptor,
                // counted with the upstream sockets above.
                crate::config::RouteKind::Static(_) => 0,
                crate::config::RouteKind::Redirect(_) => 0,
            })
            .sum();
        Need {
            clients,
            upstream_active,
            upstream_idle: pools * workers * config.upstream.pool_max_idle_per_host as u64,
            listeners: listeners + u64::from(config.admin.is_some()),
            spares: listeners,
            reserve: FIXED_RESERVE,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.clients
            + self.upstream_active
            + self.upstream_idle
            + self.listeners
            + self.spares
            + self.reserve
    }
}

/// Check the budget: a hard problem when it cannot fit, warnings otherwise.
pub(crate) fn check(config: &Config, limit: FdLimit) -> Result<Vec<String>, Problem> {
    let mut warnings = Vec::new();
    let Some(soft) = limit.soft else {
        return Ok(warnings);
    };
    if config.connections.max == 0 {
        warnings.push(format!(
            "connections.max = 0: no connection cap; descriptors are bounded only by RLIMIT_NOFILE ({soft})"
        ));
        return Ok(warnings);
    }
    let need = Need::of(config);
    if need.total() > soft {
        let hard = limit
            .hard
            .map_or("unlimited".to_string(), |h| h.to_string());
        return Err(Problem {
            file: config.source.clone(),
            position: None,
            key: "connections.max".into(),
            message: format!(
                "needs {} file descriptors ({} client connections + {} upstream in use + {} pooled upstream + {} listening + {} spare + {} reserve) but RLIMIT_NOFILE is {soft} (hard {hard})",
                need.total(),
                need.clients,
                need.upstream_active,
                need.upstream_idle,
                need.listeners,
                need.spares,
                need.reserve,
            ),
            fix: Some(format!(
                "raise the limit to at least {} (systemd LimitNOFILE=, Docker ulimits nofile, ulimit -n) or lower connections.max",
                need.total()
            )),
        });
    }
    if soft <= 1024 {
        warnings.push(format!(
            "RLIMIT_NOFILE is only {soft}; a busy edge wants far more (LimitNOFILE=65536 or higher)"
        ));
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(extra: &str) -> Config {
        Config::parse(
            Path::new("w.toml"),
            &format!(
                "{extra}\n[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nupstream = \"http://127.0.0.1:1\"\n"
            ),
        )
        .expect("valid")
    }

    #[test]
    fn default_cap_needs_more_than_1024() {
        let c = config("[server]\nworkers = 1");
        let need = Need::of(&c);
        // 1024 clients + 1024 upstream + 64 pooled + 1 listener + 1 spare + 64.
        assert_eq!(need.total(), 1024 + 1024 + 64 + 1 + 1 + 64);
        let err = check(
            &c,
            FdLimit {
                soft: Some(1024),
                hard: Some(1024),
            },
        )
        .expect_err("does not fit");
        assert!(
            err.message.contains("needs 2178 file descriptors"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("RLIMIT_NOFILE is 1024 (hard 1024)"),
            "{}",
            err.message
        );
        assert!(err.fix.as_deref().unwrap_or("").contains("2178"));
    }

    #[test]
    fn each_worker_adds_its_sockets_spares_and_pools() {
        let one = Need::of(&config("[server]\nworkers = 1")).total();
        let four = Need::of(&config("[server]\nworkers = 4")).total();
        // 3 more × (64 pooled + 1 listening socket + 1 spare).
        assert_eq!(four - one, 3 * (64 + 1 + 1));
    }

    #[test]
    fn fits_under_a_large_limit_and_warns_at_1024() {
        let c = config("[connections]\nmax = 100\n[server]\nmax_concurrent_requests = 100");
        assert!(
            check(
                &c,
                FdLimit {
                    soft: Some(65536),
                    hard: Some(65536)
                }
            )
            .expect("fits")
            .is_empty()
        );
        let w = check(
            &c,
            FdLimit {
                soft: Some(1024),
                hard: Some(4096),
            },
        )
        .expect("fits");
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn unlimited_and_uncapped_are_not_errors() {
        let c = config("");
        assert!(
            check(
                &c,
                FdLimit {
                    soft: None,
                    hard: None
                }
            )
            .expect("ok")
            .is_empty()
        );
        let c = config("[connections]\nmax = 0");
        let w = check(
            &c,
            FdLimit {
                soft: Some(64),
                hard: Some(64),
            },
        )
        .expect("ok");
        assert!(w[0].contains("no connection cap"));
    }
}
