//! TLS termination, SNI, ALPN, HTTP/2 to clients, HTTPS upstreams and the
//! HTTP→HTTPS redirect listener.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{HeaderValue, Request, Response, Version};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

/// weir with one TLS listener `tls` holding certificates for a.test
/// (default) and b.test, routing to `upstream`.
async fn tls_weir(upstream: std::net::SocketAddr) -> (Weir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, ka, pem_a) = write_cert(dir.path(), "a", &["a.test"]);
    let (cb, kb, pem_b) = write_cert(dir.path(), "b", &["b.test", "localhost"]);
    let text = format!(
        "[log]\naccess_log = false\n\
         [[listener]]\nname = \"tls\"\naddress = \"127.0.0.1:0\"\n\
         tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}, {{ cert = \"{}\", key = \"{}\" }}] }}\n\
         [[route]]\nupstream = \"http://{upstream}\"\n",
        ca.display(),
        ka.display(),
        cb.display(),
        kb.display()
    );
    let weir = Weir::start_in(dir, &text).await;
    (weir, format!("{pem_a}{pem_b}"))
}

/// Handshake with `sni`, offering `alpn`; returns the TLS stream.
async fn handshake(
    weir: &Weir,
    roots_pem: &str,
    sni: &'static str,
    alpn: &[&[u8]],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, std::io::Error> {
    let mut config = tls_config(roots_pem, versions);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(weir.addr("tls")).await.expect("connect");
    connector
        .connect(ServerName::try_from(sni).expect("name"), tcp)
        .await
}

#[tokio::test]
async fn sni_selects_the_matching_certificate() {
    let up = demo_upstream().await;
    let (weir, roots) = tls_weir(up).await;
    let all = [&rustls::version::TLS13, &rustls::version::TLS12];
    // Verification against the name proves which certificate was served.
    handshake(&weir, &roots, "a.test", &[b"h2"], &all)
        .await
        .expect("a.test verifies");
    handshake(&weir, &roots, "b.test", &[b"h2"], &all)
        .await
        .expect("b.test verifies");
    let err = handshake(&weir, &roots, "c.test", &[b"h2"], &all)
        .await
        .expect_err("unknown names get the default certificate, which is for a.test");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn alpn_negotiates_h2_and_http11() {
    let up = demo_upstream().await;
    let (weir, roots) = tls_weir(up).await;
    let all = [&rustls::version::TLS13, &rustls::version::TLS12];
    let s = handshake(&weir, &roots, "b.test", &[b"h2", b"http/1.1"], &all)
        .await
        .expect("tls");
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let s = handshake(&weir, &roots, "b.test", &[b"http/1.1"], &all)
        .await
        .expect("tls");
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn tls12_and_tls13_are_both_accepted() {
    let up = demo_upstream().await;
    let (weir, roots) = tls_weir(up).await;
    let s = handshake(&weir, &roots, "b.test", &[], &[&rustls::version::TLS12])
        .await
        .expect("tls1.2");
    assert_eq!(
        s.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    let s = handshake(&weir, &roots, "b.test", &[], &[&rustls::version::TLS13])
        .await
        .expect("tls1.3");
    assert_eq!(
        s.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
}

#[tokio::test]
async fn a_returning_client_resumes_its_session_with_a_ticket() {
    let up = demo_upstream().await;
    let (weir, roots) = tls_weir(up).await;
    for versions in [&rustls::version::TLS13, &rustls::version::TLS12] {
        // One client config, so one client-side session store.
        let mut config = tls_config(&roots, &[versions]);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let mut kinds = Vec::new();
        for _ in 0..2 {
            let tcp = TcpStream::connect(weir.addr("tls")).await.expect("connect");
            let mut tls = connector
                .connect(ServerName::try_from("a.test").expect("name"), tcp)
                .await
                .expect("handshake");
            kinds.push(tls.get_ref().1.handshake_kind());
            // TLS 1.3 tickets arrive after the handshake: read a response
            // so the client takes them in.
            tokio::io::AsyncWriteExt::write_all(
                &mut tls,
                b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
            )
            .await
            .expect("write");
            let mut answer = Vec::new();
            let _ = tokio::io::AsyncReadExt::read_to_end(&mut tls, &mut answer).await;
            assert!(answer.starts_with(b"HTTP/1.1 200"), "{versions:?}");
        }
        // weir keeps no session cache: only a ticket can resume.
        assert_eq!(
            kinds,
            vec![
                Some(rustls::HandshakeKind::Full),
                Some(rustls::HandshakeKind::Resumed)
            ],
            "{versions:?}"
        );
    }
}

#[tokio::test]
async fn http2_requests_stream_through_tls() {
    let up = demo_upstream().await;
    let (weir, roots) = tls_weir(up).await;
    let client = tls_client(&roots, true);
    let base = format!("https://localhost:{}", weir.addr("tls").port());
    let req = Request::post(format!("{base}/echo"))
        .body(Full::new(Bytes::from_static(b"0123456789")))
        .expect("request");
    let resp = client.request(req).await.expect("h2 response");
    assert_eq!(resp.version(), Version::HTTP_2);
    let (status, _, b) = split(resp).await;
    assert_eq!(status, 200);
    let e = echo_json(&b);
    assert_eq!(e["body_length"], 10);
    assert_eq!(
        e["headers"]["host"][0],
        format!("localhost:{}", weir.addr("tls").port()),
        ":authority becomes Host"
    );
    assert_eq!(e["headers"]["x-forwarded-proto"][0], "https");

    // Many concurrent streams on one connection, each a streamed download.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let client = client.clone();
        let url = format!("{base}/bytes/200000");
        tasks.push(tokio::spawn(async move {
            let resp = client
                .get(url.parse().expect("url"))
                .await
                .expect("response");
            resp.into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes()
                .len()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task"), 200_000);
    }
}

#[tokio::test]
async fn http2_clients_receive_trailers() {
    let up = upstream(|req: Request<hyper::body::Incoming>| {
        let asked = req.headers().get("te").is_some_and(|v| v == "trailers");
        let mut trailers = http::HeaderMap::new();
        trailers.insert(
            "grpc-status",
            HeaderValue::from_static(if asked { "0" } else { "13" }),
        );
        let frames = vec![
            Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(b"msg"))),
            Ok(Frame::trailers(trailers)),
        ];
        let mut r = Response::new(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
            frames,
        ))));
        r.headers_mut()
            .insert("trailer", HeaderValue::from_static("grpc-status"));
        std::future::ready(r)
    })
    .await;
    let (weir, roots) = tls_weir(up.addr).await;
    let client = tls_client(&roots, true);
    let resp = client
        .get(
            format!("https://localhost:{}/", weir.addr("tls").port())
                .parse()
                .expect("url"),
        )
        .await
        .expect("response");
    let collected = resp.into_body().collect().await.expect("body");
    let trailers = collected.trailers().cloned().expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
}

#[tokio::test]
async fn stalled_tls_handshake_is_closed_at_the_deadline() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, k, _) = write_cert(dir.path(), "a", &["a.test"]);
    let text = format!(
        "[connections]\ntls_handshake_timeout = \"300ms\"\n\
         [[listener]]\nname = \"tls\"\naddress = \"127.0.0.1:0\"\n\
         tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}\n\
         [[route]]\nupstream = \"http://{up}\"\n",
        c.display(),
        k.display()
    );
    let weir = Weir::start_in(dir, &text).await;
    let mut s = TcpStream::connect(weir.addr("tls")).await.expect("connect");
    let started = std::time::Instant::now();
    let (_, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "a client that never sends a ClientHello is dropped");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "closed near the deadline: {:?}",
        started.elapsed()
    );
}

/// An HTTPS upstream with a certificate for `localhost`.
async fn https_upstream(dir: &std::path::Path) -> (std::net::SocketAddr, std::path::PathBuf) {
    let (cert, key, _) = write_cert(dir, "upstream", &["localhost"]);
    let (certified, _) = weir::testing::pki::load_certificate(&cert, &key).expect("load");
    let settings = weir::testing::config::TlsSettings {
        certificates: vec![weir::testing::config::Certificate {
            cert_path: cert.clone(),
            key_path: key,
            names: vec!["localhost".into()],
            key: certified,
        }],
        acme: None,
    };
    let (acceptor, _) =
        weir::testing::conn::acceptor(&settings, Default::default()).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(text(200, "secure upstream"))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, cert)
}

#[tokio::test]
async fn https_upstream_is_verified_with_the_extra_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (addr, ca) = https_upstream(dir.path()).await;
    let route = |extra: &str| {
        format!(
            "[admin]\naddress = \"127.0.0.1:0\"\n{extra}[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"secure\"\nupstream = \"https://localhost:{}\"\n",
            addr.port()
        )
    };
    let trusted = Weir::start(&route(&format!(
        "[upstream]\nca_file = \"{}\"\n",
        ca.display()
    )))
    .await;
    let (status, _, b) = get(&h1_client(), &trusted.url("web", "/")).await;
    assert_eq!((status.as_u16(), b.as_str()), (200, "secure upstream"));

    let untrusted = Weir::start(&route("")).await;
    let (status, _, b) = get(&h1_client(), &untrusted.url("web", "/")).await;
    assert_eq!(status, 502, "an unverifiable upstream is refused");
    assert_eq!(b, "upstream unavailable\n", "no TLS details leak");
    let (_, _, metrics) = get(&h1_client(), &untrusted.admin_url("/metrics")).await;
    assert!(
        metrics.contains("weir_upstream_errors_total{route=\"secure\",kind=\"Tls\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn redirect_listener_sends_308_for_known_hosts_only() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[[listener]]\nname = \"plain\"\naddress = \"127.0.0.1:0\"\nredirect_https = true\nhttps_port = 8443\n\
         [[route]]\nhost = [\"example.com\", \"*.example.org\"]\nupstream = \"http://{up}\"\n"
    ))
    .await;
    let url = weir.url("plain", "/a/b?c=d");
    let (status, headers, _) = get_with(&url, &[("host", "example.com")]).await;
    assert_eq!(status, 308);
    assert_eq!(headers["location"], "https://example.com:8443/a/b?c=d");
    let (_, headers, _) = get_with(&url, &[("host", "www.example.org:80")]).await;
    assert_eq!(headers["location"], "https://www.example.org:8443/a/b?c=d");
    let (status, _, _) = get_with(&url, &[("host", "evil.test")]).await;
    assert_eq!(status, 404, "no open redirect to unknown hosts");
}

#[tokio::test]
async fn hsts_goes_out_on_https_only_and_the_server_header_is_replaced() {
    let up = upstream(|_req| async {
        let mut r = text(200, "hello");
        r.headers_mut()
            .insert("server", HeaderValue::from_static("upstream/1.0 (leaky)"));
        r
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, k, pem) = write_cert(dir.path(), "a", &["a.test"]);
    let text = format!(
        "[log]\naccess_log = false\n\
         [[listener]]\nname = \"tls\"\naddress = \"127.0.0.1:0\"\n\
         tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}\n\
         [[listener]]\nname = \"plain\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"site\"\nupstream = \"http://{}\"\n\
         hsts_max_age = \"365d\"\nhsts_include_subdomains = true\nserver_header = \"weir\"\n",
        c.display(),
        k.display(),
        up.addr
    );
    let weir = Weir::start_in(dir, &text).await;
    let req = Request::get("/")
        .header("host", "a.test")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let addr = weir.addr("tls");
    let tls =
        tokio_rustls::TlsConnector::from(Arc::new(tls_config(&pem, &[&rustls::version::TLS13])));
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let stream = tls
        .connect(ServerName::try_from("a.test").expect("name"), tcp)
        .await
        .expect("handshake");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("h1");
    tokio::spawn(conn);
    let resp = send.send_request(req).await.expect("response");
    assert_eq!(
        resp.headers()["strict-transport-security"],
        "max-age=31536000; includeSubDomains"
    );
    assert_eq!(
        resp.headers()["server"],
        "weir",
        "the upstream's is replaced"
    );

    let (_, headers, _) = get(&h1_client(), &weir.url("plain", "/")).await;
    assert!(
        headers.get("strict-transport-security").is_none(),
        "never over plain HTTP"
    );
    assert_eq!(headers["server"], "weir");
}
