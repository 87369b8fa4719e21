//! The real binary's signals: SIGTERM drains the requests in flight (and
//! the JSON access log records them), a second signal exits at once.
//! SIGHUP is in tests/cli_reload.rs, SIGUSR1 in tests/cli_logs.rs, SIGUSR2
//! in tests/cli_upgrade.rs.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::process::*;
use common::*;

/// A blocking HTTP/1.1 GET on its own thread (the test body is synchronous).
fn get_in_thread(addr: SocketAddr, path: &'static str) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n"
        )
        .expect("write");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
}

/// `weir run` with JSON logs in front of the demo upstream, a request to
/// `path` in flight, and SIGTERM sent: the start of every signal test.
async fn terminated_mid_request(
    path: &'static str,
) -> (
    Proc,
    std::thread::JoinHandle<String>,
    SocketAddr,
    tempfile::TempDir,
) {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(&dir, &run_config(up));
    let mut weir = Proc::run(&config);
    let addr = weir.listening("web");
    let admin = weir.admin();
    let in_flight = get_in_thread(addr, path);
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            metric_at(admin, "weir_requests_in_flight").await == Some(1)
        })
        .await,
        "the request is in flight"
    );
    weir.signal("-TERM");
    (weir, in_flight, up, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_drains_in_flight_requests_and_logs_access_json() {
    let (mut weir, slow, up, _dir) = terminated_mid_request("/slow?ms=800").await;
    let resp = tokio::task::spawn_blocking(move || slow.join().expect("thread"))
        .await
        .expect("join");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("slept 800 ms\n"), "{resp}");
    assert_eq!(weir.wait_exit(Duration::from_secs(10)), 0);
    weir.wait_for(|l| l.contains("\"drained\""));
    let access = weir.wait_for(|l| l.contains("\"target\":\"weir::access\""));
    let v: serde_json::Value = serde_json::from_str(&access).expect("json");
    assert_eq!(v["client"], "127.0.0.1");
    assert_eq!(v["host"], "app.test");
    assert_eq!(v["method"], "GET");
    assert_eq!(v["path"], "/slow?ms=800");
    assert_eq!(v["status"], 200);
    assert_eq!(v["bytes"], 13);
    assert!(v["duration_ms"].as_u64().expect("duration") >= 800);
    assert_eq!(v["route"], "demo");
    assert_eq!(v["upstream"], format!("http://{up}/"));
}

#[tokio::test(flavor = "multi_thread")]
async fn second_signal_exits_at_once() {
    let (mut weir, _slow, _, _dir) = terminated_mid_request("/slow?ms=20000").await;
    weir.wait_for(|l| l.contains("draining"));
    let started = Instant::now();
    weir.signal("-INT");
    assert_eq!(weir.wait_exit(Duration::from_secs(5)), 130);
    assert!(started.elapsed() < Duration::from_secs(3));
}
