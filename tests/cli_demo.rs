//! `weir demo`: a proxy and an LLM gateway with no file at all.

mod common;

use common::process::*;
use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn demo_serves_without_any_file() {
    let mut weir = Proc::spawn(&[
        "demo",
        "--http-port",
        "0",
        "--https-port",
        "0",
        "--admin-port",
        "0",
    ]);
    let banner = weir.wait_for(|l| l.contains("curl -s http://127.0.0.1:") && l.contains("/echo"));
    let port: u16 = banner
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("port in banner");
    assert_ne!(port, 0, "the banner shows the bound port");
    let (status, _, body) = get(&h1_client(), &format!("http://127.0.0.1:{port}/echo?x=1")).await;
    assert_eq!(status, 200);
    assert_eq!(echo_json(&body)["query"], "x=1");

    // Both directions of translation, on the demo's mock providers.
    let post = |path: &str, body: serde_json::Value| {
        let url = format!("http://127.0.0.1:{port}{path}");
        async move { post_json(&url, body.to_string(), &[]).await }
    };
    let (status, _, body) = post(
        "/v1/messages",
        serde_json::json!({"model": "demo-gpt", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let m: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        m["content"][0]["text"], "Hello from weir's demo model.",
        "{body}"
    );
    let (status, _, body) = post(
        "/v1/responses",
        serde_json::json!({"model": "demo-claude", "input": "hi"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let r: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        r["output"][0]["content"][0]["text"], "Hello from weir's demo model.",
        "{body}"
    );
}
