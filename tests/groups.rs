//! Upstream groups on proxy routes, against real servers on port 0:
//! spread by weight, a slow server losing share under P2C, a refused
//! server passed over with the request (body included) sent to another, a
//! request that reached a server never repeated, every server out
//! answered at once, hashing, backups.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::BodyExt;

/// A server answering `name` (and the request body's length).
async fn named(name: &'static str, delay: Duration) -> Upstream {
    upstream(
        move |req: http::Request<hyper::body::Incoming>| async move {
            let len = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes().len())
                .unwrap_or(0);
            tokio::time::sleep(delay).await;
            let mut r = text(200, name);
            r.headers_mut()
                .insert("x-body-length", len.to_string().parse().expect("value"));
            r
        },
    )
    .await
}

fn group_config(servers: &str, extra: &str) -> String {
    format!(
        "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nservers = [{servers}]\n{extra}\n"
    )
}

/// Who answered `n` GETs, by name.
async fn who(weir: &Weir, n: usize, headers: &[(&str, &str)]) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for _ in 0..n {
        let (status, _, body) = get_with(&weir.url("web", "/"), headers).await;
        assert_eq!(status, 200, "{body}");
        *out.entry(body).or_default() += 1;
    }
    out
}

#[tokio::test]
async fn round_robin_spreads_by_weight() {
    let (a, b, c) = (
        named("a", Duration::ZERO).await,
        named("b", Duration::ZERO).await,
        named("c", Duration::ZERO).await,
    );
    let servers = format!(
        "\"http://{}\", {{ url = \"http://{}\", weight = 2 }}, {{ url = \"http://{}\", weight = 3 }}",
        a.addr, b.addr, c.addr
    );
    let weir = Weir::start(&group_config(&servers, "balance = \"round_robin\"")).await;
    let got = who(&weir, 60, &[]).await;
    assert_eq!((got["a"], got["b"], got["c"]), (10, 20, 30), "{got:?}");
}

#[tokio::test]
async fn p2c_sends_less_to_a_slow_server_round_robin_does_not() {
    let slow = named("slow", Duration::from_millis(30)).await;
    let (a, b) = (
        named("a", Duration::ZERO).await,
        named("b", Duration::ZERO).await,
    );
    let servers = format!(
        "\"http://{}\", \"http://{}\", \"http://{}\"",
        slow.addr, a.addr, b.addr
    );
    let p2c = Weir::start(&group_config(&servers, "")).await;
    let got = who(&p2c, 60, &[]).await;
    assert!(
        got.get("slow").copied().unwrap_or(0) <= 6,
        "P2C over latency: {got:?}"
    );
    let rr = Weir::start(&group_config(&servers, "balance = \"round_robin\"")).await;
    let got = who(&rr, 30, &[]).await;
    assert_eq!(got["slow"], 10, "round robin keeps feeding it: {got:?}");
}

#[tokio::test]
async fn a_refused_server_is_passed_over_with_the_body_and_then_taken_out() {
    let dead = closed_port().await;
    let live = named("live", Duration::ZERO).await;
    let servers = format!("\"http://{dead}\", \"http://{}\"", live.addr);
    let weir = Weir::start(&group_config(
        &servers,
        "balance = \"round_robin\"\neject_after = 2",
    ))
    .await;
    let payload = Bytes::from(vec![b'x'; 100_000]);
    for _ in 0..6 {
        let resp = send(
            http::Method::POST,
            &weir.url("web", "/upload"),
            &[],
            payload.clone(),
        )
        .await;
        let (status, headers, body) = split(resp).await;
        assert_eq!(status, 200, "a POST whose connection was refused goes on");
        assert_eq!(body, "live");
        assert_eq!(headers["x-body-length"], "100000", "the whole body");
    }
    assert_eq!(
        metric(
            &weir,
            "weir_upstream_errors_total{route=\"main\",kind=\"Connect\"}"
        )
        .await,
        Some(2),
        "refused twice, then out of the rotation"
    );
    let (dead, live) = (format!("http://{dead}/"), format!("http://{}/", live.addr));
    for (name, server, want) in [
        ("weir_upstream_server_up", &dead, 0),
        ("weir_upstream_server_up", &live, 1),
        ("weir_upstream_server_ejections_total", &dead, 1),
        ("weir_upstream_server_picks_total", &dead, 2),
        ("weir_upstream_server_picks_total", &live, 6),
    ] {
        let reason = if name.contains("ejections") {
            ",reason=\"failing\""
        } else {
            ""
        };
        let m = format!("{name}{{route=\"main\",server=\"{server}\"{reason}}}");
        assert_eq!(metric(&weir, &m).await, Some(want), "{m}");
    }
}

#[tokio::test]
async fn a_request_that_reached_a_server_is_never_repeated() {
    let (reset, seen) = resetting().await;
    let live = named("live", Duration::ZERO).await;
    let servers = format!("\"http://{reset}\", \"http://{}\"", live.addr);
    let weir = Weir::start(&group_config(&servers, "balance = \"round_robin\"")).await;
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let resp = send(
            http::Method::POST,
            &weir.url("web", "/pay"),
            &[],
            Bytes::from_static(b"once"),
        )
        .await;
        statuses.push(split(resp).await.0.as_u16());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 502], "one went to each, none twice");
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(live.connections(), 1, "the reset POST was not sent on");
}

#[tokio::test]
async fn with_every_server_out_the_answer_is_at_once_503_with_retry_after() {
    let (x, y) = (closed_port().await, closed_port().await);
    let weir = Weir::start(&group_config(
        &format!("\"http://{x}\", \"http://{y}\""),
        "eject_after = 1\neject_base = \"30s\"\nmax_ejected_percent = 100",
    ))
    .await;
    let (status, _, _) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(status, 502, "both refused: the last failure");
    let started = std::time::Instant::now();
    let (status, headers, _) = get_with(&weir.url("web", "/"), &[]).await;
    assert_eq!(status, 503);
    let retry: u64 = headers["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    assert!(
        (29..=30).contains(&retry),
        "when the first returns: {retry}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "nothing waited on"
    );
    assert_eq!(
        metric(
            &weir,
            "weir_upstream_errors_total{route=\"main\",kind=\"NoServer\"}"
        )
        .await,
        Some(1)
    );
}

#[tokio::test]
async fn a_hash_key_stays_on_one_server_and_backups_wait_for_the_primaries() {
    let (a, b, c) = (
        named("a", Duration::ZERO).await,
        named("b", Duration::ZERO).await,
        named("c", Duration::ZERO).await,
    );
    let servers = format!(
        "\"http://{}\", \"http://{}\", \"http://{}\"",
        a.addr, b.addr, c.addr
    );
    let weir = Weir::start(&group_config(
        &servers,
        "balance = \"hash\"\nhash_key = \"header:x-session\"",
    ))
    .await;
    let mut homes = HashMap::new();
    for session in 0..30 {
        let s = format!("session-{session}");
        let got = who(&weir, 4, &[("x-session", &s)]).await;
        assert_eq!(got.len(), 1, "{s} stays on one server: {got:?}");
        *homes
            .entry(got.into_keys().next().expect("one"))
            .or_insert(0) += 1;
    }
    assert_eq!(homes.len(), 3, "keys spread over the group: {homes:?}");

    let dead = closed_port().await;
    let backup = named("backup", Duration::ZERO).await;
    let servers = format!(
        "\"http://{}\", {{ url = \"http://{}\", backup = true }}",
        a.addr, backup.addr
    );
    let weir = Weir::start(&group_config(&servers, "")).await;
    assert_eq!(who(&weir, 10, &[]).await["a"], 10, "the backup waits");
    let servers = format!(
        "\"http://{dead}\", {{ url = \"http://{}\", backup = true }}",
        backup.addr
    );
    let weir = Weir::start(&group_config(&servers, "eject_after = 1")).await;
    assert_eq!(
        who(&weir, 5, &[]).await["backup"],
        5,
        "no primary: the backup"
    );
}

#[tokio::test]
async fn the_health_check_takes_a_failing_server_out_and_brings_it_back() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let healthy = Arc::new(AtomicBool::new(false));
    let flag = healthy.clone();
    let sick = upstream(move |req: http::Request<hyper::body::Incoming>| {
        let flag = flag.clone();
        async move {
            match (req.uri().path(), flag.load(Ordering::SeqCst)) {
                ("/healthz", false) => text(503, "sick"),
                _ => text(200, "sick"),
            }
        }
    })
    .await;
    let well = named("well", Duration::ZERO).await;
    let servers = format!("\"http://{}\", \"http://{}\"", sick.addr, well.addr);
    let weir = Weir::start(&group_config(
        &servers,
        "balance = \"round_robin\"\n\
         [route.health_check]\npath = \"/healthz\"\ninterval = \"50ms\"\ntimeout = \"50ms\"\nfall = 2\nrise = 1\n",
    ))
    .await;
    let up = format!(
        "weir_upstream_server_up{{route=\"main\",server=\"http://{}/\"}}",
        sick.addr
    );
    assert!(
        eventually_metric(&weir, &up, 0).await,
        "two failed checks take it out"
    );
    assert_eq!(
        who(&weir, 6, &[]).await["well"],
        6,
        "nothing to the sick one"
    );
    healthy.store(true, Ordering::SeqCst);
    assert!(
        eventually_metric(&weir, &up, 1).await,
        "one pass brings it back"
    );
    assert_eq!(who(&weir, 6, &[]).await["sick"], 3, "its share again");
}
