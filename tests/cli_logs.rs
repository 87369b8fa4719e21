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

/// The address of listener `web` from a JSON log file.
async fn web_from(log: &std::path::Path) -> SocketAddr {
    let read = || std::fs::read_to_string(log).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(10), || read()
            .contains("\"listener\":\"web\""))
        .await,
        "no listening line in {}",
        log.display()
    );
    read()
        .lines()
        .find(|l| l.contains("\"listener\":\"web\""))
        .map(log_addr)
        .expect("listening line")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_access_log_is_kept_whatever_the_level_with_its_client_fields_bounded() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let access = dir.path().join("access.log");
    // An operator who quiets the error log: warnings only (and the
    // listening lines, to find the port).
    let text = format!(
        "[log]\nformat = \"json\"\nlevel = \"warn,weir::server=info\"\naccess_file = \"{}\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\npath = \"/v1\"\n\
         [[route.upstreams]]\nname = \"up\"\nurl = \"http://{up}\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{up}\"\n",
        access.display()
    );
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let web = log_addr(&weir.wait_for(|l| l.contains("\"listener\":\"web\"")));
    let read = || std::fs::read_to_string(&access).unwrap_or_default();

    // A path as long as the request head allows, and a model as long as
    // the body: each line stays small.
    let long_path = format!("/echo?tag-path-{}", "p".repeat(30_000));
    get(&h1_client(), &format!("http://{web}{long_path}")).await;
    let model = format!("tag-model-{}", "m".repeat(100_000));
    let body = serde_json::json!({"model": model, "max_tokens": 1, "messages": []});
    post_json(
        &format!("http://{web}/v1/messages"),
        body.to_string(),
        &[("content-type", "application/json")],
    )
    .await;
    assert!(
        eventually(Duration::from_secs(10), || {
            let t = read();
            t.contains("tag-path-") && t.contains("tag-model-")
        })
        .await,
        "the access log is written at level warn: {}",
        read()
    );
    for line in read().lines() {
        assert!(
            line.len() < 4096 + 1024,
            "an access line of {} bytes",
            line.len()
        );
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        for (field, max) in [("path", 4096), ("model", 256)] {
            if let Some(s) = v[field].as_str() {
                assert!(s.len() <= max, "{field} of {} bytes", s.len());
            }
        }
    }
    let model_line = read()
        .lines()
        .find(|l| l.contains("tag-model-"))
        .map(str::to_string)
        .expect("model line");
    let v: serde_json::Value = serde_json::from_str(&model_line).expect("json");
    assert_eq!(v["model"].as_str().map(str::len), Some(256), "{model_line}");
    assert!(
        weir.seen.iter().all(|l| !l.contains("weir::access")),
        "nothing else moved: the access log has its own file"
    );

    // Without an access file, the lines go with the other logs, at the
    // same level.
    let text = format!(
        "[log]\nformat = \"json\"\nlevel = \"warn,weir::server=info\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{up}\"\n"
    );
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let web = log_addr(&weir.wait_for(|l| l.contains("\"listener\":\"web\"")));
    get(&h1_client(), &format!("http://{web}/echo?tag-stderr")).await;
    weir.wait_for(|l| l.contains("weir::access") && l.contains("tag-stderr"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_lines_are_written_at_exit_and_failed_writes_counted() {
    // An upstream that holds each answer until released, so the requests
    // end while weir drains, just before it exits.
    let (release, released) = tokio::sync::watch::channel(false);
    let up = upstream(move |_req| {
        let mut released = released.clone();
        async move {
            let _ = released.wait_for(|r| *r).await;
            text(200, "late")
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, access) = (dir.path().join("weir.log"), dir.path().join("access.log"));
    let text = format!(
        "[log]\nformat = \"json\"\nfile = \"{}\"\naccess_file = \"{}\"\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{}\"\n",
        log.display(),
        access.display(),
        up.addr
    );
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let web = web_from(&log).await;
    const HELD: usize = 200;
    let requests: Vec<_> = (0..HELD)
        .map(|i| {
            tokio::spawn(async move { get(&h1_client(), &format!("http://{web}/held-{i}")).await })
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(10), || up.connections() >= 1).await,
        "the requests reached the upstream"
    );
    weir.signal("-TERM");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(10), || read(&log).contains("draining")).await,
        "weir drains"
    );
    release.send(true).expect("release");
    for r in requests {
        let (status, _, _) = r.await.expect("request");
        assert_eq!(status, 200, "answered while draining");
    }
    assert_eq!(weir.wait_exit(Duration::from_secs(20)), 0);
    let lines = read(&access);
    let logged = (0..HELD)
        .filter(|i| lines.contains(&format!("\"/held-{i}\"")))
        .count();
    assert_eq!(logged, HELD, "every drained request's line is in the file");
    assert!(read(&log).contains("\"drained\""), "and the last log line");

    // A log that cannot be written (a full disk): counted.
    let up = demo_upstream().await;
    let text = format!(
        "[log]\nformat = \"json\"\naccess_file = \"/dev/full\"\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{up}\"\n"
    );
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let web = weir.listening("web");
    let admin = weir.admin();
    get(&h1_client(), &format!("http://{web}/echo")).await;
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            metric_at(admin, "weir_log_write_errors_total").await >= Some(1)
        })
        .await,
        "a failed write is counted"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_cut_at_the_shutdown_timeout_are_logged_before_exit() {
    // An upstream that sends its head and then nothing: the responses are
    // mid-body when the shutdown timeout cuts them, the moment before
    // weir exits.
    let up = upstream(|_req| async {
        let never = futures_util::stream::pending::<
            Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>,
        >();
        http::Response::new(http_body_util::BodyExt::boxed(
            http_body_util::StreamBody::new(never),
        ))
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, access) = (dir.path().join("weir.log"), dir.path().join("access.log"));
    let text = format!(
        "[server]\nshutdown_timeout = \"1s\"\n\
         [log]\nformat = \"json\"\nfile = \"{}\"\naccess_file = \"{}\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{}\"\n",
        log.display(),
        access.display(),
        up.addr
    );
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let web = web_from(&log).await;
    const HELD: usize = 200;
    let heads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..HELD {
        let heads = heads.clone();
        tokio::spawn(async move {
            let uri = format!("http://{web}/cut-{i}").parse().expect("uri");
            let resp = h1_client().get(uri).await.expect("head");
            heads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = http_body_util::BodyExt::collect(resp.into_body()).await;
        });
    }
    assert!(
        eventually(Duration::from_secs(10), || {
            heads.load(std::sync::atomic::Ordering::SeqCst) == HELD
        })
        .await,
        "the requests reached the upstream"
    );
    weir.signal("-TERM");
    weir.wait_exit(Duration::from_secs(20));
    let lines = std::fs::read_to_string(&access).unwrap_or_default();
    let logged = (0..HELD)
        .filter(|i| lines.contains(&format!("\"/cut-{i}\"")))
        .count();
    assert_eq!(logged, HELD, "every cut request's line is in the file");
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(log.contains("shutdown timeout reached"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_left_after_its_terminal_event_is_logged_complete() {
    // Codex hangs up once it has `response.completed`; the upstream has
    // not ended its body yet. The answer reached the client whole.
    use common::llm::*;
    use http_body_util::BodyExt;
    let up = mock(|_| {
        let mut body: Vec<Step> = stream_events(Api::Responses, "m", &["a", "b"])
            .into_iter()
            .map(Step::Send)
            .collect::<Vec<Step>>();
        body.push(Step::Stall);
        sse_reply(body)
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "[log]\nformat = \"json\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"openai\"\n\
         [[route.upstreams]]\nname = \"up\"\nurl = \"{}\"\n",
        up.url()
    );
    let path = write_config(&dir, &text);
    let mut weir = Proc::run(&path);
    let web = log_addr(&weir.wait_for(|l| l.contains("\"listener\":\"web\"")));
    let resp = common::post_open(
        &format!("http://{web}/v1/responses"),
        responses_body("m", true),
        &[],
    )
    .await;
    let mut answer = resp.into_body();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("event: response.completed") {
        let frame = answer.frame().await.expect("an event").expect("ok");
        if let Ok(data) = frame.into_data() {
            seen.extend_from_slice(&data);
        }
    }
    drop(answer);
    let line = weir.wait_for(|l| l.contains("weir::access"));
    let v: serde_json::Value = serde_json::from_str(&line).expect("json line");
    assert_eq!(v["outcome"], "Complete", "{line}");
}
