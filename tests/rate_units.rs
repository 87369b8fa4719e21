//! Rates written with a unit, end to end: `rate_limit = "10/min"` with a
//! burst of 1 lets one request through, refuses the next within the 6 s
//! interval with a `Retry-After` that says so, and counts each client
//! apart.

mod common;

use common::*;

#[tokio::test]
async fn ten_a_minute_refuses_the_second_request_with_the_wait_until_the_next() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(
        up,
        "rate_limit = \"10/min\"\nrate_limit_burst = 1\n",
    ))
    .await;
    let client = h1_client();
    let url = weir.url("web", "/echo");
    let (first, _, _) = get(&client, &url).await;
    assert_eq!(first, 200);
    let (second, headers, body) = get(&client, &url).await;
    assert_eq!(second, 429, "{body}");
    // One request per 6 s: the wait is 6 s less what has passed (under a
    // second here), rounded up.
    let retry_after: u64 = headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert_eq!(retry_after, 6, "{headers:?}");
}

#[tokio::test]
async fn a_whole_number_is_per_second_as_before() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "rate_limit = 1\nrate_limit_burst = 1\n")).await;
    let client = h1_client();
    let url = weir.url("web", "/echo");
    assert_eq!(get(&client, &url).await.0, 200);
    let (second, headers, _) = get(&client, &url).await;
    assert_eq!(second, 429);
    assert_eq!(
        headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
}
