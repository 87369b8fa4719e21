//! Graceful shutdown in-process: in-flight requests finish, idle keep-alive
//! connections do not hold the drain open, new connections are refused,
//! and the shutdown timeout bounds the drain.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn in_flight_request_finishes_during_drain() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&simple_config(up, "")).await;
    let url = weir.url("web", "/slow?ms=600");
    let addr = weir.addr("web");
    let in_flight = tokio::spawn(async move { get(&h1_client(), &url).await });
    // The request reached weir before shutdown begins.
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 1).await);
    let drained = tokio::spawn(weir.shutdown());
    let (status, _, b) = in_flight.await.expect("task");
    assert_eq!(status, 200);
    assert_eq!(b, "slept 600 ms\n");
    assert!(
        drained.await.expect("task"),
        "drain completed within the timeout"
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed"
    );
}

#[tokio::test]
async fn idle_keep_alive_connections_do_not_hold_the_drain() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&simple_config(up, "")).await;
    let mut idle = TcpStream::connect(weir.addr("web")).await.expect("connect");
    idle.write_all(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 4096];
    let n = tokio::io::AsyncReadExt::read(&mut idle, &mut buf)
        .await
        .expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The connection is now idle between requests.
    let started = Instant::now();
    assert!(weir.shutdown().await);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let (_, closed) = read_until_close(&mut idle, Duration::from_secs(2)).await;
    assert!(closed, "the idle connection was closed by the drain");
}

#[tokio::test]
async fn shutdown_timeout_bounds_the_drain() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&format!(
        "[server]\nshutdown_timeout = \"300ms\"\n{}",
        simple_config(up, "")
    ))
    .await;
    let url = weir.url("web", "/slow?ms=5000");
    tokio::spawn(async move { h1_client().get(url.parse().expect("url")).await });
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 1).await);
    let started = Instant::now();
    assert!(!weir.shutdown().await, "the drain reports it was cut short");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// Wait until the listener refuses connections: the accept loops have
/// stopped, and the drain reaches connections microseconds later.
async fn listener_closed(addr: std::net::SocketAddr) {
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            TcpStream::connect(addr).await.is_err()
        })
        .await,
        "the listener closes"
    );
}

/// One keep-alive connection that has had one answer and is idle now.
async fn idle_connection(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 4096];
    let n = tokio::io::AsyncReadExt::read(&mut s, &mut buf)
        .await
        .expect("read");
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("connection: close"));
    s
}

fn answered_with_close(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 200")
        && answer
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n")
}

#[tokio::test]
async fn a_request_arriving_on_an_idle_connection_during_the_drain_is_answered_with_close() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&simple_config(up, "")).await;
    let addr = weir.addr("web");
    let mut idle = idle_connection(addr).await;
    let drained = tokio::spawn(weir.shutdown());
    listener_closed(addr).await;
    // The answer is decided 200 ms after the request arrives: well inside
    // the drain.
    idle.write_all(b"GET /slow?ms=200 HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("the idle connection is still open");
    let (answer, closed) = read_until_close(&mut idle, Duration::from_secs(5)).await;
    assert!(answered_with_close(&answer), "{answer:?}");
    assert!(closed, "closed after its last answer");
    assert!(drained.await.expect("task"));
}

#[tokio::test]
async fn a_silent_idle_connection_is_closed_only_after_the_drain_grace() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&drain_grace_config(up, "400ms")).await;
    let mut idle = idle_connection(weir.addr("web")).await;
    let started = Instant::now();
    let drained = tokio::spawn(weir.shutdown());
    let (rest, closed) = read_until_close(&mut idle, Duration::from_secs(3)).await;
    let waited = started.elapsed();
    assert!(closed && rest.is_empty(), "closed without a word: {rest:?}");
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_millis(1400),
        "closed after {waited:?}"
    );
    assert!(drained.await.expect("task"));
}

#[tokio::test]
async fn a_head_arriving_keeps_a_draining_connection_open_past_the_grace() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&drain_grace_config(up, "200ms")).await;
    let addr = weir.addr("web");
    let mut conn = idle_connection(addr).await;
    let drained = tokio::spawn(weir.shutdown());
    listener_closed(addr).await;
    conn.write_all(b"GET /echo HTTP/1.1\r\nHost: a\r\n")
        .await
        .expect("write");
    // Three graces pass with the head half there: the connection stays.
    tokio::time::sleep(Duration::from_millis(600)).await;
    conn.write_all(b"\r\n")
        .await
        .expect("the connection is still open");
    let (answer, closed) = read_until_close(&mut conn, Duration::from_secs(5)).await;
    assert!(answered_with_close(&answer), "{answer:?}");
    assert!(closed);
    assert!(drained.await.expect("task"));
}

#[tokio::test]
async fn http2_drain_serves_a_stream_opened_before_the_client_saw_the_goaway() {
    use common::h2raw::*;
    let up = demo_upstream().await;
    let mut weir = Weir::start(&simple_config(up, "")).await;
    let mut s = h2_connect(weir.addr("web")).await;
    let drained = tokio::spawn(weir.shutdown());
    // First step: GOAWAY with the highest stream id, then a PING.
    let mut seen = Vec::new();
    let ping = loop {
        let frames = read_frames(&mut s, &mut seen).await;
        if let Some((_, _, payload)) = frames.iter().find(|(k, f, _)| *k == PING && f & 1 == 0) {
            break payload.clone();
        }
    };
    let frames = parse_frames(&seen);
    let first = frames
        .iter()
        .find(|(k, _, _)| *k == GOAWAY)
        .expect("a GOAWAY before the PING");
    assert_eq!(
        first.2[..4],
        [0x7f, 0xff, 0xff, 0xff],
        "last stream id 2^31-1"
    );
    assert_eq!(goaway_code(&frames), Some(NO_ERROR));
    // A request the client sent before it read the GOAWAY, then the PONG.
    let mut late = frame(SETTINGS, 1, 0, &[]);
    late.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, REQUEST_BLOCK));
    late.extend(frame(PING, 1, 0, &ping));
    s.write_all(&late).await.expect("write");
    let (rest, closed) = read_bytes_until_close(&mut s, Duration::from_secs(5)).await;
    let after = parse_frames(&rest);
    assert!(closed, "the connection ends");
    let last = after
        .iter()
        .find(|(k, _, _)| *k == GOAWAY)
        .expect("the final GOAWAY");
    assert_eq!(last.2[..4], [0, 0, 0, 1], "stream 1 was processed");
    let answer = after
        .iter()
        .find(|(k, _, _)| *k == HEADERS)
        .expect("stream 1 answered");
    assert_eq!(answer.2.first(), Some(&0x88), ":status 200");
    assert!(drained.await.expect("task"));
}

/// Read what the server sends next into `seen`; all frames so far.
async fn read_frames(s: &mut TcpStream, seen: &mut Vec<u8>) -> Vec<(u8, u8, Vec<u8>)> {
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(s, &mut buf),
    )
    .await
    .expect("frames in time")
    .expect("read");
    assert!(
        n > 0,
        "closed early: {:?}",
        common::h2raw::parse_frames(seen)
    );
    seen.extend_from_slice(&buf[..n]);
    common::h2raw::parse_frames(seen)
}

#[tokio::test]
async fn the_listening_socket_closes_when_the_drain_begins_not_when_it_ends() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&simple_config(up, "")).await;
    let addr = weir.addr("web");
    let url = weir.url("web", "/slow?ms=3000");
    let in_flight = tokio::spawn(async move { get(&h1_client(), &url).await });
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 1).await);
    let drained = tokio::spawn(weir.shutdown());
    // Refused while the drain still runs: no new connection waits in a
    // backlog nobody accepts from (a second descriptor kept for an upgrade
    // must not keep the socket listening).
    listener_closed(addr).await;
    assert!(!in_flight.is_finished(), "the drain is still running");
    let (status, _, _) = in_flight.await.expect("task");
    assert_eq!(status, 200);
    assert!(drained.await.expect("task"));
}

#[tokio::test]
async fn a_preface_arriving_keeps_a_draining_cleartext_connection_open_past_the_grace() {
    use common::h2raw::*;
    let up = demo_upstream().await;
    let mut weir = Weir::start(&drain_grace_config(up, "200ms")).await;
    let addr = weir.addr("web");
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // Still undecided between HTTP/1.1 and HTTP/2: weir is sniffing.
    s.write_all(&PREFACE[..10]).await.expect("write");
    let drained = tokio::spawn(weir.shutdown());
    listener_closed(addr).await;
    // Three graces pass with the preface half there: the connection stays.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut rest = PREFACE[10..].to_vec();
    rest.extend(frame(SETTINGS, 0, 0, &[]));
    s.write_all(&rest).await.expect("write");
    let (bytes, _) = read_bytes_until_close(&mut s, Duration::from_secs(5)).await;
    let frames = parse_frames(&bytes);
    assert!(
        frames.iter().any(|(kind, _, _)| *kind == GOAWAY),
        "served as HTTP/2, and drained with a GOAWAY: {frames:?}"
    );
    assert!(drained.await.expect("task"));
}
