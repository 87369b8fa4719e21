//! Reloading the real binary: SIGHUP, the admin API and the file watcher
//! (however the file is replaced) under load, and a bad config that keeps
//! the running one and says why.

mod common;

use std::time::Duration;

use common::load::*;
use common::process::*;
use common::*;

/// Replace the config file the way editors and ConfigMaps do: a new file
/// renamed over the old one.
fn replace_file(path: &str, text: &str) {
    let tmp = format!("{path}.new");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// The body of a 200 answer; anything else is a failure.
async fn answered(
    resp: Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error>,
) -> Result<String, String> {
    match resp {
        Ok(r) if r.status() == 200 => Ok(split(r).await.2),
        Ok(r) => Err(format!("status {}", r.status())),
        // The whole chain of causes: which side closed, and how.
        Err(e) => {
            let mut why = format!("request failed: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why.push_str(&format!(": {s}"));
                source = s.source();
            }
            Err(why)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_reloads_under_load_fail_no_request_and_cut_no_stream() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret\n");
    // No per-connection request cap: the shared HTTP/2 connection passes
    // 1,000 requests within the test, and a request the client opens as
    // that GOAWAY arrives fails in hyper's client without being sent —
    // unrelated to reloads, which send no GOAWAY. No file watcher: on a
    // loaded machine it may reload the new file before the signal or the
    // admin call does, which then counts a generation more than expected.
    let unlimited = "max_requests = 0\n[server]\nwatch_config = false";
    let path = write_config(&dir, &reload_config(up, &token, 0, unlimited));
    let mut weir = Proc::run(&path);
    let addr = weir.listening("web");
    let admin = weir.admin();

    let (requests, streams) = (Tally::default(), Tally::default());
    let mut load = Load::default();
    let h2 = {
        let mut b =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
        b.http2_only(true);
        b.build::<_, http_body_util::Full<bytes::Bytes>>(
            hyper_util::client::legacy::connect::HttpConnector::new(),
        )
    };
    // Keep-alive clients on both protocols: requests, and streams long
    // enough to span several reloads.
    for i in 0..4 {
        let (h1, h2) = (h1_client(), h2.clone());
        load.spawn(&requests, move || {
            let url: http::Uri = format!("http://{addr}/echo?i={i}").parse().expect("url");
            let sent = if i % 2 == 0 { h1.get(url) } else { h2.get(url) };
            async move {
                let body = answered(sent.await).await?;
                match body.contains("\"path\":\"/echo\"") {
                    true => Ok(()),
                    false => Err(format!("odd body: {body}")),
                }
            }
        });
    }
    for i in 0..2 {
        let (h1, h2) = (h1_client(), h2.clone());
        load.spawn(&streams, move || {
            let url: http::Uri = format!("http://{addr}/sse?n=10&interval_ms=30")
                .parse()
                .expect("url");
            let sent = if i == 0 { h1.get(url) } else { h2.get(url) };
            async move {
                let body = answered(sent.await).await?;
                match body.matches("event: tick").count() {
                    10 => Ok(()),
                    n => Err(format!("stream cut after {n} events")),
                }
            }
        });
    }

    for i in 1..=100u64 {
        replace_file(&path, &reload_config(up, &token, i as u32, unlimited));
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
        let before = requests.ok();
        assert!(
            eventually(Duration::from_secs(10), || requests.ok() >= before + 20).await,
            "requests keep being answered after reload {i}"
        );
    }
    // The last reload's route is live.
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v100")).await;
    assert_eq!(status, 200);
    load.stop().await;
    requests.assert_no_failures();
    streams.assert_no_failures();
    assert!(requests.ok() > 100, "requests ran throughout");
    assert!(streams.ok() > 4, "streams ran throughout");
    assert_eq!(metric_at(admin, "weir_config_generation").await, Some(101));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_reload_keeps_the_running_config_and_says_why() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret");
    let path = write_config(&dir, &reload_config(up, &token, 0, ""));
    let mut weir = Proc::run(&path);
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
async fn a_changed_config_file_is_reloaded_however_it_was_replaced() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret");
    // Watching is the default; this test is about it, so it says so.
    let watched = |variant| {
        format!(
            "[server]\nwatch_config = true\n{}",
            reload_config(up, &token, variant, "")
        )
    };
    // Kubernetes mounts a ConfigMap as weir.toml -> ..data/weir.toml, with
    // ..data a symlink to a versioned directory that is swapped whole.
    let versions = dir.path().join("..v1");
    std::fs::create_dir(&versions).expect("mkdir");
    std::fs::write(versions.join("weir.toml"), watched(0)).expect("write");
    std::os::unix::fs::symlink("..v1", dir.path().join("..data")).expect("symlink");
    std::os::unix::fs::symlink("..data/weir.toml", dir.path().join("weir.toml")).expect("symlink");
    let path = dir.path().join("weir.toml").display().to_string();
    let mut weir = Proc::run(&path);
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

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_save_is_tried_once_per_change_not_on_every_event() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret");
    let watched = |extra: &str| {
        format!(
            "[server]\nwatch_config = true\n{}{extra}",
            reload_config(up, &token, 0, "")
        )
    };
    let path = write_config(&dir, &watched(""));
    let mut weir = Proc::run(&path);
    let admin = weir.admin();
    let failed = || async move {
        metric_at(admin, "weir_config_reloads_total{result=\"failed\"}")
            .await
            .unwrap_or(0)
    };
    // Each broken save below has one problem: one line per attempt.
    let failures = |weir: &mut Proc| weir.all_lines(|l| l.contains("config reload failed")).len();

    // One bad save (in place): tried once.
    std::fs::write(&path, watched("[first]\nx = 1\n")).expect("write");
    assert!(
        eventually_async(Duration::from_secs(10), || async { failed().await >= 1 }).await,
        "the broken save was tried"
    );
    // A count that must not grow can only be watched over time: four
    // watch periods, while events in the directory (a sibling file
    // written, weir's own reads of the config) keep coming.
    std::fs::write(dir.path().join("sibling"), "x").expect("sibling");
    let retried = eventually_async(Duration::from_secs(1), || async { failed().await > 1 }).await;
    assert!(!retried, "an unchanged broken file is not tried again");
    assert_eq!(failures(&mut weir), 1, "one failure logged for one save");

    // A second, different broken save (by rename, as editors save): tried
    // once more, so exactly two.
    replace_file(&path, &watched("[second]\nx = 1\n"));
    weir.wait_for(|l| l.contains("config reload failed") && l.contains("second"));
    assert_eq!(failed().await, 2);

    // Fixed: applied, and the count of failures stays two.
    replace_file(
        &path,
        &format!(
            "[server]\nwatch_config = true\n{}",
            reload_config(up, &token, 1, "")
        ),
    );
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            metric_at(admin, "weir_config_generation").await == Some(2)
        })
        .await,
        "the fixed file is applied"
    );
    let addr = weir.listening("web");
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v1")).await;
    assert_eq!(status, 200, "the fixed config serves");
    assert_eq!(failed().await, 2);
    assert_eq!(failures(&mut weir), 2, "one failure line per broken save");
}
