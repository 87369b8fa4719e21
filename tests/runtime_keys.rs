//! Runtime keys (`/admin/keys`, `weir keys`) kept in the database and
//! served from memory, on routes with `runtime_keys = true`; usage rows
//! written to the database and reported (`/admin/usage`, `weir usage`).
//! Against the strict Anthropic stand-in, with real SQLite files.

mod common;

use std::time::{Duration, Instant};

use common::keys::{admin, ask, ask_with, create, dir, until, usage_lines};
use common::llm::*;
use common::provider::{Options, Provider, ProviderApi};
use common::{Weir, get_with};
use serde_json::{Value, json};

/// A route `llm` taking runtime keys, over `up`, with a database at
/// `{dir}/weir.db` and an admin token.
fn config(up: &Provider, extra: &str) -> String {
    common::keys::config(up, extra, "sqlite:{dir}/weir.db")
}

#[tokio::test]
async fn a_key_issued_at_runtime_opens_the_route_until_it_is_revoked() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, "")).await;
    let (id, secret) = create(
        &weir,
        json!({"user": "alice", "team": "platform", "models": ["claude-*"]}),
    )
    .await;
    let (status, body) = ask(&weir, &secret, "claude-sonnet").await;
    assert_eq!(status, 200, "{body}");
    // The key is weir's: never sent upstream.
    for r in up.journal() {
        assert!(!format!("{:?}", r.headers).contains(&secret));
    }
    let (status, body) = ask(&weir, &secret, "gpt-5").await;
    assert_eq!(status, 403, "a model outside its list: {body}");
    assert!(body.contains("permission_error"), "{body}");
    let (status, _) = ask(&weir, "wk-not-a-key", "claude-sonnet").await;
    assert_eq!(status, 401);

    let (status, v) = admin(
        &weir,
        http::Method::GET,
        &format!("/admin/keys/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["user"], "alice");
    assert_eq!(v["status"], "active");
    assert!(v.get("key").is_none(), "the secret is shown once: {v}");
    assert!(secret.starts_with(v["prefix"].as_str().expect("prefix")));

    let (status, v) = admin(
        &weir,
        http::Method::DELETE,
        &format!("/admin/keys/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, body) = ask(&weir, &secret, "claude-sonnet").await;
    assert_eq!(status, 401, "revoked at once on this instance: {body}");
    up.assert_all_accepted();
}

#[tokio::test]
async fn a_change_made_through_one_instance_reaches_another_within_a_second() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let shared = dir();
    let path = shared.path().display().to_string();
    let one = Weir::start_in(
        dir(),
        &config(&up, "").replace("{dir}/weir.db", &format!("{path}/weir.db")),
    )
    .await;
    let two = Weir::start_in(
        dir(),
        &config(&up, "").replace("{dir}/weir.db", &format!("{path}/weir.db")),
    )
    .await;
    let (id, secret) = create(&one, json!({"name": "ci"})).await;
    let started = Instant::now();
    // Awaited on the other instance's gauge: asking with a key it does not
    // know yet would count as failed authentications from this address.
    let admin_two = two.running().admin_addr().expect("admin");
    assert!(
        common::eventually_metric_at(admin_two, "weir_runtime_keys", 1, Duration::from_secs(3))
            .await
    );
    assert_eq!(ask(&two, &secret, "claude-sonnet").await.0, 200);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    let (status, v) = admin(
        &one,
        http::Method::POST,
        &format!("/admin/keys/{id}/rotate"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let rotated = v["key"].as_str().expect("new secret").to_string();
    let started = Instant::now();
    assert_eq!(
        until(&two, &secret, 401, Duration::from_secs(3)).await,
        401,
        "the old secret stops"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(ask(&two, &rotated, "claude-sonnet").await.0, 200);

    admin(
        &one,
        http::Method::DELETE,
        &format!("/admin/keys/{id}"),
        Value::Null,
    )
    .await;
    let started = Instant::now();
    assert_eq!(
        until(&two, &rotated, 401, Duration::from_secs(3)).await,
        401
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_keys_budget_refuses_in_the_clients_shape_once_spent() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, "default_max_tokens = 64")).await;
    // Each request reserves its input bytes / 3 plus 64 output tokens.
    let (_, secret) = create(&weir, json!({"user": "bob", "tokens_per_day": 120})).await;
    let mut refused = None;
    for _ in 0..10 {
        let (status, body) = ask(&weir, &secret, "claude-sonnet").await;
        if status != 200 {
            refused = Some((status, body));
            break;
        }
    }
    let (status, body) = refused.expect("the budget ends");
    assert_eq!(status, 429, "{body}");
    assert!(
        body.contains("rate_limit_error") && body.contains("tokens_per_day"),
        "{body}"
    );
    // The holder can read where they stand with the key itself.
    let (status, _, body) = get_with(&weir.url("web", "/v1/me"), &[("x-api-key", &secret)]).await;
    assert_eq!(status, 200, "{body}");
    let me: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(me["user"], "bob", "{me}");
    assert_eq!(me["kind"], "key", "{me}");
    let day = &me["budget"]["tokens_per_day"];
    assert_eq!(day["limit"], 120, "{me}");
    assert!(day["used"].as_u64() > Some(0), "{me}");
    assert!(
        me["budget"].get("spend_per_month").is_none(),
        "unbounded months are not shown: {me}"
    );
    let (status, _, _) = get_with(&weir.url("web", "/v1/me"), &[]).await;
    assert_eq!(status, 401);
    // Another key is not touched by bob's budget.
    let (_, other) = create(&weir, json!({"user": "carol"})).await;
    assert_eq!(ask(&weir, &other, "claude-sonnet").await.0, 200);
}

#[tokio::test]
async fn a_team_budget_is_shared_by_its_members_and_leaves_other_teams_alone() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let text = format!(
        "{}\n[[teams]]\nname = \"platform\"\ntokens_per_day = 400\n",
        config(&up, "default_max_tokens = 64")
    );
    let weir = Weir::start_in(dir(), &text).await;
    // Alice's own budget is far from its end; the team's is what ends.
    let (_, alice) = create(
        &weir,
        json!({"user": "alice", "team": "platform", "tokens_per_day": 100_000}),
    )
    .await;
    let (_, bob) = create(&weir, json!({"user": "bob", "team": "platform"})).await;
    let (_, carol) = create(&weir, json!({"user": "carol", "team": "data"})).await;
    let mut served = 0;
    let refused = loop {
        let (status, body) = ask(&weir, &alice, "claude-sonnet").await;
        if status != 200 {
            break (status, body);
        }
        served += 1;
        assert!(served < 20, "the team's budget never ended");
    };
    assert!(served >= 1, "the team's budget let nothing through");
    assert_eq!(refused.0, 429, "{}", refused.1);
    assert!(
        refused.1.contains("team `platform`") && refused.1.contains("tokens_per_day"),
        "{}",
        refused.1
    );
    // Bob never asked, and the team's day is spent for him too.
    let (status, body) = ask(&weir, &bob, "claude-sonnet").await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("team `platform`"), "{body}");
    // Another team is untouched.
    assert_eq!(ask(&weir, &carol, "claude-sonnet").await.0, 200);
    // The team's refusal gave Alice's own reservation back, and her
    // window shows only what was served; the team's is there to read.
    let (status, _, body) = get_with(&weir.url("web", "/v1/me"), &[("x-api-key", &alice)]).await;
    assert_eq!(status, 200, "{body}");
    let me: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(me["in_flight"], 0, "{me}");
    let own = &me["budget"]["tokens_per_day"];
    assert_eq!(own["reserved"], 0, "{me}");
    let team = &me["team_budget"]["windows"]["tokens_per_day"];
    assert_eq!(team["limit"], 400, "{me}");
    assert_eq!(team["used"], own["used"], "only Alice spent: {me}");
}

#[tokio::test]
async fn a_monthly_spend_warns_past_its_soft_limit_then_refuses_until_next_month() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, "default_max_tokens = 64")).await;
    // Each request reserves about 0.00017 (its bytes / 3 at 1 per million,
    // 64 output tokens at 2 per million).
    let (id, secret) = create(
        &weir,
        json!({"user": "dan", "spend_per_month": 0.0006, "warn_at": 50}),
    )
    .await;
    let mut warned = None;
    let mut refused = None;
    for _ in 0..20 {
        let (status, headers, body) = post(
            &weir,
            "/v1/messages",
            messages_body("claude-sonnet", false),
            &[("anthropic-version", "2023-06-01"), ("x-api-key", &secret)],
        )
        .await;
        if status != 200 {
            refused = Some((status.as_u16(), body, headers));
            break;
        }
        if let Some(w) = headers.get("x-weir-budget-warning") {
            warned.get_or_insert(w.to_str().unwrap_or("").to_string());
        }
    }
    let warned = warned.expect("a warning before the refusal");
    assert!(warned.starts_with("spend_per_month="), "{warned}");
    let (status, body, headers) = refused.expect("the month's budget ends");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("spend_per_month"), "{body}");
    let retry: u64 = headers["retry-after"]
        .to_str()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    assert!(retry > 60, "until the month ends, not soon: {retry}");
    // The admin API shows the month as this weir's ledger enforces it:
    // spent past half, and when it resets.
    let (status, v) = admin(
        &weir,
        http::Method::GET,
        &format!("/admin/keys/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["budget"]["source"], "local", "{v}");
    assert_eq!(v["budget"]["warn_at"], 50, "{v}");
    let month = &v["budget"]["windows"]["spend_per_month"];
    let used = month["used"].as_f64().expect("used");
    assert!(used > 0.0 && used <= 0.0006, "{v}");
    let resets = month["resets_in_seconds"].as_u64().expect("seconds");
    assert!(resets.abs_diff(retry) <= 5, "{resets} vs {retry}: {v}");
    assert!(v["team_budget"].is_null(), "no team: {v}");
}

#[tokio::test]
async fn an_expired_key_is_refused_saying_so_and_bad_settings_get_every_problem() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, "")).await;
    let (_, secret) = create(
        &weir,
        json!({"name": "old", "expires_at": "2020-01-01T00:00:00Z"}),
    )
    .await;
    let (status, body) = ask(&weir, &secret, "claude-sonnet").await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("expired"), "{body}");
    let (status, v) = admin(
        &weir,
        http::Method::POST,
        "/admin/keys",
        json!({"user": 3, "models": "claude", "colour": "red"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["problems"].as_array().map(Vec::len), Some(3), "{v}");
    // The admin token is needed.
    let (status, _, _) = get_with(&weir.admin_url("/admin/keys"), &[]).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn usage_rows_are_written_and_reported_by_person_and_model_and_none_lost_at_shutdown() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let dir = dir();
    let db = dir.path().join("weir.db");
    let mut weir = Weir::start_in(dir, &config(&up, "")).await;
    let (_, alice) = create(&weir, json!({"user": "alice", "team": "platform"})).await;
    let (_, bob) = create(&weir, json!({"user": "bob", "team": "platform"})).await;
    // Alice's three requests: Claude Code's session `s-one`, its subagent
    // `sub-1` in it, and Codex's session `s-two`; Bob's names none.
    let hints: [&[(&str, &str)]; 3] = [
        &[("x-claude-code-session-id", "s-one")],
        &[
            ("x-claude-code-session-id", "s-one"),
            ("x-claude-code-agent-id", "sub-1"),
        ],
        &[("session_id", "s-two")],
    ];
    for hint in hints {
        let asked = ask_with(&weir, &alice, "claude-sonnet", hint).await;
        assert_eq!(asked.0, 200);
    }
    assert_eq!(ask(&weir, &bob, "claude-haiku").await.0, 200);
    // Rows are written off the request path: await them in the report.
    let lines = usage_lines(&weir, "group_by=person,model", 4).await;
    let alice_line = lines.iter().find(|l| l["user"] == "alice").expect("alice");
    assert_eq!(alice_line["requests"], 3, "{lines:?}");
    assert_eq!(alice_line["model"], "claude-sonnet");
    assert!(
        alice_line["input_tokens"].as_u64() > Some(0),
        "{alice_line}"
    );
    assert!(alice_line["spend"].as_f64() > Some(0.0), "{alice_line}");
    // Per session and agent: each of Alice's requests is a line of its
    // own with a third of her tokens and spend; Bob's has neither.
    let lines = usage_lines(&weir, "group_by=session,agent", 4).await;
    let line = |session: Value, agent: Value| {
        let found = lines
            .iter()
            .find(|l| l["session"] == session && l["agent"] == agent);
        found.unwrap_or_else(|| panic!("{session} {agent} in {lines:?}"))
    };
    let third = |l: &Value, field: &str| {
        assert_eq!(l["requests"], 1, "{l}");
        let (one, all) = (l[field].as_f64(), alice_line[field].as_f64());
        let (one, all) = (one.unwrap_or(-1.0), all.unwrap_or(0.0));
        assert!(
            (one * 3.0 - all).abs() < 1e-9,
            "{field}: {l} of {alice_line}"
        );
    };
    for l in [
        line(json!("s-one"), Value::Null),
        line(json!("s-one"), json!("sub-1")),
        line(json!("s-two"), Value::Null),
    ] {
        third(l, "input_tokens");
        third(l, "output_tokens");
        third(l, "spend");
    }
    assert_eq!(line(Value::Null, Value::Null)["requests"], 1, "{lines:?}");
    let by_session = usage_lines(&weir, "group_by=session", 4).await;
    let one = by_session.iter().find(|l| l["session"] == "s-one");
    assert_eq!(
        one.map(|l| &l["requests"]),
        Some(&json!(2)),
        "{by_session:?}"
    );
    let (status, v) = admin(
        &weir,
        http::Method::GET,
        "/admin/usage?group_by=colour",
        Value::Null,
    )
    .await;
    assert_eq!(status, 400, "{v}");

    // Rows queued at a graceful stop are written before it ends: with the
    // database locked by another writer, the last rows wait in the queue,
    // and the stop waits for them.
    let lock = rusqlite::Connection::open(&db).expect("db");
    lock.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    for _ in 0..5 {
        assert_eq!(ask(&weir, &bob, "claude-haiku").await.0, 200);
    }
    let stopping = tokio::spawn(weir.shutdown());
    let early = tokio::time::timeout(Duration::from_millis(800), async {
        while !stopping.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(early.is_err(), "the stop waits for the queued rows");
    lock.execute_batch("COMMIT").expect("unlock");
    assert!(stopping.await.expect("stopped"));
    let n: i64 = lock
        .query_row("SELECT COUNT(*) FROM usage WHERE user = 'bob'", [], |r| {
            r.get(0)
        })
        .expect("count");
    assert_eq!(n, 6);
}

#[test]
fn runtime_keys_without_a_database_is_a_config_problem() {
    let text = "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
                [[route]]\nname = \"llm\"\nkind = \"anthropic\"\nruntime_keys = true\n\
                default_upstreams = [\"up\"]\n\
                [[route.upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:9\"\n";
    let err = weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), text)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("no database"), "{err}");
    assert!(err.contains("[database]"), "{err}");
    let text = format!("[database]\nurl = \"mysql://x\"\n{text}");
    let err = weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), &text)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("sqlite:"), "{err}");
}

#[test]
fn a_fleet_accepts_week_and_month_budgets_of_client_tokens() {
    let text = "[cluster]\nurl = \"redis://127.0.0.1:6379\"\n\
                [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
                [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
                default_upstreams = [\"up\"]\n\
                [[route.clients]]\nname = \"ci\"\ntoken_env = \"HOME\"\nspend_per_month = 5\n\
                [[route.upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:9\"\n";
    // The fleet keeps every bound in Redis (docs/decisions/100).
    let parsed = weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), text);
    assert!(parsed.is_ok(), "{:?}", parsed.err().map(|e| e.to_string()));
}

#[test]
fn every_team_budget_problem_is_named_at_once() {
    let text = "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
                [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
                default_upstreams = [\"up\"]\n\
                [[route.upstreams]]\nname = \"up\"\nurl = \"http://127.0.0.1:9\"\n\
                [[teams]]\nname = \"platform\"\nspend_per_month = 500.0\n\
                [[teams]]\nname = \"platform\"\nspend_per_day = 5\n\
                [[teams]]\nname = \"data\"\n\
                [[teams]]\nspend_per_day = 5\n";
    let err = weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), text)
        .expect_err("refused")
        .to_string();
    for want in [
        "team `platform` is listed twice",
        "team `data` has no budget",
        "teams[3].name: missing",
        "neither a `[database]` nor an `[idp]`",
    ] {
        assert!(err.contains(want), "{want} in {err}");
    }
}

/// A key's `rate_limit_per_second` 2 with a burst of 2, on a route of
/// `kind` over `api`: two requests at once pass, the third is refused 429
/// with `Retry-After: 1` in the client's own error shape, before the
/// upstream sees it; another key is untouched. Returns the refusal's body.
async fn rate_refused(kind: &str, api: ProviderApi, path: &str, body: String) -> Value {
    let up = Provider::spawn(api, Options::default()).await;
    let text = config(&up, "").replace("kind = \"anthropic\"", &format!("kind = \"{kind}\""));
    let weir = Weir::start_in(dir(), &text).await;
    let (_, secret) = create(
        &weir,
        json!({"user": "eve", "rate_limit_per_second": 2, "rate_limit_burst": 2}),
    )
    .await;
    let (_, other) = create(&weir, json!({"user": "frank"})).await;
    let send = |secret: String| {
        let (weir, body) = (&weir, body.clone());
        async move {
            let bearer = format!("Bearer {secret}");
            let headers = [
                ("anthropic-version", "2023-06-01"),
                ("authorization", bearer.as_str()),
            ];
            post(weir, path, body, &headers).await
        }
    };
    for i in 0..2 {
        let (status, _, text) = send(secret.clone()).await;
        assert_eq!(status, 200, "request {i} is within the burst: {text}");
    }
    let (status, headers, text) = send(secret.clone()).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(headers["retry-after"], "1", "{headers:?}");
    assert_eq!(up.journal().len(), 2, "the refused request never left");
    for i in 0..3 {
        let (status, _, text) = send(other.clone()).await;
        assert_eq!(status, 200, "another key's request {i}: {text}");
    }
    serde_json::from_str(&text).expect("json")
}

#[tokio::test]
async fn a_keys_request_rate_refuses_the_third_at_once_in_each_clients_shape() {
    let v = rate_refused(
        "anthropic",
        ProviderApi::Anthropic,
        "/v1/messages",
        messages_body("claude-sonnet", false),
    )
    .await;
    assert_eq!(v["type"], "error", "Anthropic's envelope: {v}");
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("rate_limit_per_second"), "{v}");

    let v = rate_refused(
        "openai",
        ProviderApi::Responses,
        "/v1/responses",
        responses_body("gpt-5", false),
    )
    .await;
    assert!(v.get("type").is_none(), "OpenAI's envelope: {v}");
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
    assert_eq!(v["error"]["code"], "rate_limit_exceeded", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("rate_limit_per_second"), "{v}");
}

/// A team's rate is its keys' when they set none; a key's own wins.
#[tokio::test]
async fn a_teams_request_rate_applies_to_its_keys_that_set_none() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, "")).await;
    let (status, v) = admin(
        &weir,
        http::Method::POST,
        "/admin/teams",
        json!({"name": "platform", "rate_limit_per_second": 1, "rate_limit_burst": 1}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["rate_limit_per_second"], 1, "{v}");
    let (_, member) = create(&weir, json!({"user": "gail", "team": "platform"})).await;
    let (_, own) = create(
        &weir,
        json!({"user": "hal", "team": "platform", "rate_limit_per_second": 100}),
    )
    .await;
    assert_eq!(ask(&weir, &member, "claude-sonnet").await.0, 200);
    let (status, body) = ask(&weir, &member, "claude-sonnet").await;
    assert_eq!(status, 429, "the team's 1/s: {body}");
    assert!(body.contains("rate_limit_per_second"), "{body}");
    for i in 0..3 {
        let (status, body) = ask(&weir, &own, "claude-sonnet").await;
        assert_eq!(status, 200, "the key's own rate wins, request {i}: {body}");
    }
}

/// A key's rate through the API: shown, changed, and every problem with
/// it named at once (as a key's other settings).
#[tokio::test]
async fn a_keys_rate_is_shown_changed_and_bad_ones_get_every_problem() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, "")).await;
    let (id, _) = create(&weir, json!({"name": "ci", "rate_limit_per_second": 5})).await;
    let path = format!("/admin/keys/{id}");
    let (_, v) = admin(&weir, http::Method::GET, &path, Value::Null).await;
    assert_eq!(v["rate_limit_per_second"], 5, "{v}");
    assert_eq!(v["rate_limit_burst"], Value::Null, "{v}");
    let change = json!({"rate_limit_burst": 10});
    let (status, v) = admin(&weir, http::Method::PATCH, &path, change).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["rate_limit_per_second"].as_u64(),
            v["rate_limit_burst"].as_u64()
        ),
        (Some(5), Some(10))
    );
    let bad = json!({"rate_limit_per_second": 0, "rate_limit_burst": 2_000_000, "colour": 1});
    let (status, v) = admin(&weir, http::Method::PATCH, &path, bad).await;
    assert_eq!(status, 400, "{v}");
    let problems = v["problems"].to_string();
    for want in [
        "`rate_limit_per_second` must be a whole number of requests from 1 to 1000000",
        "`rate_limit_burst` must be a whole number of requests from 1 to 1000000",
        "unknown field `colour`",
    ] {
        assert!(problems.contains(want), "{want} in {v}");
    }
    assert_eq!(v["problems"].as_array().map(Vec::len), Some(3), "{v}");
    let cleared = json!({"rate_limit_per_second": null, "rate_limit_burst": 3});
    let (status, v) = admin(&weir, http::Method::PATCH, &path, cleared).await;
    assert_eq!(status, 400, "{v}");
    assert!(v["problems"].to_string().contains("needs a rate"), "{v}");
}

/// `weir keys create --rps --burst` and `update --rps`: the flags reach
/// the key; a bad one is the API's 400, said, and exit 1.
#[tokio::test]
async fn weir_keys_sets_a_keys_rate_with_rps_and_burst() {
    use common::process::{Proc, WEIR, write_config};
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let dir = dir();
    let text = config(&up, "")
        .replace("[log]\n", "[log]\nformat = \"json\"\n")
        .replace("{dir}", &dir.path().display().to_string());
    let file = write_config(&dir, &text);
    let mut proc = Proc::run(&file);
    let admin_at = proc.admin().to_string();
    let weir = |args: &[&str]| {
        let out = std::process::Command::new(WEIR)
            .args(["keys", "--config", &file, "--admin", &admin_at])
            .args(args)
            .output()
            .expect("weir keys");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, secret, shown) = weir(&["create", "--name", "ci", "--rps", "5", "--burst", "10"]);
    assert_eq!(code, Some(0), "{shown}");
    assert!(secret.starts_with("wk-"), "{secret}");
    // The key as shown, after the line saying the secret is shown once.
    let json = shown.find('{').map_or("", |at| &shown[at..]);
    let shown: Value = serde_json::from_str(json).expect(&shown);
    assert_eq!(shown["rate_limit_per_second"], 5, "{shown}");
    assert_eq!(shown["rate_limit_burst"], 10, "{shown}");
    let id = shown["id"].as_str().expect("id").to_string();
    let (code, _, shown) = weir(&["update", &id, "--rps", "7"]);
    assert_eq!(code, Some(0), "{shown}");
    let shown: Value = serde_json::from_str(&shown).expect(&shown);
    assert_eq!(shown["rate_limit_per_second"], 7, "{shown}");
    let (code, _, said) = weir(&["update", &id, "--rps", "0"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("400") && said.contains("rate_limit_per_second"),
        "{said}"
    );
}
