//! The real binary: `--version`, `check`, `run` with signals and the JSON
//! access log, and `demo`.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::*;
use common::*;

#[test]
fn version_is_printed() {
    let out = Command::new(WEIR).arg("--version").output().expect("run");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("weir {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn check_accepts_a_valid_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(
        &dir,
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nupstream = \"http://127.0.0.1:9\"\n",
    );
    let out = Command::new(WEIR)
        .args(["check", "--config", &path])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "config ok\n");
}

#[test]
fn check_lists_every_problem_with_position_and_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(
        &dir,
        "[[listener]]\naddress = \"127.0.0.1:0\"\nadress = \"x\"\n\
         [[route]]\nupstream = \"127.0.0.1:9\"\nresponse_timeout = 5\n",
    );
    let out = Command::new(WEIR)
        .args(["check", "--config", &path])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("3 problems in the configuration:"), "{err}");
    assert!(
        err.contains(&format!(
            "{path}:3:1: listener[0].adress: unknown key (fix: did you mean `address`?)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{path}:5:12: route[0].upstream:")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{path}:6:20: route[0].response_timeout: expected a duration string, found integer"
        )),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn check_reports_an_unreadable_file() {
    let out = Command::new(WEIR)
        .args(["check", "--config", "/nonexistent/weir.toml"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("/nonexistent/weir.toml: cannot read the file")
    );
}

#[test]
fn run_refuses_an_invalid_config_without_starting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, "[[listener]]\naddress = \"127.0.0.1:0\"\n");
    let out = Command::new(WEIR)
        .args(["run", "--config", &path])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no route is configured"));
}

fn run_config(upstream: SocketAddr) -> String {
    format!(
        "[log]\nformat = \"json\"\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"demo\"\nupstream = \"http://{upstream}\"\n"
    )
}

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
    let mut weir = Proc::spawn(&["run", "--config", &config]);
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

#[tokio::test(flavor = "multi_thread")]
async fn demo_serves_without_any_file() {
    let mut weir = Proc::spawn(&[
        "demo",
        "--http-port",
        "0",
        "--https-port",
        "0",
        "--admin-port",
        "0",
    ]);
    let banner = weir.wait_for(|l| l.contains("curl -s http://127.0.0.1:") && l.contains("/echo"));
    let port: u16 = banner
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("port in banner");
    assert_ne!(port, 0, "the banner shows the bound port");
    let (status, _, body) = get(&h1_client(), &format!("http://127.0.0.1:{port}/echo?x=1")).await;
    assert_eq!(status, 200);
    assert_eq!(echo_json(&body)["query"], "x=1");

    // Both directions of translation, on the demo's mock providers.
    let post = |path: &str, body: serde_json::Value| {
        http::Request::post(format!("http://127.0.0.1:{port}{path}"))
            .header("content-type", "application/json")
            .header("anthropic-version", "2023-06-01")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .expect("request")
    };
    let resp = h1_client()
        .request(post(
            "/v1/messages",
            serde_json::json!({"model": "demo-gpt", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}),
        ))
        .await
        .expect("response");
    let (status, _, body) = split(resp).await;
    assert_eq!(status, 200, "{body}");
    let m: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        m["content"][0]["text"], "Hello from weir's demo model.",
        "{body}"
    );
    let resp = h1_client()
        .request(post(
            "/v1/responses",
            serde_json::json!({"model": "demo-claude", "input": "hi"}),
        ))
        .await
        .expect("response");
    let (status, _, body) = split(resp).await;
    assert_eq!(status, 200, "{body}");
    let r: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        r["output"][0]["content"][0]["text"], "Hello from weir's demo model.",
        "{body}"
    );
}

#[test]
fn shipped_example_config_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    for stem in ["example.com", "git.example.com"] {
        write_cert(dir.path(), stem, &[stem]);
    }
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/weir.toml"))
            .expect("example");
    let text = example.replace("/etc/weir/certs", &dir.path().display().to_string());
    let path = write_config(&dir, &text);
    let out = Command::new(WEIR)
        .args(["check", "--config", &path])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
    while let Ok(line) = weir.lines.recv_timeout(Duration::from_millis(200)) {
        weir.seen.push(line);
    }
    let failing: Vec<&String> = weir
        .seen
        .iter()
        .filter(|l| {
            l.contains("\"kind\":\"EMFILE\"") && l.contains("accept") && l.contains("ERROR")
        })
        .collect();
    // 12 s of failures: the first line, and one summary for the window
    // that ended at 10 s.
    assert!(
        !failing.is_empty() && failing.len() <= 2,
        "one line per 10 s window, however failures and successes interleave: {failing:#?}"
    );
}

/// A config for the reload tests: JSON logs, an admin API with a token,
/// the demo upstream behind `main`, and a route whose path changes with
/// `variant` (so every reload changes something). `extra` goes in [connections].
fn reload_config(
    upstream: SocketAddr,
    token: &std::path::Path,
    variant: u32,
    extra: &str,
) -> String {
    format!(
        "[log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n\
         [connections]\n{extra}\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{upstream}\"\n\
         [[route]]\nname = \"v{variant}\"\npath = \"/v{variant}\"\nupstream = \"http://{upstream}/echo\"\n",
        token.display()
    )
}

/// Replace the config file the way editors and ConfigMaps do: a new file
/// renamed over the old one.
fn replace_file(path: &str, text: &str) {
    let tmp = format!("{path}.new");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

async fn admin_post(admin: SocketAddr, path: &str, token: &str) -> (http::StatusCode, String) {
    let req = http::Request::post(format!("http://{admin}{path}"))
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let (status, _, body) = split(h1_client().request(req).await.expect("admin")).await;
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_reloads_under_load_fail_no_request_and_cut_no_stream() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, "s3cret\n").expect("token");
    let path = write_config(&dir, &reload_config(up, &token, 0, ""));
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let addr = weir.listening("web");
    let admin = weir.admin();

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let streams = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut load = Vec::new();
    let h2 = {
        let mut b =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
        b.http2_only(true);
        b.build::<_, http_body_util::Full<bytes::Bytes>>(
            hyper_util::client::legacy::connect::HttpConnector::new(),
        )
    };
    for i in 0..4 {
        let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
        let (h1, h2) = (h1_client(), h2.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let url: http::Uri = format!("http://{addr}/echo?i={i}").parse().expect("url");
                // Keep-alive clients on both protocols.
                let resp = if i % 2 == 0 {
                    h1.get(url).await
                } else {
                    h2.get(url).await
                };
                match resp {
                    Ok(r) if r.status() == 200 => {
                        let (_, _, body) = split(r).await;
                        if body.contains("\"path\":\"/echo\"") {
                            ok.fetch_add(1, Ordering::Relaxed);
                        } else {
                            failures
                                .lock()
                                .expect("lock")
                                .push(format!("odd body: {body}"));
                        }
                    }
                    Ok(r) => failures
                        .lock()
                        .expect("lock")
                        .push(format!("status {}", r.status())),
                    Err(e) => failures
                        .lock()
                        .expect("lock")
                        .push(format!("request failed: {e}")),
                }
            }
        }));
    }
    for i in 0..2 {
        let (stop, streams, failures) = (stop.clone(), streams.clone(), failures.clone());
        let (h1, h2) = (h1_client(), h2.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let url: http::Uri = format!("http://{addr}/sse?n=10&interval_ms=30")
                    .parse()
                    .expect("url");
                let resp = if i == 0 {
                    h1.get(url).await
                } else {
                    h2.get(url).await
                };
                match resp {
                    Ok(r) if r.status() == 200 => {
                        let (_, _, body) = split(r).await;
                        let events = body.matches("event: tick").count();
                        if events == 10 {
                            streams.fetch_add(1, Ordering::Relaxed);
                        } else {
                            failures
                                .lock()
                                .expect("lock")
                                .push(format!("stream cut after {events} events"));
                        }
                    }
                    Ok(r) => failures
                        .lock()
                        .expect("lock")
                        .push(format!("stream status {}", r.status())),
                    Err(e) => failures
                        .lock()
                        .expect("lock")
                        .push(format!("stream failed: {e}")),
                }
            }
        }));
    }

    for i in 1..=100u64 {
        replace_file(&path, &reload_config(up, &token, i as u32, ""));
        if i % 2 == 1 {
            weir.signal("-HUP");
        } else {
            let (status, body) = admin_post(admin, "/admin/reload", "s3cret").await;
            assert_eq!(status, 200, "{body}");
            assert!(
                body.contains(&format!("\"generation\":{}", i + 1)),
                "{body}"
            );
        }
        assert!(
            eventually_async(Duration::from_secs(10), || async {
                metric_at(admin, "weir_config_reloads_total{result=\"ok\"}").await == Some(i)
            })
            .await,
            "reload {i} was applied"
        );
        // Let traffic run between reloads, so streams span several of them.
        let before = ok.load(Ordering::Relaxed);
        assert!(
            eventually(Duration::from_secs(10), || ok.load(Ordering::Relaxed)
                >= before + 20)
            .await,
            "requests keep being answered after reload {i}"
        );
    }
    // The last reload's route is live.
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v100")).await;
    assert_eq!(status, 200);
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.expect("load task");
    }
    let failures = failures.lock().expect("lock").clone();
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert!(ok.load(Ordering::Relaxed) > 100, "requests ran throughout");
    assert!(
        streams.load(Ordering::Relaxed) > 4,
        "streams ran throughout"
    );
    assert_eq!(metric_at(admin, "weir_config_generation").await, Some(101));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_reload_keeps_the_running_config_and_says_why() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, "s3cret").expect("token");
    let path = write_config(&dir, &reload_config(up, &token, 0, ""));
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let addr = weir.listening("web");
    let admin = weir.admin();

    // Wrong token: 401; the endpoint is guarded.
    let (status, _) = admin_post(admin, "/admin/reload", "guess").await;
    assert_eq!(status, 401);

    // Two problems at once: both reported, nothing applied.
    replace_file(
        &path,
        &format!(
            "{}[[route]]\nname = \"bad\"\npath = \"nope\"\nupstrem = \"x\"\n",
            reload_config(up, &token, 1, "")
        ),
    );
    let (status, body) = admin_post(admin, "/admin/reload", "s3cret").await;
    assert_eq!(status, 422, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let problems = v["problems"].as_array().expect("problems");
    assert!(problems.len() >= 2, "{body}");
    assert!(
        body.contains("weir.toml:") && body.contains("upstrem"),
        "file, line and key: {body}"
    );
    weir.signal("-HUP");
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            metric_at(admin, "weir_config_reloads_total{result=\"failed\"}").await == Some(2)
        })
        .await,
        "the SIGHUP reload failed too"
    );
    // Each failed reload logged the problem (admin call and SIGHUP alike).
    weir.wait_for_count(2, |l| {
        l.contains("config reload failed") && l.contains("upstrem")
    });
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v0")).await;
    assert_eq!(status, 200, "the running config still serves");

    // A restart-only change is named, and the rest applies.
    replace_file(&path, &reload_config(up, &token, 2, "max = 500"));
    weir.signal("-HUP");
    weir.wait_for(|l| {
        l.contains("only takes effect after a restart") && l.contains("connections.max")
    });
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v2")).await;
    assert_eq!(status, 200, "the reloadable part applied");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_the_admin_api_is_off() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, &run_config(up));
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let admin = weir.admin();
    let (status, _) = admin_post(admin, "/admin/reload", "anything").await;
    assert_eq!(status, 404);
    let (status, _, _) = get(&h1_client(), &format!("http://{admin}/health")).await;
    assert_eq!(status, 200, "/health stays open");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_config_file_is_reloaded_however_it_was_replaced() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, "s3cret").expect("token");
    let watched = |variant| {
        reload_config(up, &token, variant, "")
            .replace("watch_config = false", "watch_config = true")
    };
    // Kubernetes mounts a ConfigMap as weir.toml -> ..data/weir.toml, with
    // ..data a symlink to a versioned directory that is swapped whole.
    let versions = dir.path().join("..v1");
    std::fs::create_dir(&versions).expect("mkdir");
    std::fs::write(versions.join("weir.toml"), watched(0)).expect("write");
    std::os::unix::fs::symlink("..v1", dir.path().join("..data")).expect("symlink");
    std::os::unix::fs::symlink("..data/weir.toml", dir.path().join("weir.toml")).expect("symlink");
    let path = dir.path().join("weir.toml").display().to_string();
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let addr = weir.listening("web");
    let admin = weir.admin();
    let generation = |want: u64| async move {
        eventually_async(Duration::from_secs(10), || async {
            metric_at(admin, "weir_config_generation").await == Some(want)
        })
        .await
    };

    // The ConfigMap way: a new version directory, and ..data swapped to it.
    let v2 = dir.path().join("..v2");
    std::fs::create_dir(&v2).expect("mkdir");
    std::fs::write(v2.join("weir.toml"), watched(1)).expect("write");
    std::os::unix::fs::symlink("..v2", dir.path().join("..data.new")).expect("symlink");
    std::fs::rename(dir.path().join("..data.new"), dir.path().join("..data")).expect("swap");
    assert!(generation(2).await, "a symlink swap is seen");
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v1")).await;
    assert_eq!(status, 200);

    // An editor's way: write a new file and rename it over the old one.
    std::fs::remove_file(&path).expect("unlink");
    replace_file(&path, &watched(2));
    assert!(generation(3).await, "a rename over the file is seen");
    // And in place; an unchanged rewrite before it reloads nothing.
    std::fs::write(&path, watched(2)).expect("same text");
    std::fs::write(&path, watched(3)).expect("write");
    assert!(generation(4).await, "an in-place write is seen");
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v3")).await;
    assert_eq!(status, 200);
    assert_eq!(
        metric_at(admin, "weir_config_reloads_total{result=\"ok\"}").await,
        Some(3),
        "one reload per change"
    );
}

#[test]
fn systemd_hears_ready_reloading_watchdog_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().expect("tempdir");
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let up = runtime.block_on(demo_upstream());
    let path = write_config(&dir, &run_config(up));
    // WATCHDOG_PID must be weir's own pid: exec keeps the shell's.
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        "WATCHDOG_PID=$$ WATCHDOG_USEC=200000 exec \"$0\" run --config \"$1\"",
        WEIR,
        &path,
    ])
    .env("NOTIFY_SOCKET", &socket_path);
    let mut weir = Proc::spawn_command(cmd);
    let mut heard = Vec::new();
    let next = |until: &str| -> Vec<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            let n = socket
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("waiting for {until}: {e}; heard {got:?}"));
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = msg.contains(until);
            got.push(msg);
            if done {
                return got;
            }
        }
    };
    heard.extend(next("READY=1"));
    weir.listening("web");
    heard.extend(next("WATCHDOG=1"));
    weir.signal("-HUP");
    let reload = next("RELOADING=1");
    assert!(
        reload.last().expect("msg").contains("MONOTONIC_USEC="),
        "systemd 253+ needs the timestamp: {reload:?}"
    );
    let after = next("READY=1");
    heard.extend(reload);
    heard.extend(after);
    weir.signal("-TERM");
    heard.extend(next("STOPPING=1"));
    assert_eq!(weir.wait_exit(Duration::from_secs(10)), 0);
    let first_ready = heard
        .iter()
        .position(|m| m.contains("READY=1"))
        .expect("ready");
    assert_eq!(first_ready, 0, "READY=1 comes first: {heard:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_status_and_config_report_without_leaking_secrets() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, "s3cret-value").expect("token");
    let path = write_config(&dir, &reload_config(up, &token, 7, ""));
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let addr = weir.listening("web");
    let admin = weir.admin();
    let authed = |path: &str| {
        http::Request::get(format!("http://{admin}{path}"))
            .header("authorization", "Bearer s3cret-value")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .expect("request")
    };
    let (status, _, body) = split(
        h1_client()
            .request(authed("/admin/status"))
            .await
            .expect("status"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["config"]["generation"], 1);
    assert_eq!(v["listeners"][0]["name"], "web");
    assert_eq!(v["listeners"][0]["address"], addr.to_string());
    let routes: Vec<&str> = v["routes"]
        .as_array()
        .expect("routes")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(routes, ["main", "v7"]);
    assert!(
        v["open_connections"].as_u64().is_some() && v["requests_shed"] == 0,
        "{v}"
    );

    let (status, _, body) = split(
        h1_client()
            .request(authed("/admin/config"))
            .await
            .expect("config"),
    )
    .await;
    assert_eq!(status, 200);
    assert!(body.contains("name: \"main\""), "{body}");
    assert!(
        body.contains("Secret(..)"),
        "the token is shown redacted: {body}"
    );
    assert!(!body.contains("s3cret-value"), "and never in the clear");
    let (status, _, _) = get(&h1_client(), &format!("http://{admin}/admin/status")).await;
    assert_eq!(status, 401, "without the token");
}

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
    let mut weir = Proc::spawn(&["run", "--config", &path]);
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
    while let Ok(line) = weir.lines.recv_timeout(Duration::from_millis(200)) {
        weir.seen.push(line);
    }
    let lines: Vec<&String> = weir
        .seen
        .iter()
        .filter(|l| l.contains("rate_limited"))
        .collect();
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
    match Command::new("fail2ban-regex")
        .arg(&log)
        .arg(filter)
        .output()
    {
        Ok(out) => {
            let report = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{report}");
            assert!(report.contains("Failregex: 2 total"), "{report}");
            assert!(report.contains("2 matched, 0 missed"), "{report}");
        }
        // .ci/run installs fail2ban and sets this, so CI always runs it.
        Err(e) => assert!(
            std::env::var_os("WEIR_REQUIRE_FAIL2BAN").is_none(),
            "fail2ban-regex is required here: {e}"
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn log_files_are_reopened_after_rotation() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, "s3cret").expect("token");
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
    let _weir = Proc::spawn(&["run", "--config", &path]);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let field = |log: &str, key: &str| -> Option<String> {
        log.lines().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v[key].as_str().map(str::to_string)
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || read(&log)
            .contains("admin listening"))
        .await,
        "logs go to the file"
    );
    let web: SocketAddr = field(&read(&log), "addr")
        .expect("listening line")
        .parse()
        .expect("addr");
    let admin: SocketAddr = read(&log)
        .lines()
        .filter(|l| l.contains("admin listening"))
        .find_map(|l| {
            serde_json::from_str::<serde_json::Value>(l).ok()?["addr"]
                .as_str()?
                .parse()
                .ok()
        })
        .expect("admin addr");
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
    _weir.signal("-USR1");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_under_load_refuses_no_connection_and_fails_no_request() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // Two workers: each listener has two sockets, and both must be handed
    // over (a socket left behind takes its queued connections with it).
    let config = format!("[server]\nworkers = 2\n{}", run_config(up));
    let path = write_config(&dir, &config);
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let addr = weir.listening("web");
    let admin = weir.admin();

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut load = Vec::new();
    for _ in 0..3 {
        let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                // A new connection per request: a refused one would show.
                let mut s = match tokio::net::TcpStream::connect(addr).await {
                    Ok(s) => s,
                    Err(e) => {
                        failures.lock().expect("lock").push(format!("connect: {e}"));
                        continue;
                    }
                };
                let sent = tokio::io::AsyncWriteExt::write_all(
                    &mut s,
                    b"GET /echo HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                )
                .await;
                let (out, _) = read_until_close(&mut s, Duration::from_secs(10)).await;
                if sent.is_ok() && out.starts_with("HTTP/1.1 200") {
                    ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    failures
                        .lock()
                        .expect("lock")
                        .push(format!("answer: {out:?}"));
                }
            }
        }));
    }
    assert!(eventually(Duration::from_secs(10), || ok.load(Ordering::Relaxed) > 50).await);

    weir.signal("-USR2");
    let ready = weir.wait_for(|l| l.contains("the new process is ready"));
    let v: serde_json::Value = serde_json::from_str(&ready).expect("json");
    let new_pid = v["pid"].as_u64().expect("pid");
    assert_eq!(
        weir.wait_exit(Duration::from_secs(20)),
        0,
        "the old process drained and left"
    );
    // The new process serves alone now, on the same sockets (and admin).
    let served = ok.load(Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(10), || ok.load(Ordering::Relaxed)
            > served + 100)
        .await,
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
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.expect("load");
    }
    let _ = Command::new("kill")
        .args(["-TERM", &new_pid.to_string()])
        .status();
    let failures = failures.lock().expect("lock").clone();
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_upgrade_keeps_the_old_process_serving() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, &run_config(up));
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let addr = weir.listening("web");
    // The new process will read a config that does not validate.
    std::fs::write(&path, "[[listener]]\naddress = \"nonsense\"\n").expect("spoil");
    weir.signal("-USR2");
    weir.wait_for(|l| l.contains("upgrade failed; still serving"));
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/echo")).await;
    assert_eq!(status, 200, "the old process still serves");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_an_upgrade_systemd_hears_the_new_main_pid_and_no_stopping() {
    use std::os::unix::net::UnixDatagram;
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let path = write_config(&dir, &run_config(up));
    let mut cmd = Command::new(WEIR);
    cmd.args(["run", "--config", &path])
        .env("NOTIFY_SOCKET", &socket_path);
    let mut weir = Proc::spawn_command(cmd);
    weir.listening("web");
    let messages = tokio::task::spawn_blocking(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = socket.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = msg.contains("MAINPID=");
            got.push(msg);
            if done {
                // Anything the old process says while it drains.
                let _ = socket.set_read_timeout(Some(Duration::from_millis(1500)));
            }
        }
        got
    });
    weir.signal("-USR2");
    let ready = weir.wait_for(|l| l.contains("the new process is ready"));
    let new_pid = serde_json::from_str::<serde_json::Value>(&ready).expect("json")["pid"]
        .as_u64()
        .expect("pid");
    assert_eq!(weir.wait_exit(Duration::from_secs(20)), 0);
    let messages = messages.await.expect("join");
    let _ = Command::new("kill")
        .args(["-TERM", &new_pid.to_string()])
        .status();
    assert!(
        messages
            .iter()
            .any(|m| m.contains(&format!("MAINPID={new_pid}")) && m.contains("READY=1")),
        "{messages:?}"
    );
    assert!(
        !messages.iter().any(|m| m.contains("STOPPING=1")),
        "the unit is not stopping: {messages:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn guessing_the_admin_token_is_rate_limited() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, "s3cret").expect("token");
    let path = write_config(&dir, &reload_config(up, &token, 0, ""));
    let mut weir = Proc::spawn(&["run", "--config", &path]);
    let admin = weir.admin();
    let (status, _) = admin_post(admin, "/admin/reload", "s3cret").await;
    assert_eq!(status, 200, "successes are not counted");
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(admin_post(admin, "/admin/reload", "guess").await.0.as_u16());
    }
    assert_eq!(&statuses[..5], &[401; 5], "{statuses:?}");
    assert_eq!(
        statuses[6], 429,
        "then refused before the token is looked at: {statuses:?}"
    );
    let (status, _) = admin_post(admin, "/admin/reload", "s3cret").await;
    assert_eq!(status, 429, "even the right token, for a while");
    weir.wait_for(|l| l.contains("admin API: authentication failed"));
}
