//! The swappable snapshot, applied to a running server the way a reload
//! will: new requests see the new routes at once, a request in flight keeps
//! the snapshot it started with, a route's gate and pool outlive the swap,
//! and a config that cannot be built leaves the running one serving.

mod common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use http_body_util::BodyExt;

fn config(upstream: std::net::SocketAddr, extra: &str) -> String {
    simple_config(upstream, &format!("max_concurrent_requests = 1\n{extra}"))
}

#[tokio::test]
async fn new_requests_see_the_new_snapshot_and_running_ones_keep_theirs() {
    let old = demo_upstream().await;
    let new = upstream(|_req| async { text(200, "new upstream") }).await;
    let weir = Weir::start(&config(old, "")).await;
    let client = h1_client();

    // A stream in flight on the old snapshot holds the route's one slot.
    let resp = client
        .get(
            weir.url("web", "/sse?n=4&interval_ms=100")
                .parse()
                .expect("url"),
        )
        .await
        .expect("stream");
    let mut stream = resp.into_body().into_data_stream();
    stream.next().await.expect("first event").expect("ok");

    let generation = weir.apply(&config(new.addr, "")).expect("applied");
    assert_eq!(generation, 2);

    // The gate survived the swap: the slot is still held, so this is shed.
    let (status, headers, _) = get(&client, &weir.url("web", "/")).await;
    assert_eq!(status, 503, "the route's gate is the same gate");
    assert_eq!(headers["retry-after"], "1");

    // The old stream finishes from the old upstream, uncut.
    let mut rest = Vec::new();
    while let Some(chunk) = stream.next().await {
        rest.extend_from_slice(&chunk.expect("no cut"));
    }
    assert!(String::from_utf8_lossy(&rest).contains("data:"));

    assert!(
        eventually_async(Duration::from_secs(5), || async {
            let (status, _, body) = get(&client, &weir.url("web", "/")).await;
            status == 200 && body == "new upstream"
        })
        .await,
        "new requests go to the new upstream"
    );
}

#[tokio::test]
async fn a_config_that_cannot_be_built_leaves_the_running_one() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let (_, _, pem) = write_cert(weir.dir.path(), "ca", &["ca.test"]);
    let ca = weir.dir.path().join("ca.pem");
    std::fs::write(&ca, pem).expect("ca");
    let text = format!(
        "[upstream]\nca_file = \"{}\"\n{}",
        ca.display(),
        simple_config(closed_port().await, "")
    );
    // Validated while the file is good, built after it went bad: the
    // window a reload racing an edit has.
    let path = weir.dir.path().join("weir.toml");
    let validated = weir::testing::config::Config::parse(&path, &text).expect("valid");
    std::fs::write(&ca, "not a certificate").expect("spoil");
    let err = weir.running().apply(&validated).expect_err("cannot build");
    assert!(err.to_string().contains("ca.pem"), "{err}");
    let (status, _, body) = get(&h1_client(), &weir.url("web", "/echo")).await;
    assert_eq!(status, 200, "still the old upstream: {body}");
    assert!(echo_json(&body).is_object());
}
