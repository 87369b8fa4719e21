//! `server.workers = 2`: two threads, each with its own runtime and its own
//! `SO_REUSEPORT` socket, sharing one connection registry.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn both_workers_accept_and_share_one_per_client_cap() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[server]\nworkers = 2\n[connections]\nmax_per_ip = 20\n{}",
        simple_config(up, "")
    ))
    .await;
    // Held open mid-head, so none finishes and frees its place.
    let mut held = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
        let _ = s.write_all(b"GET / HTTP/1.1\r\n").await;
        held.push(s);
    }
    // One registry for both workers: 20 admitted, 20 refused. Two
    // registries would admit up to 20 each.
    assert!(
        eventually_metric(
            &weir,
            "weir_connections_refused_total{reason=\"per_ip\"}",
            20
        )
        .await,
        "{:?}",
        metric(&weir, "weir_connections_refused_total").await
    );
    assert!(
        eventually(Duration::from_secs(5), || weir.running().open_connections()
            == 20)
        .await
    );
    // The kernel spread the 40 connections over both workers' sockets
    // (all 40 on one socket: one chance in 2^39).
    let first = metric(
        &weir,
        "weir_worker_connections_accepted_total{worker=\"0\"}",
    )
    .await
    .unwrap_or(0);
    let second = metric(
        &weir,
        "weir_worker_connections_accepted_total{worker=\"1\"}",
    )
    .await
    .unwrap_or(0);
    assert_eq!(first + second, 40);
    assert!(
        first > 0 && second > 0,
        "worker 0: {first}, worker 1: {second}"
    );
}

#[tokio::test]
async fn two_workers_proxy_keep_alive_and_drain_in_flight_requests() {
    let up = demo_upstream().await;
    let mut weir = Weir::start(&format!("[server]\nworkers = 2\n{}", simple_config(up, ""))).await;
    let client = h1_client();
    for _ in 0..20 {
        let (status, _, _) = get(&client, &weir.url("web", "/echo")).await;
        assert_eq!(status, 200);
    }
    // A slow answer in flight when the drain begins still completes.
    let url = weir.url("web", "/slow?ms=300");
    let slow = tokio::spawn(async move { get(&h1_client(), &url).await.0 });
    assert!(
        eventually(Duration::from_secs(5), || weir.running().open_connections()
            > 1)
        .await
    );
    assert!(weir.shutdown().await, "drained in time");
    assert_eq!(slow.await.expect("task"), 200);
}
