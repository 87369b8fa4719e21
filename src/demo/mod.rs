//! `weir demo`: a complete, file-free setup for a first look — plain HTTP,
//! TLS with HTTP/2 (a self-signed `localhost` certificate made at start), the
//! admin listener, and a built-in upstream. Every limit is weir's default,
//! so what the demo shows is what a real config gets.

pub mod upstream;

use std::net::SocketAddr;
use std::path::Path;

use crate::config::{Certificate, Config, Problems, TlsSettings};
use crate::pki::{self, PkiError};

/// Why the demo could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("demo config: {0}")]
    Config(#[from] Problems),
    #[error("demo certificate: {0}")]
    Certificate(#[from] PkiError),
}

/// Ports the demo listens on (all on 127.0.0.1).
#[derive(Debug, Clone, Copy)]
pub struct DemoPorts {
    pub http: u16,
    pub https: u16,
    pub admin: u16,
}

/// The demo's config, routing everything to the upstream at `upstream`.
pub fn config(ports: DemoPorts, upstream: SocketAddr) -> Result<Config, DemoError> {
    let text = format!(
        "[admin]\naddress = \"127.0.0.1:{admin}\"\n\
         [[listener]]\nname = \"http\"\naddress = \"127.0.0.1:{http}\"\n\
         [[listener]]\nname = \"https\"\naddress = \"127.0.0.1:{https}\"\n\
         [[route]]\nname = \"demo\"\nupstream = \"http://{upstream}\"\n",
        admin = ports.admin,
        http = ports.http,
        https = ports.https,
    );
    let mut config = Config::parse(Path::new("<demo>"), &text)?;
    let (key, names, _) = pki::self_signed(&["localhost", "127.0.0.1"])?;
    let tls = TlsSettings {
        certificates: vec![Certificate {
            cert_path: "<generated>".into(),
            key_path: "<generated>".into(),
            names,
            key,
        }],
    };
    for l in config.listeners.iter_mut().filter(|l| l.name == "https") {
        l.tls = Some(tls.clone());
    }
    Ok(config)
}

/// The curl commands printed when the demo starts, for the ports it got.
pub fn try_these(running: &crate::server::Running) -> String {
    let port = |name: &str| running.listener_addr(name).map_or(0, |a| a.port());
    let (http, https) = (port("http"), port("https"));
    let admin = running.admin_addr().map_or(0, |a| a.port());
    format!(
        "weir demo is running. Try:\n\
         \x20 curl -s http://127.0.0.1:{http}/echo?hello=world\n\
         \x20 curl -sk --http2 https://localhost:{https}/echo -d 'some body'\n\
         \x20 curl -s http://127.0.0.1:{http}/bytes/104857600 -o /dev/null -w '%{{size_download}} bytes\\n'\n\
         \x20 curl -sN 'http://127.0.0.1:{http}/sse?n=5&interval_ms=300'\n\
         \x20 curl -s 'http://127.0.0.1:{http}/slow?ms=1500'\n\
         \x20 curl -s -i -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' http://127.0.0.1:{http}/ws --max-time 1\n\
         \x20 curl -s http://127.0.0.1:{admin}/health\n\
         \x20 curl -s http://127.0.0.1:{admin}/metrics\n\
         Press Ctrl-C to stop.\n"
    )
}
