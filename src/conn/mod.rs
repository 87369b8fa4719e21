//! One client connection: TLS handshake, ALPN, then hyper's HTTP/1.1 +
//! HTTP/2 server with weir's limits — until the client leaves, a deadline or
//! defence asks it to close (see [`deadline`] and [`io`]), or shutdown
//! begins.

pub mod deadline;
pub mod info;
pub mod io;
pub mod registry;
pub mod state;
pub mod tls;

use std::convert::Infallible;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::config::Config;
use crate::lifecycle::Gateway;
use info::ConnInfo;
use io::TrackedIo;
use state::{CloseReason, ConnState, Phase};

/// Connection-level settings shared by every listener. A connection uses
/// the settings current when it was accepted.
pub struct ConnSettings {
    http: auto::Builder<TokioExecutor>,
    h2_max_control_frames_per_second: u32,
}

impl ConnSettings {
    pub fn new(config: &Config) -> Self {
        let c = &config.connections;
        let mut http = auto::Builder::new(TokioExecutor::new());
        // hyper's own head timer is only a backstop: it also runs while a
        // keep-alive connection is idle, so it is set to the longest wait a
        // connection may legitimately have before a head is complete. The
        // real head and idle deadlines are enforced by the sweeper.
        http.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(c.keepalive_timeout + c.request_head_timeout)
            .max_headers(config.http1.max_headers)
            .max_buf_size(config.http1.max_head_size);
        http.http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(config.http2.max_concurrent_streams)
            .max_header_list_size(config.http2.max_header_list_size)
            .max_pending_accept_reset_streams(config.http2.max_pending_resets);
        ConnSettings {
            http,
            h2_max_control_frames_per_second: config.http2.max_control_frames_per_second,
        }
    }
}

/// How long a gracefully closing connection with nothing in flight may
/// take to go (an HTTP/2 client must answer the GOAWAY's PING); past it the
/// connection is dropped, so a client cannot hold a close open.
const GRACEFUL_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Serve one accepted connection to completion.
pub async fn serve(
    stream: TcpStream,
    info: ConnInfo,
    tls: Option<TlsAcceptor>,
    gateway: Arc<Gateway>,
    settings: Arc<ConnSettings>,
) {
    let _ = stream.set_nodelay(true);
    let state = info.slot.state.clone();
    match tls {
        None => {
            let io = TrackedIo::new(
                stream,
                state.clone(),
                None,
                settings.h2_max_control_frames_per_second,
            );
            serve_http(io, info, gateway, &settings).await;
        }
        Some(acceptor) => {
            let handshake = tokio::select! {
                done = acceptor.accept(stream) => done.map_err(|e| {
                    tracing::debug!(peer = %info.peer, error = %e, "TLS handshake failed");
                }),
                _ = state.close_requested(CloseReason::None) => Err(()),
            };
            if let Ok(mut tls_stream) = handshake {
                let alpn = tls_stream.get_ref().1.alpn_protocol();
                if alpn == Some(crate::acme::ACME_TLS_ALPN) {
                    // A CA validating tls-alpn-01: the handshake was the
                    // whole answer (RFC 8737 §3); no HTTP on this connection.
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls_stream).await;
                    return;
                }
                let h2 = alpn == Some(b"h2");
                state.handshake_done();
                let io = TrackedIo::new(
                    tls_stream,
                    state.clone(),
                    Some(h2),
                    settings.h2_max_control_frames_per_second,
                );
                serve_http(io, info, gateway, &settings).await;
            } else {
                count_close(&state, gateway.metrics());
            }
        }
    }
}

/// Every close asked for through the connection's close reason (the
/// sweeper, the registry, the frame meter, the request cap) is counted
/// here, once, before the socket closes — so whoever sees the close also
/// sees it counted. A body-rate close is counted where its 408 is answered
/// (`Rescue`), since that close goes through hyper's Connection: close.
fn count_close(state: &ConnState, metrics: &crate::telemetry::Metrics) {
    let reason = state.close_reason();
    if reason != CloseReason::None {
        metrics.connection_closed(reason.label());
    }
}

async fn serve_http<T>(
    io: TrackedIo<T>,
    info: ConnInfo,
    gateway: Arc<Gateway>,
    settings: &ConnSettings,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let peer = info.peer;
    let state = info.slot.state.clone();
    let metrics = gateway.metrics().clone();
    let mut shutdown = info.shutdown.clone();
    let info = Arc::new(info);
    let service = service_fn(move |req| {
        let gateway = gateway.clone();
        let info = info.clone();
        async move { Ok::<_, Infallible>(gateway.handle(req, &info).await) }
    });
    let mut conn = pin!(
        settings
            .http
            .serve_connection_with_upgrades(TokioIo::new(io), service)
    );
    let mut seen = CloseReason::None;
    let mut draining = false;
    // Shutdown began while a head was awaited: close once the grace is over.
    let mut close_pending = false;
    let mut grace = pin!(tokio::time::sleep(Duration::MAX));
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                break;
            }
            reason = state.close_requested(seen) => {
                seen = reason;
                if reason.graceful() && !draining {
                    // Finish in-flight requests, then close (GOAWAY on HTTP/2).
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                    grace.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
                } else if !reason.graceful() {
                    tracing::debug!(%peer, reason = reason.label(), "connection closed");
                    if reason == CloseReason::HeadTimeout {
                        // One last poll lets TrackedIo answer 408 first.
                        let _ = tokio::time::timeout(Duration::from_millis(50), conn.as_mut()).await;
                    }
                    break;
                }
            }
            _ = shutdown_begun(&mut shutdown), if !draining => {
                draining = true;
                if state.phase() == Phase::ReadingHead {
                    // A request may already be on the wire, unread: closing
                    // now would drop it unanswered (a new connection at a
                    // drain or an upgrade). Give it the grace to arrive;
                    // the close follows.
                    close_pending = true;
                } else {
                    conn.as_mut().graceful_shutdown();
                }
                grace.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
            }
            _ = grace.as_mut() => {
                if close_pending {
                    close_pending = false;
                    conn.as_mut().graceful_shutdown();
                    grace.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
                } else if matches!(state.phase(), Phase::Active | Phase::Tunnel) {
                    grace.as_mut().reset(Instant::now() + GRACEFUL_CLOSE_GRACE);
                } else {
                    tracing::debug!(%peer, "graceful close not completed by the client; dropping");
                    break;
                }
            }
        }
    }
    count_close(&state, &metrics);
    // `conn` (the socket) goes here, after the close is counted.
}

/// Resolves once shutdown has begun (the guard `wait_for` returns is not
/// `Send`, so it must not outlive this function).
async fn shutdown_begun(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
