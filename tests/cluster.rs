//! A fleet of weirs sharing limits through one real Redis (`[cluster]`):
//! three weir processes, one `redis-server` started here on a free port,
//! real upstreams on port 0. A client's rate and a token's concurrency
//! hold for the fleet; a Redis that goes silent or away costs no request
//! more than the bound, and each failure mode does what the docs say; a
//! killed weir's slots come back within the lease TTL; one instance's 529
//! with a retry hint cools the upstream for the fleet.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::llm::{messages_body, mock, success};
use common::redis::Redis;
use tokio::time::Instant;

use common::fleet::{
    Member, TOKEN, burst, fail_closed_llm_config, fleet, join, kill_and_time, kill_redis,
    llm_config, ok_upstream, proxy_config, refused_without_redis, restart_redis, timed_get,
};

/// A client limited to 50 requests a second gets 50 a second from the
/// fleet, not from each instance. The load is paced (about 300 attempts a
/// second in all, six times the limit, from six loops over the three
/// instances) so a loaded two-core machine keeps up; the first second
/// spends the burst and is not counted; passes are counted over the next
/// four seconds by when each request was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_limit_holds_across_three_instances() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = ok_upstream().await;
    let config = proxy_config(
        up,
        "rate_limit_per_second = 50\nrate_limit_burst = 10",
        // The longest bound: this test is about the shared limit, and a
        // decision by the failure mode would not count toward it.
        "timeout = \"1s\"",
    );
    let fleet = fleet(3, &redis, &config).await;

    let start = Instant::now();
    let end = start + Duration::from_secs(5);
    let mut loops = Vec::new();
    for m in &fleet {
        for _ in 0..2 {
            let url = m.url("/");
            loops.push(tokio::spawn(async move {
                let mut sent = Vec::new();
                while Instant::now() < end {
                    let at = Instant::now();
                    let (status, _) = timed_get(&url).await;
                    sent.push((at, status));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                sent
            }));
        }
    }
    let mut passed = 0;
    let mut attempts = 0;
    let window = (start + Duration::from_secs(1))..end;
    for l in loops {
        for (at, status) in l.await.expect("load loop") {
            assert!(status == 200 || status == 429, "status {status}");
            if window.contains(&at) {
                attempts += 1;
                passed += usize::from(status == 200);
            }
        }
    }
    // 4 s at 50/s.
    assert!(
        (190..=210).contains(&passed),
        "{passed} of {attempts} passed in 4 s; the fleet's limit is 200 ± 5 %"
    );
    assert!(
        attempts > 600,
        "the limit was not pressed: {attempts} attempts"
    );
    for m in &fleet {
        assert_eq!(
            m.metric("weir_cluster_decisions_total{mode=\"fail_open\"}")
                .await,
            Some(0),
            "every decision was Redis's"
        );
        assert!(
            m.metric("weir_cluster_decisions_total{mode=\"redis\"}")
                .await
                > Some(100)
        );
    }
}

/// A token's concurrency of 8 holds for the fleet: 8 streams held across
/// three instances, the 9th refused on each; one ends and one more fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_concurrency_of_8_holds_fleet_wide() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let slow = mock(|seen| success(seen, &["a"; 40], Duration::from_millis(500))).await;
    let config = llm_config(&slow.url(), "max_concurrent_per_token = 8", "");
    let fleet = fleet(3, &redis, &config).await;
    let body = messages_body("m", true);
    let auth = [("x-api-key", TOKEN)];

    let mut held = Vec::new();
    for i in 0..8 {
        let m = &fleet[i % 3];
        let resp = common::post_open(&m.url("/v1/messages"), body.clone(), &auth).await;
        assert_eq!(resp.status(), 200, "stream {i} is served");
        held.push(resp);
    }
    assert_eq!(
        redis.int(
            "EVAL_RO \"return redis.call('ZCARD', redis.call('KEYS', 'weir:cc:llm:*')[1])\" 0"
        ),
        8,
        "eight leases in Redis"
    );
    for m in &fleet {
        let (status, headers, text) =
            common::post_json(&m.url("/v1/messages"), body.clone(), &auth).await;
        assert_eq!(status, 429, "the 9th is refused on {}: {text}", m.web);
        assert_eq!(headers["retry-after"], "1");
        assert!(text.contains("rate_limit_error"), "{text}");
    }
    // One ends (the client leaves): its slot is given back.
    drop(held.pop());
    let freed_by = Instant::now() + Duration::from_secs(3);
    loop {
        let resp = common::post_open(&fleet[2].url("/v1/messages"), body.clone(), &auth).await;
        if resp.status() == 200 {
            held.push(resp);
            break;
        }
        assert!(
            Instant::now() < freed_by,
            "the freed slot was not given back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for m in &fleet {
        let (status, _, _) = common::post_json(&m.url("/v1/messages"), body.clone(), &auth).await;
        assert_eq!(status, 429, "eight in flight again");
    }
}

/// Redis silent (SIGSTOP), then gone (SIGKILL), then back on the same
/// port, under `fail_open`: no request waits much past the bound; while
/// Redis is away each instance keeps 1/3 of the limit; one log line per
/// change; the fleet's limit is back once Redis is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_keeps_a_share_and_no_request_waits_past_the_bound() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = ok_upstream().await;
    // A rate too slow to matter during a burst: the burst is the limit.
    let config = proxy_config(
        up,
        "rate_limit_per_second = 1\nrate_limit_burst = 30",
        "timeout = \"50ms\"\non_failure = \"fail_open\"",
    );
    let mut fleet = fleet(3, &redis, &config).await;
    let bound = Duration::from_millis(50);
    // A margin for a loaded machine; a request that waited on Redis
    // would wait until Redis came back.
    let margin = Duration::from_millis(450);

    redis.pause();
    let (passed, limited, longest) = burst(&fleet[0].url("/"), 20).await;
    assert!(longest < bound + margin, "a request waited {longest:?}");
    // 10: one instance's share of a burst of 30 in a fleet of 3 (one more
    // if the share's rate, 1 per 3 s, refilled one meanwhile).
    assert!(
        (10..=11).contains(&passed) && passed + limited == 20,
        "{passed} passed, {limited} limited"
    );
    assert_eq!(fleet[0].metric("weir_cluster_redis_up").await, Some(0));
    assert!(
        fleet[0]
            .metric("weir_cluster_decisions_total{mode=\"fail_open\"}")
            .await
            >= Some(20)
    );

    redis.kill();
    for m in &fleet[1..] {
        let (passed, _, longest) = burst(&m.url("/"), 12).await;
        assert!(longest < bound + margin, "a request waited {longest:?}");
        assert!(
            (10..=11).contains(&passed),
            "its share while Redis is gone: {passed}"
        );
    }

    restart_redis(&mut redis, &fleet).await;
    // Shared again: one instance gets the fleet's whole (fresh) burst.
    let (passed, _, _) = burst(&fleet[0].url("/"), 40).await;
    // 30 (the rate, 1/s, may add one or two while the burst is sent).
    assert!(
        (30..=32).contains(&passed),
        "the fleet's burst from one instance: {passed}"
    );
    let (passed, _, _) = burst(&fleet[1].url("/"), 5).await;
    assert!(passed <= 1, "and none left for the others: {passed}");

    for m in &mut fleet {
        assert_eq!(
            m.lines("cluster: Redis does not answer"),
            1,
            "one line down"
        );
        assert_eq!(
            m.lines("cluster: Redis answers"),
            2,
            "up at start, up again"
        );
    }
}

/// `fail_closed`: while Redis is gone a request under a shared limit is
/// answered at once with 503 and Retry-After, in the route's own error
/// shape; requests pass again once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_refuses_in_the_routes_shape_until_redis_returns() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = mock(|seen| success(seen, &["hi"], Duration::ZERO)).await;
    let config = fail_closed_llm_config(&up.url());
    let fleet = fleet(2, &redis, &config).await;
    let body = messages_body("m", false);
    assert_eq!(fleet[0].post(body.clone()).await.0, 200);

    redis.kill();
    for m in &fleet {
        refused_without_redis(m, body.clone()).await;
        assert!(
            m.metric("weir_cluster_decisions_total{mode=\"fail_closed\"}")
                .await
                >= Some(1)
        );
    }

    restart_redis(&mut redis, &fleet).await;
    assert_eq!(
        fleet[1].post(body).await.0,
        200,
        "requests pass again with Redis back"
    );
}

/// A weir killed (SIGKILL) while holding every slot of a token: its
/// leases are not renewed, so the slots come back within the lease TTL
/// (not at once: the killed weir released nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instance_gives_its_slots_back_within_the_ttl() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let slow = mock(|seen| success(seen, &["a"; 40], Duration::from_millis(500))).await;
    let config = llm_config(
        &slow.url(),
        "max_concurrent_per_token = 4",
        "lease_ttl = \"2s\"",
    );
    let fleet = fleet(2, &redis, &config).await;
    let body = messages_body("m", true);
    let auth = [("x-api-key", TOKEN)];
    let mut held = Vec::new();
    for _ in 0..4 {
        let resp = common::post_open(&fleet[0].url("/v1/messages"), body.clone(), &auth).await;
        assert_eq!(resp.status(), 200);
        held.push(resp);
    }
    let (status, _, _) =
        common::post_json(&fleet[1].url("/v1/messages"), body.clone(), &auth).await;
    assert_eq!(status, 429, "every slot is held by the first instance");

    let survivor = fleet[1].url("/v1/messages");
    let back_after = kill_and_time(&fleet[0], Duration::from_secs(6), || async {
        common::post_open(&survivor, body.clone(), &auth)
            .await
            .status()
            == 200
    })
    .await
    .expect("the slots came back");
    assert!(
        back_after <= Duration::from_millis(2000 + 1000),
        "back after {back_after:?}, the TTL is 2 s"
    );
    assert!(
        back_after >= Duration::from_millis(300),
        "back after {back_after:?}: the slots were never held in Redis"
    );
    drop(held);
}

/// The scripts, through weir's own cluster API against real Redis: the
/// shared GCRA passes and refuses exactly as the local limiter does, with
/// the same Retry-After; a lease is refused at the limit, given back when
/// dropped, renewed past its TTL while held, and written again after
/// Redis lost it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripts_answer_as_the_local_limiter_and_leases_renew() {
    use weir::testing::cluster::{Ask, Decision, Gcra};
    use weir::testing::rate::{Client, RateLimit};
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let (cluster, _metrics) = redis.cluster(Duration::from_secs(1)).await;

    for (i, (per_second, burst)) in [(1, 3), (2, 1), (1, 5)].into_iter().enumerate() {
        let local = RateLimit::new(per_second, burst, 100);
        let client = Client::Token(i);
        let key = format!("t:rl:r:{i}");
        let gcra = Gcra::new(per_second, burst);
        for n in 0..=burst {
            let want = local.check(client);
            let ask = Ask {
                rate: Some((&key, gcra)),
                lease: None,
                budget: None,
                key_rate: None,
            };
            let got = match cluster.decide(ask).await {
                Decision::Admitted(None) => Ok(()),
                Decision::Limited(wait) => Err(local.limited(client, wait).retry_after),
                _ => panic!("not a rate answer"),
            };
            assert_eq!(
                got,
                want.map_err(|l| l.retry_after),
                "request {n} at {per_second}/s burst {burst}"
            );
        }
    }

    // A key of the wrong type (another program's, under the prefix):
    // Redis refuses the script, this decision is the failure mode's, and
    // Redis is not taken for down.
    assert_eq!(redis.command("SET t:cc:r:other x").as_deref(), Some("+OK"));
    let other: Arc<str> = "t:cc:r:other".into();
    let ask = Ask {
        rate: None,
        lease: Some((&other, 2)),
        budget: None,
        key_rate: None,
    };
    assert!(matches!(
        cluster.decide(ask).await,
        Decision::Open { instances: 1 }
    ));
    assert!(cluster.is_up(), "a refused script is not a lost Redis");

    let key: Arc<str> = "t:cc:r:tok".into();
    let lease = |limit| Ask {
        rate: None,
        lease: Some((&key, limit)),
        budget: None,
        key_rate: None,
    };
    let Decision::Admitted(Some(one)) = cluster.decide(lease(2)).await else {
        panic!("first slot")
    };
    let Decision::Admitted(Some(_two)) = cluster.decide(lease(2)).await else {
        panic!("second slot")
    };
    assert!(matches!(cluster.decide(lease(2)).await, Decision::Full));
    drop(one);
    let given_back = common::eventually(Duration::from_secs(2), || {
        redis.int("ZCARD t:cc:r:tok") == 1
    })
    .await;
    assert!(given_back, "a dropped lease is removed from Redis");
    // Held three TTLs: renewed, never expired.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(redis.int("ZCARD t:cc:r:tok"), 1, "a held lease is renewed");
    // Redis restarted empty: the held lease is written again.
    redis.restart();
    let rewritten = common::eventually(Duration::from_secs(5), || {
        redis.command("ZCARD t:cc:r:tok").as_deref() == Some(":1")
    })
    .await;
    assert!(
        rewritten,
        "a held lease is written again after Redis lost it"
    );
}

/// A mock provider that answers 529 `overloaded_error` with
/// `retry-after: <hint>` to the next request after each [`Overloading::arm`],
/// and 200 otherwise, counting every request it gets.
struct Overloading {
    mock: common::llm::MockLlm,
    armed: Arc<std::sync::atomic::AtomicUsize>,
}

impl Overloading {
    async fn start(hint: &'static str) -> Overloading {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let armed = Arc::new(AtomicUsize::new(0));
        let shots = armed.clone();
        let mock = mock(move |seen| {
            let fire = shots
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fire {
                common::llm::error(seen, 529, "overloaded_error", "busy")
                    .with_header("retry-after", hint)
            } else {
                success(seen, &["ok"], Duration::ZERO)
            }
        })
        .await;
        Overloading { mock, armed }
    }

    /// The next request is answered 529 with the hint.
    fn arm(&self) {
        self.armed.store(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Requests it has had.
    fn requests(&self) -> usize {
        self.mock.seen().len()
    }
}

/// One request to `m`'s LLM route: its status and how long it took.
async fn ask(m: &Member) -> (u16, Duration) {
    let started = Instant::now();
    let (status, _, _) = m.post(messages_body("m", false)).await;
    (status, started.elapsed())
}

/// Wait until `m` has received `n` holds from the fleet by `via`.
async fn received(m: &Member, via: &str, n: u64, within: Duration) -> bool {
    let name = format!("weir_cluster_holds_received_total{{via=\"{via}\"}}");
    m.metric_becomes(&name, n, within).await
}

/// One instance's 529 with `retry-after: 2` cools the upstream for all
/// three: the other two learn it within a moment, answer at once (503,
/// the member is cooling) and send the upstream nothing until the hint
/// has passed; then each sends to it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instances_529_cools_the_upstream_for_the_fleet() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Overloading::start("2").await;
    let fleet = fleet(3, &redis, &llm_config(&up.mock.url(), "", "")).await;

    up.arm();
    let (status, _) = ask(&fleet[0]).await;
    let overloaded_at = Instant::now();
    assert_eq!(status, 529, "the provider's answer is relayed");
    assert_eq!(up.requests(), 1);
    for m in &fleet[1..] {
        assert!(
            received(m, "announce", 1, Duration::from_secs(1)).await,
            "{} did not hear of the hold",
            m.web
        );
    }
    let heard_after = overloaded_at.elapsed();
    eprintln!("the others heard of the hold {heard_after:?} after the 529 reached the client");
    assert!(
        heard_after < Duration::from_millis(500),
        "announced in {heard_after:?}"
    );
    assert_eq!(
        fleet[0]
            .metric("weir_cluster_holds_published_total{result=\"sent\"}")
            .await,
        Some(1)
    );
    // No echo: the learner skips its own announcement, and the others do
    // not send on what they heard.
    assert_eq!(
        fleet[0]
            .metric("weir_cluster_holds_received_total{via=\"announce\"}")
            .await,
        Some(0)
    );
    for m in &fleet[1..] {
        assert_eq!(
            m.metric("weir_cluster_holds_published_total{result=\"sent\"}")
                .await,
            Some(0)
        );
    }
    let left =
        redis.int("EVAL_RO \"return redis.call('PTTL', redis.call('KEYS', 'weir:hold:*')[1])\" 0");
    assert!(
        left > 0 && left <= 2000 - heard_after.as_millis() as i64 + 50,
        "the hold's key expires with the hold: {left} ms left, heard after {heard_after:?}"
    );

    // Until the hint has passed every instance answers at once and the
    // upstream hears nothing.
    let mut asked = 0;
    while overloaded_at.elapsed() < Duration::from_millis(1700) {
        for m in &fleet {
            let (status, took) = ask(m).await;
            if overloaded_at.elapsed() >= Duration::from_millis(1900) {
                break;
            }
            assert_eq!(status, 503, "{} answers that the member is cooling", m.web);
            assert!(
                took < Duration::from_millis(500),
                "answered at once: {took:?}"
            );
            asked += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(asked >= 6, "only {asked} requests while cooling");
    assert_eq!(
        up.requests(),
        1,
        "no instance sent the cooling member anything"
    );

    // The hint has passed: every instance sends to it again.
    for m in &fleet {
        let before = up.requests();
        let back =
            common::eventually_async(Duration::from_secs(3), || async { ask(m).await.0 == 200 })
                .await;
        assert!(back, "{} sends again after the hint", m.web);
        assert!(up.requests() > before);
    }
    assert!(
        overloaded_at.elapsed() >= Duration::from_secs(2),
        "not before the hint"
    );
}

/// An instance that starts while a hold is on reads it from its key: it
/// sends the member nothing until the hint has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_during_a_hold_reads_it_from_its_key() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Overloading::start("6").await;
    let config = llm_config(&up.mock.url(), "", "");
    let fleet = fleet(1, &redis, &config).await;
    up.arm();
    assert_eq!(ask(&fleet[0]).await.0, 529);
    let overloaded_at = Instant::now();

    // It listens once its first connection to Redis has ended: the holds
    // are read by then.
    let late = join(&redis, &config);
    let (status, took) = ask(&late).await;
    assert!(
        overloaded_at.elapsed() < Duration::from_secs(6),
        "the start took longer than the hint"
    );
    assert_eq!(status, 503, "the late instance knows the member is cooling");
    assert!(took < Duration::from_millis(500));
    assert_eq!(up.requests(), 1, "and sent it nothing");
    assert_eq!(
        late.metric("weir_cluster_holds_received_total{via=\"key\"}")
            .await,
        Some(1),
        "the late instance read the hold from its key"
    );
    assert_eq!(
        late.metric("weir_cluster_holds_received_total{via=\"announce\"}")
            .await,
        Some(0),
        "it was not announced to it"
    );
}

/// Redis killed: a hold stays on the instance that learnt it (the others
/// still send to the member) and no request waits on Redis. Redis back:
/// the subscription is renewed, and a new hold reaches the others again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_stay_local_without_redis_and_are_shared_again_when_it_returns() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = Overloading::start("3").await;
    let config = llm_config(&up.mock.url(), "", "timeout = \"50ms\"");
    let fleet = fleet(3, &redis, &config).await;

    kill_redis(&mut redis, &fleet).await;
    up.arm();
    let (status, took) = ask(&fleet[0]).await;
    assert_eq!(status, 529);
    assert!(took < Duration::from_millis(500), "waited {took:?}");
    let (status, took) = ask(&fleet[0]).await;
    assert_eq!(status, 503, "held where it was learnt");
    assert!(took < Duration::from_millis(500), "waited {took:?}");
    assert_eq!(
        fleet[0]
            .metric("weir_cluster_holds_published_total{result=\"redis_down\"}")
            .await,
        Some(1)
    );
    for m in &fleet[1..] {
        let (status, took) = ask(m).await;
        assert_eq!(status, 200, "{}: the hold is the other instance's", m.web);
        assert!(took < Duration::from_millis(500), "waited {took:?}");
    }
    assert_eq!(up.requests(), 3);

    restart_redis(&mut redis, &fleet).await;
    up.arm();
    assert_eq!(ask(&fleet[1]).await.0, 529);
    for m in [&fleet[0], &fleet[2]] {
        assert!(
            received(m, "announce", 1, Duration::from_secs(1)).await,
            "{} did not hear of the hold after the restart",
            m.web
        );
    }
    let (status, _) = ask(&fleet[2]).await;
    assert_eq!(status, 503, "the hold reached the third instance");
    assert_eq!(up.requests(), 4, "which sent the member nothing");
}

/// A Redis user without the holds' channel (Redis 7 gives new users no
/// channels): the subscription is refused, logged, and shared limits stay
/// up; a hold still reaches an instance that connects later, by its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_subscription_keeps_redis_up_and_holds_in_their_keys() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    assert_eq!(
        redis
            .command("ACL SETUSER default resetchannels")
            .as_deref(),
        Some("+OK")
    );
    let up = Overloading::start("6").await;
    let config = llm_config(&up.mock.url(), "", "");
    let mut fleet = fleet(1, &redis, &config).await;
    let connected = fleet[0]
        .metric_becomes("weir_cluster_redis_up", 1, Duration::from_secs(5))
        .await;
    assert!(connected, "a refused subscription does not keep Redis down");
    up.arm();
    assert_eq!(ask(&fleet[0]).await.0, 529);

    let mut late = join(&redis, &config);
    assert_eq!(late.metric("weir_cluster_redis_up").await, Some(1));
    assert_eq!(ask(&late).await.0, 503, "the hold was read from its key");
    assert_eq!(up.requests(), 1);
    for m in [&mut fleet[0], &mut late] {
        assert_eq!(m.metric("weir_cluster_redis_up").await, Some(1));
        assert_eq!(m.lines("Redis refused the subscription to holds"), 1);
    }
}

/// A route whose limits are its own (`limit_scope = "local"`) keeps its
/// holds to itself too: the other instance still sends to the member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_route_keeps_its_holds() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Overloading::start("6").await;
    let config = llm_config(&up.mock.url(), "limit_scope = \"local\"", "");
    let fleet = fleet(2, &redis, &config).await;
    up.arm();
    assert_eq!(ask(&fleet[0]).await.0, 529);
    assert_eq!(ask(&fleet[0]).await.0, 503, "held where it was learnt");
    assert_eq!(ask(&fleet[1]).await.0, 200, "and only there");
    assert_eq!(up.requests(), 2);
    assert_eq!(
        redis.int("EVAL_RO \"return #redis.call('KEYS', 'weir:hold*')\" 0"),
        0,
        "nothing written to Redis"
    );
}

/// The subscriber connection cut alone (Redis stays up): the instance
/// notices, reconnects under its back-off and subscribes again, so the
/// next hold reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_subscription_is_renewed() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Overloading::start("6").await;
    let config = llm_config(&up.mock.url(), "", "");
    let mut fleet = fleet(2, &redis, &config).await;
    assert_eq!(
        redis.command("CLIENT KILL TYPE pubsub").as_deref(),
        Some(":2"),
        "each instance has its subscriber connection"
    );
    for m in &mut fleet {
        let reconnected = common::eventually(Duration::from_secs(5), || {
            m.lines("the subscription to holds ended") == 1
                && m.lines("cluster: Redis answers") == 2
        })
        .await;
        assert!(
            reconnected,
            "{} noticed the cut once and reconnected",
            m.web
        );
    }
    up.arm();
    assert_eq!(ask(&fleet[0]).await.0, 529);
    assert!(
        received(&fleet[1], "announce", 1, Duration::from_secs(2)).await,
        "the hold reached the other instance after its subscription was cut"
    );
    assert_eq!(ask(&fleet[1]).await.0, 503);
    assert_eq!(up.requests(), 1);
}
