//! Client token budgets kept by a fleet of weirs in one real Redis
//! (`[cluster]`, `limit_scope = "cluster"`): real weir processes, one
//! `redis-server` started here on a free port, and one upstream on port 0
//! that answers every request with the same usage (10 input + 5 output
//! tokens) and holds requests for the model `held` open until the test
//! lets them go.
//!
//! What is proved: under 100 concurrent requests across three instances
//! the budget's reservations are never more than it, and what is settled
//! is exactly what was served, with nothing left reserved; a refusal is a
//! 429 in the route's shape with the window's Retry-After and no upstream
//! contact; a killed instance's reservations come back within the TTL;
//! with Redis gone each mode does what docs/operations.md says, and the
//! budget is the fleet's again once Redis is back. The scripts' own rules
//! (window rollover, Retry-After values, the sweep of expired
//! reservations) are checked through weir's cluster API at the end.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::fleet::{
    Member, TOKEN, fleet, kill_and_time, kill_redis, llm_config, refused_without_redis,
    restart_redis,
};
use common::held::{USED, Upstream};
use common::redis::Redis;
use serde_json::{Value, json};

/// A request for `model` (`held` or `quick`: the same size, so the same
/// reservation).
fn body(model: &str) -> String {
    json!({
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string()
}

/// What one request reserves: its bytes over 3, plus its `max_tokens`.
fn reservation() -> u64 {
    (body("held").len() as u64).div_ceil(3) + 64
}

const AUTH: [(&str, &str); 1] = [("x-api-key", TOKEN)];

async fn send(m: &Member, model: &str) -> (u16, http::HeaderMap, String) {
    m.post(body(model)).await
}

/// A request that the upstream holds: sent in the background.
fn send_held(m: &Member) -> tokio::task::JoinHandle<(u16, http::HeaderMap, String)> {
    let url = m.url("/v1/messages");
    tokio::spawn(async move {
        let (s, h, text) = common::post_json(&url, body("held"), &AUTH).await;
        (s.as_u16(), h, text)
    })
}

/// A fleet whose token has `budget` (route keys), over `up`, with
/// `cluster` keys.
async fn budget_fleet(
    n: usize,
    redis: &Redis,
    up: &Upstream,
    budget: &str,
    cluster: &str,
) -> Vec<Member> {
    fleet(n, redis, &llm_config(&up.url, budget, cluster)).await
}

/// An integer a Lua expression over the token's budget keys gives (`B`:
/// its base key; 0 when it has none yet).
fn budget_int(redis: &Redis, lua: &str) -> i64 {
    let script = format!(
        "local k = redis.call('KEYS', 'weir:bg:llm:*:r')[1] or redis.call('KEYS', 'weir:bg:llm:*:td:*')[1] \
         if not k then return 0 end \
         local B = string.match(k, '^(weir:bg:llm:[^:]+:)') \
         return tonumber({lua}) or 0"
    );
    redis.int(&format!("EVAL_RO \"{script}\" 0"))
}

/// Tokens settled in the fleet's day, reserved in flight, reservations —
/// those whose TTL has not passed, as the decide script counts them (it
/// sweeps the expired before it checks; a raw count would keep one that
/// expired until the next reserve, and no reserve may come).
fn fleet_figures(redis: &Redis) -> (i64, i64, i64) {
    let now = "redis.call('TIME')[1]";
    let day = budget_int(
        redis,
        &format!("redis.call('GET', B .. 'td:' .. ({now} - {now} % 86400))"),
    );
    let live = "'(' .. (function() local t = redis.call('TIME') \
                return t[1] * 1000 + math.floor(t[2] / 1000) end)()";
    let reserved = budget_int(
        redis,
        &format!(
            "(function() local n = 0 \
             for _, m in ipairs(redis.call('ZRANGEBYSCORE', B .. 'r', {live}, '+inf')) do \
             n = n + (tonumber(string.match(m, ':(%d+):%d+$')) or 0) end return n end)()"
        ),
    );
    let held = budget_int(
        redis,
        &format!("redis.call('ZCOUNT', B .. 'r', {live}, '+inf')"),
    );
    (day, reserved, held)
}

/// The member's admin view of the token.
async fn usage_view(m: &Member) -> Value {
    let (status, _, text) =
        common::get(&common::h1_client(), &format!("http://{}/usage", m.admin)).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).expect("json");
    v["clients"][0].clone()
}

fn retry_after(h: &http::HeaderMap) -> u64 {
    h["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds")
}

/// A budget is never exceeded by more than what is in flight: 100
/// concurrent requests across three instances, with the upstream holding
/// every admitted one, reach it only as many at a time as the budget has
/// room for; every other is a 429 at once. Released, what the fleet
/// settled is exactly what was served; a second wave spends what is left
/// and no more; nothing stays reserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_holds_across_three_instances_under_100_concurrent_requests() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let r = reservation();
    let budget = 5 * r + r / 2;
    // The token's rate and concurrency are shared too: all three are
    // decided by one script per request.
    let fleet = budget_fleet(
        3,
        &redis,
        &up,
        &format!(
            "tokens_per_day = {budget}\nmax_concurrent_per_token = 100\n\
             rate_limit_per_second = 1000\nrate_limit_burst = 1000"
        ),
        "timeout = \"1s\"",
    )
    .await;

    let mut wave = Vec::new();
    for i in 0..100 {
        wave.push(send_held(&fleet[i % 3]));
    }
    up.until_in_flight(5).await;
    let mut pending = Vec::new();
    let mut refused = 0;
    for w in wave {
        if w.is_finished() {
            let (s, h, text) = w.await.expect("request");
            assert_eq!(s, 429, "{text}");
            assert_eq!(retry_after(&h), 1, "reservations in flight free soon");
            refused += 1;
        } else {
            pending.push(w);
        }
    }
    // The refused answer at once; wait for any still on their way.
    let mut still = Vec::new();
    for w in pending {
        match tokio::time::timeout(Duration::from_millis(1500), async {
            while !w.is_finished() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        {
            Ok(()) => {
                let (s, _, text) = w.await.expect("request");
                assert_eq!(s, 429, "{text}");
                refused += 1;
            }
            Err(_) => still.push(w),
        }
    }
    assert_eq!(still.len(), 5, "five fit the budget at once");
    assert_eq!(refused, 95);
    assert_eq!(
        up.most.load(Ordering::SeqCst),
        5,
        "never more than five at the upstream"
    );
    let (day, reserved, held) = fleet_figures(&redis);
    assert_eq!(
        (day, reserved, held),
        (0, 5 * r as i64, 5),
        "five reservations in Redis"
    );
    for m in &fleet {
        let v = usage_view(m).await;
        assert_eq!(v["source"], "fleet", "{v}");
        assert_eq!(v["budget"]["tokens_per_day"]["reserved"], 5 * r, "{v}");
        assert_eq!(v["in_flight"], 5, "{v}");
    }

    up.release();
    for w in still {
        let (s, _, text) = w.await.expect("request");
        assert_eq!(s, 200, "{text}");
    }
    let settled = common::eventually(Duration::from_secs(5), || {
        fleet_figures(&redis) == (5 * USED as i64, 0, 0)
    })
    .await;
    assert!(settled, "settled: {:?}", fleet_figures(&redis));

    // A second wave, answered at once: it spends what is left, no more.
    let mut wave = Vec::new();
    for i in 0..100 {
        wave.push(send_held(&fleet[i % 3]));
    }
    let mut served = 5;
    for w in wave {
        let (s, h, text) = w.await.expect("request");
        match s {
            200 => served += 1,
            429 => assert!(retry_after(&h) >= 1, "{text}"),
            other => panic!("{other}: {text}"),
        }
    }
    assert_eq!(
        up.seen(),
        served,
        "refused requests never reached the upstream"
    );
    let done = common::eventually(Duration::from_secs(5), || {
        let (day, reserved, held) = fleet_figures(&redis);
        day == (served as u64 * USED) as i64 && reserved == 0 && held == 0
    })
    .await;
    let (day, _, _) = fleet_figures(&redis);
    assert!(
        done,
        "{served} served, {:?} in Redis",
        fleet_figures(&redis)
    );
    assert!(day as u64 <= budget, "spent {day} of {budget}");
    assert!(served > 5, "the second wave spent what the first left");
    let mut decisions = 0;
    for m in &fleet {
        let v = usage_view(m).await;
        assert_eq!(v["budget"]["tokens_per_day"]["used"], day, "{v}");
        assert_eq!(v["in_flight"], 0, "{v}");
        decisions += m
            .metric("weir_cluster_decisions_total{mode=\"redis\"}")
            .await
            .expect("decisions");
    }
    assert_eq!(
        decisions, 200,
        "one round trip per request: rate, slot and budget"
    );
    let slots = common::eventually(Duration::from_secs(5), || {
        redis.int("EVAL_RO \"local k = redis.call('KEYS', 'weir:cc:llm:*')[1] return k and redis.call('ZCARD', k) or 0\" 0") == 0
    })
    .await;
    assert!(slots, "every slot given back");
}

/// Seconds left in Redis's current minute.
fn redis_minute_left(redis: &Redis) -> i64 {
    redis.int("EVAL_RO \"local t = redis.call('TIME') return 60 - t[1] % 60\" 0")
}

/// A budget spent by one instance is refused by another: 429 in the
/// Anthropic shape, Retry-After the end of the minute by Redis's clock,
/// and the upstream never contacted; a request larger than the whole
/// bound is 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_the_routes_429_with_the_windows_retry_after() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    up.release();
    let r = reservation();
    let fleet = budget_fleet(
        2,
        &redis,
        &up,
        &format!("tokens_per_minute = {}", r + 10),
        "timeout = \"1s\"",
    )
    .await;
    // Well inside a minute: both requests in the same one.
    let inside =
        common::eventually(Duration::from_secs(61), || redis_minute_left(&redis) > 10).await;
    assert!(inside);
    let (s, _, text) = send(&fleet[0], "quick").await;
    assert_eq!(s, 200, "{text}");
    let settled = common::eventually(Duration::from_secs(5), || fleet_figures(&redis).2 == 0).await;
    assert!(settled);

    let (s, h, text) = send(&fleet[1], "quick").await;
    let left = redis_minute_left(&redis) as u64;
    assert_eq!(s, 429, "{text}");
    let retry = retry_after(&h);
    assert!(
        (left.saturating_sub(1)..=left + 1).contains(&retry),
        "Retry-After {retry}, {left} s left in the minute"
    );
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["type"], "error", "{text}");
    assert_eq!(v["error"]["type"], "rate_limit_error", "{text}");
    assert!(text.contains("tokens_per_minute"), "{text}");
    assert_eq!(
        up.seen(),
        1,
        "the refused request never reached the upstream"
    );

    let huge = json!({"model": "quick", "max_tokens": 100_000, "messages": []}).to_string();
    let (s, h, text) = common::post_json(&fleet[0].url("/v1/messages"), huge, &AUTH).await;
    assert_eq!(s, 400, "{text}");
    assert!(h.get("retry-after").is_none());
    assert!(text.contains("whole tokens_per_minute budget"), "{text}");
    assert_eq!(up.seen(), 1);
}

/// A weir killed (SIGKILL) while its requests hold reservations: they are
/// not renewed, so the next reserve sweeps them once their TTL passed —
/// while the survivor's own reservation keeps the keys alive, so only the
/// sweep can free them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_reservations_come_back_within_the_ttl() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let r = reservation();
    let fleet = budget_fleet(
        2,
        &redis,
        &up,
        &format!("tokens_per_day = {}", 3 * r + r / 2),
        "lease_ttl = \"2s\"",
    )
    .await;
    let _held = [
        send_held(&fleet[0]),
        send_held(&fleet[0]),
        send_held(&fleet[1]),
    ];
    up.until_in_flight(3).await;
    let (s, h, _) = send(&fleet[1], "quick").await;
    assert_eq!((s, retry_after(&h)), (429, 1), "three of three held");

    let back_after = kill_and_time(&fleet[0], Duration::from_secs(8), || async {
        send(&fleet[1], "quick").await.0 == 200
    })
    .await
    .expect("the killed instance's reservations came back");
    assert!(
        back_after <= Duration::from_millis(2000 + 1000),
        "back after {back_after:?}, the TTL is 2 s"
    );
    assert!(
        back_after >= Duration::from_millis(600),
        "back after {back_after:?}: they were never held in Redis"
    );
    // The quick request's settle is off its path: awaited.
    let survivor = common::eventually(Duration::from_secs(5), || {
        let (_, reserved, held) = fleet_figures(&redis);
        (reserved, held) == (r as i64, 1)
    })
    .await;
    assert!(
        survivor,
        "the survivor's one is still held: {:?}",
        fleet_figures(&redis)
    );
    up.release();
}

/// Redis gone under `fail_open`: each of three instances admits its third
/// of the budget (here two requests in flight), no more; their usage is
/// charged to the fleet's day once Redis is back, and the budget is the
/// fleet's again (one instance alone gets past its third).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_admits_a_third_each_and_the_budget_is_shared_again_when_redis_returns() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let r = reservation();
    let budget = 6 * r + r / 2;
    let fleet = budget_fleet(
        3,
        &redis,
        &up,
        &format!("tokens_per_day = {budget}"),
        "timeout = \"50ms\"\non_failure = \"fail_open\"",
    )
    .await;

    kill_redis(&mut redis, &fleet).await;
    let mut held = Vec::new();
    for (i, m) in fleet.iter().enumerate() {
        held.push(send_held(m));
        held.push(send_held(m));
        up.until_in_flight(2 * (i + 1)).await;
        let third = tokio::time::timeout(Duration::from_secs(5), send(m, "held"))
            .await
            .expect("a request past the share is refused at once, not admitted");
        assert_eq!((third.0, retry_after(&third.1)), (429, 1), "{}", third.2);
        assert!(
            m.metric("weir_cluster_decisions_total{mode=\"fail_open\"}")
                .await
                >= Some(3)
        );
        let v = usage_view(m).await;
        assert_eq!(v["source"], "local_redis_unavailable", "{v}");
    }
    up.release();
    for h in held {
        assert_eq!(h.await.expect("request").0, 200);
    }

    restart_redis(&mut redis, &fleet).await;
    let charged = common::eventually(Duration::from_secs(5), || {
        fleet_figures(&redis) == (6 * USED as i64, 0, 0)
    })
    .await;
    assert!(
        charged,
        "the outage's usage reached the fleet: {:?}",
        fleet_figures(&redis)
    );

    // Shared again: one instance gets what the fleet has left.
    up.hold();
    let fits = ((budget - 6 * USED) / r) as usize;
    let mut held = Vec::new();
    for _ in 0..fits {
        held.push(send_held(&fleet[0]));
    }
    up.until_in_flight(fits).await;
    let (s, h, _) = send(&fleet[0], "held").await;
    assert_eq!((s, retry_after(&h)), (429, 1));
    assert!(fits > 2, "more than one instance's share");
    up.release();
    for h in held {
        assert_eq!(h.await.expect("request").0, 200);
    }
}

/// Redis gone under `fail_closed`: 503 with Retry-After in the route's
/// shape, the upstream never contacted; served again once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_refuses_budgeted_requests_until_redis_returns() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    up.release();
    let fleet = budget_fleet(
        2,
        &redis,
        &up,
        "tokens_per_day = 100000",
        "timeout = \"50ms\"\non_failure = \"fail_closed\"",
    )
    .await;
    assert_eq!(send(&fleet[0], "quick").await.0, 200);
    redis.kill();
    for m in &fleet {
        refused_without_redis(m, body("quick")).await;
    }
    assert_eq!(up.seen(), 1, "refused requests never reached the upstream");
    restart_redis(&mut redis, &fleet).await;
    assert_eq!(
        send(&fleet[1], "quick").await.0,
        200,
        "served again with Redis back"
    );
}

/// The scripts through weir's cluster API against real Redis, by Redis's
/// clock: the Retry-After of each case as the local ledger gives it
/// (reservations alone: at most 1 s; settled use: the window's end; more
/// than the bound: never), a window's use named by its start so a past
/// window's keys count for nothing, and a dead instance's expired
/// reservation swept by the next reserve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_scripts_roll_windows_give_retry_after_and_sweep() {
    use weir::testing::cluster::{Decision, OverBudget};
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let (cluster, _metrics) = redis.cluster(Duration::from_secs(2)).await;
    let key = cluster.budget_key("r", "tok");
    assert_eq!(&*key, "t:bg:r:tok:");
    let minute = &book(&key, [Some(100), None, None]);
    let minute_and_day = &book(&key, [Some(100), Some(100), None]);
    // Well inside a minute, so the figures below stay in one.
    let inside =
        common::eventually(Duration::from_secs(61), || redis_minute_left(&redis) > 10).await;
    assert!(inside);

    // Reservations alone: retry within a second.
    let Decision::Reserved(None, held) = cluster.decide(ask(minute, 80)).await else {
        panic!("80 of 100 fits")
    };
    match cluster.decide(ask(minute, 30)).await {
        Decision::OverBudget(OverBudget {
            book: 0,
            bound: 0,
            wait: Some(w),
        }) => {
            assert!(w <= Duration::from_secs(1) && w > Duration::ZERO, "{w:?}")
        }
        _ => panic!("80 held: 30 more does not fit"),
    }
    assert_eq!(lua(&redis, "redis.call('HGET', 't:bg:r:tok:rt', 'n')"), 1);
    // Settled use: retry when the minute ends, by Redis's clock.
    held.settle(90, 0);
    let minute_used = "redis.call('GET', 't:bg:r:tok:tm:' .. (redis.call('TIME')[1] - redis.call('TIME')[1] % 60))";
    let settled =
        common::eventually(Duration::from_secs(5), || lua(&redis, minute_used) == 90).await;
    assert!(settled, "the settle was sent");
    // At once, not at the TTL: the settle itself took it out.
    assert_eq!(
        redis.int("ZCARD t:bg:r:tok:r"),
        0,
        "the settle removed the reservation"
    );
    assert_eq!(redis.int("EXISTS t:bg:r:tok:rt"), 0, "and its totals");
    let left = redis_minute_left(&redis) as u64;
    match cluster.decide(ask(minute, 20)).await {
        Decision::OverBudget(OverBudget {
            book: 0,
            bound: 0,
            wait: Some(w),
        }) => {
            assert!(
                w.as_secs() + 1 >= left && w.as_secs() <= left,
                "{w:?}, {left} s left in the minute"
            )
        }
        _ => panic!("90 settled: 20 more does not fit"),
    }
    // The window's key is named by its start and ends a minute after it.
    let start = redis.int("EVAL_RO \"local t = redis.call('TIME')[1] return t - t % 60\" 0");
    assert_eq!(
        lua(
            &redis,
            &format!("redis.call('GET', 't:bg:r:tok:tm:{start}')")
        ),
        90
    );
    let ttl = redis.int(&format!("TTL t:bg:r:tok:tm:{start}"));
    assert!((1..=120).contains(&ttl), "{ttl}");
    // More than the whole bound: never.
    assert!(matches!(
        cluster.decide(ask(minute, 101)).await,
        Decision::OverBudget(OverBudget {
            book: 0,
            bound: 0,
            wait: None
        })
    ));
    // The day's bound refuses with the later wait of the two.
    match cluster.decide(ask(minute_and_day, 20)).await {
        Decision::OverBudget(OverBudget {
            book: 0,
            bound: 1,
            wait: Some(w),
        }) => {
            assert!(w.as_secs() + 1 >= left, "{w:?}")
        }
        _ => panic!("the day's 90 are settled too"),
    }

    // Rollover: the last minute's use counts for nothing now.
    assert_eq!(redis.int(&format!("DEL t:bg:r:tok:tm:{start}")), 1);
    assert_eq!(
        redis
            .command(&format!("SET t:bg:r:tok:tm:{} 100", start - 60))
            .as_deref(),
        Some("+OK")
    );
    let Decision::Reserved(None, fits) = cluster.decide(ask(minute, 100)).await else {
        panic!("a past window's use does not count")
    };
    fits.settle(0, 0);

    // A dead instance's reservation, expired a second ago: swept.
    let settled = common::eventually(Duration::from_secs(5), || {
        redis.int("ZCARD t:bg:r:tok:r") == 0
    })
    .await;
    assert!(settled);
    redis.int("EVAL \"local t = redis.call('TIME')[1] * 1000 redis.call('ZADD', 't:bg:r:tok:r', t - 1000, 'dead:1:100:0') return redis.call('HINCRBY', 't:bg:r:tok:rt', 't', 100)\" 0");
    let Decision::Reserved(None, after) = cluster.decide(ask(minute, 100)).await else {
        panic!("the expired reservation was swept")
    };
    assert_eq!(redis.int("ZCARD t:bg:r:tok:r"), 1, "the dead one is gone");
    assert_eq!(
        lua(&redis, "redis.call('HGET', 't:bg:r:tok:rt', 't')"),
        100,
        "only the live one"
    );
    // Held past its TTL: renewed, not swept.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        matches!(
            cluster.decide(ask(minute, 1)).await,
            Decision::OverBudget(OverBudget { bound: 0, .. })
        ),
        "a held reservation is renewed"
    );
    drop(after);
}

/// One client token's budget book: `limits` are tokens per minute, tokens
/// and spend per day (the rest unbounded).
fn book(
    key: &std::sync::Arc<str>,
    [m, d, s]: [Option<u64>; 3],
) -> Vec<weir::testing::cluster::BudgetBook> {
    vec![weir::testing::cluster::BudgetBook {
        key: key.clone(),
        limits: [m, d, s, None, None, None, None],
    }]
}

/// A decision asking only for `tokens` in `books`.
fn ask(
    books: &[weir::testing::cluster::BudgetBook],
    tokens: u64,
) -> weir::testing::cluster::Ask<'_> {
    weir::testing::cluster::Ask {
        rate: None,
        lease: None,
        budget: Some(weir::testing::cluster::BudgetAsk {
            books,
            tokens,
            spend: 0,
        }),
        key_rate: None,
    }
}

/// A number a Lua expression gives (0 for none).
fn lua(redis: &Redis, expr: &str) -> i64 {
    redis.int(&format!("EVAL_RO \"return tonumber({expr}) or 0\" 0"))
}

/// Settles that waited for Redis go in one script call when it answers
/// again, and one that Redis refuses (a key of another program's type
/// under the prefix) neither stops the others nor is retried for ever: it
/// is dropped and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settles_wait_for_redis_and_a_refused_one_does_not_stop_the_others() {
    use weir::testing::cluster::Decision;
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let (cluster, metrics) = redis.cluster(Duration::from_secs(30)).await;
    let (bad, good) = (
        cluster.budget_key("r", "bad"),
        cluster.budget_key("r", "good"),
    );
    let mut held = Vec::new();
    for key in [&bad, &good] {
        let books = book(key, [Some(1000), None, None]);
        let Decision::Reserved(None, r) = cluster.decide(ask(&books, 100)).await else {
            panic!("fits")
        };
        held.push(r);
    }
    let day = redis.int("EVAL_RO \"local t = redis.call('TIME')[1] return t - t % 86400\" 0");
    assert_eq!(redis.int(&format!("HSET t:bg:r:bad:td:{day} other 1")), 1);

    redis.pause();
    for r in held {
        r.settle(40, 0);
    }
    let pending = |m: &weir::testing::telemetry::Metrics| {
        common::metric_in(&m.encode(), "weir_cluster_budget_settles_pending ")
    };
    assert_eq!(pending(&metrics), Some(2), "both wait for Redis");
    let silent = common::eventually(Duration::from_secs(5), || !cluster.is_up()).await;
    assert!(silent, "the supervisor found Redis silent");
    redis.resume();
    let sent = common::eventually(Duration::from_secs(10), || {
        lua(
            &redis,
            &format!("redis.call('GET', 't:bg:r:good:td:{day}')"),
        ) == 40
    })
    .await;
    assert!(sent, "the good settle was charged after the refused one");
    assert_eq!(
        redis.int("EXISTS t:bg:r:good:r"),
        0,
        "its reservation is out"
    );
    // Counted once the answer is read, just after Redis wrote.
    let dropped = |m: &weir::testing::telemetry::Metrics| {
        common::metric_in(&m.encode(), "weir_cluster_budget_settles_dropped_total ")
    };
    let counted = common::eventually(Duration::from_secs(2), || dropped(&metrics) == Some(1)).await;
    assert!(
        counted,
        "the refused one is counted: {:?}",
        dropped(&metrics)
    );
    assert_eq!(pending(&metrics), Some(0));
}

/// A settle sent into a stalled Redis (SIGSTOP, past the 1 s the
/// supervisor waits) is queued again and re-sent once Redis answers,
/// while Redis also runs the stalled call when it resumes: the budget is
/// charged once, not twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_resent_after_a_redis_stall_is_charged_once() {
    use weir::testing::cluster::Decision;
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let (cluster, metrics) = redis.cluster(Duration::from_secs(30)).await;
    let key = cluster.budget_key("r", "once");
    let books = book(&key, [None, Some(1000), None]);
    let Decision::Reserved(None, reservation) = cluster.decide(ask(&books, 100)).await else {
        panic!("fits")
    };
    let day = redis.int("EVAL_RO \"local t = redis.call('TIME')[1] return t - t % 86400\" 0");
    let charged = || {
        lua(
            &redis,
            &format!("redis.call('GET', 't:bg:r:once:td:{day}')"),
        )
    };

    redis.pause();
    reservation.settle(40, 0);
    let silent = common::eventually(Duration::from_secs(5), || !cluster.is_up()).await;
    assert!(silent, "the settle's call went unanswered");
    redis.resume();
    let pending = |m: &weir::testing::telemetry::Metrics| {
        common::metric_in(&m.encode(), "weir_cluster_budget_settles_pending ")
    };
    let resent = common::eventually(Duration::from_secs(10), || {
        cluster.is_up() && pending(&metrics) == Some(0)
    })
    .await;
    assert!(resent, "re-sent once Redis answered");
    assert_eq!(charged(), 40, "charged once");
    assert_eq!(
        redis.int("EXISTS t:bg:r:once:r"),
        0,
        "its reservation is out"
    );
}

/// A weir told to stop (SIGTERM) with a settle still queued — its request
/// ended while Redis was away — waits for Redis to take it before it
/// exits: the fleet's day has the usage once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_queued_at_shutdown_reaches_redis() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let mut fleet = budget_fleet(1, &redis, &up, "tokens_per_day = 100000", "").await;
    let held = send_held(&fleet[0]);
    up.until_in_flight(1).await;
    kill_redis(&mut redis, &fleet).await;
    up.release();
    let (status, _, text) = held.await.expect("request");
    assert_eq!(status, 200, "{text}");
    let m = &mut fleet[0];
    assert_eq!(
        m.metric("weir_cluster_budget_settles_pending").await,
        Some(1),
        "the settle waits for Redis"
    );
    m.proc.signal("-TERM");
    m.proc.wait_for(|l| l.contains("\"drained\""));
    redis.restart();
    assert_eq!(m.proc.wait_exit(Duration::from_secs(10)), 0);
    let (day, reserved, in_flight) = fleet_figures(&redis);
    assert_eq!(
        (day, reserved, in_flight),
        (USED as i64, 0, 0),
        "the settle reached Redis"
    );
}
