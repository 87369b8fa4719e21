//! Listening sockets, their accept loops, and the process-wide connection
//! registry they share.
//!
//! Each accepted connection is admitted through the
//! [`crate::conn::registry::Registry`]
//! (which may evict an unproductive connection to make room, or refuse),
//! then served in its own task by [`crate::conn::serve`] — on a listener
//! with `proxy_protocol_from`, after the PROXY header a balancer sends has
//! named the client, which then is the connection's peer (see
//! [`proxy_protocol`] and `serve_proxied`) — which hands its
//! requests to the handler every loop shares ([`Shared::handler`]: the
//! gateway, in weir; this module only knows the trait). Accept errors go
//! through the policy in [`accept`]. The loop stops when shutdown begins,
//! which closes the listening socket so new clients are refused by the
//! kernel rather than left in the backlog.

pub(crate) mod accept;
pub(crate) mod budget;
pub(crate) mod handover;
pub(crate) mod proxy_protocol;

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::acme::Challenges;
use crate::config::ListenerConfig;
use crate::conn::info::ConnInfo;
use crate::conn::registry::{Refused, Registry, Slot};
use crate::conn::state::Phase;
use crate::conn::tls::Certificates;
use crate::conn::{self, ConnSettings, Handler};
use crate::pki::PkiError;
use crate::telemetry::Metrics;
use accept::{AcceptLoop, LogDedup, SpareFd};

/// Why a listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("listener {listener}: cannot bind {address}: {source}")]
    Socket {
        listener: String,
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("listener {listener}: {source}")]
    Tls { listener: String, source: PkiError },
}

/// A bound listener, ready to accept: one socket per worker.
pub(crate) struct Listener {
    pub(crate) name: Arc<str>,
    pub(crate) config: ListenerConfig,
    /// Non-blocking, registered with a runtime only in the accept loop,
    /// so each can run on its own worker.
    sockets: Vec<std::net::TcpListener>,
    tls: Option<TlsAcceptor>,
    /// The TLS listener's certificates, swappable while it serves.
    pub(crate) certificates: Option<Arc<Certificates>>,
    /// How many of the sockets came from the process this one replaced.
    pub(crate) inherited: usize,
}

/// What every accept loop shares; `handler` answers the requests of every
/// connection accepted (the gateway, in weir).
pub(crate) struct Shared<H> {
    pub(crate) handler: Arc<H>,
    /// Read once per accepted connection, so a reload reaches new ones.
    pub(crate) settings: Arc<ArcSwap<ConnSettings>>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) metrics: Arc<Metrics>,
    /// Set first at shutdown: the accept loops stop and close their
    /// sockets.
    pub(crate) stop_accepting: watch::Receiver<bool>,
    /// Set once every accept loop has stopped: connections drain.
    pub(crate) shutdown: watch::Receiver<bool>,
}

/// The name a listener's `i`th socket is handed over under at an upgrade:
/// the listener's own name for the first, `name#i` for the others.
fn handover_name(listener: &str, i: usize) -> String {
    if i == 0 {
        listener.to_string()
    } else {
        format!("{listener}#{i}")
    }
}

impl Listener {
    /// Bind one socket per worker (or adopt those inherited under this
    /// listener's names) and prepare TLS; errors name the listener.
    ///
    /// With more than one worker the sockets share the address through
    /// `SO_REUSEPORT`, so the kernel spreads connections across workers.
    /// A socket inherited from a process that bound it without
    /// `SO_REUSEPORT` cannot gain siblings; the workers then accept from
    /// that one socket.
    pub(crate) async fn bind(
        config: &ListenerConfig,
        inherited: &mut handover::Inherited,
        challenges: &Arc<Challenges>,
        workers: usize,
    ) -> Result<Self, BindError> {
        let (tls, certificates) = match &config.tls {
            Some(t) => {
                let (acceptor, certs) =
                    conn::tls::acceptor(t, challenges.clone()).map_err(|source| {
                        BindError::Tls {
                            listener: config.name.clone(),
                            source,
                        }
                    })?;
                (Some(acceptor), Some(certs))
            }
            None => (None, None),
        };
        let socket_error = |source| BindError::Socket {
            listener: config.name.clone(),
            address: config.address,
            source,
        };
        let workers = workers.max(1);
        let reuse_port = workers > 1;
        let mut adopted = 0;
        let first = match inherited.take(&config.name) {
            Some(s) => {
                adopted += 1;
                s
            }
            None => bind_socket(config.address, reuse_port).map_err(socket_error)?,
        };
        // Port 0 picks a port: the siblings bind the one the first got.
        let address = first.local_addr().map_err(socket_error)?;
        let mut sockets = vec![first];
        for i in 1..workers {
            let socket = match inherited.take(&handover_name(&config.name, i)) {
                Some(s) => {
                    adopted += 1;
                    s
                }
                None => match bind_socket(address, true) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(listener = %config.name, error = %e, "cannot add a SO_REUSEPORT socket; this worker accepts from the first socket");
                        sockets[0].try_clone().map_err(socket_error)?
                    }
                },
            };
            sockets.push(socket);
        }
        // Sockets a process with more workers handed over, that no worker
        // here takes: closing them drops only what is queued on them.
        let mut extra = workers;
        while inherited
            .take(&handover_name(&config.name, extra))
            .is_some()
        {
            extra += 1;
        }
        if extra > workers {
            tracing::warn!(listener = %config.name, closed = extra - workers, "closed inherited sockets beyond this process's workers");
        }
        for s in &sockets {
            s.set_nonblocking(true).map_err(socket_error)?;
        }
        Ok(Listener {
            name: config.name.as_str().into(),
            config: config.clone(),
            sockets,
            tls,
            certificates,
            inherited: adopted,
        })
    }

    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.sockets.first().and_then(|s| s.local_addr().ok())
    }

    /// Second descriptors of every socket, named for an upgrade.
    pub(crate) fn handover(&self) -> Vec<(String, std::net::TcpListener)> {
        self.sockets
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((handover_name(&self.name, i), s.try_clone().ok()?)))
            .collect()
    }

    /// One accept loop per socket; the `i`th is meant for worker `i`.
    pub(crate) fn accept_loops<H: Handler>(
        self,
        shared: &Arc<Shared<H>>,
    ) -> Vec<impl Future<Output = ()> + use<H>> {
        let Listener {
            name,
            config,
            sockets,
            tls,
            ..
        } = self;
        let log = Arc::new(std::sync::Mutex::new(LogDedup::default()));
        let access = config.access.clone().map(Arc::new);
        let proxy_protocol = (!config.proxy_protocol_from.is_empty()).then(|| {
            Arc::new(ProxyProtocol {
                from: config.proxy_protocol_from.clone(),
                log: Default::default(),
                access: access.clone(),
            })
        });
        sockets
            .into_iter()
            .map(|socket| {
                let accepting = Accepting {
                    name: name.clone(),
                    redirect: config.redirect_https,
                    tls: tls.clone(),
                    proxy_protocol: proxy_protocol.clone(),
                    access: access.clone(),
                    shared: shared.clone(),
                };
                accept_loop(socket, accepting, log.clone())
            })
            .collect()
    }
}

/// A listening socket; `SO_REUSEPORT` when workers share the address.
fn bind_socket(address: SocketAddr, reuse_port: bool) -> std::io::Result<std::net::TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // What `TcpListener::bind` does on Unix: a restarted weir must not
    // wait out TIME_WAIT.
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(address)?;
    socket.listen(BACKLOG_AT_STOP as u32)?.into_std()
}

/// At most this many connections waiting in a socket's backlog are taken
/// when accepting stops (the listen backlog's size).
const BACKLOG_AT_STOP: usize = 1024;

/// A listener's PROXY protocol settings, shared by its accept loops.
struct ProxyProtocol {
    /// The sources that must send a header (and the only ones that may).
    from: Vec<ipnet::IpNet>,
    /// Refusals are logged once per kind per 10 s for the listener.
    log: std::sync::Mutex<LogDedup>,
    /// The listener's address rules, for the client a header names.
    access: Option<Arc<crate::config::AddressRules>>,
}

impl ProxyProtocol {
    fn trusts(&self, peer: std::net::IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.from.iter().any(|n| n.contains(&peer))
    }

    fn log_refusal(&self, listener: &str, peer: SocketAddr, refusal: proxy_protocol::Refusal) {
        use accept::LogAction;
        let kind = refusal.label();
        let action =
            crate::sync::Locked::locked(&self.log).record(kind, tokio::time::Instant::now());
        let why = match refusal {
            proxy_protocol::Refusal::Missing => {
                "a trusted source sent no PROXY header (is the balancer set to send one?)"
            }
            proxy_protocol::Refusal::Untrusted => {
                "a PROXY header from a source not in proxy_protocol_from"
            }
            _ => "an invalid PROXY header",
        };
        match action {
            LogAction::First => {
                tracing::warn!(listener, %peer, kind, "connection refused: {why}");
            }
            LogAction::Summary { suppressed } => {
                tracing::warn!(listener, %peer, kind, suppressed, "connection refused: {why}; repeats were suppressed");
            }
            LogAction::Suppressed => {}
        }
    }
}

/// A connection from a listener with PROXY protocol on: read the header
/// (under the handshake or head deadline, which the sweeper enforces
/// through the close reason), count a balancer's connection under the
/// client it names, then serve it as that client.
async fn serve_proxied<H: Handler>(
    mut stream: tokio::net::TcpStream,
    mut info: ConnInfo,
    trusted: bool,
    proxy: Arc<ProxyProtocol>,
    listener: Arc<str>,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared<H>>,
) {
    let state = info.slot.state.clone();
    let read = tokio::select! {
        read = proxy_protocol::read_header(&mut stream, trusted) => read,
        _ = state.close_requested(crate::conn::state::CloseReason::None) => {
            conn::count_close(&state, &shared.metrics);
            return;
        }
    };
    let client = match read {
        Ok(client) => client,
        Err(proxy_protocol::Refusal::Gone) => return,
        Err(refusal) => {
            shared.metrics.connection_refused("proxy_protocol");
            proxy.log_refusal(&listener, info.peer, refusal);
            return;
        }
    };
    if trusted {
        // LOCAL and UNKNOWN: the balancer's own connection.
        let client = client.unwrap_or(info.peer);
        if denied(proxy.access.as_deref(), client, &listener, &shared.metrics) {
            return;
        }
        if info.slot.attribute(client.ip()).is_err() {
            shared.metrics.connection_refused("per_ip");
            tracing::debug!(peer = %client, balancer = %info.peer, listener = %listener, reason = "per_ip", "connection refused");
            return;
        }
        info.peer = client;
    }
    conn::serve(
        stream,
        info,
        tls,
        shared.handler.clone(),
        shared.metrics.clone(),
        shared.settings.load_full(),
    )
    .await;
}

/// Whether the listener's address rules refuse `client`: then counted
/// (`weir_connections_refused_total{reason="denied"}`) and to be closed.
fn denied(
    rules: Option<&crate::config::AddressRules>,
    client: SocketAddr,
    listener: &str,
    metrics: &crate::telemetry::Metrics,
) -> bool {
    let Some(rules) = rules else {
        return false;
    };
    if rules.allows(client.ip()) {
        return false;
    }
    metrics.connection_refused("denied");
    tracing::debug!(peer = %client, listener, reason = "denied", "connection refused");
    true
}

/// What a listener gives each of its accept loops.
struct Accepting<H: Handler> {
    name: Arc<str>,
    redirect: Option<crate::config::RedirectSettings>,
    tls: Option<TlsAcceptor>,
    proxy_protocol: Option<Arc<ProxyProtocol>>,
    access: Option<Arc<crate::config::AddressRules>>,
    shared: Arc<Shared<H>>,
}

/// What an accept loop does with each connection it accepts: the
/// listener's settings and the counters it bumps, resolved once on the
/// loop's worker (the per-worker counter is that worker's).
struct Acceptor<H: Handler> {
    name: Arc<str>,
    redirect: Option<crate::config::RedirectSettings>,
    tls: Option<TlsAcceptor>,
    proxy_protocol: Option<Arc<ProxyProtocol>>,
    access: Option<Arc<crate::config::AddressRules>>,
    shared: Arc<Shared<H>>,
    open_gauge: Gauge,
    accepted: Counter,
    worker_accepted: Counter,
}

impl<H: Handler> Acceptor<H> {
    fn new(a: Accepting<H>) -> Self {
        let metrics = &a.shared.metrics;
        Acceptor {
            open_gauge: metrics.open_connections(&a.name),
            accepted: metrics.connections_accepted(&a.name),
            worker_accepted: metrics.worker_accepted(crate::worker::index()),
            name: a.name,
            redirect: a.redirect,
            tls: a.tls,
            proxy_protocol: a.proxy_protocol,
            access: a.access,
            shared: a.shared,
        }
    }

    /// One accepted connection: counted, checked against the address
    /// rules, given a slot (or refused), and served on a task of its own.
    fn serve(&self, stream: tokio::net::TcpStream, peer: SocketAddr) {
        self.accepted.inc();
        self.worker_accepted.inc();
        // A balancer's connection is counted per IP under the client its
        // PROXY header names, once read; its client is checked then too.
        let trusted = (self.proxy_protocol.as_ref()).is_some_and(|p| p.trusts(peer.ip()));
        if !trusted
            && denied(
                self.access.as_deref(),
                peer,
                &self.name,
                &self.shared.metrics,
            )
        {
            return;
        }
        let Some(slot) = self.slot(peer, trusted) else {
            return;
        };
        let shared = &self.shared;
        let info = ConnInfo {
            peer,
            tls: self.tls.is_some(),
            redirect: self.redirect,
            slot: Arc::new(slot),
            shutdown: shared.shutdown.clone(),
            peer_text: std::sync::OnceLock::new(),
        };
        match &self.proxy_protocol {
            None => {
                tokio::spawn(conn::serve(
                    stream,
                    info,
                    self.tls.clone(),
                    shared.handler.clone(),
                    shared.metrics.clone(),
                    shared.settings.load_full(),
                ));
            }
            Some(proxy) => {
                tokio::spawn(serve_proxied(
                    stream,
                    info,
                    trusted,
                    proxy.clone(),
                    self.name.clone(),
                    self.tls.clone(),
                    shared.clone(),
                ));
            }
        }
    }

    /// A connection slot from the registry (at the cap, an unproductive
    /// connection is reclaimed for it), or `None`: refused, and counted.
    fn slot(&self, peer: SocketAddr, trusted: bool) -> Option<Slot> {
        let phase = if self.tls.is_some() {
            Phase::Handshake
        } else {
            Phase::ReadingHead
        };
        let (registry, name, gauge) = (
            &self.shared.registry,
            self.name.clone(),
            self.open_gauge.clone(),
        );
        let admitted = if trusted {
            registry.admit_unattributed(peer.ip(), name, phase, gauge)
        } else {
            registry.admit(peer.ip(), name, phase, gauge)
        };
        match admitted {
            Ok((slot, evicted)) => {
                if let Some(victim) = evicted {
                    tracing::debug!(peer = %victim.peer(), listener = %victim.listener, "reclaimed an unproductive connection at the cap");
                }
                Some(slot)
            }
            Err(refused) => {
                let reason = match refused {
                    Refused::Full => "full",
                    Refused::PerIp => "per_ip",
                };
                self.shared.metrics.connection_refused(reason);
                tracing::debug!(%peer, listener = %self.name, reason, "connection refused");
                None
            }
        }
    }
}

/// Accept until shutdown begins.
async fn accept_loop<H: Handler>(
    socket: std::net::TcpListener,
    accepting: Accepting<H>,
    log: Arc<std::sync::Mutex<LogDedup>>,
) {
    let acceptor = Acceptor::new(accepting);
    let name = acceptor.name.clone();
    let shared = acceptor.shared.clone();
    let socket = match TcpListener::from_std(socket) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(listener = %name, error = %e, "cannot register the listening socket; this worker does not accept on it");
            return;
        }
    };
    let mut accepts = AcceptLoop::new(socket, SpareFd::new(), &name);
    let metrics = shared.metrics.clone();
    accepts.on_error = Box::new(move |kind| metrics.accept_error(kind));
    accepts.wake_on(shared.registry.freed());
    accepts.log_with(log);
    let mut stop = shared.stop_accepting.clone();
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            accepted = accepts.next() => accepted,
        };
        acceptor.serve(stream, peer);
    }
    // Connections the kernel has completed but not handed over yet would
    // be reset when the socket closes — some with a request written. They
    // are served instead, under the drain's rules. (A connection completed
    // between the last accept and the close is still reset; on Linux
    // `net.ipv4.tcp_migrate_req = 1` moves it to another socket on the
    // port.)
    let shed = accepts.shed;
    take_backlog(accepts.into_listener(), &name, |s, p| acceptor.serve(s, p));
    if shed > 0 {
        tracing::warn!(listener = %name, shed, "connections closed at once while out of descriptors");
    }
    tracing::info!(listener = %name, worker = crate::worker::index(), "stopped accepting");
}

/// Serve what waits in a listening socket's backlog, without waiting for
/// more; the socket closes on return. Accepts directly (non-blocking), as
/// the runtime would only try once it has seen the socket readable.
fn take_backlog(
    socket: TcpListener,
    name: &str,
    mut serve: impl FnMut(tokio::net::TcpStream, std::net::SocketAddr),
) {
    let socket = match socket.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(listener = %name, error = %e, "cannot take the backlog");
            return;
        }
    };
    for _ in 0..BACKLOG_AT_STOP {
        let Ok((stream, peer)) = socket.accept() else {
            // WouldBlock: nothing waits (other errors: nothing to do now).
            return;
        };
        let stream = stream
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(stream));
        if let Ok(stream) = stream {
            serve(stream, peer);
        }
    }
}

/// A second descriptor of a listening socket (for a later handover).
pub(crate) fn socket_handover(socket: &TcpListener) -> Option<std::net::TcpListener> {
    let fd = std::os::fd::AsFd::as_fd(socket).try_clone_to_owned().ok()?;
    Some(std::net::TcpListener::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_balancer_reached_over_a_dual_stack_socket_is_trusted_as_ipv4() {
        let p = ProxyProtocol {
            from: vec![
                "10.0.0.0/8".parse().expect("net"),
                "2001:db8::/32".parse().expect("net"),
            ],
            log: Default::default(),
            access: None,
        };
        let ip = |s: &str| s.parse::<std::net::IpAddr>().expect("ip");
        assert!(p.trusts(ip("10.1.2.3")));
        assert!(
            p.trusts(ip("::ffff:10.1.2.3")),
            "as a [::] listener sees it"
        );
        assert!(p.trusts(ip("2001:db8::5")));
        assert!(!p.trusts(ip("11.0.0.1")));
        assert!(!p.trusts(ip("::ffff:11.0.0.1")));
    }
}
