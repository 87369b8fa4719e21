//! The one integration harness: start weir in-process on port 0 from a TOML
//! config, start real upstreams on port 0, and talk to both with real
//! clients (hyper's pooled client over rustls for HTTP/1.1 and HTTP/2, raw
//! TCP for byte-exact input).
//!
//! Every test file uses it (`mod common;`); a helper two files need lives
//! here, not in both. Beside this file: [`llm`] (mock providers, LLM route
//! configs, SSE parsing), [`process`] (the real binary as a child process),
//! [`load`] (background traffic while something changes) and [`h2raw`]
//! (raw HTTP/2 frames). A test that needs an external tool skips through
//! [`can_run`], visibly.

#![allow(dead_code)]
// The harness is a module of each test crate: its `pub` is for the tests.
#![allow(unreachable_pub)]

pub mod agents;
pub mod browser;
pub mod dns;
pub mod fleet;
pub mod h2raw;
pub mod held;
pub mod idp;
pub mod keepalive;
pub mod keys;
pub mod llm;
pub mod load;
pub mod nginx;
pub mod otlp;
pub mod postgres;
pub mod process;
pub mod provider;
pub mod redis;
pub mod sdk;
pub mod wsraw;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use weir::testing::config::Config;
use weir::testing::server::{self, Running};

pub type TestBody = BoxBody<Bytes, Infallible>;

/// A weir started in-process from a config text.
pub struct Weir {
    running: Option<Running>,
    pub dir: tempfile::TempDir,
}

impl Weir {
    /// Start weir with `toml`; `{dir}` in the text is replaced by a temporary
    /// directory (for certificate files written with [`write_cert`]).
    pub async fn start(toml: &str) -> Weir {
        Self::start_in(tempfile::tempdir().expect("tempdir"), toml).await
    }

    pub async fn start_in(dir: tempfile::TempDir, toml: &str) -> Weir {
        let text = toml.replace("{dir}", &dir.path().display().to_string());
        let path = dir.path().join("weir.toml");
        let config = match Config::parse(&path, &text) {
            Ok(c) => c,
            Err(p) => panic!("test config is invalid:\n{p}\n{text}"),
        };
        let running = server::start(&config).await.expect("weir starts");
        Weir {
            running: Some(running),
            dir,
        }
    }

    pub fn running(&self) -> &Running {
        self.running.as_ref().expect("running")
    }

    /// The address of the listener called `name`.
    pub fn addr(&self, name: &str) -> SocketAddr {
        self.running().listener_addr(name).expect("listener exists")
    }

    pub fn url(&self, name: &str, path: &str) -> String {
        format!("http://{}{path}", self.addr(name))
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!(
            "http://{}{path}",
            self.running().admin_addr().expect("admin")
        )
    }

    /// Validate `toml` (with `{dir}` replaced) and apply it to the running
    /// server, as a reload does.
    pub fn apply(&self, toml: &str) -> Result<u64, weir::testing::server::StartError> {
        let text = toml.replace("{dir}", &self.dir.path().display().to_string());
        let path = self.dir.path().join("weir.toml");
        let config = match Config::parse(&path, &text) {
            Ok(c) => c,
            Err(p) => panic!("test config is invalid:\n{p}\n{text}"),
        };
        self.running().apply(&config)
    }

    /// Begin a graceful shutdown; resolves when the drain ends.
    pub fn shutdown(&mut self) -> impl Future<Output = bool> + use<> {
        let running = self.running.take().expect("running");
        running.shutdown()
    }
}

/// Write a self-signed certificate for `names` into `dir`; returns the
/// certificate and key paths and the certificate PEM (to trust it).
pub fn write_cert(dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf, String) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let c = rcgen::generate_simple_self_signed(names).expect("generate cert");
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}-key.pem"));
    std::fs::write(&cert, c.cert.pem()).expect("write cert");
    std::fs::write(&key, c.signing_key.serialize_pem()).expect("write key");
    (cert, key, c.cert.pem())
}

/// The built-in demo upstream on a fresh port.
pub async fn demo_upstream() -> SocketAddr {
    weir::testing::demo::upstream::spawn(([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream")
}

/// A real HTTP server on port 0 answering with `handler`; counts
/// connections opened and closed.
pub struct Upstream {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
    pub closed: Arc<AtomicUsize>,
}

impl Upstream {
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn closed(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

pub async fn upstream<F, Fut>(handler: F) -> Upstream
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<TestBody>> + Send + 'static,
{
    upstream_at("127.0.0.1:0".parse().expect("addr"), handler).await
}

/// [`upstream`] on `addr` (another loopback address, a port given back).
pub async fn upstream_at<F, Fut>(addr: SocketAddr, handler: F) -> Upstream
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<TestBody>> + Send + 'static,
{
    let listener = TcpListener::bind(addr).await.expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    let connections = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    let closed_counter = closed.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let handler = handler.clone();
            let closed = closed_counter.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let fut = handler(req);
                    async move { Ok::<_, Infallible>(fut.await) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(stream), service)
                    .await;
                closed.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Upstream {
        addr,
        connections,
        closed,
    }
}

pub fn body(b: impl Into<Bytes>) -> TestBody {
    Full::new(b.into()).boxed()
}

pub fn text(status: u16, b: &'static str) -> Response<TestBody> {
    let mut r = Response::new(body(b));
    *r.status_mut() = http::StatusCode::from_u16(status).expect("status");
    r
}

/// A server that reads a request head and closes the connection with the
/// request unanswered, counting the requests that reached it: a request
/// that reached a server, which must not be sent again unless idempotent.
pub async fn resetting() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                if s.read(&mut buf).await.is_ok_and(|n| n > 0) {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, seen)
}

/// An address nothing listens on.
pub async fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    l.local_addr().expect("addr")
}

pub type PlainClient = Client<HttpConnector, Full<Bytes>>;
pub type TlsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTP/1.1 client.
pub fn h1_client() -> PlainClient {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// A TLS client trusting `ca_pem`, offering `alpn` (`h2`, `http/1.1`).
pub fn tls_client(ca_pem: &str, h2: bool) -> TlsClient {
    tls_client_with(
        ca_pem,
        h2,
        &[&rustls::version::TLS13, &rustls::version::TLS12],
    )
}

pub fn tls_config(
    ca_pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("pem")).expect("root");
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(versions)
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth()
}

pub fn tls_client_with(
    ca_pem: &str,
    h2: bool,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> TlsClient {
    let b = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(ca_pem, versions))
        .https_only();
    let (connector, h2_only) = if h2 {
        (b.enable_http2().build(), true)
    } else {
        (b.enable_http1().build(), false)
    };
    let mut builder = Client::builder(TokioExecutor::new());
    builder.http2_only(h2_only);
    builder.build(connector)
}

pub async fn get(client: &PlainClient, url: &str) -> (http::StatusCode, http::HeaderMap, String) {
    let resp = client
        .get(url.parse().expect("url"))
        .await
        .expect("request");
    split(resp).await
}

/// A request with `headers` and `body` over HTTP/1.1: the response once
/// its head has arrived, the body left to read (a stream the test holds
/// open, reads a little of, or drops).
pub async fn send(
    method: http::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Response<Incoming> {
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body.into())).expect("request");
    h1_client().request(req).await.expect("response")
}

/// A GET of `url` with `headers`, the whole answer read.
pub async fn get_with(
    url: &str,
    headers: &[(&str, &str)],
) -> (http::StatusCode, http::HeaderMap, String) {
    split(send(http::Method::GET, url, headers, Bytes::new()).await).await
}

/// A stream held open: a GET of `url` with `headers` answered 200, its
/// body once the first piece of it arrived.
pub async fn held_stream(
    url: &str,
    headers: &[(&str, &str)],
) -> http_body_util::BodyDataStream<Incoming> {
    let resp = send(http::Method::GET, url, headers, Bytes::new()).await;
    assert_eq!(resp.status(), 200, "the stream is answered");
    let mut body = resp.into_body().into_data_stream();
    futures_util::StreamExt::next(&mut body)
        .await
        .expect("first event")
        .expect("ok");
    body
}

/// A POST of the JSON text `body` to `url` with `headers`: the response
/// once its head has arrived.
pub async fn post_open(
    url: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> Response<Incoming> {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    send(http::Method::POST, url, &all, body).await
}

/// [`post_open`], the whole answer read.
pub async fn post_json(
    url: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> (http::StatusCode, http::HeaderMap, String) {
    split(post_open(url, body, headers).await).await
}

pub async fn split(resp: Response<Incoming>) -> (http::StatusCode, http::HeaderMap, String) {
    let (parts, b) = resp.into_parts();
    let bytes = b.collect().await.expect("body").to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// Parse the demo upstream's /echo answer.
pub fn echo_json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not echo JSON ({e}): {s}"))
}

/// Send raw bytes and read until the server closes or `wait` passes.
pub async fn raw(addr: SocketAddr, request: &[u8], wait: Duration) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(request).await.expect("write");
    read_until_close(&mut s, wait).await.0
}

/// Read everything until EOF (returns true) or until `wait` passes (false).
pub async fn read_until_close(s: &mut TcpStream, wait: Duration) -> (String, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&out).into_owned(), true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&out).into_owned(), false),
        }
    }
}

/// Config text for one plain listener named `web`, an admin listener and a
/// catch-all route to `upstream`, plus `extra_route` keys.
pub fn simple_config(upstream: SocketAddr, extra_route: &str) -> String {
    format!(
        "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{upstream}\"\n{extra_route}\n"
    )
}

/// [`simple_config`] with `server.drain_grace` set to `grace`.
pub fn drain_grace_config(upstream: SocketAddr, grace: &str) -> String {
    format!(
        "[server]\ndrain_grace = \"{grace}\"\n{}",
        simple_config(upstream, "")
    )
}

/// The admin listener's /metrics text.
pub async fn metrics(weir: &Weir) -> String {
    get(&h1_client(), &weir.admin_url("/metrics")).await.2
}

/// The value of the first metric line starting with `name` (name plus
/// labels, as written in the exposition).
pub async fn metric(weir: &Weir, name: &str) -> Option<u64> {
    metric_at(weir.running().admin_addr().expect("admin"), name).await
}

/// [`metric`] from the admin listener at `admin` (a weir in another process).
pub async fn metric_at(admin: SocketAddr, name: &str) -> Option<u64> {
    metric_in(
        &get(&h1_client(), &format!("http://{admin}/metrics"))
            .await
            .2,
        name,
    )
}

/// [`metric`] from an exposition's text.
pub fn metric_in(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Wait until the metric `name` at `admin` reads `want`, up to `within`.
pub async fn eventually_metric_at(
    admin: SocketAddr,
    name: &str,
    want: u64,
    within: Duration,
) -> bool {
    eventually_async(within, || async {
        metric_at(admin, name).await == Some(want)
    })
    .await
}

/// Poll `cond` until it holds or `within` passes: waiting on an observable
/// condition instead of sleeping a fixed time.
pub async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Poll an async condition until it holds or `within` passes.
pub async fn eventually_async<F, Fut>(within: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond().await
}

/// Wait until the metric `name` reads `want` (within 5 s).
pub async fn eventually_metric(weir: &Weir, name: &str, want: u64) -> bool {
    let admin = weir.running().admin_addr().expect("admin");
    eventually_metric_at(admin, name, want, Duration::from_secs(5)).await
}

/// Whether a test that needs an external tool can run. With the tool
/// `found`, yes. Without it the test is skipped, but visibly: a `SKIPPED`
/// line on the process's own stderr (libtest does not capture it, so a
/// green run still shows it) naming the test, what is missing and how to
/// enable it. With the environment variable `require` set (CI sets it), a
/// missing tool fails the test instead.
pub fn can_run(found: bool, missing: &str, enable: &str, require: &str) -> bool {
    if found {
        return true;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string();
    let test = format!("{}::{test}", env!("CARGO_CRATE_NAME"));
    assert!(
        std::env::var_os(require).is_none(),
        "{test}: {missing}, and {require} says it is required. To run it: {enable}."
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {missing}. To run it: {enable}. \
         With {require}=1 a missing tool fails the test instead."
    );
    false
}
