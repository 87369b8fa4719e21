//! LLM routes end to end on real sockets: weir in-process, scripted mock
//! providers on port 0, a real HTTP client. The failover matrix (each
//! trigger and each non-trigger, preamble-then-error, a cut mid-stream),
//! cooldowns, client tokens checked before the body, per-token bounds, the
//! byte budget, keep-alives at event boundaries, cancellation, count_tokens,
//! and byte-for-byte passthrough. The official SDKs drive the same routes
//! in tests/llm_sdk.rs.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::llm::*;
use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const WORDS: &[&str] = &["Hello", " there", "."];

async fn messages(
    weir: &Weir,
    model: &str,
    stream: bool,
) -> (http::StatusCode, http::HeaderMap, String) {
    post(
        weir,
        "/v1/messages",
        messages_body(model, stream),
        &[("anthropic-version", "2023-06-01")],
    )
    .await
}

/// An Anthropic route over `up` admitting the client tokens `tok-a` and
/// `tok-b`, plus `extra` route keys.
async fn with_two_tokens(up: &MockLlm, extra: &str) -> Weir {
    let (dir, tokens) = client_tokens("tok-a\ntok-b\n");
    Weir::start_in(
        dir,
        &llm_config(
            "anthropic",
            &[("up", up.url())],
            &format!("{extra}{tokens}"),
        ),
    )
    .await
}

fn error_type(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
    v["error"]["type"].as_str().unwrap_or("").to_string()
}

#[tokio::test]
async fn a_streamed_answer_and_the_request_pass_byte_for_byte() {
    // Tool use and thinking, as a provider sends them.
    let events: Vec<Bytes> = [
        r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"up-id","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me see"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\"}"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|d| {
        let v: serde_json::Value = serde_json::from_str(d).expect("fixture");
        Bytes::from(format!("event: {}\ndata: {d}\n\n", v["type"].as_str().expect("type")))
    })
    .collect();
    let expected: Vec<u8> = events.iter().flat_map(|b| b.to_vec()).collect();
    let up = mock(move |_| {
        // Split across writes in awkward places.
        sse_reply(
            events
                .iter()
                .flat_map(|e| {
                    let mid = e.len() / 2;
                    [Step::Send(e.slice(..mid)), Step::Send(e.slice(mid..))]
                })
                .collect(),
        )
        .with_header("request-id", "req_upstream")
        .with_header("anthropic-ratelimit-requests-remaining", "99")
    })
    .await;
    let weir = weir_over(
        "anthropic",
        &up,
        "[[route.models]]\nname = \"client-id\"\nupstreams = [\"up:up-id\"]",
    )
    .await;
    let request = r#"{"model":"client-id","max_tokens":64,"stream":true,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"weather?","cache_control":{"type":"ephemeral","ttl":"1h"}}]}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}"#;
    let (status, headers, body) = post(
        &weir,
        "/v1/messages?beta=true",
        request,
        &[
            ("anthropic-version", "2023-01-01"),
            (
                "anthropic-beta",
                "prompt-caching-2024-07-31,fine-grained-tool-streaming-2025-05-14",
            ),
            ("x-stainless-retry-count", "0"),
            ("x-api-key", "sk-client"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_bytes(), &expected[..], "the stream is unchanged");
    assert_eq!(headers["request-id"], "req_upstream");
    assert_eq!(headers["anthropic-ratelimit-requests-remaining"], "99");

    let seen = &up.seen()[0];
    assert_eq!(seen.path, "/v1/messages?beta=true");
    assert_eq!(
        seen.body,
        Bytes::from(request.replace("\"client-id\"", "\"up-id\"")),
        "only the model differs"
    );
    assert_eq!(
        seen.headers["anthropic-beta"],
        "prompt-caching-2024-07-31,fine-grained-tool-streaming-2025-05-14"
    );
    assert_eq!(
        seen.headers["anthropic-version"], "2023-01-01",
        "the client's own version, not the one weir adds when none is sent"
    );
    assert_eq!(seen.headers["x-stainless-retry-count"], "0");
    assert_eq!(
        seen.headers["x-api-key"], "sk-client",
        "passed through by default"
    );
}

#[tokio::test]
async fn failover_triggers_move_on_and_other_statuses_are_relayed() {
    for status in [429u16, 500, 502, 503, 504, 529] {
        let bad = mock(move |seen| error(seen, status, "overloaded_error", "busy")).await;
        let good = serving(WORDS).await;
        let weir = failover_pair("anthropic", &bad, &good).await;
        let (s, _, body) = messages(&weir, "m", true).await;
        assert_eq!(s, 200, "{status} fails over: {body}");
        assert!(body.contains("message_stop"), "{status}: {body}");
        assert_eq!((bad.seen().len(), good.seen().len()), (1, 1), "{status}");
    }
    for status in [400u16, 401, 403, 404, 413] {
        let bad = mock(move |seen| error(seen, status, "invalid_request_error", "no")).await;
        let good = serving(WORDS).await;
        let weir = failover_pair("anthropic", &bad, &good).await;
        let (s, _, body) = messages(&weir, "m", true).await;
        assert_eq!(s.as_u16(), status, "{status} is relayed: {body}");
        assert!(body.contains("\"message\":\"no\""), "verbatim: {body}");
        assert_eq!(good.seen().len(), 0, "{status}: no failover");
    }
}

#[tokio::test]
async fn unreachable_and_slow_upstreams_are_passed_over() {
    let slow =
        mock(|seen| success(seen, WORDS, Duration::ZERO).delayed(Duration::from_secs(3))).await;
    let good = serving(WORDS).await;
    let weir = Weir::start(&llm_config(
        "openai",
        &[
            ("gone", refusing().await),
            ("slow", slow.url()),
            ("good", good.url()),
        ],
        "first_byte_timeout = \"300ms\"",
    ))
    .await;
    let (s, _, body) = post(&weir, "/v1/responses", &responses_body("m", false), &[]).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).expect("json")["status"],
        "completed"
    );
    let m = metrics(&weir).await;
    assert!(
        m.contains(
            "weir_llm_failovers_total{route=\"llm\",model=\"default\",reason=\"connect\"} 1"
        ),
        "{m}"
    );
    assert!(
        m.contains(
            "weir_llm_failovers_total{route=\"llm\",model=\"default\",reason=\"timeout\"} 1"
        ),
        "{m}"
    );
}

#[tokio::test]
async fn an_error_after_the_preamble_still_fails_over() {
    // response.created, then an error event: what no other gateway fails over on.
    let bad = mock(|seen| {
        let events = stream_events(Api::Responses, "m", &[]);
        sse_reply(vec![
                Step::Send(events[0].clone()),
                Step::Send(events[1].clone()),
                Step::Send(Bytes::from_static(
                    b"event: error\ndata: {\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"quota\",\"param\":null,\"sequence_number\":2}\n\n",
                )),
            ])
        .with_header("x-test", "bad")
        .with_header("x-model", &seen.model())
    })
    .await;
    let good = serving(WORDS).await;
    let weir = failover_pair("openai", &bad, &good).await;
    let (s, headers, body) = post(&weir, "/v1/responses", &responses_body("m", true), &[]).await;
    assert_eq!(s, 200);
    assert!(headers.get("x-test").is_none(), "the good upstream's head");
    let names = event_names(&body);
    assert_eq!(names.first().map(String::as_str), Some("response.created"));
    assert_eq!(names.last().map(String::as_str), Some("response.completed"));
    assert!(
        !body.contains("insufficient_quota"),
        "the failed preamble never reached the client"
    );
    let m = metrics(&weir).await;
    assert!(m.contains("reason=\"preamble_error\"} 1"), "{m}");
}

#[tokio::test]
async fn a_cut_after_content_ends_with_an_error_event_not_a_clean_end() {
    for (kind, path, api) in [
        ("anthropic", "/v1/messages", Api::Messages),
        ("openai", "/v1/responses", Api::Responses),
        ("openai", "/v1/chat/completions", Api::Chat),
    ] {
        let up = mock(move |_| {
            let events = stream_events(api, "m", WORDS);
            let half = events[4].slice(..events[4].len() / 2);
            sse_reply(vec![
                Step::Send(events[0].clone()),
                Step::Send(events[1].clone()),
                Step::Send(events[2].clone()),
                Step::Send(events[3].clone()),
                Step::Send(half),
                Step::Cut,
            ])
        })
        .await;
        let weir = weir_over(kind, &up, "").await;
        let body = match api {
            Api::Messages => messages_body("m", true),
            Api::Chat => serde_json::json!({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}).to_string(),
            _ => responses_body("m", true),
        };
        let (s, _, out) = post(&weir, path, &body, &[]).await;
        assert_eq!(s, 200, "{path}");
        // Whole events only: the half event was never passed on.
        let whole = events(&out);
        let (name, data) = whole.last().expect("events");
        assert!(
            name.contains("error") || data.to_string().contains("error"),
            "{path} ends with an error event: {out}"
        );
        assert!(
            !out.contains("message_stop")
                && !out.contains("response.completed")
                && !out.contains("[DONE]"),
            "{path}: no success terminator: {out}"
        );
    }
}

#[tokio::test]
async fn the_most_useful_failure_is_relayed_and_none_answered_is_502() {
    let overloaded = mock(|seen| error(seen, 529, "overloaded_error", "overloaded")).await;
    let limited = mock(|seen| {
        error(seen, 429, "rate_limit_error", "slow down")
            .with_header("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:00Z")
    })
    .await;
    // The 429 first, then the 529: relaying the last failure would answer
    // 529. And the other way round: relaying the first would too.
    for order in [
        [("limited", limited.url()), ("overloaded", overloaded.url())],
        [("overloaded", overloaded.url()), ("limited", limited.url())],
    ] {
        let weir = Weir::start(&llm_config("anthropic", &order, "")).await;
        let (s, headers, body) = messages(&weir, "m", false).await;
        assert_eq!(
            s, 429,
            "a 429 is more useful than a 5xx ({order:?}): {body}"
        );
        assert_eq!(error_type(&body), "rate_limit_error");
        assert_eq!(
            headers["anthropic-ratelimit-requests-reset"],
            "2030-01-01T00:00:00Z"
        );
    }
    assert_eq!(
        (limited.seen().len(), overloaded.seen().len()),
        (2, 2),
        "both were tried, in both orders"
    );

    let weir = Weir::start(&llm_config(
        "anthropic",
        &[("a", refusing().await), ("b", refusing().await)],
        "",
    ))
    .await;
    let (s, headers, body) = messages(&weir, "m", false).await;
    assert_eq!(s, 502);
    assert_eq!(error_type(&body), "api_error");
    assert!(body.contains("2 attempted"), "{body}");
    assert!(
        headers["request-id"]
            .to_str()
            .expect("id")
            .starts_with("req_")
    );
}

#[tokio::test]
async fn a_retry_hint_cools_an_upstream_and_all_cooling_answers_at_once() {
    let limited = mock(|seen| {
        error(seen, 429, "rate_limit_error", "slow down").with_header("retry-after", "30")
    })
    .await;
    let weir = Weir::start(&llm_config("anthropic", &[("a", limited.url())], "")).await;
    let (s, h, _) = messages(&weir, "m", false).await;
    assert_eq!(s, 429);
    assert_eq!(
        h["retry-after"], "30",
        "the upstream's own header, unchanged"
    );
    // Now every upstream is cooling: answered without contacting one.
    let (s, h, body) = messages(&weir, "m", false).await;
    assert_eq!(s, 429, "{body}");
    assert_eq!(error_type(&body), "rate_limit_error");
    let after: u64 = h["retry-after"].to_str().expect("v").parse().expect("secs");
    assert!((29..=30).contains(&after), "{after}");
    assert_eq!(h["x-should-retry"], "true");
    assert_eq!(limited.seen().len(), 1, "no upstream was contacted");
}

#[tokio::test]
async fn client_tokens_are_checked_before_the_body_and_never_forwarded() {
    let up = serving(WORDS).await;
    let (dir, tokens) = client_tokens("# team tokens\ntok-alice\ntok-bob\n");
    let weir = Weir::start_in(dir, &llm_config("anthropic", &[("up", up.url())], tokens)).await;
    let (s, _, body) = messages(&weir, "m", false).await;
    assert_eq!(s, 401);
    assert_eq!(error_type(&body), "authentication_error");

    // A 1 GiB body behind a bad token: refused from the head alone.
    let mut sock = TcpStream::connect(weir.addr("web")).await.expect("connect");
    sock.write_all(
        b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nx-api-key: tok-mallory\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n{\"model\":",
    )
    .await
    .expect("head");
    let (out, closed) = read_until_close(&mut sock, Duration::from_secs(3)).await;
    assert!(out.starts_with("HTTP/1.1 401"), "{out}");
    assert!(closed, "the connection is closed: the body is never read");

    let (s, _, body) = post(
        &weir,
        "/v1/messages",
        &messages_body("m", false),
        &[("authorization", "Bearer tok-bob")],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let (s, _, _) = post(
        &weir,
        "/v1/messages",
        &messages_body("m", false),
        &[
            ("x-api-key", "tok-alice"),
            ("authorization", "Bearer oauth-token"),
        ],
    )
    .await;
    assert_eq!(s, 200);
    let seen = up.seen();
    assert!(
        seen[0].headers.get("authorization").is_none(),
        "the gateway token stays at the gateway"
    );
    assert!(seen[1].headers.get("x-api-key").is_none());
    assert_eq!(
        seen[1].headers["authorization"], "Bearer oauth-token",
        "the client's other credential passes"
    );
    assert_eq!(up.seen().len(), 2);
}

#[tokio::test]
async fn an_upstream_key_replaces_the_clients_credential() {
    let up = serving(WORDS).await;
    let dir = tempfile::tempdir().expect("dir");
    let key = dir.path().join("key");
    std::fs::write(&key, "sk-upstream\n").expect("write");
    let weir = Weir::start(&format!(
        "{}api_key_file = \"{}\"\n",
        llm_config("openai", &[("up", up.url())], ""),
        key.display()
    ))
    .await;
    let (s, _, _) = post(
        &weir,
        "/v1/chat/completions",
        r#"{"model":"m","messages":[]}"#,
        &[
            ("authorization", "Bearer sk-client"),
            ("x-api-key", "other"),
        ],
    )
    .await;
    assert_eq!(s, 200);
    let seen = &up.seen()[0];
    assert_eq!(seen.headers["authorization"], "Bearer sk-upstream");
    assert!(seen.headers.get("x-api-key").is_none());
}

#[tokio::test]
async fn a_token_over_its_bound_gets_429_and_others_still_pass() {
    let up = mock(|seen| success(seen, &["a", "b", "c", "d"], Duration::from_millis(200))).await;
    let weir = with_two_tokens(&up, "max_concurrent_per_token = 1\n").await;
    let held = open_stream(
        &weir,
        "/v1/messages",
        messages_body("m", true),
        &[("x-api-key", "tok-a")],
    )
    .await;
    assert_eq!(held.status(), 200);
    let (s, h, body) = post(
        &weir,
        "/v1/messages",
        &messages_body("m", false),
        &[("x-api-key", "tok-a")],
    )
    .await;
    assert_eq!(s, 429, "{body}");
    assert_eq!(error_type(&body), "rate_limit_error");
    assert_eq!(h["retry-after"], "1");
    let (s, _, _) = post(
        &weir,
        "/v1/messages",
        &messages_body("m", false),
        &[("x-api-key", "tok-b")],
    )
    .await;
    assert_eq!(s, 200, "another token is not affected");
    drop(held);
}

#[tokio::test]
async fn keepalives_arrive_between_events_never_inside_one() {
    let up = mock(|_| {
        let events = stream_events(Api::Messages, "m", WORDS);
        let split = events[3].len() / 2;
        let mut body = vec![Step::Send(events[0].clone()), Step::Send(events[1].clone())];
        body.push(Step::Send(events[3].slice(..split)));
        body.push(Step::Wait(Duration::from_millis(450)));
        body.push(Step::Send(events[3].slice(split..)));
        body.extend(events[4..].iter().cloned().map(Step::Send));
        sse_reply(body)
    })
    .await;
    let weir = weir_over("anthropic", &up, "sse_keepalive = \"100ms\"").await;
    let (s, _, body) = messages(&weir, "m", true).await;
    assert_eq!(s, 200);
    let names = event_names(&body);
    let pings = names.iter().filter(|n| *n == "ping").count();
    assert!(pings >= 2, "keep-alives during the pause: {names:?}");
    // Every event is whole: the split delta arrived intact, pings around it.
    events(&body);
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
}

#[tokio::test]
async fn a_silent_upstream_ends_the_stream_with_an_error_event() {
    let up = mock(|_| {
        let events = stream_events(Api::Messages, "m", WORDS);
        sse_reply(vec![
            Step::Send(events[0].clone()),
            Step::Send(events[1].clone()),
            Step::Send(events[3].clone()),
            Step::Stall,
        ])
    })
    .await;
    let weir = weir_over(
        "anthropic",
        &up,
        "stream_idle_timeout = \"300ms\"\nsse_keepalive = \"10s\"",
    )
    .await;
    let (s, _, body) = messages(&weir, "m", true).await;
    assert_eq!(s, 200);
    assert_eq!(
        event_names(&body).last().map(String::as_str),
        Some("error"),
        "{body}"
    );
    assert!(
        eventually(Duration::from_secs(3), || up.abandoned() == 1).await,
        "the upstream request was closed"
    );
}

#[tokio::test]
async fn a_client_that_leaves_cancels_the_upstream_request() {
    // Streaming: the client reads the first event, then goes.
    let up = trickling().await;
    let weir = weir_over("anthropic", &up, "").await;
    leave_after_first_event(&weir, "/v1/messages", messages_body("m", true)).await;
    assert!(
        eventually(Duration::from_secs(3), || up.abandoned() == 1).await,
        "streaming request cancelled upstream"
    );
    assert_eq!(up.finished(), 0);

    // Not streaming: the client leaves while weir waits for the head.
    let slow =
        mock(|seen| success(seen, WORDS, Duration::ZERO).delayed(Duration::from_millis(600))).await;
    let weir = weir_over("anthropic", &slow, "").await;
    let mut sock = TcpStream::connect(weir.addr("web")).await.expect("connect");
    let body = messages_body("m", false);
    sock.write_all(format!("POST /v1/messages HTTP/1.1\r\nHost: a\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).as_bytes()).await.expect("write");
    assert!(eventually(Duration::from_secs(3), || slow.seen().len() == 1).await);
    drop(sock);
    assert!(
        eventually(Duration::from_secs(3), || slow.abandoned() == 1).await,
        "non-streaming request cancelled upstream"
    );
    assert_eq!(slow.finished(), 0);
}

#[tokio::test]
async fn count_tokens_is_forwarded_or_answered_501() {
    // A count no local tokenizer would arrive at for "hi": only the
    // upstream's answer carries it.
    let up = mock(|seen| match Api::of(seen) {
        Some(Api::CountTokens) => json_reply(200, b"{\"input_tokens\":987654}"),
        _ => success(seen, WORDS, Duration::ZERO),
    })
    .await;
    let weir = weir_over("anthropic", &up, "").await;
    let request = messages_body("m", false);
    let (s, _, body) = post(&weir, "/v1/messages/count_tokens?beta=true", &request, &[]).await;
    assert_eq!(s, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["input_tokens"], 987654, "the upstream's count: {body}");
    let seen = up.seen();
    assert_eq!(seen.len(), 1, "the upstream was asked");
    assert_eq!(seen[0].path, "/v1/messages/count_tokens?beta=true");
    assert_eq!(seen[0].body, Bytes::from(request), "the request as sent");

    let without = mock(|seen| error(seen, 404, "not_found_error", "no")).await;
    let weir = weir_over("anthropic", &without, "").await;
    let (s, _, body) = post(
        &weir,
        "/v1/messages/count_tokens",
        &messages_body("m", false),
        &[],
    )
    .await;
    assert_eq!(s, 501);
    assert_eq!(error_type(&body), "not_supported");
}

#[tokio::test]
async fn errors_weir_generates_use_the_routes_protocol() {
    let up = serving(WORDS).await;
    let weir = weir_over(
        "openai",
        &up,
        "[[route.models]]\nname = \"known\"\nupstreams = [\"up\"]",
    )
    .await;
    let (s, h, body) = post(
        &weir,
        "/v1/responses",
        &responses_body("unknown", false),
        &[],
    )
    .await;
    assert_eq!(s, 404);
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("unknown")
    );
    assert!(v["error"].get("param").is_some());
    assert!(h.contains_key("x-request-id"));
    let (s, _, body) = post(&weir, "/v1/messages", &responses_body("known", false), &[]).await;
    assert_eq!(s, 404, "not an endpoint of an openai route: {body}");
    let (s, _, body) = post(&weir, "/v1/responses", "{not json", &[]).await;
    assert_eq!(s, 400, "{body}");
    let (s, _, _) = post(&weir, "/v1/responses", &responses_body("known", false), &[]).await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn a_shed_on_an_llm_route_tells_the_sdk_to_retry() {
    let up = mock(|seen| success(seen, &["a", "b", "c", "d"], Duration::from_millis(200))).await;
    let weir = weir_over("anthropic", &up, "max_concurrent_requests = 1").await;
    let held = open_stream(&weir, "/v1/messages", messages_body("m", true), &[]).await;
    let (s, h, body) = messages(&weir, "m", true).await;
    assert_eq!(s, 503);
    assert_eq!(error_type(&body), "overloaded_error");
    assert_eq!(h["retry-after"], "1");
    assert_eq!(h["x-should-retry"], "true");
    drop(held);
}

#[tokio::test]
async fn the_byte_budget_sheds_bodies_it_cannot_hold() {
    let up = serving(WORDS).await;
    let weir = Weir::start(&format!(
        "[server]\nmax_buffered_body_bytes = 1000\n{}",
        llm_config("anthropic", &[("up", up.url())], "")
    ))
    .await;
    let big = serde_json::json!({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x".repeat(2000)}]}).to_string();
    let (s, h, body) = post(&weir, "/v1/messages", &big, &[]).await;
    assert_eq!(s, 503, "{body}");
    assert_eq!(error_type(&body), "overloaded_error");
    assert_eq!(h["retry-after"], "1");
    assert_eq!(up.seen().len(), 0);
    let (s, _, _) = messages(&weir, "m", false).await;
    assert_eq!(s, 200, "a body within the budget passes");
}

#[tokio::test]
async fn what_weir_holds_of_a_stream_is_bounded() {
    // An event that never ends: treated as a broken upstream, not buffered.
    let endless = mock(|_| {
        let events = stream_events(Api::Messages, "m", WORDS);
        let mut body: Vec<Step> = events[..4].iter().cloned().map(Step::Send).collect();
        body.push(Step::Send(Bytes::from_static(
            b"event: content_block_delta\ndata: ",
        )));
        body.extend((0..24).map(|_| Step::Send(Bytes::from(vec![b'x'; 64 * 1024]))));
        body.push(Step::Stall);
        sse_reply(body)
    })
    .await;
    let weir = weir_over("anthropic", &endless, "").await;
    let (s, _, body) = messages(&weir, "m", true).await;
    assert_eq!(s, 200);
    assert_eq!(event_names(&body).last().map(String::as_str), Some("error"));
    assert!(
        body.len() < 64 * 1024,
        "the endless event was not passed on"
    );

    // A preamble that goes on and on: released to the client, not held.
    let chatty = mock(|_| {
        let events = stream_events(Api::Messages, "m", WORDS);
        let ping = Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n");
        let mut body = vec![Step::Send(events[0].clone())];
        body.extend((0..3000).map(|_| Step::Send(ping.clone())));
        body.push(Step::Send(Bytes::from_static(
            b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"late\"}}\n\n",
        )));
        sse_reply(body)
    })
    .await;
    let good = serving(WORDS).await;
    let weir = Weir::start(&llm_config(
        "anthropic",
        &[("chatty", chatty.url()), ("good", good.url())],
        "",
    ))
    .await;
    let (s, _, body) = messages(&weir, "m", true).await;
    assert_eq!(s, 200);
    assert_eq!(
        good.seen().len(),
        0,
        "past the hold bound the stream was released"
    );
    assert_eq!(event_names(&body).last().map(String::as_str), Some("error"));
}

#[tokio::test]
async fn with_client_tokens_the_rate_limit_counts_each_token() {
    let up = serving(WORDS).await;
    let weir = with_two_tokens(&up, "rate_limit_per_second = 1\nrate_limit_burst = 1\n").await;
    let as_token = |t: &'static str| [("x-api-key", t)];
    let (s, _, _) = post(
        &weir,
        "/v1/messages",
        &messages_body("m", false),
        &as_token("tok-a"),
    )
    .await;
    assert_eq!(s, 200);
    let (s, h, body) = post(
        &weir,
        "/v1/messages",
        &messages_body("m", false),
        &as_token("tok-a"),
    )
    .await;
    assert_eq!(s, 429, "{body}");
    assert_eq!(error_type(&body), "rate_limit_error");
    assert_eq!(h["retry-after"], "1");
    let (s, _, _) = post(
        &weir,
        "/v1/messages",
        &messages_body("m", false),
        &as_token("tok-b"),
    )
    .await;
    assert_eq!(s, 200, "same address, another token: its own budget");
}

#[tokio::test]
async fn a_whole_answer_too_large_to_hold_is_streamed_on_uncounted() {
    // 2 MiB of text in one Messages answer, in pieces: past the 1 MiB
    // weir holds for usage, so it is relayed as it comes.
    let text = "y".repeat(2 * 1024 * 1024);
    let answer = serde_json::json!({"id":"msg_big","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":text}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":3}}).to_string();
    let pieces: Vec<Step> = answer
        .as_bytes()
        .chunks(64 * 1024)
        .map(|c| Step::Send(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let up = mock(move |_| Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        delay: Duration::ZERO,
        body: pieces.clone(),
    })
    .await;
    let weir = Weir::start(&llm_config("anthropic", &[("up", up.url())], "")).await;
    let (s, _, body) = messages(&weir, "m", false).await;
    assert_eq!(s, 200);
    assert_eq!(body, answer, "every byte, in order");
    let input = "weir_llm_tokens_total{route=\"llm\",model=\"default\",kind=\"input\"}";
    assert_eq!(metric(&weir, input).await, None, "not held, not counted");

    let small = serving(WORDS).await;
    let weir = Weir::start(&llm_config("anthropic", &[("up", small.url())], "")).await;
    let (s, _, _) = messages(&weir, "m", false).await;
    assert_eq!(s, 200);
    assert_eq!(
        metric(&weir, input).await,
        Some(12),
        "a small one is counted"
    );
}

#[tokio::test]
async fn a_client_that_hangs_up_after_the_terminal_event_was_served_in_full() {
    // Codex closes its connection once it has `response.completed`, while
    // the upstream may not have ended its body yet: that answer was
    // delivered whole, not cancelled.
    let up = mock(|_| {
        let mut body: Vec<Step> = stream_events(Api::Responses, "m", WORDS)
            .into_iter()
            .map(Step::Send)
            .collect();
        body.push(Step::Stall);
        sse_reply(body)
    })
    .await;
    let weir = weir_over("openai", &up, "").await;
    {
        use http_body_util::BodyExt;
        let mut answer = open_stream(&weir, "/v1/responses", responses_body("m", true), &[])
            .await
            .into_body();
        let mut seen = Vec::new();
        while !event_names(&String::from_utf8_lossy(&seen))
            .iter()
            .any(|n| n == "response.completed")
        {
            let frame = answer.frame().await.expect("an event").expect("ok");
            if let Ok(data) = frame.into_data() {
                seen.extend_from_slice(&data);
            }
        }
    }
    let counted = eventually_async(Duration::from_secs(10), || async {
        metrics(&weir).await.contains("outcome=\"completed\"} 1")
    })
    .await;
    let m = metrics(&weir).await;
    assert!(counted, "{m}");
    assert!(!m.contains("outcome=\"client_cancel\"}"), "{m}");
}
