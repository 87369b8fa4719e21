//! Responses weir generates itself: 400, 404, 502, 504, their shapes, and
//! the metrics and health endpoints that report on them.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::Full;

#[tokio::test]
async fn unreachable_upstream_is_502_without_leaking_details() {
    let dead = closed_port().await;
    let weir = Weir::start(&simple_config(dead, "")).await;
    let (status, headers, b) = get(&h1_client(), &weir.url("web", "/x")).await;
    assert_eq!(status, 502);
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(b, "upstream unavailable\n");
    assert!(!b.contains(&dead.port().to_string()));

    let (_, _, metrics) = get(&h1_client(), &weir.admin_url("/metrics")).await;
    assert!(
        metrics.contains("weir_upstream_errors_total{route=\"main\",kind=\"Connect\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("weir_requests_total{route=\"main\",status=\"502\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn generated_errors_answer_json_when_asked() {
    let dead = closed_port().await;
    let weir = Weir::start(&simple_config(dead, "")).await;
    let req = Request::get(weir.url("web", "/"))
        .header("accept", "application/json")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let (status, headers, b) = split(h1_client().request(req).await.expect("response")).await;
    assert_eq!(status, 502);
    assert_eq!(headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    assert_eq!(v["error"]["status"], 502);
}

#[tokio::test]
async fn slow_upstream_is_504_at_the_response_timeout() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "response_timeout = \"200ms\"")).await;
    let started = std::time::Instant::now();
    let (status, _, b) = get(&h1_client(), &weir.url("web", "/slow?ms=3000")).await;
    assert_eq!(status, 504);
    assert_eq!(b, "upstream timed out\n");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let (_, _, metrics) = get(&h1_client(), &weir.admin_url("/metrics")).await;
    assert!(metrics.contains("kind=\"ResponseTimeout\"} 1"), "{metrics}");
}

#[tokio::test]
async fn unknown_host_is_404_and_missing_host_is_400() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nhost = \"example.com\"\nupstream = \"http://{up}\"\n"
    ))
    .await;
    let client = h1_client();
    let req = |host: &str| {
        Request::get(weir.url("web", "/echo"))
            .header("host", host)
            .body(Full::new(Bytes::new()))
            .expect("request")
    };
    let (status, _, _) = split(
        client
            .request(req("EXAMPLE.com:80"))
            .await
            .expect("response"),
    )
    .await;
    assert_eq!(status, 200, "host match ignores case and port");
    let (status, _, b) = split(client.request(req("other.test")).await.expect("response")).await;
    assert_eq!(status, 404);
    assert_eq!(b, "no route for this host and path\n");
    let out = raw(
        weir.addr("web"),
        b"GET /echo HTTP/1.1\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
}

#[tokio::test]
async fn health_reports_version() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let (status, headers, b) = get(&h1_client(), &weir.admin_url("/health")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    let (status, _, _) = get(&h1_client(), &weir.admin_url("/nope")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn latency_histogram_is_exported() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let (status, _, _) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 200);
    let (_, headers, metrics) = get(&h1_client(), &weir.admin_url("/metrics")).await;
    assert!(
        headers["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/plain")
    );
    assert!(
        metrics.contains("weir_request_duration_seconds_count{route=\"main\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("weir_requests_total{route=\"main\",status=\"200\"} 1"),
        "{metrics}"
    );
}
