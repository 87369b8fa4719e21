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
