//! One client connection: TLS handshake (with a deadline), ALPN, then
//! hyper's HTTP/1.1 + HTTP/2 server with weir's limits, watched for
//! graceful shutdown.

pub mod tls;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use crate::config::ServerSettings;
use crate::lifecycle::{ConnInfo, Gateway};

/// HTTP/2 concurrent streams per connection (nginx 128, HAProxy 100).
const H2_MAX_CONCURRENT_STREAMS: u32 = 100;

/// Connection-level settings shared by every listener.
pub struct ConnSettings {
    pub tls_handshake_timeout: Duration,
    http: auto::Builder<TokioExecutor>,
}

impl ConnSettings {
    pub fn new(server: &ServerSettings) -> Self {
        let mut http = auto::Builder::new(TokioExecutor::new());
        http.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(server.request_head_timeout)
            .max_headers(100);
        http.http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
            .max_header_list_size(64 * 1024);
        ConnSettings {
            tls_handshake_timeout: server.tls_handshake_timeout,
            http,
        }
    }
}

/// Serve one accepted connection to completion.
pub async fn serve(
    stream: TcpStream,
    info: ConnInfo,
    tls: Option<TlsAcceptor>,
    gateway: Arc<Gateway>,
    settings: Arc<ConnSettings>,
    watcher: Watcher,
) {
    let _ = stream.set_nodelay(true);
    match tls {
        None => serve_http(TokioIo::new(stream), info, gateway, &settings, watcher).await,
        Some(acceptor) => {
            let handshake =
                tokio::time::timeout(settings.tls_handshake_timeout, acceptor.accept(stream));
            match handshake.await {
                Ok(Ok(tls_stream)) => {
                    serve_http(TokioIo::new(tls_stream), info, gateway, &settings, watcher).await
                }
                Ok(Err(e)) => {
                    tracing::debug!(peer = %info.peer, error = %e, "TLS handshake failed")
                }
                Err(_) => tracing::debug!(peer = %info.peer, "TLS handshake timed out"),
            }
        }
    }
}

async fn serve_http<I>(
    io: I,
    info: ConnInfo,
    gateway: Arc<Gateway>,
    settings: &ConnSettings,
    watcher: Watcher,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let peer = info.peer;
    let info = Arc::new(info);
    let service = service_fn(move |req| {
        let gateway = gateway.clone();
        let info = info.clone();
        async move { Ok::<_, Infallible>(gateway.handle(req, &info).await) }
    });
    let conn = settings.http.serve_connection_with_upgrades(io, service);
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
