//! One client connection: TLS handshake, ALPN (or, on cleartext, the
//! HTTP/2 preface sniffed from the first bytes), then hyper's HTTP/1.1 or
//! HTTP/2 server with weir's limits — until the client leaves, a deadline or
//! defence asks it to close (see [`deadline`] and [`io`]), or shutdown
//! begins. An HTTP/1.1 connection idle for a second is parked: hyper's
//! connection and its buffers go, and only the socket waits for the next
//! request (see `serve_http`).
//!
//! The requests themselves are answered by a [`Handler`] the caller hands
//! in (the gateway, in weir): this module imports nothing above it on the
//! data path, and the driver — sniffing, parking, the drain and its grace —
//! is unit tested below with a handler of a few lines.

pub(crate) mod deadline;
pub(crate) mod info;
pub(crate) mod io;
pub(crate) mod registry;
pub(crate) mod state;
pub(crate) mod tls;

#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::config::{Http1Settings, Http2Settings};
use crate::telemetry::Metrics;
use info::ConnInfo;
use io::TrackedIo;
use state::{CloseReason, ConnState, Park, Phase, Wake};

/// What answers the requests a connection carries: the gateway in weir
/// (`lifecycle::Gateway`), a few lines in this module's tests. The driver
/// is generic over it, so each connection's service is monomorphised: no
/// boxed call and no allocation per request for the indirection.
///
/// The handler marks each request on `conn.slot.state`:
/// `request_started()` when it begins and `request_finished()` when its
/// response body is done or dropped. The phase those marks set is what the
/// drain, parking and the idle deadline read.
pub(crate) trait Handler: Send + Sync + 'static {
    type Body: http_body::Body<Data = Bytes, Error: Into<Box<dyn StdError + Send + Sync>>>
        + Send
        + 'static;

    fn handle(
        &self,
        req: Request<Incoming>,
        conn: &ConnInfo,
    ) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// Connection-level settings shared by every listener. A connection uses
/// the settings current when it was accepted.
pub(crate) struct ConnSettings {
    h1: http1::Builder,
    h2: http2::Builder<TokioExecutor>,
    h2_max_control_frames_per_second: u32,
    /// `server.drain_grace`: see [`drive`].
    drain_grace: Duration,
}

impl ConnSettings {
    pub(crate) fn new(http1: &Http1Settings, http2: &Http2Settings, drain_grace: Duration) -> Self {
        let mut h1 = http1::Builder::new();
        // No timer, so no hyper head timer: it would also run while a
        // keep-alive connection is idle and cost a timer update per
        // request. The head and idle deadlines are the sweeper's.
        h1.max_headers(http1.max_headers)
            .max_buf_size(http1.max_head_size);
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new())
            .max_concurrent_streams(http2.max_concurrent_streams)
            .max_header_list_size(http2.max_header_list_size)
            .max_pending_accept_reset_streams(http2.max_pending_resets);
        ConnSettings {
            h1,
            h2,
            h2_max_control_frames_per_second: http2.max_control_frames_per_second,
            drain_grace,
        }
    }
}

/// How long a gracefully closing connection with nothing in flight may
/// take to go (an HTTP/2 client must answer the GOAWAY's PING); past it the
/// connection is dropped, so a client cannot hold a close open. (An
/// HTTP/1.1 connection in a drain waits `server.drain_grace` instead.)
const GRACEFUL_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Serve one accepted connection to completion: its requests go to
/// `handler`; how it ends is counted in `metrics`.
pub(crate) async fn serve<H: Handler>(
    stream: TcpStream,
    info: ConnInfo,
    tls: Option<TlsAcceptor>,
    handler: Arc<H>,
    metrics: Arc<Metrics>,
    settings: Arc<ConnSettings>,
) {
    let _ = stream.set_nodelay(true);
    // Each path is boxed: a task is as large as the largest state it can
    // be in (a TLS stream, an HTTP/2 connection), and every connection —
    // every parked idle one too — would pay for that size.
    match tls {
        None => {
            let io = TrackedIo::new(
                stream,
                info.slot.state.clone(),
                None,
                settings.h2_max_control_frames_per_second,
            );
            Box::pin(serve_http(io, info, handler, metrics, &settings)).await;
        }
        Some(acceptor) => {
            Box::pin(serve_tls(
                stream, acceptor, info, handler, metrics, settings,
            ))
            .await
        }
    }
}

async fn serve_tls<H: Handler>(
    stream: TcpStream,
    acceptor: TlsAcceptor,
    info: ConnInfo,
    handler: Arc<H>,
    metrics: Arc<Metrics>,
    settings: Arc<ConnSettings>,
) {
    let state = info.slot.state.clone();
    let handshake = tokio::select! {
        done = Box::pin(acceptor.accept(stream)) => done.map_err(|e| {
            tracing::debug!(peer = %info.peer, error = %e, "TLS handshake failed");
        }),
        _ = state.close_requested(CloseReason::None) => Err(()),
    };
    let Ok(tls_stream) = handshake else {
        count_close(&state, &metrics);
        return;
    };
    let alpn = tls_stream.get_ref().1.alpn_protocol();
    if alpn == Some(crate::acme::ACME_TLS_ALPN) {
        // A CA validating tls-alpn-01: the handshake was the whole answer
        // (RFC 8737 §3); no HTTP on this connection.
        Box::pin(close_tls(tls_stream)).await;
        return;
    }
    let h2 = alpn == Some(b"h2");
    state.handshake_done();
    // Moved into the boxed server at once, so no copy of the TLS stream
    // stays in this task's frame.
    let io = TrackedIo::new(
        tls_stream,
        state,
        Some(h2),
        settings.h2_max_control_frames_per_second,
    );
    Box::pin(serve_http(io, info, handler, metrics, &settings)).await;
}

async fn close_tls(mut tls: tokio_rustls::server::TlsStream<TcpStream>) {
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls).await;
}

/// Every close asked for through the connection's close reason (the
/// sweeper, the registry, the frame meter, the request cap) is counted
/// here, once, before the socket closes — so whoever sees the close also
/// sees it counted. A body-rate close is counted where its 408 is answered
/// (`Rescue`), since that close goes through hyper's Connection: close.
pub(crate) fn count_close(state: &ConnState, metrics: &Metrics) {
    let reason = state.close_reason();
    if reason != CloseReason::None && state.first_count() {
        metrics.connection_closed(reason.label());
    }
}

/// The HTTP server on a connection whose protocol is known (ALPN) or is
/// sniffed here from the first bytes (cleartext: the HTTP/2 preface or
/// not).
async fn serve_http<T, H>(
    mut io: TrackedIo<T>,
    info: ConnInfo,
    handler: Arc<H>,
    metrics: Arc<Metrics>,
    settings: &ConnSettings,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let peer = info.peer;
    let state = info.slot.state.clone();
    let mut shutdown = info.shutdown.clone();
    // The sniffing and serving states are boxed so that a parked
    // connection's future is only as large as its parked state.
    let grace = settings.drain_grace;
    if io.sniffing() && !Box::pin(sniff(&mut io, &state, &mut shutdown, grace)).await {
        count_close(&state, &metrics);
        return;
    }
    let info = Arc::new(info);
    let handle = move |req| {
        let handler = handler.clone();
        let info = info.clone();
        async move { Ok::<_, Infallible>(handler.handle(req, &info).await) }
    };
    if io.is_h2() {
        // Boxed once here: a request's future is large, and hyper's HTTP/2
        // server moves it several times on its way into a task of its own
        // (−4 % instructions per HTTP/2 request; HTTP/1.1 keeps it in place,
        // where a box would cost +3 %).
        let service = service_fn(move |req| Box::pin(handle(req)));
        let mut conn = Box::pin(settings.h2.serve_connection(TokioIo::new(io), service));
        drive(conn.as_mut(), &state, &metrics, &mut shutdown, peer, grace).await;
        count_close(&state, &metrics);
        return;
    }
    let service = service_fn(handle);
    loop {
        // Boxed, so a parked connection's task holds a pointer, not hyper's
        // connection state.
        let mut conn = Box::pin(
            settings
                .h1
                .serve_connection(TokioIo::new(io), service.clone())
                .with_upgrades(),
        );
        let outcome = Box::pin(drive(
            conn.as_mut(),
            &state,
            &metrics,
            &mut shutdown,
            peer,
            grace,
        ))
        .await;
        if outcome != Outcome::Parked {
            break;
        }
        metrics.connection_parked();
        // hyper is done with the socket; take it back with whatever hyper
        // had read and not yet used (a pipelined head, say).
        let Some(http1::Parts {
            io: hyper_io,
            read_buf,
            ..
        }) = Pin::into_inner(conn).into_parts()
        else {
            break;
        };
        io = hyper_io.into_inner();
        io.resume();
        if !read_buf.is_empty() {
            state.unpark();
            io.unread(read_buf);
            continue;
        }
        // Even empty, it holds hyper's whole read buffer.
        drop(read_buf);
        // Parked: only the socket and weir's own state are held until the
        // client sends its next request.
        state.park_waiting();
        let counted = ParkedGauge::inc(metrics.parked_gauge());
        let next = wait_parked(&mut io, &state, &mut shutdown, grace).await;
        drop(counted);
        state.unpark();
        if !next {
            break;
        }
    }
    count_close(&state, &metrics);
    // The socket goes here, after the close is counted.
}

/// Counts a parked connection for as long as it lives (a cancelled task
/// included).
struct ParkedGauge<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl<'a> ParkedGauge<'a> {
    fn inc(gauge: &'a prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        ParkedGauge(gauge)
    }
}

impl Drop for ParkedGauge<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// How serving a connection through hyper ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ended,
    /// Idle and parked: hyper's connection ended, the socket is kept.
    Parked,
}

/// A hyper connection (HTTP/1.1 or HTTP/2) being served.
trait Served: Future<Output = hyper::Result<()>> {
    fn graceful(self: Pin<&mut Self>);
}

impl<I, S, B> Served for hyper::server::conn::http1::UpgradeableConnection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    B: http_body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B> Served for hyper::server::conn::http2::Connection<I, S, TokioExecutor>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: http_body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    TokioExecutor: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Poll `conn` to its end, closing it when weir asks (deadlines, defences,
/// shutdown) and parking it when the sweeper asks.
///
/// When shutdown begins (a drain: SIGTERM, or a hand-over), an HTTP/2
/// connection gets hyper's graceful close: GOAWAY with the highest stream
/// id, a PING round trip, then GOAWAY with the last stream processed, so
/// streams the client opened meanwhile are served. An HTTP/1.1 connection
/// is *not* handed to hyper's graceful close, which closes a connection
/// between requests at once — a request the client is writing, or that is
/// unread in the socket, would be lost. Instead every answer from then on
/// carries `Connection: close` (see `lifecycle`), after which hyper ends
/// the connection; and one with nothing of a request arriving for `grace`
/// ([`ConnState::quiet_for_us`]) is closed.
async fn drive<C: Served + ?Sized>(
    mut conn: Pin<&mut C>,
    state: &ConnState,
    metrics: &Metrics,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    peer: std::net::SocketAddr,
    grace: Duration,
) -> Outcome {
    let mut seen = CloseReason::None;
    let mut draining = false;
    // An HTTP/1.1 drain: waiting for the connection to be quiet for `grace`.
    let mut quiet_wait = false;
    // Armed only when needed: an unarmed timer is never registered.
    let mut timer = pin!(tokio::time::sleep(Duration::MAX));
    let mut timer_armed = false;
    loop {
        tokio::select! {
            biased;
            result = conn.as_mut() => {
                if let Err(e) = result
                    && state.park_state() != Park::Parked
                {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                // An incomplete pipelined head ends hyper's connection with
                // an error at a park, but nothing is lost: it is in the
                // buffer the caller takes back.
                if state.park_state() == Park::Parked {
                    return Outcome::Parked;
                }
                return Outcome::Ended;
            }
            wake = state.woken(seen) => match wake {
                // The next poll of `conn` ends it at its read, if still idle.
                Wake::Park => {
                    state.confirm_park();
                }
                Wake::Close(reason) => {
                    seen = reason;
                    if reason.graceful() && !draining {
                        // Finish in-flight requests, then close (GOAWAY on HTTP/2).
                        draining = true;
                        conn.as_mut().graceful();
                        timer.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
                        timer_armed = true;
                    } else if !reason.graceful() {
                        tracing::debug!(%peer, reason = reason.label(), "connection closed");
                        // Counted before the 408 below reaches the client.
                        count_close(state, metrics);
                        if reason == CloseReason::HeadTimeout {
                            // One last poll lets TrackedIo answer 408 first.
                            let _ = tokio::time::timeout(Duration::from_millis(50), conn.as_mut()).await;
                        }
                        return Outcome::Ended;
                    }
                }
            },
            _ = shutdown_begun(shutdown), if !draining => {
                draining = true;
                if state.is_h2() {
                    conn.as_mut().graceful();
                    timer.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
                } else {
                    quiet_wait = true;
                    timer.as_mut().reset(Instant::now() + grace);
                }
                timer_armed = true;
            }
            _ = timer.as_mut(), if timer_armed => {
                if quiet_wait {
                    // `conn` was polled first (biased), so bytes waiting in
                    // the socket have been read and counted by now.
                    match state.quiet_for_us().map(Duration::from_micros) {
                        Some(quiet) if quiet >= grace => {
                            quiet_wait = false;
                            if state.phase() != Phase::Idle {
                                // New and silent: hyper would wait for a head.
                                tracing::debug!(%peer, "silent new connection closed by the drain");
                                return Outcome::Ended;
                            }
                            // Idle between requests: hyper closes it at once.
                            conn.as_mut().graceful();
                            timer.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
                        }
                        Some(quiet) => timer.as_mut().reset(Instant::now() + (grace - quiet)),
                        // A head arriving, a request in flight, a tunnel:
                        // their deadlines bound them.
                        None => timer.as_mut().reset(Instant::now() + grace),
                    }
                } else if matches!(state.phase(), Phase::Active | Phase::Tunnel) {
                    timer.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
                } else {
                    tracing::debug!(%peer, "graceful close not completed by the client; dropping");
                    return Outcome::Ended;
                }
            }
        }
    }
}

/// Read a cleartext connection's first bytes until they are or are not the
/// HTTP/2 preface, and keep them for the server. `false`: the connection
/// ended (the client left, a deadline passed, or a drain found it silent
/// for `grace`).
async fn sniff<T>(
    io: &mut TrackedIo<T>,
    state: &ConnState,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    grace: Duration,
) -> bool
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut first = [0u8; 24];
    let mut n = 0;
    let mut timer = pin!(tokio::time::sleep(Duration::MAX));
    let mut draining = false;
    while io.sniffing() && n < first.len() {
        tokio::select! {
            read = io.read(&mut first[n..]) => match read {
                Ok(0) | Err(_) => return false,
                Ok(k) => n += k,
            },
            _ = state.close_requested(CloseReason::None) => return false,
            _ = shutdown_begun(shutdown), if !draining => {
                // As in `drive`: a request may be on its way.
                draining = true;
                timer.as_mut().reset(Instant::now() + grace);
            }
            // Once bytes arrive, the head deadline bounds the wait.
            _ = timer.as_mut(), if draining && n == 0 => return false,
        }
    }
    io.unread(Bytes::copy_from_slice(&first[..n]));
    true
}

/// A parked connection: wait for the client's next byte with nothing but
/// the socket. `false`: the connection ends (the client left, weir closes
/// it — idle timeout, reclaim — or a drain found it silent for `grace`).
async fn wait_parked<T>(
    io: &mut TrackedIo<T>,
    state: &ConnState,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    grace: Duration,
) -> bool
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut next = [0u8; 1];
    let mut timer = pin!(tokio::time::sleep(Duration::MAX));
    let mut draining = false;
    loop {
        tokio::select! {
            biased;
            read = io.read(&mut next) => return match read {
                Ok(1) => {
                    io.unread(Bytes::copy_from_slice(&next));
                    true
                }
                _ => false,
            },
            _ = state.close_requested(CloseReason::None) => return false,
            // Like any idle HTTP/1.1 connection in a drain: closed only
            // after `grace` with nothing arriving; a request that does
            // arrive is served and answered with `Connection: close`.
            _ = shutdown_begun(shutdown), if !draining => {
                draining = true;
                timer.as_mut().reset(Instant::now() + grace);
            }
            _ = timer.as_mut(), if draining => return false,
        }
    }
}

/// Resolves once shutdown has begun (the guard `wait_for` returns is not
/// `Send`, so it must not outlive this function).
async fn shutdown_begun(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
