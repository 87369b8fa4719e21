//! HTTP/2 to upstreams, against real servers on port 0: an `https://`
//! server that speaks only h2 is reached by ALPN (and `:authority` is the
//! client's host); a cleartext server is spoken to in h2c when the route
//! says so; many concurrent requests share one connection; hop-by-hop
//! headers never reach an HTTP/2 server; trailers cross in both
//! directions; an upgrade still goes over HTTP/1.1; an LLM upstream takes
//! the same `http_version` and multiplexes its calls; the active health
//! check speaks it too; a server's GOAWAY costs no request.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// What the upstream saw: the version, the authority (`:authority` over
/// HTTP/2, else Host) and every header name.
async fn describe(req: Request<Incoming>) -> Response<TestBody> {
    let authority = req
        .uri()
        .authority()
        .map(|a| a.to_string())
        .or_else(|| {
            req.headers()
                .get("host")
                .and_then(|h| h.to_str().ok())
                .map(String::from)
        })
        .unwrap_or_default();
    let te = req
        .headers()
        .get("te")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let names: Vec<&str> = req.headers().keys().map(|k| k.as_str()).collect();
    let text = format!(
        "{:?} {authority} te={te} {}",
        req.version(),
        names.join(",")
    );
    Response::new(body(text))
}

/// A TLS server that offers only `h2` by ALPN and serves HTTP/2 only;
/// counts the TCP connections it accepts. Returns its address, the
/// certificate's PEM path (to trust it) and the count.
async fn h2_only_tls_upstream<F, Fut>(
    dir: &std::path::Path,
    handler: F,
) -> (SocketAddr, std::path::PathBuf, Arc<AtomicUsize>)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<TestBody>> + Send + 'static,
{
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let pem = dir.join("h2-upstream.pem");
    std::fs::write(&pem, c.cert.pem()).expect("write");
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(c.signing_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![c.cert.der().clone()], key)
    .expect("server config");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let (addr, accepted) = accepting(move |tcp| {
        let (acceptor, handler) = (acceptor.clone(), handler.clone());
        async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |req| {
                let fut = handler(req);
                async move { Ok::<_, Infallible>(fut.await) }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(1000)
                .serve_connection(TokioIo::new(tls), service)
                .await;
        }
    })
    .await;
    (addr, pem, accepted)
}

/// A server on port 0 that hands each TCP connection it accepts to
/// `serve`, in a task of its own; its address and how many it accepted.
async fn accepting<F, Fut>(serve: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(tcp));
        }
    });
    (addr, accepted)
}

/// Holds each request until `n` have arrived, so they are truly
/// concurrent on the wire (awaited, not slept on).
#[derive(Clone)]
struct AllAtOnce {
    n: usize,
    arrived: Arc<AtomicUsize>,
    all_in: Arc<Notify>,
}

impl AllAtOnce {
    fn new(n: usize) -> Self {
        AllAtOnce {
            n,
            arrived: Arc::new(AtomicUsize::new(0)),
            all_in: Arc::new(Notify::new()),
        }
    }

    /// Count one arrival; the `n`th (and any after) wakes the waiters.
    fn arrive(&self) -> bool {
        let all = self.arrived.fetch_add(1, Ordering::SeqCst) + 1 >= self.n;
        if all {
            self.all_in.notify_waiters();
        }
        all
    }

    async fn wait(&self) {
        // Registered before counting, so the last arrival cannot miss it.
        let released = self.all_in.notified();
        if !self.arrive() {
            released.await;
        }
    }
}

/// The results of `tasks`, each of which must end within 20 s.
async fn all_done<T>(tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let done = tokio::time::timeout(
        Duration::from_secs(20),
        futures_util::future::join_all(tasks),
    )
    .await
    .expect("every request answered");
    done.into_iter().map(|r| r.expect("task")).collect()
}

fn config(upstream: &str, extra: &str, global: &str) -> String {
    format!(
        "[log]\naccess_log = false\n{global}[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"{upstream}\"\n{extra}\n"
    )
}

/// weir in front of `up`, speaking h2c to it.
async fn h2c_weir(up: &Upstream) -> Weir {
    let url = format!("http://{}", up.addr);
    Weir::start(&config(&url, "http_version = \"2\"", "")).await
}

#[tokio::test]
async fn an_https_upstream_that_speaks_only_h2_is_reached_by_alpn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (addr, ca, _) = h2_only_tls_upstream(dir.path(), describe).await;
    let upstream = format!("https://localhost:{}", addr.port());
    let ca = format!("[upstream]\nca_file = \"{}\"\n", ca.display());
    let weir = Weir::start(&config(&upstream, "http_version = \"auto\"", &ca)).await;
    let (status, _, text) = get_with(
        &weir.url("web", "/"),
        &[("host", "app.example:8080"), ("te", "trailers")],
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("HTTP/2.0 "), "{text}");
    // HTTP/2's Host is `:authority`: the client's host, as with HTTP/1.1,
    // while the connection and its TLS name are the server's.
    assert!(text.contains(" app.example:8080 "), "{text}");

    // By default weir speaks HTTP/1.1 only, and cannot agree on a
    // protocol with it.
    let weir = Weir::start(&config(&upstream, "", &ca)).await;
    let (status, _, text) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(status, 502, "{text}");
}

#[tokio::test]
async fn a_cleartext_upstream_is_spoken_to_in_h2c_when_the_route_says_so() {
    let up = upstream(describe).await;
    let url = format!("http://{}", up.addr);
    let h2c = h2c_weir(&up).await;
    let auto = Weir::start(&config(&url, "http_version = \"auto\"", "")).await;
    let hop = [
        ("connection", "keep-alive, x-hop"),
        ("x-hop", "1"),
        ("keep-alive", "timeout=5"),
        ("te", "trailers, deflate"),
        ("x-end", "2"),
    ];
    // No hop-by-hop header reaches an HTTP/2 server (hyper's HTTP/2
    // client strips them too; HTTP/1.1 servers rely on weir's removal
    // alone, tested in proxy_http1), and `te` is exactly `trailers`,
    // which weir sets again for a client that accepts trailers (gRPC
    // servers expect it).
    let (status, _, text) = get_with(&h2c.url("web", "/"), &hop).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("HTTP/2.0 "), "{text}");
    let names: Vec<&str> = text.rsplit(' ').next().expect("names").split(',').collect();
    assert!(names.contains(&"x-end"), "{text}");
    for hop in [
        "connection",
        "x-hop",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
    ] {
        assert!(!names.contains(&hop), "{hop} reached the server: {text}");
    }
    assert!(
        text.contains(" te=trailers "),
        "only `te: trailers`: {text}"
    );
    let (_, _, text) = get_with(&auto.url("web", "/"), &[]).await;
    assert!(
        text.starts_with("HTTP/1.1 "),
        "plain http stays HTTP/1.1 with \"auto\": {text}"
    );
}

#[tokio::test]
async fn many_concurrent_requests_to_an_h2_upstream_share_one_connection() {
    const N: usize = 100;
    let dir = tempfile::tempdir().expect("tempdir");
    let gather = AllAtOnce::new(N);
    let handler = move |_req: Request<Incoming>| {
        let gather = gather.clone();
        async move {
            gather.wait().await;
            text(200, "ok")
        }
    };
    let (addr, ca, accepted) = h2_only_tls_upstream(dir.path(), handler).await;
    let upstream = format!("https://localhost:{}", addr.port());
    let global = format!(
        "[server]\nworkers = 1\n[upstream]\nca_file = \"{}\"\n",
        ca.display()
    );
    let weir = Weir::start(&config(&upstream, "http_version = \"2\"", &global)).await;
    let client = h1_client();
    let url = weir.url("web", "/");
    let requests = (0..N).map(|_| {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let resp = client.get(url.parse().expect("url")).await.expect("resp");
            resp.status()
        })
    });
    for status in all_done(requests).await {
        assert_eq!(status, 200);
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "{N} concurrent requests, one connection"
    );
}

#[tokio::test]
async fn trailers_cross_an_h2_upstream_both_ways() {
    // The server answers with the request's trailer in its own trailers.
    let up = upstream(|req: Request<Incoming>| async move {
        let collected = req.into_body().collect().await.expect("body");
        let sent = collected
            .trailers()
            .and_then(|t| t.get("x-sum"))
            .cloned()
            .unwrap_or(HeaderValue::from_static("none"));
        let data = collected.to_bytes();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-seen-sum", sent);
        let frames = vec![
            Ok::<_, Infallible>(Frame::data(data)),
            Ok(Frame::trailers(trailers)),
        ];
        Response::new(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
            frames,
        ))))
    })
    .await;
    let weir = h2c_weir(&up).await;
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("abc"));
    let frames = vec![
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"payload"))),
        Ok(Frame::trailers(trailers)),
    ];
    let client: Client<HttpConnector, TestBody> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build(HttpConnector::new());
    let req = Request::post(weir.url("web", "/"))
        .body(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
            frames,
        ))))
        .expect("request");
    let resp = client.request(req).await.expect("response");
    assert_eq!(resp.status(), 200);
    let collected = resp.into_body().collect().await.expect("body");
    let trailers = collected.trailers().cloned().expect("trailers relayed");
    assert_eq!(trailers["x-seen-sum"], "abc", "request trailers relayed");
    assert_eq!(&collected.to_bytes()[..], b"payload");
}

#[tokio::test]
async fn an_upgrade_goes_over_http1_when_the_route_speaks_h2() {
    // Answers an upgrade with 101 and echoes the tunnel; any other
    // request with its version.
    let up = upstream(|mut req: Request<Incoming>| async move {
        if req.headers().get("upgrade").is_none() {
            return Response::new(body(format!("{:?}", req.version())));
        }
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(io) = on.await {
                let mut io = TokioIo::new(io);
                let mut buf = [0u8; 5];
                if io.read_exact(&mut buf).await.is_ok() {
                    let _ = io.write_all(&buf).await;
                }
            }
        });
        let mut r = Response::new(body(Bytes::new()));
        *r.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
        r.headers_mut()
            .insert("connection", HeaderValue::from_static("upgrade"));
        r.headers_mut()
            .insert("upgrade", HeaderValue::from_static("websocket"));
        r
    })
    .await;
    let weir = h2c_weir(&up).await;
    let (_, _, text) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(text, "HTTP/2.0", "the route speaks h2c");

    let mut s = tokio::net::TcpStream::connect(weir.addr("web"))
        .await
        .expect("connect");
    s.write_all(
        b"GET /tunnel HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n",
    )
    .await
    .expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.expect("head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s.write_all(b"hello").await.expect("write");
    let mut back = [0u8; 5];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut back))
        .await
        .expect("echo in time")
        .expect("echo");
    assert_eq!(&back, b"hello");
}

#[tokio::test]
async fn an_llm_upstream_over_h2_carries_concurrent_requests_on_one_connection() {
    const N: usize = 50;
    let gather = AllAtOnce::new(N);
    let over_h2 = Arc::new(AtomicUsize::new(0));
    let up = upstream({
        let over_h2 = over_h2.clone();
        move |req: Request<Incoming>| {
            let (gather, over_h2) = (gather.clone(), over_h2.clone());
            async move {
                if req.version() == http::Version::HTTP_2 {
                    over_h2.fetch_add(1, Ordering::SeqCst);
                }
                gather.wait().await;
                let mut r = Response::new(body(
                    r#"{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}"#,
                ));
                r.headers_mut()
                    .insert("content-type", HeaderValue::from_static("application/json"));
                r
            }
        }
    })
    .await;
    let text = llm::llm_config_with(
        "anthropic",
        &[(
            "up",
            format!("http://{}", up.addr),
            "http_version = \"2\"".to_string(),
        )],
        "",
    );
    let weir = Weir::start(&format!("[server]\nworkers = 1\n{text}")).await;
    let weir = Arc::new(weir);
    let calls = (0..N).map(|_| {
        let weir = weir.clone();
        tokio::spawn(async move {
            llm::post(&weir, "/v1/messages", llm::messages_body("m", false), &[]).await
        })
    });
    for (status, _, text) in all_done(calls).await {
        assert_eq!(status, 200, "{text}");
    }
    assert_eq!(over_h2.load(Ordering::SeqCst), N, "every call over h2c");
    assert_eq!(up.connections(), 1, "{N} concurrent calls, one connection");
}

#[tokio::test]
async fn the_health_check_speaks_the_routes_http_version() {
    // A server that speaks only h2c: an HTTP/1.1 check could never pass.
    let checks = AllAtOnce::new(3);
    let seen = checks.clone();
    let (addr, _) = accepting(move |tcp| {
        let seen = seen.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            if req.uri().path() == "/healthz" {
                // Counted, never held.
                seen.arrive();
            }
            async { Ok::<_, Infallible>(text(200, "up")) }
        });
        async move {
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        }
    })
    .await;
    let three_checks = checks.all_in.notified();
    let weir = Weir::start(&config(
        &format!("http://{addr}"),
        "http_version = \"2\"\n[route.health_check]\npath = \"/healthz\"\n\
         interval = \"50ms\"\ntimeout = \"50ms\"\nfall = 1\nrise = 1",
        "",
    ))
    .await;
    tokio::time::timeout(Duration::from_secs(10), three_checks)
        .await
        .expect("three checks reached the server");
    let (status, _, text) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(status, 200, "the checks passed, the server is in: {text}");
}

/// What operations.md says of GOAWAY, pinned: the reconnect is
/// hyper-util's pool's, so no weir line can be removed to turn it red;
/// it would go red if a change (a pool of weir's own) lost it.
#[tokio::test]
async fn after_a_goaway_the_next_request_takes_a_new_connection() {
    // Each connection is drained (GOAWAY) as soon as its first request
    // arrives, as a server going away does; that request is still answered.
    let (addr, accepted) = accepting(|tcp| async move {
        let go_away = Arc::new(Notify::new());
        let asked = go_away.clone();
        let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
            asked.notify_one();
            async { Ok::<_, Infallible>(text(200, "served")) }
        });
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(tcp), service);
        tokio::pin!(conn);
        tokio::select! {
            _ = conn.as_mut() => {}
            _ = go_away.notified() => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        }
    })
    .await;
    let weir = Weir::start(&config(
        &format!("http://{addr}"),
        "http_version = \"2\"",
        "[server]\nworkers = 1\n",
    ))
    .await;
    for n in 1..=5 {
        let (status, _, text) = get_with(&weir.url("web", "/"), &[]).await;
        assert_eq!(status, 200, "request {n}: {text}");
    }
    // A request racing the first GOAWAY may still be taken by the
    // draining connection (HTTP/2's two-step GOAWAY allows it); none fails.
    assert!(
        accepted.load(Ordering::SeqCst) >= 2,
        "new connections after GOAWAY: {}",
        accepted.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn a_refused_stream_goes_to_another_server_whatever_its_method() {
    // Server a refuses every stream (REFUSED_STREAM: not processed, as a
    // server at its stream limit or going away answers); b serves. The
    // requests have no body: one already sent is not kept to send again.
    let refused = Arc::new(AtomicUsize::new(0));
    let seen = refused.clone();
    let (a, _) = accepting(move |tcp| {
        let seen = seen.clone();
        async move {
            let Ok(mut conn) = h2::server::handshake(tcp).await else {
                return;
            };
            while let Some(Ok((_req, mut respond))) = conn.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                respond.send_reset(h2::Reason::REFUSED_STREAM);
            }
        }
    })
    .await;
    let b = upstream(|_req| async { text(200, "b") }).await;
    let weir = Weir::start(&format!(
        "[log]\naccess_log = false\n[server]\nworkers = 1\n[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nservers = [\"http://{a}\", \"http://{}\"]\nbalance = \"round_robin\"\n\
         http_version = \"2\"\neject_after = 1000\n",
        b.addr
    ))
    .await;
    let client = h1_client();
    for n in 0..4 {
        let req = Request::post(weir.url("web", "/"))
            .body(http_body_util::Full::new(Bytes::new()))
            .expect("request");
        let (status, _, text) = split(client.request(req).await.expect("answer")).await;
        assert_eq!((status.as_u16(), text.as_str()), (200, "b"), "POST {n}");
    }
    assert!(
        refused.load(Ordering::SeqCst) >= 1,
        "a was asked and refused"
    );
}
