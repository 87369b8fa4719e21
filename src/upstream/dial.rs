//! Dialing a server: TCP, then TLS for `https://`, offering the ALPN
//! protocols of the upstream's HTTP versions. A leaf the pools and the
//! servers share.

use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

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
