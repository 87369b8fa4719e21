//! Upgrading the real binary in place (SIGUSR2): under load no connection
//! is refused and no request fails; a failed upgrade keeps the old process.

mod common;

use std::time::Duration;

use common::load::*;
use common::process::*;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_under_load_refuses_no_connection_and_fails_no_request() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // Two workers: each listener has two sockets, and both must be handed
    // over (a socket left behind takes its queued connections with it).
    let config = format!("[server]\nworkers = 2\n{}", run_config(up));
    let path = write_config(&dir, &config);
    let mut weir = Proc::run(&path);
    let addr = weir.listening("web");
    let admin = weir.admin();

    let requests = Tally::default();
    let mut load = Load::default();
    for _ in 0..3 {
        // A new connection per request: a refused one would show.
        load.spawn(&requests, move || async move {
            let mut s = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let sent = tokio::io::AsyncWriteExt::write_all(
                &mut s,
                b"GET /echo HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            )
            .await;
            let (out, _) = read_until_close(&mut s, Duration::from_secs(10)).await;
            match sent.is_ok() && out.starts_with("HTTP/1.1 200") {
                true => Ok(()),
                false => Err(format!("answer: {out:?}")),
            }
        });
    }
    assert!(eventually(Duration::from_secs(10), || requests.ok() > 50).await);

    weir.signal("-USR2");
    let ready = weir.wait_for(|l| l.contains("the new process is ready"));
    let new_pid = log_pid(&ready);
    assert_eq!(
        weir.wait_exit(Duration::from_secs(20)),
        0,
        "the old process drained and left"
    );
    // The new process serves alone now, on the same sockets (and admin).
    let served = requests.ok();
    assert!(
        eventually(Duration::from_secs(10), || requests.ok() > served + 100).await,
        "the new process serves"
    );
    assert_eq!(
        metric_at(admin, "weir_config_generation").await,
        Some(1),
        "a fresh process answers the admin port"
    );
    // The new process adopted both of the listener's sockets...
    let adopted = weir.wait_for(|l| l.contains("\"listening\"") && l.contains("\"inherited\":2"));
    assert!(adopted.contains("\"workers\":2"), "{adopted}");
    // ...and both of its workers accept.
    for worker in 0..2 {
        let name = format!("weir_worker_connections_accepted_total{{worker=\"{worker}\"}}");
        assert!(
            metric_at(admin, &name).await.unwrap_or(0) > 0,
            "worker {worker} of the new process accepts"
        );
    }
    load.stop().await;
    signal(new_pid, "-TERM");
    requests.assert_no_failures();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_upgrade_keeps_the_old_process_serving() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, &run_config(up));
    let mut weir = Proc::run(&path);
    let addr = weir.listening("web");
    // The new process will read a config that does not validate.
    std::fs::write(&path, "[[listener]]\naddress = \"nonsense\"\n").expect("spoil");
    weir.signal("-USR2");
    weir.wait_for(|l| l.contains("upgrade failed; still serving"));
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/echo")).await;
    assert_eq!(status, 200, "the old process still serves");
}
