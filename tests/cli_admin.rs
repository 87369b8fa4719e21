//! The admin API of the real binary: off without a token, status and
//! config without leaking secrets, token guessing rate-limited.

mod common;

use common::process::*;
use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_the_admin_api_is_off() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, &run_config(up));
    let mut weir = Proc::run(&path);
    let admin = weir.admin();
    let (status, _) = admin_post(admin, "/admin/reload", "anything").await;
    assert_eq!(status, 404);
    let (status, _, _) = get(&h1_client(), &format!("http://{admin}/health")).await;
    assert_eq!(status, 200, "/health stays open");
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_status_and_config_report_without_leaking_secrets() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret-value");
    let path = write_config(&dir, &reload_config(up, &token, 7, ""));
    let mut weir = Proc::run(&path);
    let addr = weir.listening("web");
    let admin = weir.admin();
    let authed = |path: &'static str| admin_call(admin, http::Method::GET, path, "s3cret-value");
    let (status, body) = authed("/admin/status").await;
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

    let (status, body) = authed("/admin/config").await;
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
async fn guessing_the_admin_token_is_rate_limited() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret");
    let path = write_config(&dir, &reload_config(up, &token, 0, ""));
    let mut weir = Proc::run(&path);
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
