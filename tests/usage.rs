//! Usage accounting end to end: weir in-process, mock providers speaking
//! Anthropic Messages and OpenAI Chat Completions and Responses (streamed
//! and whole) on port 0, a real HTTP client. Per-client metrics and usage
//! records after known requests, cached tokens priced once at their own
//! price on both API families, budgets refused before any upstream in the
//! route's own error shape with `Retry-After`, reserve-then-settle under
//! 100 concurrent requests, a stream cut mid-way, and the admin view.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::llm::*;
use common::*;
use serde_json::{Value, json};

const WORDS: &[&str] = &["Hello", " there", "."];

/// weir with one LLM route `llm` of `kind` over the upstream `up`, usage
/// records to `{dir}/usage.log`, `route` keys and `tables` after the
/// upstream. Client token files are written into the directory first:
/// `alice` holds `tok-alice`, `bob` holds `tok-bob`.
async fn start(kind: &str, up: &MockLlm, route: &str, tables: &str) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["alice", "bob"] {
        std::fs::write(dir.path().join(name), format!("tok-{name}\n")).expect("token");
    }
    let text = format!(
        "[log]\naccess_log = false\nusage_log = true\nusage_file = \"{{dir}}/usage.log\"\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"{kind}\"\n{route}\n\
         [[route.upstreams]]\nname = \"up\"\nurl = \"{}\"\n{tables}",
        up.url()
    );
    Weir::start_in(dir, &text).await
}

/// Two named clients, alice and bob, with the route's budget keys
/// `budget` (each client its own).
fn clients(budget: &str) -> String {
    format!(
        "[[route.clients]]\nname = \"alice\"\ntoken_file = \"alice\"\n{budget}\n\
         [[route.clients]]\nname = \"bob\"\ntoken_file = \"bob\"\n{budget}\n"
    )
}

async fn as_client(
    weir: &Weir,
    path: &str,
    body: &Value,
    token: &str,
) -> (http::StatusCode, http::HeaderMap, String) {
    post(
        weir,
        path,
        body.to_string(),
        &[("x-api-key", token), ("anthropic-version", "2023-06-01")],
    )
    .await
}

/// [`as_client`], which must be served (200); the answer's body.
async fn served(weir: &Weir, path: &str, body: &Value, token: &str) -> String {
    let (s, _, answer) = as_client(weir, path, body, token).await;
    assert_eq!(s, 200, "{path}: {answer}");
    answer
}

/// `Retry-After` in `h` says the current UTC window of `period` seconds
/// ends then (give or take the second the request took).
fn retry_after_is_the_window_end(h: &http::HeaderMap, period: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let left = period - now % period;
    let retry: u64 = h["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!(
        (left.saturating_sub(1)..=left + 1).contains(&retry),
        "Retry-After {retry}, {left} s left in the window of {period} s"
    );
    retry
}

fn messages(model: &str, stream: bool, max_tokens: u64) -> Value {
    json!({
        "model": model,
        "max_tokens": max_tokens,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    })
}

/// What a budget reserves for `body`: its bytes over 3, plus its output
/// limit (as docs/llm-gateway.md says).
fn reservation(body: &Value, max_tokens: u64) -> u64 {
    (body.to_string().len() as u64).div_ceil(3) + max_tokens
}

/// The usage records written so far, once there are at least `n`.
async fn read_records(weir: &Weir, n: usize) -> Vec<Value> {
    let path = weir.dir.path().join("usage.log");
    let read = || {
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
            .collect::<Vec<Value>>()
    };
    assert!(
        eventually(Duration::from_secs(5), || read().len() >= n).await,
        "{} usage records, expected {n}",
        read().len()
    );
    read()
}

/// The value of the metric line that starts with `line` (name and labels).
async fn metric_f64(weir: &Weir, line: &str) -> Option<f64> {
    metrics(weir)
        .await
        .lines()
        .find(|l| l.starts_with(line))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn admin_json(weir: &Weir, path: &str) -> (http::StatusCode, Value) {
    let (s, _, body) = get(&h1_client(), &weir.admin_url(path)).await;
    (
        s,
        serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}")),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[tokio::test]
async fn usage_is_counted_per_client_in_metrics_and_records() {
    let up = serving(WORDS).await;
    let weir = start("anthropic", &up, "", &clients("")).await;
    for token in ["tok-alice", "tok-alice"] {
        served(&weir, "/v1/messages", &messages("m", false, 64), token).await;
    }
    // Bob's request is a Claude Code subagent's, in a session whose id is
    // longer than a record keeps.
    let long_session = "s".repeat(200);
    let (s, _, answer) = post(
        &weir,
        "/v1/messages",
        messages("m", true, 64).to_string(),
        &[
            ("x-api-key", "tok-bob"),
            ("anthropic-version", "2023-06-01"),
            ("x-claude-code-session-id", &long_session),
            ("x-claude-code-agent-id", "agent-7"),
        ],
    )
    .await;
    assert_eq!(s, 200, "{answer}");
    // The mock reports 12 input tokens, and 3 output tokens (the words).
    let series = |client: &str, kind: &str| {
        format!(
            "weir_llm_client_tokens_total{{route=\"llm\",client=\"{client}\",model=\"default\",upstream=\"up\",kind=\"{kind}\"}}"
        )
    };
    let records = read_records(&weir, 3).await;
    for (client, input, output, requests) in [("alice", 24, 6, 2), ("bob", 12, 3, 1)] {
        assert_eq!(metric(&weir, &series(client, "input")).await, Some(input));
        assert_eq!(metric(&weir, &series(client, "output")).await, Some(output));
        assert_eq!(
            metric(
                &weir,
                &format!(
                    "weir_llm_client_requests_total{{route=\"llm\",client=\"{client}\",model=\"default\",upstream=\"up\",outcome=\"completed\"}}"
                )
            )
            .await,
            Some(requests)
        );
    }
    assert_eq!(
        metric(&weir, &series("alice", "cache_read")).await,
        None,
        "no cached tokens were reported"
    );
    let text = metrics(&weir).await;
    assert!(
        !text.contains("tok-alice") && !text.contains("tok-bob"),
        "a secret in the metrics"
    );

    let bob: Vec<&Value> = records.iter().filter(|r| r["client"] == "bob").collect();
    assert_eq!(bob.len(), 1, "{records:#?}");
    let r = bob[0];
    for (field, want) in [
        ("route", json!("llm")),
        ("model", json!("m")),
        ("model_served", json!("m")),
        ("upstream", json!("up")),
        ("status", json!(200)),
        ("outcome", json!("completed")),
        ("stream", json!(true)),
        ("input_tokens", json!(12)),
        ("output_tokens", json!(3)),
        ("cache_read_tokens", json!(0)),
        ("cache_write_tokens", json!(0)),
        ("spend", Value::Null),
        ("request_id", json!("req_mock_stream")),
        ("settled", json!("usage")),
        ("failovers", json!(0)),
        ("session", json!("s".repeat(128))),
        ("agent", json!("agent-7")),
    ] {
        assert_eq!(r[field], want, "{field} in {r}");
    }
    assert!(
        r["duration_ms"].is_u64() && r["first_token_ms"].is_u64(),
        "{r}"
    );
    assert!(r["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
    let alice: Vec<&Value> = records.iter().filter(|r| r["client"] == "alice").collect();
    assert_eq!(alice.len(), 2);
    assert!(
        alice
            .iter()
            .all(|r| r["session"].is_null() && r["agent"].is_null()),
        "{alice:?}"
    );
}

/// An Anthropic answer with prompt caching: 100 uncached input tokens,
/// 1000 read from the cache, 200 written to it, 50 output.
fn anthropic_cached(seen: &Seen) -> Reply {
    let usage = json!({"input_tokens": 100, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200, "output_tokens": 50});
    if !seen.streaming() {
        let body = json!({"id":"msg_c","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage": usage});
        return json_reply_owned(body);
    }
    let events = [
        (
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_c","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_read_input_tokens":1000,"cache_creation_input_tokens":200,"output_tokens":1}}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":50}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ];
    sse_reply(
        events
            .iter()
            .map(|(name, data)| Step::Send(Bytes::from(format!("event: {name}\ndata: {data}\n\n"))))
            .collect(),
    )
}

/// An OpenAI answer with 1100 input tokens of which 1000 were cached (the
/// OpenAI APIs count cached tokens inside the input), 50 output; Chat
/// Completions or Responses by the path, streamed or whole.
fn openai_cached(seen: &Seen) -> Reply {
    let chat = seen.path.ends_with("/chat/completions");
    let chat_usage = json!({"prompt_tokens": 1100, "completion_tokens": 50, "total_tokens": 1150, "prompt_tokens_details": {"cached_tokens": 1000}});
    let responses_usage = json!({"input_tokens": 1100, "input_tokens_details": {"cached_tokens": 1000}, "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1150});
    let item = json!({"id":"msg_c","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]});
    let response = |status: &str, usage: Value, output: Value| json!({"id":"resp_c","object":"response","created_at":0,"status":status,"model":"gpt","output":output,"usage":usage});
    if !seen.streaming() {
        return json_reply_owned(if chat {
            json!({"id":"chatcmpl-c","object":"chat.completion","created":0,"model":"gpt","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage": chat_usage})
        } else {
            response("completed", responses_usage, json!([item]))
        });
    }
    let data = |v: Value| Step::Send(Bytes::from(format!("data: {v}\n\n")));
    let named = |n: &str, v: Value| Step::Send(Bytes::from(format!("event: {n}\ndata: {v}\n\n")));
    let chunk = |delta: Value, finish: Value| json!({"id":"chatcmpl-c","object":"chat.completion.chunk","created":0,"model":"gpt","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    let steps = if chat {
        vec![
            data(chunk(json!({"role":"assistant","content":""}), Value::Null)),
            data(chunk(json!({"content":"ok"}), Value::Null)),
            data(chunk(json!({}), json!("stop"))),
            data(
                json!({"id":"chatcmpl-c","object":"chat.completion.chunk","created":0,"model":"gpt","choices":[],"usage": chat_usage}),
            ),
            Step::Send(Bytes::from_static(b"data: [DONE]\n\n")),
        ]
    } else {
        vec![
            named(
                "response.created",
                json!({"type":"response.created","sequence_number":0,"response":response("in_progress", Value::Null, json!([]))}),
            ),
            named(
                "response.output_text.delta",
                json!({"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_c","output_index":0,"content_index":0,"delta":"ok"}),
            ),
            named(
                "response.completed",
                json!({"type":"response.completed","sequence_number":2,"response":response("completed", responses_usage, json!([item]))}),
            ),
        ]
    };
    sse_reply(steps)
}

fn json_reply_owned(body: Value) -> Reply {
    Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        delay: Duration::ZERO,
        body: vec![Step::Send(Bytes::from(body.to_string()))],
    }
}

#[tokio::test]
async fn cached_tokens_are_priced_once_at_their_own_price_on_both_api_families() {
    // Anthropic's input_tokens excludes cache reads and writes.
    let up = mock(anthropic_cached).await;
    let weir = start(
        "anthropic",
        &up,
        "",
        &format!(
            "{}[[route.prices]]\nmodel = \"claude\"\ninput = 3\noutput = 15\ncache_read = 0.3\ncache_write = 3.75\n",
            clients("")
        ),
    )
    .await;
    for stream in [false, true] {
        served(
            &weir,
            "/v1/messages",
            &messages("claude", stream, 64),
            "tok-alice",
        )
        .await;
    }
    let records = read_records(&weir, 2).await;
    for r in &records {
        assert_eq!(
            (
                &r["input_tokens"],
                &r["cache_read_tokens"],
                &r["cache_write_tokens"],
                &r["output_tokens"]
            ),
            (&json!(100), &json!(1000), &json!(200), &json!(50)),
            "{r}"
        );
        // 100 × 3 + 1000 × 0.30 + 200 × 3.75 + 50 × 15, per million.
        let spend = r["spend"].as_f64().expect("priced");
        assert!(close(spend, 0.0021), "{spend} in {r}");
    }
    let spent = metric_f64(
        &weir,
        "weir_llm_client_spend_total{route=\"llm\",client=\"alice\",model=\"default\",upstream=\"up\"}",
    )
    .await
    .expect("spend metric");
    assert!(close(spent, 0.0042), "{spent}");

    // OpenAI's prompt_tokens / input_tokens include the cached ones.
    let up = mock(openai_cached).await;
    let weir = start(
        "openai",
        &up,
        "",
        &format!(
            "{}[[route.prices]]\nmodel = \"gpt\"\ninput = 2\noutput = 8\ncache_read = 0.5\n",
            clients("")
        ),
    )
    .await;
    let chat = |stream| json!({"model": "gpt", "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let responses = |stream| json!({"model": "gpt", "stream": stream, "input": "hi"});
    for (path, body) in [
        ("/v1/chat/completions", chat(false)),
        ("/v1/chat/completions", chat(true)),
        ("/v1/responses", responses(false)),
        ("/v1/responses", responses(true)),
    ] {
        served(&weir, path, &body, "tok-bob").await;
    }
    let records = read_records(&weir, 4).await;
    for r in &records {
        assert_eq!(
            (
                &r["input_tokens"],
                &r["cache_read_tokens"],
                &r["cache_write_tokens"],
                &r["output_tokens"]
            ),
            (&json!(100), &json!(1000), &json!(0), &json!(50)),
            "the cached 1000 are not input as well: {r}"
        );
        // 100 × 2 + 1000 × 0.50 + 50 × 8, per million.
        let spend = r["spend"].as_f64().expect("priced");
        assert!(close(spend, 0.0011), "{spend} in {r}");
    }
}

/// Wait, if need be, until at least `margin` seconds are left in the
/// current UTC minute (a test of a minute's budget must not straddle two).
async fn well_inside_a_minute(margin: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    let into = now.as_secs() % 60;
    if 60 - into < margin {
        tokio::time::sleep(Duration::from_secs(60 - into) + Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_spent_budget_is_refused_before_any_upstream_in_the_route_shape() {
    // One request fits; with its 15 tokens settled, the next does not.
    for kind in ["anthropic", "openai"] {
        let up = serving(WORDS).await;
        let (path, body) = if kind == "anthropic" {
            ("/v1/messages", messages("m", false, 64))
        } else {
            (
                "/v1/chat/completions",
                json!({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}),
            )
        };
        let r = reservation(&body, 64);
        let weir = start(
            kind,
            &up,
            "",
            &clients(&format!("tokens_per_minute = {}\n", r + 10)),
        )
        .await;
        well_inside_a_minute(10).await;
        served(&weir, path, &body, "tok-alice").await;
        let (s, h, answer) = as_client(&weir, path, &body, "tok-alice").await;
        assert_eq!(s, 429, "{kind}: {answer}");
        let v: Value = serde_json::from_str(&answer).expect("json");
        if kind == "anthropic" {
            assert_eq!(v["type"], "error", "{v}");
            assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
            assert!(h.contains_key("request-id"));
        } else {
            assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
            assert_eq!(v["error"]["code"], "rate_limit_exceeded", "{v}");
        }
        let message = v["error"]["message"].as_str().expect("message");
        assert!(message.contains("tokens_per_minute"), "{message}");
        // When this minute ends, the settled 15 tokens are gone.
        retry_after_is_the_window_end(&h, 60);
        assert_eq!(h["x-should-retry"], "true");
        assert_eq!(
            up.seen().len(),
            1,
            "the refused request reached no upstream"
        );
        // Another client's budget is its own.
        served(&weir, path, &body, "tok-bob").await;
        assert_eq!(
            metric(
                &weir,
                "weir_llm_budget_refusals_total{route=\"llm\",client=\"alice\",bound=\"tokens_per_minute\"}"
            )
            .await,
            Some(1)
        );
        let records = read_records(&weir, 3).await;
        let refused: Vec<&Value> = records.iter().filter(|r| r["status"] == 429).collect();
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0]["outcome"], "over_budget");
        assert_eq!(refused[0]["client"], "alice");
        assert_eq!(refused[0]["upstream"], Value::Null);
    }
}

#[tokio::test]
async fn a_daily_budget_says_when_the_day_ends_and_a_request_too_large_for_it_is_400() {
    // A route's budget applies to each unnamed token of its token file.
    let up = serving(WORDS).await;
    let body = messages("m", false, 64);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tokens"), "tok-carol\n").expect("tokens");
    std::fs::write(dir.path().join("id-key"), "fleet-key\n").expect("key");
    let text = format!(
        "[server]\ntoken_id_key_file = \"id-key\"\n\
         [log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\nclient_tokens_file = \"tokens\"\n\
         tokens_per_day = {}\n\
         [[route.upstreams]]\nname = \"up\"\nurl = \"{}\"\n",
        reservation(&body, 64) + 10,
        up.url()
    );
    let weir = Weir::start_in(dir, &text).await;
    served(&weir, "/v1/messages", &body, "tok-carol").await;
    let (s, h, answer) = as_client(&weir, "/v1/messages", &body, "tok-carol").await;
    assert_eq!(s, 429, "{answer}");
    let retry = retry_after_is_the_window_end(&h, 86_400);
    if retry > 60 {
        assert_eq!(
            h["x-should-retry"], "false",
            "an SDK must not retry for hours"
        );
    }
    // The unnamed token is named by its keyed fingerprint:
    // HMAC-SHA256("fleet-key", "tok-carol"), first 6 bytes.
    let (status, view) = admin_json(&weir, "/usage/token-705b8f473e35").await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["clients"][0]["budget"]["tokens_per_day"]["used"], 15);

    // More than the whole day's budget can never pass: 400, not 429.
    let (s, h, answer) = as_client(
        &weir,
        "/v1/messages",
        &messages("m", false, 100_000),
        "tok-carol",
    )
    .await;
    assert_eq!(s, 400, "{answer}");
    assert!(h.get("retry-after").is_none());
    assert!(answer.contains("whole tokens_per_day budget"), "{answer}");
    assert_eq!(up.seen().len(), 1);
}

#[tokio::test]
async fn concurrent_requests_never_spend_past_the_budget() {
    // Each answer takes 200 ms and uses 15 tokens (12 in, 3 out); each
    // request reserves far more (its bytes / 3 and its 64 output tokens),
    // so the budget admits 5 at once, and after they settle, as many as
    // the budget left over by their 15 tokens each allows.
    let up =
        mock(|seen| success(seen, WORDS, Duration::ZERO).delayed(Duration::from_millis(200))).await;
    let body = messages("m", false, 64);
    let r = reservation(&body, 64);
    let budget = 5 * r;
    let weir = start(
        "anthropic",
        &up,
        "",
        &clients(&format!("tokens_per_day = {budget}\n")),
    )
    .await;
    let url = weir.url("web", "/v1/messages");
    // Waves of 100 at once, each after the last has settled.
    let mut served = 0u64;
    let mut waves = Vec::new();
    for _ in 0..3 {
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let url = url.clone();
                let body = body.to_string();
                tokio::spawn(async move {
                    post_json(
                        &url,
                        body,
                        &[
                            ("x-api-key", "tok-alice"),
                            ("anthropic-version", "2023-06-01"),
                        ],
                    )
                    .await
                })
            })
            .collect();
        let mut wave = 0u64;
        for t in tasks {
            let (s, h, answer) = t.await.expect("task");
            match s.as_u16() {
                200 => wave += 1,
                429 => assert!(h.contains_key("retry-after"), "{answer}"),
                other => panic!("{other}: {answer}"),
            }
        }
        waves.push(wave);
        served += wave;
        // Settled: nothing in flight, 15 tokens charged per request served.
        let (_, view) = admin_json(&weir, "/usage/alice").await;
        let day = &view["clients"][0]["budget"]["tokens_per_day"];
        assert_eq!(day["used"], 15 * served, "{view}");
        assert_eq!(day["reserved"], 0, "every reservation settled: {view}");
        assert_eq!(view["clients"][0]["in_flight"], 0);
    }
    assert!(waves[0] >= 5, "the first five fit: {waves:?}");
    assert!(waves[0] < 100, "100 at once cannot all fit: {waves:?}");
    assert!(
        waves[1] >= 1,
        "what the first wave did not use came back: {waves:?}"
    );
    assert!(
        15 * served <= budget,
        "spent {} of a budget of {budget} ({waves:?})",
        15 * served
    );
    assert_eq!(
        up.seen().len() as u64,
        served,
        "a refused request reached the upstream"
    );
    let records = read_records(&weir, 300).await;
    let charged: u64 = records
        .iter()
        .filter_map(|r| r["charged_tokens"].as_u64())
        .sum();
    assert_eq!(
        charged,
        15 * served,
        "each served request settled its usage"
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r["outcome"] == "over_budget")
            .count() as u64,
        300 - served
    );
}

#[tokio::test]
async fn a_stream_cut_midway_is_charged_what_it_reported_and_the_output_reserved() {
    let up = mock(|_| cut_after_content(Api::Messages, WORDS)).await;
    let weir = start("anthropic", &up, "", &clients("tokens_per_day = 100000\n")).await;
    let body = served(&weir, "/v1/messages", &messages("m", true, 64), "tok-alice").await;
    assert_eq!(
        event_names(&body).last().map(String::as_str),
        Some("error"),
        "{body}"
    );
    let records = read_records(&weir, 1).await;
    let r = &records[0];
    // message_start said 12 in and 1 out; the final count never came.
    assert_eq!(r["outcome"], "upstream_error", "{r}");
    assert_eq!(
        (&r["input_tokens"], &r["output_tokens"]),
        (&json!(12), &json!(1))
    );
    assert_eq!(r["settled"], "reservation");
    assert_eq!(r["charged_tokens"], 12 + 64, "{r}");
    let (_, view) = admin_json(&weir, "/usage/alice").await;
    assert_eq!(
        view["clients"][0]["budget"]["tokens_per_day"]["used"],
        12 + 64
    );
}

/// A client that leaves a stream mid-answer is charged what the provider
/// reported so far plus the output it reserved, and the record, /usage
/// and both request counters say it was cancelled.
#[tokio::test]
async fn a_stream_the_client_cancels_is_settled_on_what_it_reserved() {
    let up = trickling().await;
    let weir = start(
        "anthropic",
        &up,
        "",
        &format!(
            "{}[[route.prices]]\nmodel = \"*\"\ninput = 1\noutput = 2\n",
            clients("tokens_per_day = 100000\n")
        ),
    )
    .await;
    let body = messages("m", true, 64);
    let headers = [
        ("x-api-key", "tok-alice"),
        ("anthropic-version", "2023-06-01"),
    ];
    {
        use http_body_util::BodyExt;
        let mut answer = open_stream(&weir, "/v1/messages", body.to_string(), &headers)
            .await
            .into_body();
        answer.frame().await.expect("first event").expect("ok");
    }
    let records = read_records(&weir, 1).await;
    let r = &records[0];
    assert_eq!(r["outcome"], "client_cancel", "{r}");
    assert_eq!(r["settled"], "reservation", "{r}");
    let input = r["input_tokens"].as_u64().expect("input reported");
    assert!(input > 0, "message_start reported the input: {r}");
    let charged = input + 64;
    assert_eq!(r["charged_tokens"], charged, "{r}");
    // Per million: the input at 1, the 64 reserved output at 2.
    let spend = r["charged_spend"].as_f64().expect("spend");
    assert!(close(spend, (input + 2 * 64) as f64 / 1e6), "{r}");
    let (_, view) = admin_json(&weir, "/usage/alice").await;
    let used = &view["clients"][0]["budget"]["tokens_per_day"]["used"];
    assert_eq!(used, charged, "{view}");
    let text = metrics(&weir).await;
    for counter in [
        "weir_llm_requests_total{route=\"llm\",model=\"default\",upstream=\"up\",outcome=\"client_cancel\"} 1",
        "weir_llm_client_requests_total{route=\"llm\",client=\"alice\",model=\"default\",upstream=\"up\",outcome=\"client_cancel\"} 1",
    ] {
        assert!(text.contains(counter), "{counter} in\n{text}");
    }
}

/// An output limit written as a float (`64000.0`, `1e5`) reserves that
/// many tokens, not the route's default.
#[tokio::test]
async fn a_whole_number_output_limit_written_as_a_float_is_reserved() {
    let up = serving(WORDS).await;
    let weir = start("anthropic", &up, "", &clients("tokens_per_day = 1000000\n")).await;
    for (n, limit) in [(1, "64000.0"), (2, "1e5")] {
        let text = format!(
            r#"{{"model":"m","max_tokens":{limit},"messages":[{{"role":"user","content":"hi"}}]}}"#
        );
        let (s, _, answer) = post(
            &weir,
            "/v1/messages",
            &text,
            &[
                ("x-api-key", "tok-alice"),
                ("anthropic-version", "2023-06-01"),
            ],
        )
        .await;
        assert_eq!(s, 200, "{answer}");
        let records = read_records(&weir, n).await;
        let want = (text.len() as u64).div_ceil(3) + if n == 1 { 64_000 } else { 100_000 };
        assert_eq!(
            records[n - 1]["reserved_tokens"],
            want,
            "{limit}: {}",
            records[n - 1]
        );
    }
}

#[tokio::test]
async fn the_admin_view_shows_each_client_against_its_budget() {
    let up = serving(WORDS).await;
    let weir = start(
        "anthropic",
        &up,
        "tokens_per_minute = 100000\n",
        &format!(
            "{}[[route.prices]]\nmodel = \"*\"\ninput = 1\noutput = 2\n",
            clients("tokens_per_day = 1000000\nspend_per_day = 2.5\n")
        ),
    )
    .await;
    served(
        &weir,
        "/v1/messages",
        &messages("m", false, 64),
        "tok-alice",
    )
    .await;
    let (s, all) = admin_json(&weir, "/usage").await;
    assert_eq!(s, 200);
    let names: Vec<&str> = all["clients"]
        .as_array()
        .expect("clients")
        .iter()
        .map(|c| c["client"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["alice", "bob"]);
    let (s, alice) = admin_json(&weir, "/usage/alice").await;
    assert_eq!(s, 200);
    let c = &alice["clients"][0];
    assert_eq!(c["route"], "llm");
    let budget = &c["budget"];
    assert_eq!(budget["tokens_per_minute"]["limit"], 100_000, "{c}");
    assert_eq!(budget["tokens_per_day"]["limit"], 1_000_000, "{c}");
    assert_eq!(budget["tokens_per_day"]["used"], 15, "{c}");
    assert_eq!(budget["tokens_per_day"]["remaining"], 1_000_000 - 15, "{c}");
    // 12 × 1 + 3 × 2 per million.
    let spent = budget["spend_per_day"]["used"].as_f64().expect("spend");
    assert!(close(spent, 0.000018), "{c}");
    assert_eq!(budget["spend_per_day"]["limit"], 2.5);
    let resets = budget["tokens_per_day"]["resets_in_seconds"]
        .as_u64()
        .expect("seconds");
    assert!((1..=86_400).contains(&resets), "{c}");
    let (_, bob) = admin_json(&weir, "/usage/bob").await;
    assert_eq!(bob["clients"][0]["budget"]["tokens_per_day"]["used"], 0);
    let (s, _) = admin_json(&weir, "/usage/nobody").await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn a_reload_that_changes_a_budget_keeps_what_was_used() {
    let up = serving(WORDS).await;
    let config = |per_day: u64| {
        format!(
            "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
             [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"up\"\nurl = \"{}\"\n{}",
            up.url(),
            clients(&format!("tokens_per_day = {per_day}\n"))
        )
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("alice"), "tok-alice\n").expect("token");
    std::fs::write(dir.path().join("bob"), "tok-bob\n").expect("token");
    let weir = Weir::start_in(dir, &config(1_000)).await;
    served(
        &weir,
        "/v1/messages",
        &messages("m", false, 64),
        "tok-alice",
    )
    .await;
    weir.apply(&config(2_000)).expect("reload");
    let (_, view) = admin_json(&weir, "/usage/alice").await;
    let day = &view["clients"][0]["budget"]["tokens_per_day"];
    assert_eq!((&day["limit"], &day["used"]), (&json!(2_000), &json!(15)));
}

/// The real binary: usage records go to stdout by default, one JSON object
/// per line beside the logs on stderr; with `usage_file` they go to the
/// file, which SIGUSR1 reopens after logrotate moved it away.
#[tokio::test(flavor = "multi_thread")]
async fn the_binary_writes_records_to_stdout_or_to_a_file_it_reopens() {
    use common::process::*;
    let up = serving(WORDS).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("alice"), "tok-alice\n").expect("token");
    let config = |usage_file: &str| {
        format!(
            "[log]\nformat = \"json\"\naccess_log = false\nusage_log = true\n{usage_file}\n\
             [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
             [[route.upstreams]]\nname = \"up\"\nurl = \"{}\"\n\
             [[route.clients]]\nname = \"alice\"\ntoken_file = \"alice\"\n",
            up.url()
        )
    };
    let ask = |addr: std::net::SocketAddr| async move {
        let (s, _, answer) = post_json(
            &format!("http://{addr}/v1/messages"),
            messages("m", false, 64).to_string(),
            &[
                ("x-api-key", "tok-alice"),
                ("anthropic-version", "2023-06-01"),
            ],
        )
        .await;
        assert_eq!(s, 200, "{answer}");
    };
    let is_record = |l: &str| l.contains("\"settled\"") && l.contains("\"client\":\"alice\"");

    let mut weir = Proc::run(&write_config(&dir, &config("")));
    let addr = weir.listening("web");
    ask(addr).await;
    let line = weir.wait_for(is_record);
    let r: Value = serde_json::from_str(&line).expect("one JSON object per line");
    assert_eq!(
        (&r["input_tokens"], &r["output_tokens"]),
        (&json!(12), &json!(3))
    );
    weir.signal("-TERM");
    weir.wait_exit(Duration::from_secs(10));

    let file = dir.path().join("usage.log");
    let mut weir = Proc::run(&write_config(
        &dir,
        &config(&format!("usage_file = \"{}\"", file.display())),
    ));
    let addr = weir.listening("web");
    ask(addr).await;
    let lines = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| is_record(l))
            .count()
    };
    assert!(eventually(Duration::from_secs(5), || lines(&file) == 1).await);
    let rotated = dir.path().join("usage.log.1");
    std::fs::rename(&file, &rotated).expect("rotate");
    weir.signal("-USR1");
    // The reopen is logged; the next record goes to the new file.
    weir.wait_for(|l| l.contains("log files reopened"));
    ask(addr).await;
    assert!(
        eventually(Duration::from_secs(5), || lines(&file) == 1).await,
        "the record went to the new file"
    );
    assert_eq!(lines(&rotated), 1);
    weir.signal("-TERM");
    weir.wait_exit(Duration::from_secs(10));
    assert!(
        weir.all_lines(is_record).is_empty(),
        "with a file, nothing on stdout"
    );
}

#[tokio::test]
async fn a_spend_budget_reserves_at_the_dearest_price_and_refuses_when_spent() {
    // Output at 1000 per million tokens (0.001 a token), input at 1: the
    // reservation is mostly its 64 output tokens (0.064); the answer
    // spends 12 × 0.000001 + 3 × 0.001 = 0.003012.
    let up = serving(WORDS).await;
    let body = messages("m", false, 64);
    let input = (body.to_string().len() as f64 / 3.0).ceil();
    let reserved = input * 1e-6 + 64.0 * 1e-3;
    let weir = start(
        "anthropic",
        &up,
        "",
        &format!(
            "{}[[route.prices]]\nmodel = \"*\"\ninput = 1\noutput = 1000\n",
            clients(&format!("spend_per_day = {:.6}\n", reserved + 0.001))
        ),
    )
    .await;
    served(&weir, "/v1/messages", &body, "tok-alice").await;
    let (s, _, answer) = as_client(&weir, "/v1/messages", &body, "tok-alice").await;
    assert_eq!(s, 429, "{answer}");
    assert!(answer.contains("spend_per_day"), "{answer}");
    let records = read_records(&weir, 2).await;
    let spend = records[0]["spend"].as_f64().expect("priced");
    assert!(close(spend, 0.003012), "{}", records[0]);
    let (_, view) = admin_json(&weir, "/usage/alice").await;
    let day = &view["clients"][0]["budget"]["spend_per_day"];
    assert!(
        close(day["used"].as_f64().expect("used"), 0.003012),
        "{view}"
    );
    assert_eq!(up.seen().len(), 1);
}

/// An LLM route's series are looked up once and kept by the place of each
/// label in the config (its models, upstreams and client tokens), and
/// built again with the route. A reload that removes a model and reorders
/// the models, upstreams and clients therefore counts each later request
/// under its own labels; what was counted before stays exported, as
/// series always have (none is ever removed).
#[tokio::test]
async fn after_a_reload_that_reorders_labels_each_request_counts_under_its_own() {
    let one = serving(WORDS).await;
    let two = serving(WORDS).await;
    let config = |upstreams: [(&str, &MockLlm); 2], models: &[(&str, &str)], clients: [&str; 2]| {
        let mut text = "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
             [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nname = \"llm\"\nkind = \"anthropic\"\ndefault_upstreams = [\"one\"]\n"
            .to_string();
        for (name, up) in upstreams {
            text += &format!(
                "[[route.upstreams]]\nname = \"{name}\"\nurl = \"{}\"\n",
                up.url()
            );
        }
        for (name, up) in models {
            text += &format!("[[route.models]]\nname = \"{name}\"\nupstreams = [\"{up}\"]\n");
        }
        for name in clients {
            text += &format!("[[route.clients]]\nname = \"{name}\"\ntoken_file = \"{name}\"\n");
        }
        text
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("alice"), "tok-alice\n").expect("token");
    std::fs::write(dir.path().join("bob"), "tok-bob\n").expect("token");
    let weir = Weir::start_in(
        dir,
        &config(
            [("one", &one), ("two", &two)],
            &[("a", "one"), ("b", "two")],
            ["alice", "bob"],
        ),
    )
    .await;
    let body = |model| messages(model, false, 64);
    served(&weir, "/v1/messages", &body("a"), "tok-alice").await;
    served(&weir, "/v1/messages", &body("b"), "tok-bob").await;
    weir.apply(&config(
        [("two", &two), ("one", &one)],
        &[("b", "two"), ("c", "one")],
        ["bob", "alice"],
    ))
    .expect("reload");
    served(&weir, "/v1/messages", &body("b"), "tok-alice").await;
    served(&weir, "/v1/messages", &body("a"), "tok-alice").await;
    served(&weir, "/v1/messages", &body("c"), "tok-bob").await;

    let route = |model: &str, upstream: &str| {
        format!(
            "weir_llm_requests_total{{route=\"llm\",model=\"{model}\",upstream=\"{upstream}\",outcome=\"completed\"}}"
        )
    };
    let client = |client: &str, model: &str, upstream: &str| {
        format!(
            "weir_llm_client_requests_total{{route=\"llm\",client=\"{client}\",model=\"{model}\",upstream=\"{upstream}\",outcome=\"completed\"}}"
        )
    };
    let want = [
        (route("a", "one"), 1),
        (route("b", "two"), 2),
        (route("default", "one"), 1),
        (route("c", "one"), 1),
        (client("alice", "a", "one"), 1),
        (client("bob", "b", "two"), 1),
        (client("alice", "b", "two"), 1),
        (client("alice", "default", "one"), 1),
        (client("bob", "c", "one"), 1),
        (
            "weir_llm_tokens_total{route=\"llm\",model=\"b\",kind=\"input\"}".to_string(),
            24,
        ),
    ];
    // Usage is counted when each response has ended: wait for the last.
    let last = client("bob", "c", "one");
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            metric(&weir, &last).await == Some(1)
        })
        .await,
        "{}",
        metrics(&weir).await
    );
    let text = metrics(&weir).await;
    for (series, n) in want {
        let line = text.lines().find(|l| l.starts_with(&series));
        assert_eq!(
            line.and_then(|l| l.rsplit(' ').next()),
            Some(n.to_string().as_str()),
            "{series}\n{text}"
        );
    }
    let counted = |prefix: &str| {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    assert_eq!(counted("weir_llm_requests_total{"), 5, "{text}");
    assert_eq!(counted("weir_llm_client_requests_total{"), 5, "{text}");
}
