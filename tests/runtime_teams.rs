//! Teams kept in the database (`/admin/teams`, `weir teams`), applied to
//! their keys without a reload, on every instance sharing the database;
//! the config's teams win. Against the strict Anthropic stand-in, with
//! real SQLite files.

mod common;

use std::time::{Duration, Instant};

use common::keys::{admin, ask, create, dir, until};
use common::provider::{Options, Provider, ProviderApi};
use common::{Weir, get_with};
use serde_json::{Value, json};

/// A route `llm` taking runtime keys, over `up`, with a database at
/// `{dir}/weir.db` (or `db`), an admin token, and `more` after it.
fn config(up: &Provider, db: Option<&str>, more: &str) -> String {
    let text = common::keys::config(up, "default_max_tokens = 64", "sqlite:{dir}/weir.db");
    let text = match db {
        Some(db) => text.replace("{dir}/weir.db", db),
        None => text,
    };
    format!("{text}\n{more}")
}

async fn team(weir: &Weir, method: http::Method, path: &str, body: Value) -> (u16, Value) {
    admin(weir, method, &format!("/admin/teams{path}"), body).await
}

/// Ask with `secret` until refused: how many were served, and the refusal.
async fn spend(weir: &Weir, secret: &str) -> (u32, u16, String) {
    let mut served = 0;
    loop {
        let (status, body) = ask(weir, secret, "claude-sonnet").await;
        if status != 200 {
            return (served, status, body);
        }
        served += 1;
        assert!(served < 20, "the budget never ended");
    }
}

#[tokio::test]
async fn a_team_created_over_the_api_caps_its_keys_together_without_a_reload() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, None, "")).await;
    // Keys of a team that does not exist yet: no team budget, no limit.
    let (_, alice) = create(&weir, json!({"user": "alice", "team": "platform"})).await;
    let (_, bob) = create(&weir, json!({"user": "bob", "team": "platform"})).await;
    let (_, carol) = create(&weir, json!({"user": "carol", "team": "data"})).await;
    assert_eq!(
        ask(&weir, &alice, "gpt-5").await.0,
        200,
        "no team policy yet"
    );

    let (status, v) = team(
        &weir,
        http::Method::POST,
        "",
        json!({"name": "platform", "tokens_per_day": 400, "models": ["claude-*"],
               "per_person": {"spend_per_month": 50.0}}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["tokens_per_day"], 400, "{v}");
    assert_eq!(v["per_person"]["spend_per_month"], 50.0, "{v}");
    // The team's models are its keys' when a key names none.
    let (status, body) = ask(&weir, &bob, "gpt-5").await;
    assert_eq!(status, 403, "{body}");
    let (served, status, body) = spend(&weir, &alice).await;
    assert!(served >= 1, "the team's budget let nothing through");
    assert_eq!(status, 429, "{body}");
    assert!(
        body.contains("team `platform`") && body.contains("tokens_per_day"),
        "{body}"
    );
    // Bob never spent, and the team's day is spent for him too.
    let (status, body) = ask(&weir, &bob, "claude-sonnet").await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("team `platform`"), "{body}");
    assert_eq!(
        ask(&weir, &carol, "claude-sonnet").await.0,
        200,
        "another team"
    );
    // A member reads the team's budget and the policy's own budget.
    let (status, _, body) = get_with(&weir.url("web", "/v1/me"), &[("x-api-key", &bob)]).await;
    assert_eq!(status, 200, "{body}");
    let me: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        me["team_budget"]["windows"]["tokens_per_day"]["limit"], 400,
        "{me}"
    );
    assert!(
        me["budget"].get("spend_per_month").is_some(),
        "per person: {me}"
    );

    // The team as the API shows it: the day's use from the usage rows
    // (refusals are rows too: Alice's first, Bob's two, Alice's last).
    let rows = u64::from(served) + 4;
    let last = std::sync::Mutex::new(Value::Null);
    common::eventually_async(Duration::from_secs(10), || async {
        let (status, v) = team(&weir, http::Method::GET, "/platform", Value::Null).await;
        assert_eq!(status, 200, "{v}");
        let done = v["used"]["day"]["requests"].as_u64() == Some(rows);
        *last.lock().expect("team") = v;
        done
    })
    .await;
    let v = last.into_inner().expect("team");
    let day = &v["used"]["day"];
    assert_eq!(day["requests"], rows, "{v}");
    let used = day["tokens"].as_u64().expect("tokens");
    assert!(used > 0, "{v}");
    assert_eq!(day["tokens_remaining"], 400u64.saturating_sub(used), "{v}");
    let (status, v) = team(&weir, http::Method::GET, "", Value::Null).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["teams"][0]["name"], "platform", "{v}");
    // The admin token is needed.
    let (status, _, _) = get_with(&weir.admin_url("/admin/teams"), &[]).await;
    assert_eq!(status, 401);
    up.assert_all_accepted();
}

#[tokio::test]
async fn a_budget_change_reaches_a_second_instance_sharing_the_file_within_a_second() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let shared = dir();
    let db = format!("{}/weir.db", shared.path().display());
    let one = Weir::start_in(dir(), &config(&up, Some(&db), "")).await;
    let two = Weir::start_in(dir(), &config(&up, Some(&db), "")).await;
    let (status, v) = team(
        &one,
        http::Method::POST,
        "",
        json!({"name": "platform", "tokens_per_day": 100_000}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let (_, secret) = create(&one, json!({"user": "alice", "team": "platform"})).await;
    let admin_two = two.running().admin_addr().expect("admin");
    assert!(
        common::eventually_metric_at(admin_two, "weir_runtime_keys", 1, Duration::from_secs(3))
            .await
    );
    // About 25 tokens each, once served (98 reserved while in flight).
    for _ in 0..3 {
        assert_eq!(ask(&two, &secret, "claude-sonnet").await.0, 200);
    }

    // Now the next request's reservation no longer fits on either.
    let (status, v) = team(
        &one,
        http::Method::PATCH,
        "/platform",
        json!({"tokens_per_day": 120}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["tokens_per_day"], 120, "{v}");
    let started = Instant::now();
    assert_eq!(
        until(&two, &secret, 429, Duration::from_secs(3)).await,
        429,
        "the smaller budget applies on the other instance"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let (_, body) = ask(&two, &secret, "claude-sonnet").await;
    assert!(body.contains("team `platform`"), "{body}");
}

#[tokio::test]
async fn a_deleted_teams_keys_fall_back_to_no_team_budget() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let weir = Weir::start_in(dir(), &config(&up, None, "")).await;
    let (status, v) = team(
        &weir,
        http::Method::POST,
        "",
        json!({"name": "platform", "tokens_per_day": 150}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let (_, secret) = create(&weir, json!({"user": "alice", "team": "platform"})).await;
    let (_, status, body) = spend(&weir, &secret).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("team `platform`"), "{body}");

    let (status, v) = team(&weir, http::Method::DELETE, "/platform", Value::Null).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(ask(&weir, &secret, "claude-sonnet").await.0, 200);
    let (status, v) = team(&weir, http::Method::DELETE, "/platform", Value::Null).await;
    assert_eq!(status, 404, "once: {v}");
    let (status, v) = team(&weir, http::Method::GET, "/platform", Value::Null).await;
    assert_eq!(status, 404, "{v}");
}

#[tokio::test]
async fn bad_team_settings_get_every_problem_and_the_configs_teams_are_refused() {
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let ops = "[[teams]]\nname = \"ops\"\ntokens_per_day = 1000\n";
    let weir = Weir::start_in(dir(), &config(&up, None, ops)).await;
    let (status, v) = team(
        &weir,
        http::Method::POST,
        "",
        json!({"spend_per_month": -1, "models": "claude", "colour": "red",
               "warn_at": 120, "per_person": {"tokens_per_day": 0, "size": 1}}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    let problems: Vec<&str> = v["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for want in [
        "unknown field `colour`",
        "`name` is missing",
        "`spend_per_month`",
        "`models`",
        "`warn_at`",
        "per_person: unknown field `size`",
        "per_person: `tokens_per_day`",
    ] {
        assert!(problems.iter().any(|p| p.contains(want)), "{want} in {v}");
    }
    assert_eq!(problems.len(), 7, "{v}");
    let (status, v) = team(&weir, http::Method::POST, "", json!([1])).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = team(&weir, http::Method::PATCH, "/x", json!({"name": "y"})).await;
    assert_eq!(status, 400, "a rename: {v}");

    // The config's team is the config's: every write is refused, saying where.
    for (method, path, body) in [
        (
            http::Method::POST,
            "",
            json!({"name": "ops", "tokens_per_day": 5}),
        ),
        (http::Method::PATCH, "/ops", json!({"tokens_per_day": 5})),
        (http::Method::DELETE, "/ops", Value::Null),
    ] {
        let (status, v) = team(&weir, method, path, body).await;
        assert_eq!(status, 409, "{v}");
        assert!(
            v["error"].as_str().unwrap_or("").contains("[[teams]]"),
            "{v}"
        );
    }
    let (status, v) = team(&weir, http::Method::POST, "", json!({"name": "web"})).await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = team(&weir, http::Method::POST, "", json!({"name": "web"})).await;
    assert_eq!(status, 409, "exists: {v}");
    let (status, v) = team(&weir, http::Method::PATCH, "/nobody", json!({})).await;
    assert_eq!(status, 404, "{v}");
}

#[tokio::test]
async fn weir_teams_creates_lists_shows_changes_and_deletes_through_the_admin_api() {
    use common::process::{Proc, WEIR, write_config};
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let dir = dir();
    let text = config(&up, None, "")
        .replace("[log]\n", "[log]\nformat = \"json\"\n")
        .replace("{dir}", &dir.path().display().to_string());
    let file = write_config(&dir, &text);
    let mut proc = Proc::run(&file);
    let admin_at = proc.admin().to_string();
    let weir = |args: &[&str]| {
        let out = std::process::Command::new(WEIR)
            .args(["teams", "--config", &file, "--admin", &admin_at])
            .args(args)
            .output()
            .expect("weir teams");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let (code, out) = weir(&[
        "create",
        "platform",
        "--budget",
        "500USD/month",
        "--budget",
        "2000000tokens/week",
        "--models",
        "claude-*",
        "--per-person",
        "50/month",
    ]);
    assert_eq!(code, Some(0), "{out}");
    let shown: Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(shown["spend_per_month"], 500.0, "{out}");
    assert_eq!(shown["tokens_per_week"], 2_000_000, "{out}");
    assert_eq!(shown["per_person"]["spend_per_month"], 50.0, "{out}");
    let (code, out) = weir(&["list"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with("platform") && out.contains("500/month"),
        "{out}"
    );
    let (code, out) = weir(&["update", "platform", "--budget", "off/month"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = weir(&["show", "platform"]);
    assert_eq!(code, Some(0), "{out}");
    let shown: Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(shown["spend_per_month"], Value::Null, "{out}");
    assert_eq!(shown["used"]["month"]["requests"], 0, "{out}");
    let (code, out) = weir(&["create", "x", "--budget", "500USD/year"]);
    assert_eq!(code, Some(2), "refused before asking: {out}");
    assert!(out.contains("500USD/year"), "{out}");
    let (code, out) = weir(&["delete", "platform"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = weir(&["delete", "platform"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("404"), "{out}");
}
