//! Runtime keys' and teams' budgets kept by a fleet of weirs in one real
//! Redis (`[cluster]`): two real weir processes sharing one SQLite file
//! (so one set of keys) and one `redis-server` started here, over the
//! upstream of tests/common/held.rs (15 tokens used per answer).
//!
//! What is proved: a key's monthly budget spent on one instance refuses
//! on the other; a team's budget shared by two people's keys on two
//! instances refuses both, and the refusal reserved nothing in the key's
//! own book; under 40 concurrent requests across both the key's budget
//! is never exceeded by more than what is in flight; with Redis gone,
//! `fail_open` holds each instance to its share and charges the fleet
//! once Redis is back, and `fail_closed` answers 503.
//!
//! And a key's own limits (docs/decisions/106): its request rate holds for
//! the fleet when requests alternate over the instances; its concurrency
//! held on one instance refuses on the other until a request ends, and a
//! killed instance's slots free at the lease TTL; without Redis in
//! `fail_open` each instance holds its share of the rate.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::fleet::{Member, fleet, kill_and_time, kill_redis, restart_redis};
use common::held::{USED, Upstream};
use common::keys::{ADMIN, Addresses, create};
use common::redis::Redis;
use serde_json::{Value, json};

/// A request for `model` (`held` or `quick`: the same size).
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

/// Two weirs on one SQLite file (kept in `shared`) and `redis`, with an
/// LLM route taking runtime keys over `up`, `teams` and `cluster` keys.
async fn key_fleet(
    shared: &tempfile::TempDir,
    redis: &Redis,
    up: &Upstream,
    teams: &str,
    cluster: &str,
) -> Vec<Member> {
    std::fs::write(shared.path().join("admin-token"), ADMIN).expect("token");
    let shared = shared.path().display();
    let config = format!(
        "[log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{shared}/admin-token\"\n\
         [database]\nurl = \"sqlite:{shared}/weir.db\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\nruntime_keys = true\n\
         [[route.upstreams]]\nname = \"up\"\nurl = \"{}\"\n\
         {teams}\n\
         [cluster]\nurl = \"{{redis}}\"\n{cluster}\n",
        up.url
    );
    fleet(2, redis, &config).await
}

fn at(m: &Member) -> Addresses {
    Addresses {
        web: m.web,
        admin: m.admin,
    }
}

/// A key made through the first member, once every member knows it
/// (asking with a key an instance does not know yet would count as a
/// failed authentication).
async fn key(fleet: &[Member], spec: Value) -> (String, String) {
    let before = known_keys(&fleet[0]).await;
    let (id, secret) = create(&at(&fleet[0]), spec).await;
    for m in fleet {
        let known = common::eventually_metric_at(
            m.admin,
            "weir_runtime_keys",
            before + 1,
            Duration::from_secs(5),
        )
        .await;
        assert!(known, "{} does not know the key", m.web);
    }
    (id, secret)
}

async fn known_keys(m: &Member) -> u64 {
    m.metric("weir_runtime_keys").await.unwrap_or(0)
}

async fn send(m: &Member, secret: &str, model: &str) -> (u16, http::HeaderMap, String) {
    let (status, headers, text) = common::post_json(
        &m.url("/v1/messages"),
        body(model),
        &[("x-api-key", secret)],
    )
    .await;
    (status.as_u16(), headers, text)
}

/// The number in the first key matching `pattern` (0 when none).
fn used(redis: &Redis, pattern: &str) -> i64 {
    redis.int(&format!(
        "EVAL_RO \"local k = redis.call('KEYS', '{pattern}')[1] if not k then return 0 end \
         return tonumber(redis.call('GET', k)) or 0\" 0"
    ))
}

/// Wait until the window matching `pattern` in Redis holds `want`.
async fn settled_to(redis: &Redis, pattern: &str, want: i64) {
    let reached = common::eventually(Duration::from_secs(5), || used(redis, pattern) == want).await;
    assert!(reached, "{pattern}: {} not {want}", used(redis, pattern));
}

/// A key's month is the fleet's: what it spent through one instance
/// counts on the other, whose refusal names the month and says when the
/// month ends. Each instance alone would have let the last one through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_monthly_budget_spent_on_one_instance_refuses_on_the_other() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(&shared, &redis, &up, "", "").await;
    // Room for one reservation on top of two answers' use.
    let limit = reservation() + 2 * USED;
    let (id, secret) = key(&fleet, json!({"user": "alice", "tokens_per_month": limit})).await;
    let month = format!("weir:bk:{id}:tmo:*");
    for (i, m) in [&fleet[0], &fleet[1], &fleet[0]].into_iter().enumerate() {
        let (status, _, text) = send(m, &secret, "quick").await;
        assert_eq!(status, 200, "request {i}: {text}");
        settled_to(&redis, &month, (i as i64 + 1) * USED as i64).await;
    }
    let (status, headers, text) = send(&fleet[1], &secret, "quick").await;
    assert_eq!(status, 429, "{text}");
    assert!(
        text.contains("tokens_per_month") && text.contains(&format!("({id})")),
        "{text}"
    );
    let retry: u64 = headers["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!(
        (1..=31 * 86_400).contains(&retry),
        "until the month ends: {retry}"
    );
    assert_eq!(
        up.seen(),
        3,
        "the refused request never reached the upstream"
    );
    assert_eq!(
        redis.int(&format!("EXISTS weir:bk:{id}:r")),
        0,
        "nothing held"
    );
    // The week's and the day's windows are counted too.
    assert_eq!(used(&redis, &format!("weir:bk:{id}:tw:*")), 3 * USED as i64);
    assert_eq!(used(&redis, &format!("weir:bk:{id}:td:*")), 3 * USED as i64);
}

/// A team's day is shared by its people's keys across the fleet: Alice
/// on one instance and Bob on the other spend it together, then both are
/// refused naming the team; the team's refusal reserved nothing in
/// Alice's own book (one script, all or nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_budget_is_shared_by_two_peoples_keys_on_two_instances() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let team_day = reservation() + USED;
    let fleet = key_fleet(
        &shared,
        &redis,
        &up,
        &format!("[[teams]]\nname = \"platform\"\ntokens_per_day = {team_day}\n"),
        "",
    )
    .await;
    let (alice_id, alice) = key(
        &fleet,
        json!({"user": "alice", "team": "platform", "tokens_per_day": 100_000}),
    )
    .await;
    let (_, bob) = key(&fleet, json!({"user": "bob", "team": "platform"})).await;
    let team = "weir:bt:platform:td:*";
    let (status, _, text) = send(&fleet[0], &alice, "quick").await;
    assert_eq!(status, 200, "{text}");
    settled_to(&redis, team, USED as i64).await;
    let (status, _, text) = send(&fleet[1], &bob, "quick").await;
    assert_eq!(status, 200, "{text}");
    settled_to(&redis, team, 2 * USED as i64).await;
    for (m, secret) in [(&fleet[0], &alice), (&fleet[1], &bob)] {
        let (status, _, text) = send(m, secret, "quick").await;
        assert_eq!(status, 429, "{text}");
        assert!(
            text.contains("team `platform`") && text.contains("tokens_per_day"),
            "{text}"
        );
    }
    assert_eq!(up.seen(), 2);
    // Alice's own day has her one answer, and nothing held for the
    // refused request.
    assert_eq!(
        used(&redis, &format!("weir:bk:{alice_id}:td:*")),
        USED as i64
    );
    assert_eq!(redis.int(&format!("EXISTS weir:bk:{alice_id}:rt")), 0);
    assert_eq!(redis.int("EXISTS weir:bt:platform:rt"), 0);
    // /v1/me reads the fleet's figures on either instance.
    for m in &fleet {
        let (status, _, text) = common::get_with(&m.url("/v1/me"), &[("x-api-key", &alice)]).await;
        assert_eq!(status, 200, "{text}");
        let me: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            me["team_budget"]["windows"]["tokens_per_day"]["used"],
            2 * USED,
            "{me}"
        );
        assert_eq!(me["budget"]["tokens_per_day"]["used"], USED, "{me}");
    }
}

/// 40 concurrent requests with one key across both instances, the
/// upstream holding every admitted one: only as many reach it as the
/// key's day has room for; released, the fleet's day is exactly what was
/// served and nothing stays reserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_never_overspend_a_keys_budget_beyond_what_is_in_flight() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(&shared, &redis, &up, "", "timeout = \"1s\"").await;
    let r = reservation();
    let (id, secret) = key(
        &fleet,
        json!({"user": "carol", "tokens_per_day": 4 * r + r / 2}),
    )
    .await;
    let mut wave = Vec::new();
    for i in 0..40 {
        let url = fleet[i % 2].url("/v1/messages");
        let secret = secret.clone();
        wave.push(tokio::spawn(async move {
            let (s, _, _) = common::post_json(&url, body("held"), &[("x-api-key", &secret)]).await;
            s.as_u16()
        }));
    }
    up.until_in_flight(4).await;
    let refused = common::eventually(Duration::from_secs(10), || {
        wave.iter().filter(|w| w.is_finished()).count() == 36
    })
    .await;
    assert!(refused, "36 refused at once");
    assert_eq!(
        up.most.load(Ordering::SeqCst),
        4,
        "never more than 4 upstream"
    );
    assert_eq!(
        redis.int(&format!(
            "EVAL_RO \"return tonumber(redis.call('HGET', 'weir:bk:{id}:rt', 't'))\" 0"
        )),
        4 * r as i64
    );
    up.release();
    let mut served = 0;
    for w in wave {
        match w.await.expect("request") {
            200 => served += 1,
            429 => {}
            other => panic!("{other}"),
        }
    }
    assert_eq!(served, 4);
    settled_to(&redis, &format!("weir:bk:{id}:td:*"), 4 * USED as i64).await;
    let out = common::eventually(Duration::from_secs(5), || {
        redis.int(&format!("EXISTS weir:bk:{id}:r")) == 0
    })
    .await;
    assert!(out, "nothing stays reserved");
}

/// Redis gone, `fail_open`: each of the two instances holds the key to
/// half its budget on its own (its soft limit warning against that
/// half), and what it served is charged to the fleet's windows once
/// Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_fail_open_holds_each_instance_to_its_share_and_charges_later() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(&shared, &redis, &up, "", "timeout = \"50ms\"").await;
    // Each instance's half: one reservation on top of one answer's use.
    let half = reservation() + USED;
    let (id, secret) = key(
        &fleet,
        json!({"user": "dan", "tokens_per_day": 2 * half, "warn_at": 50}),
    )
    .await;
    kill_redis(&mut redis, &fleet).await;
    let m = &fleet[0];
    let (status, headers, _) = send(m, &secret, "quick").await;
    assert_eq!(status, 200);
    // One reservation is past half of the share: warned against it.
    let percent = reservation() * 100 / half;
    assert_eq!(
        headers["x-weir-budget-warning"],
        format!("tokens_per_day={percent}%").as_str()
    );
    assert_eq!(
        send(m, &secret, "quick").await.0,
        200,
        "one answer + one reservation"
    );
    let (status, _, text) = send(m, &secret, "quick").await;
    assert_eq!(status, 429, "past this instance's half: {text}");
    assert_eq!(
        send(&fleet[1], &secret, "quick").await.0,
        200,
        "the other's half"
    );
    restart_redis(&mut redis, &fleet).await;
    settled_to(&redis, &format!("weir:bk:{id}:td:*"), 3 * USED as i64).await;
}

/// Redis gone, `fail_closed`: a key with a budget is answered 503 at
/// once, in the client's shape, and nothing reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_fail_closed_refuses_budgeted_keys() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(
        &shared,
        &redis,
        &up,
        "",
        "timeout = \"50ms\"\non_failure = \"fail_closed\"",
    )
    .await;
    let (_, secret) = key(&fleet, json!({"user": "erin", "tokens_per_month": 100_000})).await;
    let (status, _, text) = send(&fleet[1], &secret, "quick").await;
    assert_eq!(status, 200, "{text}");
    kill_redis(&mut redis, &fleet).await;
    for m in &fleet {
        let (status, headers, text) = send(m, &secret, "quick").await;
        assert_eq!(status, 503, "{text}");
        assert_eq!(headers["retry-after"], "1");
        assert!(text.contains("overloaded_error"), "{text}");
    }
    assert_eq!(up.seen(), 1);
}

/// With `[server] budget_time_zone`, the fleet's day is the zone's: its
/// Redis key is named by the zone's midnight (Kiritimati, UTC+14 all
/// year), and `/v1/me` says it resets at the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_day_starts_at_midnight_in_the_configured_zone() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let zone = "[server]\nbudget_time_zone = \"Pacific/Kiritimati\"\n";
    let fleet = key_fleet(&shared, &redis, &up, zone, "").await;
    let (id, secret) = key(&fleet, json!({"user": "fay", "tokens_per_day": 100_000})).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    const OFFSET: u64 = 14 * 3600;
    let midnight = (now + OFFSET) / 86_400 * 86_400 - OFFSET;
    let (status, _, text) = send(&fleet[1], &secret, "quick").await;
    assert_eq!(status, 200, "{text}");
    settled_to(&redis, &format!("weir:bk:{id}:td:{midnight}"), USED as i64).await;
    let (status, _, text) =
        common::get_with(&fleet[0].url("/v1/me"), &[("x-api-key", &secret)]).await;
    assert_eq!(status, 200, "{text}");
    let me: Value = serde_json::from_str(&text).expect("json");
    let day = &me["budget"]["tokens_per_day"];
    assert_eq!(day["used"], USED, "{me}");
    let resets = day["resets_in_seconds"].as_u64().expect("seconds");
    let want = midnight + 86_400 - now;
    assert!(resets.abs_diff(want) <= 5, "{resets} vs {want}: {me}");
}

const WARNED: &str = "past its warning level";

/// An answer's `x-weir-budget-warning` (empty: none).
fn warning_of(headers: &http::HeaderMap) -> String {
    headers
        .get("x-weir-budget-warning")
        .and_then(|w| w.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A day that warns (at 50 %) only once one answer was spent: a lone
/// reservation is under half of it, an answer's use plus a reservation
/// half or more.
fn warning_day() -> u64 {
    2 * reservation() + USED
}

/// A key's soft limit is the fleet's: spent past half through one
/// instance, the next requests on the other carry
/// `x-weir-budget-warning`, and that instance logs the warning once, not
/// on every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_warning_level_passed_on_one_instance_warns_on_the_other_logged_once() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let mut fleet = key_fleet(&shared, &redis, &up, "", "").await;
    let day = warning_day();
    let (id, secret) = key(
        &fleet,
        json!({"user": "gil", "tokens_per_day": day, "warn_at": 50}),
    )
    .await;
    let (status, headers, text) = send(&fleet[0], &secret, "quick").await;
    assert_eq!(status, 200, "{text}");
    assert!(headers.get("x-weir-budget-warning").is_none(), "under half");
    settled_to(&redis, &format!("weir:bk:{id}:td:*"), USED as i64).await;
    let percent = (USED + reservation()) * 100 / day;
    for i in 0..3 {
        let (status, headers, text) = send(&fleet[1], &secret, "quick").await;
        assert_eq!(status, 200, "request {i}: {text}");
        let warning = warning_of(&headers);
        assert!(
            warning.starts_with("tokens_per_day=") && warning.ends_with('%'),
            "request {i}: {warning:?}"
        );
        if i == 0 {
            assert_eq!(warning, format!("tokens_per_day={percent}%"));
        }
        settled_to(&redis, &format!("weir:bk:{id}:td:*"), (i + 2) * USED as i64).await;
    }
    assert_eq!(fleet[1].lines(WARNED), 1, "logged once in the window");
    assert_eq!(fleet[0].lines(WARNED), 0, "instance 1 never passed it");
}

/// A team's soft limit likewise: Hal's answer on one instance takes the
/// team past half its day, and Ida's next request on the other carries
/// the warning naming the team's day, logged once there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_warning_level_is_the_fleets() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let teams = format!(
        "[[teams]]\nname = \"infra\"\ntokens_per_day = {}\nwarn_at = 50\n",
        warning_day()
    );
    let mut fleet = key_fleet(&shared, &redis, &up, &teams, "").await;
    let (_, hal) = key(&fleet, json!({"user": "hal", "team": "infra"})).await;
    let (_, ida) = key(&fleet, json!({"user": "ida", "team": "infra"})).await;
    let (status, headers, _) = send(&fleet[0], &hal, "quick").await;
    assert_eq!(status, 200);
    assert!(headers.get("x-weir-budget-warning").is_none());
    settled_to(&redis, "weir:bt:infra:td:*", USED as i64).await;
    for i in 0..2 {
        let (status, headers, text) = send(&fleet[1], &ida, "quick").await;
        assert_eq!(status, 200, "{text}");
        let warning = warning_of(&headers);
        assert!(warning.starts_with("tokens_per_day="), "{warning:?}");
        settled_to(&redis, "weir:bt:infra:td:*", (i + 2) * USED as i64).await;
    }
    let logged = fleet[1].proc.all_lines(|l| l.contains(WARNED));
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].contains("team `infra`"), "{}", logged[0]);
}

/// `/admin/keys/<id>` shows a key's and its team's budget windows as the
/// fleet keeps them: spent through one instance, read on the other, with
/// when each window resets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_view_of_a_key_shows_the_fleets_windows_on_any_instance() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let teams = "[[teams]]\nname = \"data\"\ntokens_per_month = 100000\n";
    let fleet = key_fleet(&shared, &redis, &up, teams, "").await;
    let (id, secret) = key(
        &fleet,
        json!({"user": "jo", "team": "data", "tokens_per_day": 100_000}),
    )
    .await;
    let (status, _, text) = send(&fleet[0], &secret, "quick").await;
    assert_eq!(status, 200, "{text}");
    settled_to(&redis, &format!("weir:bk:{id}:td:*"), USED as i64).await;
    settled_to(&redis, "weir:bt:data:tmo:*", USED as i64).await;
    let (status, v) = common::keys::admin(
        &at(&fleet[1]),
        http::Method::GET,
        &format!("/admin/keys/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["budget"]["source"], "fleet", "{v}");
    let day = &v["budget"]["windows"]["tokens_per_day"];
    assert_eq!(day["used"], USED, "{v}");
    assert_eq!(day["limit"], 100_000, "{v}");
    let resets = day["resets_in_seconds"].as_u64().expect("seconds");
    assert!((1..=86_400).contains(&resets), "{v}");
    assert!(
        day["resets_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{v}"
    );
    assert_eq!(v["team_budget"]["source"], "fleet", "{v}");
    let month = &v["team_budget"]["windows"]["tokens_per_month"];
    assert_eq!(month["used"], USED, "{v}");
    assert!(
        month["resets_in_seconds"].as_u64().is_some_and(|s| s >= 1),
        "{v}"
    );
}

/// A key's own request rate is the fleet's: requests alternated over the
/// two instances as fast as they answer never pass more than the burst
/// plus the rate over the time taken (each instance alone would let
/// twice that through), and the refusals say the key's rate. The key has
/// a budget, so its limits are decided with the reserve, in one script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_rate_holds_for_the_fleet_when_requests_alternate_over_instances() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(&shared, &redis, &up, "", "").await;
    let spec = json!({"user": "erin", "rate_limit_per_second": 2, "rate_limit_burst": 2,
                      "tokens_per_month": 1_000_000});
    let (id, secret) = key(&fleet, spec).await;
    let started = std::time::Instant::now();
    let (mut served, mut refused) = (0u64, 0u64);
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(2) {
        let (status, headers, text) = send(&fleet[i % 2], &secret, "quick").await;
        i += 1;
        match status {
            200 => served += 1,
            429 => {
                refused += 1;
                assert!(text.contains("rate_limit_per_second"), "{text}");
                assert!(headers.contains_key("retry-after"), "{headers:?}");
            }
            other => panic!("{other}: {text}"),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let allowed = 2.0 + 2.0 * elapsed;
    assert!(
        served as f64 <= allowed.floor(),
        "{served} served in {elapsed:.2} s, the fleet's rate allows {allowed:.1}"
    );
    assert!(
        served >= 4 && refused > 0,
        "{served} served, {refused} refused"
    );
    assert!(
        redis.int(&format!("EXISTS weir:rk:{id}")) == 1,
        "the key's rate is kept in Redis"
    );
}

/// Held requests of `secret` on `m`, once the upstream holds `n` in all:
/// each a task the test can end (its connection closed) by aborting it.
async fn hold(
    m: &Member,
    secret: &str,
    up: &Upstream,
    n: usize,
) -> Vec<tokio::task::JoinHandle<u16>> {
    let mut held = Vec::new();
    for _ in 0..n {
        let (url, secret) = (m.url("/v1/messages"), secret.to_string());
        held.push(tokio::spawn(async move {
            let (s, _, _) = common::post_json(&url, body("held"), &[("x-api-key", &secret)]).await;
            s.as_u16()
        }));
    }
    up.until_in_flight(n).await;
    held
}

/// A key's concurrency is the fleet's: with 2 held on the first instance
/// the second refuses the key (429, the key's in-flight bound), admits it
/// once one of them ends, and another key is untouched throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_concurrency_held_on_one_instance_refuses_on_the_other_until_one_ends() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(&shared, &redis, &up, "", "").await;
    let (id, secret) = key(&fleet, json!({"user": "fay", "max_concurrent": 2})).await;
    let (_, other) = key(&fleet, json!({"user": "gus"})).await;
    let mut held = hold(&fleet[0], &secret, &up, 2).await;
    assert_eq!(redis.int(&format!("ZCARD weir:ck:{id}")), 2);
    let (status, headers, text) = send(&fleet[1], &secret, "quick").await;
    assert_eq!(status, 429, "both slots are held on the first: {text}");
    assert_eq!(headers["retry-after"], "1");
    assert!(text.contains("in flight"), "{text}");
    assert_eq!(send(&fleet[1], &other, "quick").await.0, 200, "another key");
    held.pop().expect("held").abort();
    let admitted = common::eventually_async(Duration::from_secs(5), || async {
        send(&fleet[1], &secret, "quick").await.0 == 200
    })
    .await;
    assert!(admitted, "a slot came back when its request ended");
    up.release();
}

/// A weir killed (SIGKILL) while holding both of a key's slots gives
/// nothing back itself: the slots free when its leases expire (the TTL,
/// 2 s here), not before, and the other instance then admits the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_key_slots_free_at_the_lease_ttl() {
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(&shared, &redis, &up, "", "lease_ttl = \"2s\"").await;
    let (_, secret) = key(&fleet, json!({"user": "hana", "max_concurrent": 2})).await;
    let _held = hold(&fleet[0], &secret, &up, 2).await;
    assert_eq!(send(&fleet[1], &secret, "quick").await.0, 429);
    let back_after = kill_and_time(&fleet[0], Duration::from_secs(6), || async {
        send(&fleet[1], &secret, "quick").await.0 == 200
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
    up.release();
}

/// Redis gone, `fail_open`: each instance holds the key to its share of
/// its rate (half of 2/s: one request, then one a second) on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_fail_open_holds_each_instance_to_its_share_of_a_keys_rate() {
    let Some(mut redis) = Redis::start_if_available() else {
        return;
    };
    let up = Upstream::start().await;
    let shared = tempfile::tempdir().expect("tempdir");
    let fleet = key_fleet(&shared, &redis, &up, "", "timeout = \"50ms\"").await;
    let spec = json!({"user": "ian", "rate_limit_per_second": 2, "rate_limit_burst": 2});
    let (_, secret) = key(&fleet, spec).await;
    kill_redis(&mut redis, &fleet).await;
    for m in &fleet {
        assert_eq!(send(m, &secret, "quick").await.0, 200, "its share's burst");
        let (status, _, text) = send(m, &secret, "quick").await;
        assert_eq!(status, 429, "past this instance's share: {text}");
        assert!(text.contains("rate_limit_per_second"), "{text}");
    }
}

/// The decide script with a route's rate and a key's own beside it: both
/// must pass, the refusal names which refused, and a request either one
/// refuses takes from neither (the other's arrival time is unchanged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_rate_and_a_keys_rate_both_pass_and_a_refusal_takes_from_neither() {
    use weir::testing::cluster::{Ask, Decision, Gcra};
    let Some(redis) = Redis::start_if_available() else {
        return;
    };
    let (cluster, _metrics) = redis.cluster(Duration::from_secs(1)).await;
    let decide = |route: (&'static str, Gcra), key: (&'static str, Gcra)| {
        let cluster = &cluster;
        async move {
            let ask = Ask {
                rate: Some(route),
                lease: None,
                budget: None,
                key_rate: Some(key),
            };
            cluster.decide(ask).await
        }
    };
    // A rate's theoretical arrival time (µs), as the script keeps it.
    let tat = |key: &str| {
        redis.int(&format!(
            "EVAL_RO \"return tonumber(redis.call('GET', '{key}'))\" 0"
        ))
    };
    // The key's 1/s with no burst refuses the second; the route's 1/s
    // with a burst of 10 would not, and keeps the one request it took.
    let (route, key) = (
        ("t:rl:r:k1", Gcra::new(1, 10)),
        ("t:rk:k1", Gcra::new(1, 1)),
    );
    assert!(matches!(decide(route, key).await, Decision::Admitted(None)));
    let route_tat = tat(route.0);
    assert!(matches!(decide(route, key).await, Decision::KeyLimited(_)));
    assert_eq!(tat(route.0), route_tat, "the route's rate gave nothing");
    // The other way round: the route refuses, the key's rate is untouched.
    let (route, key) = (
        ("t:rl:r:k2", Gcra::new(1, 1)),
        ("t:rk:k2", Gcra::new(1, 10)),
    );
    assert!(matches!(decide(route, key).await, Decision::Admitted(None)));
    let key_tat = tat(key.0);
    assert!(matches!(decide(route, key).await, Decision::Limited(_)));
    assert_eq!(tat(key.0), key_tat, "the key's rate gave nothing");
    // A key's rate alone.
    let only = Ask {
        rate: None,
        lease: None,
        budget: None,
        key_rate: Some(("t:rk:k3", Gcra::new(1, 1))),
    };
    assert!(matches!(
        cluster.decide(only).await,
        Decision::Admitted(None)
    ));
}
