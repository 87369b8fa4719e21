//! Retries that are safe and group members that follow DNS, on proxy
//! routes, against real servers on port 0: a server killed under
//! concurrent load costs no idempotent request and comes back through its
//! health check; an idempotent request that got no answer (reset, or past
//! its response timeout) goes once to another server, a POST never; the retry budget caps what a failing
//! group receives; a server name's addresses follow a real (test) DNS
//! server's answers, with state carried and the last set kept when a
//! lookup fails.

mod common;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::dns::{Answer, Dns};
use common::load::{Load, Tally};
use common::*;
use tokio::task::AbortHandle;

fn config(servers: &str, extra: &str) -> String {
    format!(
        "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nservers = [{servers}]\n{extra}\n"
    )
}

/// A server answering its name after `delay` (and 200 on /healthz), that
/// can be killed: its listener and every connection closed at once, the
/// requests on them unanswered.
struct Killable {
    addr: SocketAddr,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Killable {
    async fn start(addr: SocketAddr, name: &'static str, delay: Duration) -> Killable {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let tasks: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let held = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let service = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| async move {
                        if req.uri().path() != "/healthz" {
                            tokio::time::sleep(delay).await;
                        }
                        Ok::<_, std::convert::Infallible>(text(200, name))
                    },
                );
                let conn = tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
                held.lock().expect("lock").push(conn.abort_handle());
            }
        });
        tasks.lock().expect("lock").push(accept.abort_handle());
        Killable { addr, tasks }
    }

    fn kill(&self) {
        for t in self.tasks.lock().expect("lock").drain(..) {
            t.abort();
        }
    }
}

async fn status_of(weir: &Weir, method: http::Method) -> (u16, String) {
    let resp = send(method, &weir.url("web", "/"), &[], Bytes::new()).await;
    let (status, _, body) = split(resp).await;
    (status.as_u16(), body)
}

#[tokio::test]
async fn a_server_killed_under_load_costs_no_get_and_comes_back_through_its_check() {
    let a = Killable::start(
        "127.0.0.1:0".parse().expect("addr"),
        "a",
        Duration::from_millis(2),
    )
    .await;
    let b = Killable::start(
        "127.0.0.1:0".parse().expect("addr"),
        "b",
        Duration::from_millis(2),
    )
    .await;
    let c = Killable::start(
        "127.0.0.1:0".parse().expect("addr"),
        "c",
        Duration::from_millis(2),
    )
    .await;
    let weir = Weir::start(&config(
        &format!("\"http://{}\", \"http://{}\", \"http://{}\"", a.addr, b.addr, c.addr),
        "eject_after = 2\n\
         [route.health_check]\npath = \"/healthz\"\ninterval = \"100ms\"\ntimeout = \"100ms\"\nfall = 1\nrise = 1\n",
    ))
    .await;
    let answered: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let tally = Tally::default();
    let mut load = Load::default();
    let url = weir.url("web", "/");
    for _ in 0..8 {
        let (url, answered) = (url.clone(), answered.clone());
        load.spawn(&tally, move || {
            let (url, answered) = (url.clone(), answered.clone());
            async move {
                let (status, _, body) = get_with(&url, &[]).await;
                if status != 200 {
                    return Err(format!("{status}: {body}"));
                }
                *answered.lock().expect("lock").entry(body).or_default() += 1;
                Ok(())
            }
        });
    }
    let served = |name: &'static str| {
        let answered = answered.clone();
        move || {
            answered
                .lock()
                .expect("lock")
                .get(name)
                .copied()
                .unwrap_or(0)
        }
    };
    let b_served = served("b");
    assert!(
        eventually(Duration::from_secs(5), || b_served() >= 50).await,
        "b takes its share"
    );
    b.kill();
    let b_label = format!(
        "weir_upstream_server_up{{route=\"main\",server=\"http://{}/\"}}",
        b.addr
    );
    assert!(
        eventually_metric(&weir, &b_label, 0).await,
        "b is taken out"
    );
    let (before, ok_then) = (b_served(), tally.ok());
    assert!(
        eventually(Duration::from_secs(5), || tally.ok() >= ok_then + 200).await,
        "the others carry the load"
    );
    assert_eq!(b_served(), before, "nothing answered by a dead server");
    let retried = metrics(&weir).await;
    assert!(
        retried.contains("weir_upstream_retries_total{route=\"main\",reason="),
        "the requests on b went elsewhere:\n{retried}"
    );

    let b = Killable::start(b.addr, "b", Duration::from_millis(2)).await;
    assert!(
        eventually_metric(&weir, &b_label, 1).await,
        "its check brings it back"
    );
    let again = b_served();
    assert!(
        eventually(Duration::from_secs(5), || b_served() >= again + 50).await,
        "b takes its share again"
    );
    load.stop().await;
    tally.assert_no_failures();
    drop((a, b, c));
}

#[tokio::test]
async fn a_get_that_got_no_answer_goes_once_to_another_server_a_post_never() {
    let (reset, seen) = resetting().await;
    let live = Killable::start("127.0.0.1:0".parse().expect("addr"), "live", Duration::ZERO).await;
    let weir = Weir::start(&config(
        &format!("\"http://{reset}\", \"http://{}\"", live.addr),
        "balance = \"round_robin\"\neject_after = 1000",
    ))
    .await;
    for _ in 0..4 {
        assert_eq!(
            status_of(&weir, http::Method::GET).await,
            (200, "live".into())
        );
    }
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "every other GET reached it once"
    );
    assert_eq!(
        metric(
            &weir,
            "weir_upstream_retries_total{route=\"main\",reason=\"no_response\"}"
        )
        .await,
        Some(2)
    );
    let mut posts = Vec::new();
    for _ in 0..4 {
        posts.push(status_of(&weir, http::Method::POST).await.0);
    }
    posts.sort_unstable();
    assert_eq!(
        posts,
        [200, 200, 502, 502],
        "a POST that reached a server is answered 502"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 4, "each once, none repeated");

    // Three servers that all fail: a GET is tried twice, no more.
    let (other, seen_other) = resetting().await;
    let (third, seen_third) = resetting().await;
    let weir = Weir::start(&config(
        &format!("\"http://{reset}\", \"http://{other}\", \"http://{third}\""),
        "eject_after = 1000\nretry_budget_min_per_second = 1000",
    ))
    .await;
    let before = seen.load(Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(status_of(&weir, http::Method::GET).await.0, 502);
    }
    let reached = seen.load(Ordering::SeqCst) - before
        + seen_other.load(Ordering::SeqCst)
        + seen_third.load(Ordering::SeqCst);
    assert_eq!(reached, 6, "each GET reached two servers");
}

#[tokio::test]
async fn the_retry_budget_caps_what_a_failing_group_receives() {
    let (x, seen_x) = resetting().await;
    let (y, seen_y) = resetting().await;
    let weir = Weir::start(&config(
        &format!("\"http://{x}\", \"http://{y}\""),
        "eject_after = 1000\nretry_budget_percent = 20\nretry_budget_min_per_second = 0\nretry_budget_window = \"1m\"",
    ))
    .await;
    let requests = 100;
    let mut loads = Vec::new();
    for _ in 0..4 {
        let url = weir.url("web", "/");
        loads.push(tokio::spawn(async move {
            for _ in 0..requests / 4 {
                let (status, _, _) = get_with(&url, &[]).await;
                assert_eq!(status, 502);
            }
        }));
    }
    for l in loads {
        l.await.expect("load");
    }
    let reached = seen_x.load(Ordering::SeqCst) + seen_y.load(Ordering::SeqCst);
    let retries = metric(
        &weir,
        "weir_upstream_retries_total{route=\"main\",reason=\"no_response\"}",
    )
    .await
    .unwrap_or(0) as usize;
    let refused = metric(
        &weir,
        "weir_upstream_retry_budget_exhausted_total{route=\"main\"}",
    )
    .await
    .unwrap_or(0) as usize;
    assert_eq!(
        reached,
        requests + retries,
        "each request once, plus the retries"
    );
    assert!(retries <= requests / 5, "at most a fifth more: {retries}");
    assert!(retries >= requests / 5 - 2, "the budget is used: {retries}");
    assert_eq!(
        refused,
        requests - retries,
        "every retry refused is counted"
    );
}

#[tokio::test]
async fn servers_follow_the_names_addresses_keeping_state_and_the_last_set_on_failure() {
    // One port on several loopback addresses: what the name resolves to
    // picks the servers.
    let one = Killable::start("127.0.0.1:0".parse().expect("addr"), "1", Duration::ZERO).await;
    let port = one.addr.port();
    let at = |last: u8| SocketAddr::from((Ipv4Addr::new(127, 0, 0, last), port));
    let two = Killable::start(at(2), "2", Duration::ZERO).await;
    let on_slow = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let arrived = on_slow.clone();
    let slow = upstream_at(at(4), move |_req| {
        arrived.fetch_add(1, Ordering::SeqCst);
        async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            text(200, "4")
        }
    })
    .await;
    let dns = Dns::start(Answer::Addrs(vec![
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(127, 0, 0, 3),
        Ipv4Addr::new(127, 0, 0, 4),
    ]))
    .await;
    let name = format!("http://app.weir.test:{port}");
    let toml = config(
        &format!("\"{name}\""),
        "balance = \"round_robin\"\neject_after = 1\neject_base = \"1m\"",
    )
    .replace(
        "[[listener]]",
        &format!(
            "[upstream]\nnameservers = [\"{}\"]\nresolve_interval = \"50ms\"\n[[listener]]",
            dns.addr
        ),
    );
    let weir = Weir::start(&toml).await;
    let label = |last: u8| format!("{name}/ (127.0.0.{last})");
    let picks = |last: u8| {
        format!(
            "weir_upstream_server_picks_total{{route=\"main\",server=\"{}\"}}",
            label(last)
        )
    };
    let up3 = format!(
        "weir_upstream_server_up{{route=\"main\",server=\"{}\"}}",
        label(3)
    );
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            metric(&weir, &picks(1)).await.is_some()
        })
        .await,
        "the name's addresses are the servers:\n{}",
        metrics(&weir).await
    );
    // 127.0.0.3 has nothing listening: refused once, out for a minute.
    let mut got: HashMap<String, usize> = HashMap::new();
    for _ in 0..6 {
        let (status, _, body) = get_with(&weir.url("web", "/fast"), &[]).await;
        assert_eq!(status, 200);
        *got.entry(body).or_default() += 1;
    }
    assert_eq!(metric(&weir, &up3).await, Some(0), "{got:?}");
    assert_eq!(metric(&weir, &picks(3)).await, Some(1));
    // A request on the slow server when it leaves the answer still ends.
    let before = on_slow.load(Ordering::SeqCst);
    let held = tokio::spawn({
        let url = weir.url("web", "/slow");
        async move {
            // Round robin over the two servers in: the slow one within two.
            for _ in 0..2 {
                let (status, _, body) = get_with(&url, &[]).await;
                assert_eq!(status, 200);
                if body == "4" {
                    return true;
                }
            }
            false
        }
    });
    assert!(
        eventually(Duration::from_secs(5), || on_slow.load(Ordering::SeqCst)
            > before)
        .await,
        "a request reached the slow server"
    );
    dns.set(Answer::Addrs(vec![
        Ipv4Addr::new(127, 0, 0, 2),
        Ipv4Addr::new(127, 0, 0, 3),
    ]));
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            metric(&weir, &picks(2)).await.is_some()
        })
        .await,
        "a new address joins"
    );
    let up4 = format!(
        "weir_upstream_server_up{{route=\"main\",server=\"{}\"}}",
        label(4)
    );
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            metric(&weir, &picks(1)).await.is_none() && metric(&weir, &up4).await.is_none()
        })
        .await,
        "the series of the addresses that left the answer go:\n{}",
        metrics(&weir).await
    );
    assert!(
        held.await.expect("held"),
        "the request on a server that left was answered"
    );
    let mut got: HashMap<String, usize> = HashMap::new();
    for _ in 0..10 {
        let (status, _, body) = get_with(&weir.url("web", "/"), &[]).await;
        assert_eq!(status, 200);
        *got.entry(body).or_default() += 1;
    }
    assert_eq!(
        got.get("2"),
        Some(&10),
        "only the servers of the answer: {got:?}"
    );
    assert_eq!(
        metric(&weir, &picks(3)).await,
        Some(1),
        "127.0.0.3 stayed and stays out: its state was carried over"
    );

    dns.set(Answer::ServFail);
    let failures = "weir_upstream_dns_failures_total{route=\"main\",host=\"app.weir.test\"}";
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            metric(&weir, failures).await.is_some_and(|n| n >= 2)
        })
        .await,
        "the lookups fail"
    );
    for _ in 0..5 {
        let (status, _, body) = get_with(&weir.url("web", "/"), &[]).await;
        assert_eq!(
            (status.as_u16(), body.as_str()),
            (200, "2"),
            "the last set keeps serving"
        );
    }
    drop((one, two, slow));
}

#[tokio::test]
async fn a_get_past_its_response_timeout_goes_to_another_server_with_its_own() {
    // A server that reads requests and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let silent = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let live = Killable::start(
        "127.0.0.1:0".parse().expect("addr"),
        "live",
        Duration::from_millis(100),
    )
    .await;
    let weir = Weir::start(&config(
        &format!("\"http://{silent}\", \"http://{}\"", live.addr),
        "balance = \"round_robin\"\neject_after = 1000\nresponse_timeout = \"300ms\"",
    ))
    .await;
    for _ in 0..2 {
        assert_eq!(
            status_of(&weir, http::Method::GET).await,
            (200, "live".into()),
            "the retry has its own 300 ms, more than the 100 ms it needs"
        );
    }
    let posts = [
        status_of(&weir, http::Method::POST).await.0,
        status_of(&weir, http::Method::POST).await.0,
    ];
    assert!(posts.contains(&504), "a POST past its timeout: {posts:?}");
    assert_eq!(
        metric(
            &weir,
            "weir_upstream_retries_total{route=\"main\",reason=\"no_response\"}"
        )
        .await,
        Some(1)
    );
}
