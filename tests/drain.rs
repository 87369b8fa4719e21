//! Drain without loss: the real binary under a keep-alive load (`wrk -c
//! 20`-like, 1 KiB POSTs back to back) through a hand-over (SIGUSR2) and
//! through SIGTERM with a second instance on the port; the hand-over over
//! TLS too. No request may be
//! written and then go unanswered; a connection may only be closed before
//! a request was written on it (a client retries those).
//!
//! `WEIR_DRAIN_RUNS=N` repeats each scenario N times (default 2).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::keepalive::{Load, Tally, Tls};
use common::process::*;
use common::*;

fn runs() -> usize {
    std::env::var("WEIR_DRAIN_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// No per-connection request cap: only the drain tells a client to leave.
/// `listener_tls`: the listener's `tls = …` line, if any.
fn config(upstream: SocketAddr, listen: &str, workers: usize, listener_tls: &str) -> String {
    format!(
        "[server]\nworkers = {workers}\n\
         [connections]\nmax_requests = 0\n\
         [log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"{listen}\"\n{listener_tls}\n\
         [[route]]\nname = \"demo\"\nupstream = \"http://{upstream}\"\n"
    )
}

/// `weir run` on `listen` with 20 keep-alive clients going (over TLS,
/// HTTP/1.1 by ALPN, with `tls`).
async fn loaded(
    upstream: SocketAddr,
    listen: &str,
    workers: usize,
    tls: bool,
) -> (Proc, SocketAddr, Load, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (listener_tls, client_tls) = if tls {
        let (cert, key, pem) = write_cert(dir.path(), "drain", &["drain.test"]);
        let mut client = tls_config(&pem, &[&rustls::version::TLS13]);
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        (
            format!(
                "tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}",
                cert.display(),
                key.display()
            ),
            Some(Tls {
                connector: tokio_rustls::TlsConnector::from(std::sync::Arc::new(client)),
                name: rustls_pki_types::ServerName::try_from("drain.test").expect("name"),
            }),
        )
    } else {
        (String::new(), None)
    };
    let path = write_config(&dir, &config(upstream, listen, workers, &listener_tls));
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let addr = weir.listening("web");
    let load = Load::start(addr, client_tls, 20, "/echo");
    assert!(load.answered_more(300, Duration::from_secs(20)).await);
    (weir, addr, load, dir)
}

/// Wait (off the runtime) for the process to exit; its exit code.
async fn exited(mut weir: Proc) -> (Proc, i32) {
    tokio::task::spawn_blocking(move || {
        let code = weir.wait_exit(Duration::from_secs(20));
        (weir, code)
    })
    .await
    .expect("join")
}

/// Every run's tally is printed before any is judged, so a loop of runs
/// reports all its numbers.
fn assert_lossless(runs: &[(String, Tally)]) {
    for (what, t) in runs {
        report(what, t);
    }
    for (what, t) in runs {
        judge(what, t);
    }
}

fn report(what: &str, t: &Tally) {
    eprintln!(
        "{what}: ok {} (closing {}), refused before writing {}, lost {}, failed {}, p99 {:.2} ms",
        t.ok,
        t.closing_answers,
        t.refused,
        t.lost,
        t.failed,
        t.quantile_ms(0.99)
    );
}

fn judge(what: &str, t: &Tally) {
    assert_eq!(
        (t.lost, t.failed),
        (0, 0),
        "{what}: requests lost or failed: {:?}",
        t.problems
    );
    assert!(
        t.closing_answers > 0,
        "{what}: the drain told its keep-alive clients"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_under_keep_alive_load_loses_no_request() {
    hand_over(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_under_tls_keep_alive_load_loses_no_request() {
    hand_over(true).await;
}

/// SIGUSR2 under the load, `runs()` times.
async fn hand_over(tls: bool) {
    let up = demo_upstream().await;
    let mut tallies = Vec::new();
    for run in 0..runs() {
        let (mut weir, _, load, _dir) = loaded(up, "127.0.0.1:0", 1, tls).await;
        weir.signal("-USR2");
        let ready = weir.wait_for(|l| l.contains("the new process is ready"));
        let v: serde_json::Value = serde_json::from_str(&ready).expect("json");
        let successor = v["pid"].as_u64().expect("pid");
        let (weir, code) = exited(weir).await;
        assert_eq!(code, 0, "the old process drained and left");
        assert!(
            load.answered_more(300, Duration::from_secs(20)).await,
            "the successor serves"
        );
        let tally = load.stop().await;
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &successor.to_string()])
            .status();
        drop(weir);
        let what = if tls { "SIGUSR2 TLS" } else { "SIGUSR2" };
        tallies.push((format!("{what} run {run}"), tally));
    }
    assert_lossless(&tallies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_successor_on_the_port_loses_no_request() {
    let up = demo_upstream().await;
    let mut tallies = Vec::new();
    for run in 0..runs() {
        // Two workers: the sockets are bound with SO_REUSEPORT, so a
        // second instance can bind the same port beside the first.
        let (old, addr, load, _dir) = loaded(up, "127.0.0.1:0", 2, false).await;
        let dir2 = tempfile::tempdir().expect("tempdir");
        let path2 = write_config(&dir2, &config(up, &addr.to_string(), 2, ""));
        let mut new = Proc::spawn(&["run", "--config", &path2]);
        assert_eq!(new.listening("web"), addr);
        old.signal("-TERM");
        let (_old, code) = exited(old).await;
        assert_eq!(code, 0, "the old instance drained and left");
        assert!(
            load.answered_more(300, Duration::from_secs(20)).await,
            "the second instance serves"
        );
        let tally = load.stop().await;
        drop(new);
        tallies.push((format!("SIGTERM run {run}"), tally));
    }
    assert_lossless(&tallies);
}
