//! Idle HTTP/1.1 keep-alive connections give up their HTTP buffers
//! ("parking"): after a second idle, hyper's connection (its read and write
//! buffers) is taken apart and only the socket waits for the next request.
//! Nothing the client sent may be lost on the way.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// One response: its head and its `Content-Length` body.
async fn response<S: AsyncRead + Unpin>(s: &mut S) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut byte))
            .await
            .expect("a response in time")
            .expect("read");
        assert_eq!(n, 1, "closed mid-head: {}", String::from_utf8_lossy(&got));
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .expect("content-length");
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).await.expect("body");
    format!("{head}{}", String::from_utf8_lossy(&body))
}

async fn parked(weir: &Weir, want: u64) -> bool {
    eventually_metric(weir, "weir_connections_parked", want).await
}

async fn request_twice_around_a_park<S: AsyncRead + AsyncWrite + Unpin>(weir: &Weir, s: &mut S) {
    s.write_all(b"GET /echo/first HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    assert!(response(s).await.starts_with("HTTP/1.1 200"));
    assert!(parked(weir, 1).await, "the idle connection is parked");
    s.write_all(b"GET /echo/second HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    let second = response(s).await;
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains("/echo/second"), "{second}");
    assert!(parked(weir, 0).await, "serving again");
}

#[tokio::test]
async fn an_idle_connection_is_parked_and_serves_its_next_request() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    request_twice_around_a_park(&weir, &mut s).await;
    // The same connection throughout.
    assert_eq!(
        metric(&weir, "weir_connections_accepted_total{listener=\"web\"}").await,
        Some(1)
    );
    assert!(metric(&weir, "weir_connection_parks_total").await >= Some(1));
}

#[tokio::test]
async fn a_partial_pipelined_head_survives_a_park() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    // The second request's head is half there when the first is answered:
    // hyper holds it in its buffer while the connection looks idle.
    s.write_all(b"GET /echo/first HTTP/1.1\r\nHost: a\r\n\r\nGET /echo/second HTTP/1.1\r\nHo")
        .await
        .expect("write");
    assert!(response(&mut s).await.starts_with("HTTP/1.1 200"));
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            metric(&weir, "weir_connection_parks_total").await >= Some(1)
        })
        .await,
        "parked with the half head buffered"
    );
    s.write_all(b"st: a\r\n\r\n").await.expect("write");
    let second = response(&mut s).await;
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains("/echo/second"), "{second}");
}

#[tokio::test]
async fn a_parked_connection_is_closed_at_its_idle_timeout() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[connections]\nkeepalive_timeout = \"2500ms\"\n{}",
        simple_config(up, "")
    ))
    .await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    let started = tokio::time::Instant::now();
    s.write_all(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    assert!(response(&mut s).await.starts_with("HTTP/1.1 200"));
    assert!(parked(&weir, 1).await);
    let (_, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        eventually_metric(
            &weir,
            "weir_connections_closed_total{reason=\"idle_timeout\"}",
            1
        )
        .await
    );
    assert!(parked(&weir, 0).await);
}

#[tokio::test]
async fn shutdown_closes_a_silent_parked_connection_after_the_drain_grace() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&drain_grace_config(up, "300ms")).await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    s.write_all(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    assert!(response(&mut s).await.starts_with("HTTP/1.1 200"));
    assert!(parked(&weir, 1).await);
    let started = tokio::time::Instant::now();
    let drained = tokio::spawn(weir.shutdown());
    assert!(read_until_close(&mut s, Duration::from_secs(2)).await.1);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(1),
        "closed after {waited:?}"
    );
    assert!(drained.await.expect("task"), "drained");
}

#[tokio::test]
async fn a_request_on_a_parked_connection_in_a_drain_is_answered_with_close() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&drain_grace_config(up, "10s")).await;
    let addr = weir.addr("web");
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    assert!(response(&mut s).await.starts_with("HTTP/1.1 200"));
    assert!(parked(&weir, 1).await);
    let drained = tokio::spawn(weir.shutdown());
    // Once the listener refuses, the drain is microseconds away; the
    // answer is decided 200 ms after the request arrives.
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            TcpStream::connect(addr).await.is_err()
        })
        .await
    );
    s.write_all(b"GET /slow?ms=200 HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    let (answer, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{answer}"
    );
    assert!(closed, "closed after the answer");
    assert!(drained.await.expect("task"), "drained");
}

#[tokio::test]
async fn tls_connections_park_too_but_http2_ones_do_not() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key, pem) = write_cert(dir.path(), "a", &["a.test"]);
    let weir = Weir::start_in(
        dir,
        &format!(
            "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
             [[listener]]\nname = \"tls\"\naddress = \"127.0.0.1:0\"\n\
             tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}\n\
             [[route]]\nupstream = \"http://{up}\"\n",
            cert.display(),
            key.display()
        ),
    )
    .await;
    let tls = |alpn: &[u8]| {
        let mut config = tls_config(&pem, &[&rustls::version::TLS13]);
        config.alpn_protocols = vec![alpn.to_vec()];
        tokio_rustls::TlsConnector::from(Arc::new(config))
    };
    // An HTTP/2 connection, idle as long: never parked.
    let tcp = TcpStream::connect(weir.addr("tls")).await.expect("connect");
    let h2 = tls(b"h2")
        .connect(ServerName::try_from("a.test").expect("name"), tcp)
        .await
        .expect("handshake");
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(h2),
    )
    .await
    .expect("h2");
    tokio::spawn(conn);
    let req = http::Request::get("https://a.test/echo")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    assert_eq!(
        sender.send_request(req).await.expect("h2 answer").status(),
        200
    );

    let tcp = TcpStream::connect(weir.addr("tls")).await.expect("connect");
    let mut s = tls(b"http/1.1")
        .connect(ServerName::try_from("a.test").expect("name"), tcp)
        .await
        .expect("handshake");
    request_twice_around_a_park(&weir, &mut s).await;
    assert!(
        metric(&weir, "weir_connection_parks_total").await == Some(1),
        "only the HTTP/1.1 connection parked"
    );
    assert!(!sender.is_closed());
}
