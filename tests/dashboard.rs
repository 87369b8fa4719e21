//! The dashboard on the admin listener: its tokens (the admin token reads
//! and acts, the view token only reads the dashboard's JSON, no token is
//! 401), its strict Content-Security-Policy, its JSON; and in headless
//! Chromium from Debian, the page under that policy with no console
//! error, showing the routes, a server taken out of its group by the
//! health check and back, and the LLM usage charts with data after LLM
//! requests, on a desk and on a phone (screenshots: docs/images/).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::browser::{Browser, chromium};
use common::llm::{messages_body, post, serving};
use common::{Weir, can_run, eventually_async, get_with, send, split, text, upstream};
use serde_json::Value;

const ADMIN: &str = "admin-secret";
const VIEW: &str = "view-secret";

/// weir with a proxy route over two servers under a health check (the
/// second's answer set by `healthy`), an LLM route over `llm` with a
/// client token, a budget and prices, and both dashboard tokens.
async fn start(llm: &str, healthy: Arc<AtomicBool>) -> (Weir, String) {
    let steady = upstream(|_req| async { text(200, "steady") }).await;
    let flaky = upstream(move |req: http::Request<hyper::body::Incoming>| {
        let healthy = healthy.clone();
        async move {
            if req.uri().path() == "/health" && !healthy.load(Ordering::SeqCst) {
                return text(503, "sick");
            }
            text(200, "flaky")
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, secret) in [("admin", ADMIN), ("view", VIEW), ("alice", "tok-alice")] {
        std::fs::write(dir.path().join(name), format!("{secret}\n")).expect("token file");
    }
    let flaky_url = format!("http://{}", flaky.addr);
    let toml = format!(
        "[log]\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{{dir}}/admin\"\n\
         view_token_file = \"{{dir}}/view\"\ndashboard_interval = \"1s\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"app\"\npath = \"/app/\"\n\
         servers = [\"http://{}\", \"{flaky_url}\"]\n\
         [route.health_check]\npath = \"/health\"\ninterval = \"200ms\"\ntimeout = \"150ms\"\nfall = 1\nrise = 1\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
         [[route.clients]]\nname = \"alice\"\ntoken_file = \"{{dir}}/alice\"\ntokens_per_day = 100000\n\
         [[route.prices]]\nmodel = \"*\"\ninput = 3\noutput = 15\n\
         [[route.models]]\nname = \"claude-test\"\nupstreams = [\"mock\"]\n\
         [[route.upstreams]]\nname = \"mock\"\nurl = \"{llm}\"\n",
        steady.addr
    );
    (Weir::start_in(dir, &toml).await, flaky_url)
}

async fn ask_llm(weir: &Weir) {
    let (status, _, body) = post(
        weir,
        "/v1/messages",
        messages_body("claude-test", false),
        &[
            ("x-api-key", "tok-alice"),
            ("anthropic-version", "2023-06-01"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

async fn admin_json(weir: &Weir, path: &str, token: &str) -> (http::StatusCode, Value) {
    let auth = format!("Bearer {token}");
    let (status, _, body) = get_with(&weir.admin_url(path), &[("authorization", &auth)]).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_view_token_reads_the_dashboard_and_nothing_else() {
    let llm = serving(&["hello"]).await;
    let (weir, _) = start(&llm.url(), Arc::new(AtomicBool::new(true))).await;
    let state = weir.admin_url("/admin/dashboard/state");

    // No token, or a wrong one: 401, asking for a bearer token.
    let (status, headers, _) = get_with(&state, &[]).await;
    assert_eq!(status, 401);
    assert_eq!(headers["www-authenticate"], "Bearer");
    let (status, _, _) = get_with(&state, &[("authorization", "Bearer nope")]).await;
    assert_eq!(status, 401);

    // Either token reads it, with the policy and nosniff on the answer.
    for token in [VIEW, ADMIN] {
        let auth = format!("Bearer {token}");
        let (status, headers, body) = get_with(&state, &[("authorization", &auth)]).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            headers["content-security-policy"]
                .to_str()
                .is_ok_and(|p| p.starts_with("default-src 'none'; script-src 'self'"))
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        let routes: Vec<&str> = v["routes"]
            .as_array()
            .expect("routes")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(routes, ["app", "llm"]);
    }
    for path in [
        "/admin/dashboard/series",
        "/admin/dashboard/usage?group_by=model",
    ] {
        assert_eq!(admin_json(&weir, path, VIEW).await.0, 200, "{path}");
    }

    // The view token may not act, nor read keys or the config: 403.
    let view = format!("Bearer {VIEW}");
    let reload = send(
        http::Method::POST,
        &weir.admin_url("/admin/reload"),
        &[("authorization", &view)],
        "",
    )
    .await;
    assert_eq!(reload.status(), 403);
    for path in [
        "/admin/keys",
        "/admin/config",
        "/admin/status",
        "/admin/usage",
    ] {
        let (status, _, _) = get_with(&weir.admin_url(path), &[("authorization", &view)]).await;
        assert_eq!(status, 403, "{path}");
    }
    let post_state = send(http::Method::POST, &state, &[("authorization", &view)], "").await;
    assert_eq!(post_state.status(), 403, "the view token only reads");
    // The admin token still acts.
    let admin = format!("Bearer {ADMIN}");
    let (status, _, _) = get_with(
        &weir.admin_url("/admin/config"),
        &[("authorization", &admin)],
    )
    .await;
    assert_eq!(status, 200);

    // The page's files carry no data: served without a token, under the
    // policy; `/dashboard` moves to `/dashboard/`.
    let (status, headers, _) = get_with(&weir.admin_url("/dashboard"), &[]).await;
    assert_eq!(
        (status.as_u16(), &headers["location"]),
        (308, &"/dashboard/".parse().expect("value"))
    );
    for (path, kind) in [
        ("/dashboard/", "text/html"),
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/uplot.js", "text/javascript"),
        ("/dashboard/app.css", "text/css"),
    ] {
        let (status, headers, body) = get_with(&weir.admin_url(path), &[]).await;
        assert_eq!(status, 200, "{path}");
        assert!(
            headers["content-type"]
                .to_str()
                .is_ok_and(|t| t.starts_with(kind)),
            "{path}"
        );
        assert!(headers.contains_key("content-security-policy"), "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(!body.contains(VIEW) && !body.contains(ADMIN));
    }
    let (status, _, _) = get_with(&weir.admin_url("/dashboard/nothing.js"), &[]).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn without_a_token_the_dashboard_is_off() {
    let up = upstream(|_req| async { text(200, "ok") }).await;
    let weir = Weir::start(&common::simple_config(up.addr, "")).await;
    for path in ["/dashboard/", "/admin/dashboard/state"] {
        let (status, _, _) = get_with(&weir.admin_url(path), &[]).await;
        assert_eq!(status, 404, "{path}");
    }
}

#[tokio::test]
async fn the_json_follows_requests_members_and_spend() {
    let llm = serving(&["hello", "world"]).await;
    let healthy = Arc::new(AtomicBool::new(true));
    let (weir, flaky) = start(&llm.url(), healthy.clone()).await;
    // A first sample, then traffic, so the ring sees it as a change.
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            admin_json(&weir, "/admin/dashboard/series", VIEW).await.1["at"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
        .await
    );
    for _ in 0..4 {
        let (s, _, _) =
            split(send(http::Method::GET, &weir.url("web", "/app/x"), &[], "").await).await;
        assert_eq!(s, 200);
        ask_llm(&weir).await;
    }
    let charted = eventually_async(Duration::from_secs(10), || async {
        let series = admin_json(&weir, "/admin/dashboard/series", VIEW).await.1;
        let sum = |chart: &str, name: &str| -> f64 {
            series["charts"][chart][name]
                .as_array()
                .map_or(0.0, |v| v.iter().filter_map(Value::as_f64).sum())
        };
        sum("requests", "app") > 0.0
            && sum("spend", "alice") > 0.0
            && sum("tokens", "claude-test") > 0.0
    })
    .await;
    assert!(
        charted,
        "{}",
        admin_json(&weir, "/admin/dashboard/series", VIEW).await.1
    );
    let state = admin_json(&weir, "/admin/dashboard/state", VIEW).await.1;
    let app = &state["routes"][0];
    assert_eq!(app["requests"], 4.0, "{app}");
    assert!(app["latency_ms"]["p50"].as_f64().is_some(), "{app}");
    let alice = &state["llm"]["since_start"]["client"][0];
    assert_eq!(
        (alice["client"].as_str(), alice["requests"].as_f64()),
        (Some("alice"), Some(4.0))
    );
    assert!(alice["spend"].as_f64().is_some_and(|s| s > 0.0), "{alice}");
    let budget = &state["llm"]["budgets"][0];
    assert_eq!(
        (budget["client"].as_str(), budget["bound"].as_str()),
        (Some("alice"), Some("tokens_per_day"))
    );
    let usage = admin_json(&weir, "/admin/dashboard/usage?group_by=model", VIEW)
        .await
        .1;
    assert_eq!(usage["source"], "process");
    assert_eq!(usage["usage"][0]["model"], "claude-test", "{usage}");
    assert_eq!(
        admin_json(&weir, "/admin/dashboard/usage?group_by=team", VIEW)
            .await
            .0,
        400,
        "teams need the database"
    );

    // The health check takes the flaky server out, and brings it back.
    let member = |state: &Value| -> Value {
        state["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["members"].as_array().into_iter().flatten())
            .find(|m| m["server"].as_str().is_some_and(|s| s.starts_with(&flaky)))
            .cloned()
            .unwrap_or(Value::Null)
    };
    healthy.store(false, Ordering::SeqCst);
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            let m = member(&admin_json(&weir, "/admin/dashboard/state", VIEW).await.1);
            m["state"] == "out" && m["why"] == "health_check"
        })
        .await
    );
    healthy.store(true, Ordering::SeqCst);
    assert!(
        eventually_async(Duration::from_secs(10), || async {
            member(&admin_json(&weir, "/admin/dashboard/state", VIEW).await.1)["state"] == "in"
        })
        .await
    );
}

/// Where the screenshots go: docs/images/ with WEIR_UPDATE_SCREENSHOTS
/// set, else the target directory (a run does not dirty the tree).
fn shot(name: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    match std::env::var_os("WEIR_UPDATE_SCREENSHOTS") {
        Some(_) => root.join("docs/images").join(name),
        None => root.join("target/screenshots").join(name),
    }
}

/// The text of the members table row of `server`, in the page.
fn member_row(server: &str) -> String {
    format!(
        "Array.from(document.querySelectorAll('table.members tr'))\
         .map(r => r.textContent).filter(t => t.includes({server:?})).join('|')"
    )
}

#[tokio::test]
async fn a_browser_shows_the_live_dashboard_under_its_policy_with_no_console_errors() {
    let found = chromium();
    if !can_run(
        found.is_some(),
        "chromium is not installed",
        "apt-get install chromium",
        "WEIR_REQUIRE_CHROMIUM",
    ) {
        return;
    }
    let llm = serving(&["hello", "world"]).await;
    let healthy = Arc::new(AtomicBool::new(true));
    let (weir, flaky) = start(&llm.url(), healthy.clone()).await;
    let mut b = Browser::start(&found.expect("found")).await;
    b.viewport(1280, 900, false).await;
    b.open(&weir.admin_url("/dashboard/")).await;

    // It asks for a token; a wrong one is refused and asked for again.
    assert!(
        b.until(
            Duration::from_secs(10),
            "!document.getElementById('login').hidden"
        )
        .await
    );
    let submit = |token: &str| {
        format!(
            "document.getElementById('token').value = {token:?};\
             document.getElementById('login').requestSubmit(); true"
        )
    };
    b.eval(&submit("wrong")).await;
    assert!(
        b.until(
            Duration::from_secs(10),
            "document.getElementById('login-error').textContent.includes('not accepted')"
        )
        .await
    );
    // The browser logs the refused fetches (401: the state's and the
    // series', asked together), and only those. The second's log may come
    // after the page has shown the first's refusal: await both.
    let both = |errors: &[String]| {
        ["dashboard/state", "dashboard/series"]
            .iter()
            .all(|u| errors.iter().any(|e| e.contains(u)))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !both(&b.errors) && std::time::Instant::now() < deadline {
        b.until(Duration::from_millis(50), "false").await;
    }
    assert!(
        both(&b.errors) && b.errors.iter().all(|e| e.contains("status of 401")),
        "{:#?}",
        b.errors
    );
    b.errors.clear();
    // The view token shows the routes.
    b.eval(&submit(VIEW)).await;
    let routes = "(t => t.includes('app') && t.includes('llm') && t.includes('/app/'))\
                  (document.getElementById('routes').textContent)";
    assert!(
        b.until(Duration::from_secs(10), routes).await,
        "routes shown"
    );

    // Traffic after the page's first sample shows in the charts.
    for _ in 0..4 {
        let (s, _, _) =
            split(send(http::Method::GET, &weir.url("web", "/app/x"), &[], "").await).await;
        assert_eq!(s, 200);
        ask_llm(&weir).await;
    }
    let charted = "['requests', 'spend', 'tokens'].every(c => {\
                     const e = document.getElementById('chart-' + c);\
                     return Number(e.dataset.total) > 0 && e.querySelector('canvas') !== null; })";
    assert!(
        b.until(Duration::from_secs(15), charted).await,
        "charts with data"
    );
    assert!(
        b.until(
            Duration::from_secs(10),
            "document.getElementById('usage').textContent.includes('alice')"
        )
        .await
    );

    // The health check takes the flaky server out; the page says so, and
    // why; then it is back.
    healthy.store(false, Ordering::SeqCst);
    let out = format!(
        "(t => t.includes('out') && t.includes('health_check'))({})",
        member_row(&flaky)
    );
    assert!(b.until(Duration::from_secs(15), &out).await, "shown out");
    b.screenshot(&shot("dashboard.png"), 2400.0).await;
    healthy.store(true, Ordering::SeqCst);
    let back = format!(
        "(t => t.length > 0 && !t.includes('out'))({})",
        member_row(&flaky)
    );
    assert!(
        b.until(Duration::from_secs(15), &back).await,
        "shown back in"
    );

    // A phone: the same tab (the token kept in sessionStorage), no
    // sideways scrolling.
    b.viewport(390, 844, true).await;
    b.open(&weir.admin_url("/dashboard/?on=phone")).await;
    assert!(
        b.until(Duration::from_secs(10), routes).await,
        "routes on a phone"
    );
    assert!(
        b.until(Duration::from_secs(15), charted).await,
        "charts on a phone"
    );
    let width = b.eval("document.documentElement.scrollWidth").await;
    assert!(
        width.as_f64().is_some_and(|w| w <= 391.0),
        "fits a phone: {width}"
    );
    b.screenshot(&shot("dashboard-phone.png"), 2400.0).await;

    // A refresh or two more, then not one error: no script error, no
    // policy violation, no failed load.
    let refreshed = b.eval("Number(document.body.dataset.refreshed)").await;
    let later = format!("Number(document.body.dataset.refreshed) > {refreshed}");
    assert!(b.until(Duration::from_secs(10), &later).await, "live");
    assert!(
        b.errors.is_empty(),
        "the page reported errors: {:#?}",
        b.errors
    );
}

#[tokio::test]
async fn the_budgets_nearest_their_limits_include_runtime_keys_and_teams() {
    use common::keys;
    use common::provider::{Options, Provider, ProviderApi};
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let text = format!(
        "{}\n[[teams]]\nname = \"platform\"\ntokens_per_day = 200000\n",
        keys::config(&up, "default_max_tokens = 64", "sqlite:{dir}/weir.db")
    );
    let weir = Weir::start_in(keys::dir(), &text).await;
    let (id, secret) = keys::create(
        &weir,
        serde_json::json!({"user": "alice", "team": "platform", "tokens_per_day": 1000}),
    )
    .await;
    assert_eq!(keys::ask(&weir, &secret, "claude-sonnet").await.0, 200);
    let state = admin_json(&weir, "/admin/dashboard/state", keys::ADMIN)
        .await
        .1;
    let budgets = state["llm"]["budgets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let key = budgets.iter().find(|b| b["kind"] == "key");
    let key = key.unwrap_or_else(|| panic!("no key budget in {budgets:#?}"));
    assert_eq!(
        (
            key["key"].as_str(),
            key["user"].as_str(),
            key["bound"].as_str()
        ),
        (Some(id.as_str()), Some("alice"), Some("tokens_per_day"))
    );
    assert!(key["used"].as_f64().is_some_and(|u| u > 0.0), "{key}");
    let team = budgets.iter().find(|b| b["kind"] == "team");
    let team = team.unwrap_or_else(|| panic!("no team budget in {budgets:#?}"));
    assert_eq!(
        (team["team"].as_str(), team["bound"].as_str()),
        (Some("platform"), Some("tokens_per_day"))
    );
    assert_eq!(team["used"], key["used"], "the key's request is its team's");
    // The key's own budget is the fuller: it comes first.
    assert_eq!(budgets[0]["kind"], "key", "{budgets:#?}");
}
