//! weir's own HTTP/1.1 connection pool: one per server and worker.
//!
//! hyper-util's pool serves any number of hosts from any thread: every
//! checkout and return hashes the scheme and authority (SipHash), takes a
//! mutex shared by all of them and spawns a task to wait for the
//! connection to be free again — ~5 % of a proxied request's
//! instructions. Here a pool reaches one server and is used by one worker,
//! so none of that is needed: idle connections are a stack (the most
//! recently used first: its socket is warm, the others age out), and a
//! connection goes back on it from the task that already drives it.
//!
//! A connection's life: dialled by the route's connector (TCP nodelay,
//! connect timeout, TLS for `https://`) or to its unix socket, its hyper connection driven by a
//! task on the worker's runtime. A request takes the sender off the stack
//! (or dials), hands hyper the request and leaves the sender with that
//! task, which puts it back on the stack once hyper is ready for another
//! request on it — the response read to its end and the connection reusable
//! (hyper's own rule: not `Connection: close`, framing intact). An idle
//! connection past `pool_idle_timeout` is closed by a sweeper task the
//! pool runs while it holds any; one over `pool_max_idle_per_host` is
//! closed at once.
//!
//! A request written to a reused connection that the server closed
//! meanwhile comes back unsent from hyper; it is tried again on the next
//! connection (a new one at last), as hyper-util does.

use std::future::poll_fn;
use std::pin::pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;
use std::time::Duration;

use http::header::{HOST, HeaderValue};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Builder, SendRequest};
use tokio::time::Instant;

use super::dial::{self, Dial};
use super::error::SendError;
use crate::sync::Locked;

/// The HTTP/1.1 connections of one worker to one server.
pub(crate) struct H1Pool<B> {
    inner: Arc<Inner<B>>,
    dial: Dial,
    /// Where connections go, whatever authority a request names.
    server: Uri,
    /// The `Host` a request without one is given when it names the
    /// server's own authority (all of a proxy route's, an LLM member's).
    host: Option<HeaderValue>,
    handshake: Builder,
}

struct Inner<B> {
    idle: Mutex<Idle<B>>,
    idle_timeout: Duration,
    max_idle: usize,
}

struct Idle<B> {
    /// Oldest first: connections are pushed when they become idle, so
    /// their `since` only grows up the stack.
    stack: Vec<Pooled<B>>,
    /// Whether a sweeper task is running for this pool.
    sweeping: bool,
}

/// An idle connection.
struct Pooled<B> {
    tx: SendRequest<B>,
    parked: Arc<Parked<B>>,
    since: Instant,
}

/// Where a request leaves its connection's sender for the connection's
/// task to pool when hyper wants the next request.
struct Parked<B>(Mutex<Option<SendRequest<B>>>);

impl<B> H1Pool<B>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// A pool whose connections reach `server` (scheme and authority)
    /// as `dial` says.
    pub(crate) fn new(dial: Dial, server: Uri, idle_timeout: Duration, max_idle: usize) -> Self {
        let host = host_of(&server);
        H1Pool {
            inner: Arc::new(Inner {
                idle: Mutex::new(Idle {
                    stack: Vec::new(),
                    sweeping: false,
                }),
                idle_timeout,
                max_idle,
            }),
            dial,
            server,
            host,
            handshake: Builder::new(),
        }
    }

    /// Whether this pool's connections go to `uri`'s scheme and authority.
    pub(crate) fn reaches(&self, uri: &Uri) -> bool {
        uri.scheme() == self.server.scheme() && uri.authority() == self.server.authority()
    }

    /// Send `req` on an idle connection, or a new one; the response's body
    /// streams from the connection, which is pooled again once it is read.
    pub(crate) async fn request(
        &self,
        mut req: Request<B>,
    ) -> Result<Response<Incoming>, SendError> {
        self.prepare(&mut req);
        loop {
            let (mut tx, parked, reused) = match self.checkout() {
                Some(p) => (p.tx, p.parked, true),
                None => {
                    let (tx, parked) = self.dial().await?;
                    (tx, parked, false)
                }
            };
            let sent = tx.try_send_request(req);
            self.park(tx, parked);
            match sent.await {
                Ok(resp) => return Ok(resp),
                Err(mut e) => match e.take_message() {
                    // The server closed the connection before the request
                    // was written: nothing was sent, try the next one.
                    Some(back) if reused => req = back,
                    Some(_) => return Err(SendError::NotSent(e.into_error().into())),
                    None => return Err(SendError::Failed(e.into_error().into())),
                },
            }
        }
    }

    /// What hyper-util does to a request before an HTTP/1.1 connection
    /// takes it: a `Host` when it has none, and the URI in origin form.
    fn prepare(&self, req: &mut Request<B>) {
        if !req.headers().contains_key(HOST) {
            let host = match &self.host {
                Some(h) if req.uri().authority() == self.server.authority() => Some(h.clone()),
                _ => host_of(req.uri()),
            };
            if let Some(h) = host {
                req.headers_mut().insert(HOST, h);
            }
        }
        let origin = match req.uri().path_and_query() {
            Some(pq) if pq.as_str() != "/" => {
                let mut parts = http::uri::Parts::default();
                parts.path_and_query = Some(pq.clone());
                Uri::from_parts(parts).unwrap_or_default()
            }
            _ => Uri::default(),
        };
        *req.uri_mut() = origin;
    }

    /// The newest idle connection still open and not past the idle
    /// timeout.
    fn checkout(&self) -> Option<Pooled<B>> {
        let mut idle = self.inner.idle.locked();
        let now = Instant::now();
        while let Some(p) = idle.stack.pop() {
            if now.saturating_duration_since(p.since) >= self.inner.idle_timeout {
                // The rest are older still.
                idle.stack.clear();
                return None;
            }
            if p.tx.is_ready() {
                return Some(p);
            }
        }
        None
    }

    /// A new connection, its task spawned on this worker's runtime.
    async fn dial(&self) -> Result<(SendRequest<B>, Arc<Parked<B>>), SendError> {
        match &self.dial {
            Dial::Tcp(connector) => {
                let mut connector = connector.clone();
                let io = tower_service::Service::call(&mut connector, self.server.clone())
                    .await
                    .map_err(SendError::Connect)?;
                self.handshake(io).await
            }
            Dial::Unix {
                path,
                connect_timeout,
            } => {
                let io = dial::unix(path, *connect_timeout)
                    .await
                    .map_err(SendError::Connect)?;
                self.handshake(io).await
            }
        }
    }

    /// HTTP/1.1 on a connection just made, its task spawned.
    async fn handshake<I>(&self, io: I) -> Result<(SendRequest<B>, Arc<Parked<B>>), SendError>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (tx, conn) = self
            .handshake
            .handshake(io)
            .await
            .map_err(|e| SendError::NotSent(e.into()))?;
        let parked = Arc::new(Parked(Mutex::new(None)));
        tokio::spawn(drive(
            conn.with_upgrades(),
            parked.clone(),
            Arc::downgrade(&self.inner),
        ));
        Ok((tx, parked))
    }

    /// Leave `tx` with its connection's task, which pools it once hyper
    /// wants another request (checked under the lock the task checks
    /// under, so a connection that became ready meanwhile is not missed).
    fn park(&self, tx: SendRequest<B>, parked: Arc<Parked<B>>) {
        let mut slot = parked.0.locked();
        if tx.is_ready() {
            drop(slot);
            self.inner.put(tx, parked, &self.inner);
        } else {
            *slot = Some(tx);
        }
    }
}

impl<B: Send + 'static> Inner<B> {
    /// Pool `tx`, or close it when the pool keeps no more.
    fn put(&self, tx: SendRequest<B>, parked: Arc<Parked<B>>, me: &Arc<Inner<B>>) {
        if self.max_idle == 0 || self.idle_timeout.is_zero() {
            return;
        }
        let mut idle = self.idle.locked();
        if idle.stack.len() >= self.max_idle {
            return;
        }
        idle.stack.push(Pooled {
            tx,
            parked,
            since: Instant::now(),
        });
        if !idle.sweeping
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            idle.sweeping = true;
            rt.spawn(sweep(Arc::downgrade(me)));
        }
    }
}

/// Drive one connection; pool its sender whenever a request left it here
/// and hyper is ready for the next. The sender can only become ready
/// while the connection is polled (hyper asks for the next request from
/// inside it), so looking after each poll is enough: no wake-up of its
/// own.
async fn drive<B, C>(conn: C, parked: Arc<Parked<B>>, pool: Weak<Inner<B>>)
where
    C: std::future::Future,
    B: Send + 'static,
{
    let mut conn = pin!(conn);
    poll_fn(|cx| {
        if conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let mut slot = parked.0.locked();
        if slot.as_ref().is_some_and(SendRequest::is_ready)
            && let Some(tx) = slot.take()
        {
            drop(slot);
            if let Some(inner) = pool.upgrade() {
                inner.put(tx, parked.clone(), &inner);
            }
        }
        Poll::Pending
    })
    .await;
    // The connection ended (closed, or upgraded: the tunnel owns it now).
    parked.0.locked().take();
}

/// Close the pool's idle connections as they pass the idle timeout; ends
/// when none is left (the next to be pooled starts it again) or the pool
/// is gone.
async fn sweep<B>(pool: Weak<Inner<B>>) {
    loop {
        let next = {
            let Some(inner) = pool.upgrade() else {
                return;
            };
            let mut idle = inner.idle.locked();
            let now = Instant::now();
            let timeout = inner.idle_timeout;
            let expired = idle
                .stack
                .iter()
                .take_while(|p| now.saturating_duration_since(p.since) >= timeout)
                .count();
            // Dropping a sender lets its connection's task close it.
            idle.stack.drain(..expired);
            match idle.stack.first().map(|p| p.since.checked_add(timeout)) {
                Some(Some(at)) => at,
                // Too far to ever expire.
                Some(None) | None => {
                    idle.sweeping = false;
                    return;
                }
            }
        };
        tokio::time::sleep_until(next).await;
    }
}

fn default_port(uri: &Uri) -> Option<u16> {
    match uri.scheme_str() {
        Some("http") => Some(80),
        Some("https") => Some(443),
        _ => None,
    }
}

/// The `Host` hyper-util gives a request to `uri`: its host, and its port
/// unless the scheme's default.
fn host_of(uri: &Uri) -> Option<HeaderValue> {
    let a = uri.authority()?;
    match (a.port_u16(), default_port(uri)) {
        (Some(p), Some(d)) if p != d => HeaderValue::from_str(a.as_str()).ok(),
        (Some(_), None) => HeaderValue::from_str(a.as_str()).ok(),
        _ => HeaderValue::from_str(a.host()).ok(),
    }
}
