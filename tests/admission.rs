//! Request admission end to end: shed (never queue) with Retry-After, slots
//! held until the response body ends (streams, tunnels), freed by
//! disconnects and by the slow-client defences, the admin endpoints never
//! shed, and `0` meaning no bound.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::h2raw::*;
use common::*;
use http_body_util::{BodyExt, Full};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn gated(limit: usize, extra_route: &str) -> Weir {
    let up = demo_upstream().await;
    Weir::start(&format!(
        "[server]\nmax_concurrent_requests = {limit}\n{}",
        simple_config(up, extra_route)
    ))
    .await
}

/// An SSE stream held open; returns once its first event arrived.
async fn open_stream(weir: &Weir) -> http_body_util::BodyDataStream<hyper::body::Incoming> {
    held_stream(&weir.url("web", "/sse?n=1000&interval_ms=50"), &[]).await
}

#[tokio::test]
async fn full_gate_sheds_with_retry_after_and_frees_when_a_stream_ends() {
    let weir = gated(2, "").await;
    let first = open_stream(&weir).await;
    let _second = open_stream(&weir).await;
    assert_eq!(metric(&weir, "weir_requests_in_flight").await, Some(2));

    let started = Instant::now();
    let (status, headers, body) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 503);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(body, "overloaded, retry later\n");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "shed at once, not queued"
    );

    // The route's error shape applies to sheds too.
    let (status, headers, body) =
        get_with(&weir.url("web", "/echo"), &[("accept", "application/json")]).await;
    assert_eq!(status, 503);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).expect("json")["error"]["status"],
        503
    );

    // Admin endpoints are never shed.
    let (status, _, _) = get(&h1_client(), &weir.admin_url("/health")).await;
    assert_eq!(status, 200);

    // End one stream: exactly one slot frees.
    drop(first);
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 1).await);
    let (status, _, _) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 200);
    assert!(
        metric(
            &weir,
            "weir_requests_shed_total{reason=\"global\",route=\"-\"}"
        )
        .await
            >= Some(2)
    );
}

#[tokio::test]
async fn disconnecting_clients_mid_stream_returns_every_slot() {
    let weir = gated(10, "").await;
    let mut streams = Vec::new();
    for _ in 0..5 {
        streams.push(open_stream(&weir).await);
    }
    assert_eq!(metric(&weir, "weir_requests_in_flight").await, Some(5));
    drop(streams);
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 0).await);
}

#[tokio::test]
async fn unknown_routes_are_gated_too() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[server]\nmax_concurrent_requests = 1\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nhost = \"known.test\"\nupstream = \"http://{up}\"\n"
    ))
    .await;
    let _held = held_stream(
        &weir.url("web", "/sse?n=1000&interval_ms=50"),
        &[("host", "known.test")],
    )
    .await;
    let (status, _, _) = get_with(&weir.url("web", "/"), &[("host", "unknown.test")]).await;
    assert_eq!(status, 503, "the gate comes before routing");
}

#[tokio::test]
async fn a_route_limit_protects_its_upstream_only() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"small\"\npath = \"/sse\"\nmax_concurrent_requests = 1\nupstream = \"http://{up}\"\n\
         [[route]]\nname = \"rest\"\nupstream = \"http://{up}\"\n"
    ))
    .await;
    let _held = open_stream(&weir).await;
    let (status, headers, _) = get(&h1_client(), &weir.url("web", "/sse?n=1")).await;
    assert_eq!(status, 503);
    assert_eq!(headers["retry-after"], "1");
    let (status, _, _) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 200, "other routes are unaffected");
    assert_eq!(
        metric(
            &weir,
            "weir_requests_shed_total{reason=\"route\",route=\"small\"}"
        )
        .await,
        Some(1)
    );
    assert_eq!(
        metric(&weir, "weir_requests_in_flight").await,
        Some(1),
        "the shed request holds nothing"
    );
}

#[tokio::test]
async fn a_websocket_holds_its_slot_until_the_tunnel_closes() {
    let weir = gated(1, "").await;
    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws", weir.addr("web")))
        .await
        .expect("websocket");
    let (status, _, _) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 503, "the open tunnel counts");
    drop(ws);
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 0).await);
    let (status, _, _) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_trickled_upload_loses_its_slot() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[server]\nmax_concurrent_requests = 1\n[connections]\nmin_body_rate = 1000\nbody_rate_period = \"300ms\"\n{}",
        simple_config(up, "")
    ))
    .await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nxx")
        .await
        .expect("write");
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 1).await);
    let (out, _) = read_until_close(&mut s, Duration::from_secs(3)).await;
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 0).await);
}

#[tokio::test]
async fn an_http2_stream_the_client_never_reads_loses_its_slot() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[server]\nmax_concurrent_requests = 4\n[connections]\nsend_timeout = \"300ms\"\n{}",
        simple_config(up, "")
    ))
    .await;
    // Ask for 10 MB and never grant flow-control window beyond the first
    // 64 KiB: the socket stays writable, only the stream is stuck.
    let mut s = h2_connect(weir.addr("web")).await;
    let block: &[u8] = &[0x82, 0x86, 0x41, 0x01, b'a', 0x44, 0x0f];
    let mut req = block.to_vec();
    req.extend_from_slice(b"/bytes/10000000");
    let mut frames = frame(SETTINGS, 0x1, 0, &[]);
    frames.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, &req));
    s.write_all(&frames).await.expect("request");
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 1).await);
    let (_, closed) = server_frames(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "the stalled connection was cut");
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 0).await);
    assert_eq!(
        metric(
            &weir,
            "weir_connections_closed_total{reason=\"send_timeout\"}"
        )
        .await,
        Some(1)
    );
}

#[tokio::test]
async fn zero_means_no_bound_even_past_1024_concurrent_requests() {
    weir::testing::listen::raise_nofile_limit();
    let weir = gated(0, "").await;
    let url = weir.url("web", "/slow?ms=1500");
    // 11 HTTP/2 connections × 100 streams: 1100 requests at once.
    let mut tasks = Vec::new();
    for _ in 0..11 {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .http2_only(true)
                .build_http::<Full<Bytes>>();
        for _ in 0..100 {
            let client = client.clone();
            let url = url.clone();
            tasks.push(tokio::spawn(async move {
                let resp = client
                    .get(url.parse().expect("url"))
                    .await
                    .expect("response");
                let status = resp.status();
                resp.into_body().collect().await.expect("body");
                status
            }));
        }
    }
    let peak = std::cell::Cell::new(0);
    let past = eventually_async(Duration::from_secs(5), || async {
        let now = metric(&weir, "weir_requests_in_flight").await.unwrap_or(0);
        peak.set(peak.get().max(now));
        now > 1024
    })
    .await;
    assert!(
        past,
        "more than 1024 in flight at once without a gate: peak {}",
        peak.get()
    );
    for t in tasks {
        assert_eq!(t.await.expect("task"), 200);
    }
}
