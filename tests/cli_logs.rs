//! What the real binary writes to its logs: one line per rate-limited
//! client that the shipped fail2ban filter finds, log files reopened after
//! rotation, and descriptor exhaustion logged once per window.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::*;
use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn rate_limited_clients_get_429_and_one_fail2ban_line_each() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // Text logs: what a journal or a log file holds.
    let text = format!(
        "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"site\"\nupstream = \"http://{up}\"\n\
         rate_limit_per_second = 1\nrate_limit_burst = 2\n"
    );
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let line = weir.wait_for(|l| l.contains("listening") && l.contains("listener=web"));
    let addr: SocketAddr = line
        .split("addr=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("addr")
        .parse()
        .expect("socket addr");

    // From two client addresses: 127.0.0.1 and 127.0.0.2.
    let mut statuses = Vec::new();
    for source in ["127.0.0.1", "127.0.0.2"] {
        for _ in 0..5 {
            let sock = tokio::net::TcpSocket::new_v4().expect("socket");
            sock.bind(format!("{source}:0").parse().expect("source"))
                .expect("bind");
            let mut s = sock.connect(addr).await.expect("connect");
            tokio::io::AsyncWriteExt::write_all(
                &mut s,
                b"GET /echo HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n",
            )
            .await
            .expect("write");
            let (out, _) = read_until_close(&mut s, Duration::from_secs(5)).await;
            statuses.push((source, out.lines().next().unwrap_or("").to_string(), out));
        }
    }
    for source in ["127.0.0.1", "127.0.0.2"] {
        let mine: Vec<_> = statuses.iter().filter(|(s, _, _)| *s == source).collect();
        assert!(
            mine[..2].iter().all(|(_, l, _)| l.contains("200")),
            "the burst passes: {mine:?}"
        );
        let limited: Vec<_> = mine[2..]
            .iter()
            .filter(|(_, l, _)| l.contains("429"))
            .collect();
        assert!(limited.len() >= 2, "then 429s: {mine:?}");
        assert!(
            limited
                .iter()
                .all(|(_, _, out)| out.to_ascii_lowercase().contains("retry-after: 1"))
        );
    }
    weir.wait_for_count(2, |l| l.contains("weir: rate_limited client="));
    weir.signal("-TERM");
    weir.wait_exit(Duration::from_secs(10));
    let lines = weir.all_lines(|l| l.contains("rate_limited"));
    assert_eq!(
        lines.len(),
        2,
        "one line per limited client per 10 s: {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("client=127.0.0.1 route=site host=example.test"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("client=127.0.0.2 route=site host=example.test"))
    );

    // The shipped fail2ban filter finds both clients in these real lines.
    let log = dir.path().join("weir.log");
    std::fs::write(
        &log,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .expect("log");
    let filter = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/fail2ban/filter.d/weir.conf"
    );
    let run = Command::new("fail2ban-regex")
        .arg(&log)
        .arg(filter)
        .output();
    // .ci/run installs fail2ban and sets WEIR_REQUIRE_FAIL2BAN, so CI always
    // runs this part.
    let missing = match &run {
        Ok(_) => String::new(),
        Err(e) => {
            format!("fail2ban-regex did not run ({e}), so the shipped filter was not checked")
        }
    };
    if can_run(
        run.is_ok(),
        &missing,
        "apt-get install fail2ban",
        "WEIR_REQUIRE_FAIL2BAN",
    ) {
        let out = run.expect("fail2ban-regex");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{report}");
        assert!(report.contains("Failregex: 2 total"), "{report}");
        assert!(report.contains("2 matched, 0 missed"), "{report}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn log_files_are_reopened_after_rotation() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret");
    let (log, access) = (dir.path().join("weir.log"), dir.path().join("access.log"));
    let text = format!(
        "[log]\nformat = \"json\"\nfile = \"{}\"\naccess_file = \"{}\"\n\
         [admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{up}\"\n",
        log.display(),
        access.display(),
        token.display()
    );
    let path = write_config(&dir, &text);
    let weir = Proc::run(&path);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(10), || read(&log)
            .contains("admin listening"))
        .await,
        "logs go to the file"
    );
    let logged = |what: &str| {
        read(&log)
            .lines()
            .find(|l| l.contains(what))
            .map(log_addr)
            .unwrap_or_else(|| panic!("no {what} line"))
    };
    let web = logged("\"listener\":\"web\"");
    let admin = logged("admin listening");
    let hit = |tag: &'static str| async move {
        get(&h1_client(), &format!("http://{web}/echo?{tag}")).await;
    };
    hit("before").await;
    assert!(eventually(Duration::from_secs(5), || read(&access).contains("before")).await);
    assert!(
        !read(&log).contains("weir::access"),
        "the access log has its own file"
    );

    // logrotate: move the files away, then ask weir to reopen (SIGUSR1).
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&access, &rotated).expect("rotate");
    weir.signal("-USR1");
    assert!(
        eventually(Duration::from_secs(5), || read(&log)
            .contains("log files reopened"))
        .await
    );
    hit("after-usr1").await;
    assert!(
        eventually(Duration::from_secs(5), || read(&access)
            .contains("after-usr1"))
        .await,
        "a new file"
    );
    assert!(
        !read(&rotated).contains("after-usr1"),
        "the rotated file is left alone"
    );

    // And through the admin API.
    std::fs::rename(&access, dir.path().join("access.log.2")).expect("rotate");
    let (status, body) = admin_post(admin, "/admin/reopen-logs", "s3cret").await;
    assert_eq!(status, 200, "{body}");
    hit("after-admin").await;
    assert!(
        eventually(Duration::from_secs(5), || read(&access)
            .contains("after-admin"))
        .await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn descriptor_exhaustion_under_a_churning_flood_logs_once_per_window_and_recovers() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, &format!("[connections]\nmax = 0\n{}", run_config(up)));
    // A tiny descriptor limit and no connection cap: the kernel's limit is
    // the only one, so accept() will fail with EMFILE.
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        "ulimit -n 64 && exec \"$0\" run --config \"$1\"",
        WEIR,
        &path,
    ]);
    let mut weir = Proc::spawn_command(cmd);
    let addr = weir.listening("web");
    weir.wait_for(|l| l.contains("no connection cap"));

    // Keep opening connections and close the oldest in batches: weir runs
    // out of descriptors, gets a few back, runs out again — accepts that
    // succeed between failures, for longer than one 10 s log window.
    let churn = Duration::from_secs(12);
    let started = Instant::now();
    let mut open = std::collections::VecDeque::new();
    while started.elapsed() < churn {
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(100),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            open.push_back(s);
        }
        if open.len() >= 120 {
            open.drain(..60);
        }
    }
    weir.wait_for(|l| l.contains("\"kind\":\"EMFILE\""));
    drop(open);

    // Served again within 2 s of the descriptors being free.
    let freed = Instant::now();
    let served = loop {
        let attempt = tokio::time::timeout(
            Duration::from_millis(500),
            h1_client().get(format!("http://{addr}/echo").parse().expect("url")),
        )
        .await;
        if let Ok(Ok(resp)) = attempt
            && resp.status() == 200
        {
            break true;
        }
        if freed.elapsed() > Duration::from_secs(5) {
            break false;
        }
    };
    let took = freed.elapsed();
    assert!(served, "weir serves again after the flood");
    assert!(took < Duration::from_secs(2), "served again after {took:?}");

    weir.signal("-TERM");
    weir.wait_exit(Duration::from_secs(10));
    let failing = weir.all_lines(|l| {
        l.contains("\"kind\":\"EMFILE\"") && l.contains("accept") && l.contains("ERROR")
    });
    // 12 s of failures: the first line, and one summary for the window
    // that ended at 10 s.
    assert!(
        !failing.is_empty() && failing.len() <= 2,
        "one line per 10 s window, however failures and successes interleave: {failing:#?}"
    );
}
