//! Dialing a server: TCP, then TLS for `https://`, offering the ALPN
//! protocols of the upstream's HTTP versions; or a proxy route's unix
//! socket. A leaf the pools and the servers share.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

use super::error::BoxError;
use crate::config::UpstreamHttp;

/// TCP, then TLS for `https://`, offering the ALPN protocols of the
/// upstream's HTTP versions.
pub(crate) type Connector = HttpsConnector<HttpConnector>;

/// The connector for an upstream spoken to in `http`.
pub(crate) fn connector(
    connect_timeout: Duration,
    tls: &rustls::ClientConfig,
    http: UpstreamHttp,
) -> Connector {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_connect_timeout(Some(connect_timeout));
    tcp.set_nodelay(true);
    let b = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http();
    match http {
        UpstreamHttp::Http1 => b.enable_http1().wrap_connector(tcp),
        UpstreamHttp::Auto => b.enable_http1().enable_http2().wrap_connector(tcp),
        UpstreamHttp::Http2 => b.enable_http2().wrap_connector(tcp),
    }
}

/// How an HTTP/1.1 pool reaches its server, chosen once when the server is
/// made: a request only meets this when a new connection is dialled.
#[derive(Clone)]
pub(crate) enum Dial {
    /// TCP, then TLS for `https://`.
    Tcp(Connector),
    /// A unix domain socket, in plain HTTP.
    Unix {
        path: Arc<Path>,
        connect_timeout: Duration,
    },
}

/// A connection to the unix socket at `path`. A socket that is not there
/// (the app not started, or gone) or refuses is a connect failure, as a
/// refused TCP connect is; past `connect_timeout` it is an I/O error of
/// kind `TimedOut`, which the proxy answers as a TCP connect timeout.
pub(crate) async fn unix(
    path: &Path,
    connect_timeout: Duration,
) -> Result<TokioIo<UnixStream>, BoxError> {
    let failed = |kind: std::io::ErrorKind, why: &dyn std::fmt::Display| -> BoxError {
        std::io::Error::new(
            kind,
            format!("connecting to unix:{}: {why}", path.display()),
        )
        .into()
    };
    match tokio::time::timeout(connect_timeout, UnixStream::connect(path)).await {
        Ok(Ok(stream)) => Ok(TokioIo::new(stream)),
        Ok(Err(e)) => Err(failed(e.kind(), &e)),
        Err(_) => Err(failed(std::io::ErrorKind::TimedOut, &"timed out")),
    }
}
