//! Responses weir generates itself: 400, 404, 502, 504, their shapes, and
//! the metrics and health endpoints that report on them.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn unreachable_upstream_is_502_without_leaking_details() {
    let dead = closed_port().await;
    let weir = Weir::start(&simple_config(dead, "")).await;
    let (status, headers, b) = get(&h1_client(), &weir.url("web", "/x")).await;
    assert_eq!(status, 502);
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(b, "upstream unavailable\n");
    assert!(!b.contains(&dead.port().to_string()));

    let metrics = metrics(&weir).await;
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
    let (status, headers, b) =
        get_with(&weir.url("web", "/"), &[("accept", "application/json")]).await;
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
    let metrics = metrics(&weir).await;
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
    let url = weir.url("web", "/echo");
    let (status, _, _) = get_with(&url, &[("host", "EXAMPLE.com:80")]).await;
    assert_eq!(status, 200, "host match ignores case and port");
    let (status, _, b) = get_with(&url, &[("host", "other.test")]).await;
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

/// Send a raw request and parse a generated JSON error from the answer.
async fn generated(
    addr: std::net::SocketAddr,
    request: String,
) -> (u16, serde_json::Value, String) {
    let out = raw(addr, request.as_bytes(), Duration::from_secs(5)).await;
    let status: u16 = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {out}"));
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default();
    let json = serde_json::from_str(body.trim()).unwrap_or(serde_json::Value::Null);
    (status, json, out)
}

#[tokio::test]
async fn every_generated_error_goes_through_the_one_renderer() {
    let up = demo_upstream().await;
    let dead = closed_port().await;
    let weir = Weir::start(&format!(
        "[connections]\nmin_body_rate = 1000\nbody_rate_period = \"300ms\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nhost = \"dead.test\"\nupstream = \"http://{dead}\"\n\
         [[route]]\nhost = \"slow.test\"\nresponse_timeout = \"200ms\"\nupstream = \"http://{up}\"\n\
         [[route]]\nhost = \"small.test\"\nmax_request_body = 10\nupstream = \"http://{up}\"\n\
         [[route]]\nhost = \"one.test\"\nmax_concurrent_requests = 1\nupstream = \"http://{up}\"\n\
         [[route]]\nhost = \"upload.test\"\nupstream = \"http://{up}\"\n"
    ))
    .await;
    let addr = weir.addr("web");
    let json = "Accept: application/json\r\nConnection: close\r\n";
    // Hold the one.test route's only slot.
    let held = held_stream(
        &weir.url("web", "/sse?n=1000&interval_ms=50"),
        &[("host", "one.test")],
    )
    .await;
    let cases = [
        (400, format!("GET / HTTP/1.1\r\n{json}\r\n")),
        (
            404,
            format!("GET / HTTP/1.1\r\nHost: nowhere.test\r\n{json}\r\n"),
        ),
        (
            405,
            format!("CONNECT dead.test:443 HTTP/1.1\r\nHost: dead.test:443\r\n{json}\r\n"),
        ),
        (
            408,
            format!(
                "POST /echo HTTP/1.1\r\nHost: upload.test\r\nContent-Length: 1000\r\n{json}\r\nxx"
            ),
        ),
        (
            413,
            format!("POST /echo HTTP/1.1\r\nHost: small.test\r\nContent-Length: 11\r\n{json}\r\n"),
        ),
        (
            502,
            format!("GET / HTTP/1.1\r\nHost: dead.test\r\n{json}\r\n"),
        ),
        (
            503,
            format!("GET /echo HTTP/1.1\r\nHost: one.test\r\n{json}\r\n"),
        ),
        (
            504,
            format!("GET /slow?ms=3000 HTTP/1.1\r\nHost: slow.test\r\n{json}\r\n"),
        ),
    ];
    for (want, request) in cases {
        let (status, body, out) = generated(addr, request).await;
        assert_eq!(status, want, "{out}");
        assert_eq!(body["error"]["status"], want, "rendered by the seam: {out}");
        assert!(body["error"]["message"].is_string(), "{out}");
        assert!(
            out.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{out}"
        );
        assert_eq!(
            out.to_ascii_lowercase().contains("retry-after: 1"),
            want == 503,
            "Retry-After exactly on 503: {out}"
        );
    }
    drop(held);
}

#[tokio::test]
async fn upstream_connect_timeout_is_504() {
    // An upstream whose accept queue is full: the kernel drops further
    // SYNs, so a connect hangs until weir's connect_timeout.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let stuck = socket.listen(1).expect("listen");
    let addr = stuck.local_addr().expect("addr");
    let mut fillers = Vec::new();
    for _ in 0..8 {
        match tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(s)) => fillers.push(s),
            _ => break,
        }
    }
    let weir = Weir::start(&simple_config(addr, "connect_timeout = \"300ms\"")).await;
    let started = std::time::Instant::now();
    let (status, _, b) = get(&h1_client(), &weir.url("web", "/")).await;
    assert_eq!(status, 504, "{b}");
    assert_eq!(b, "upstream timed out\n");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let metrics = metrics(&weir).await;
    assert!(metrics.contains("kind=\"ConnectTimeout\"} 1"), "{metrics}");
    drop(stuck);
}
