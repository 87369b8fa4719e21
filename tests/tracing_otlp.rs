//! OpenTelemetry traces end to end: weir started from a config with
//! `[telemetry.traces]`, real upstreams and LLM providers, and a collector
//! stand-in (`common::otlp`) that decodes each export with
//! opentelemetry-proto's prost types and keeps the spans.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::llm::{events, llm_config};
use common::otlp::{Collector, Mode, attr, hex, traces_table};
use common::provider::{Failure, Options, Provider, ProviderApi};
use common::*;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as OtelStatus;

const WAIT: Duration = Duration::from_secs(10);

/// An upstream answering 200 "ok" that keeps each request's trace
/// context headers.
async fn recording_upstream() -> (Upstream, Arc<Mutex<Vec<http::HeaderMap>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let up = upstream(move |req: http::Request<hyper::body::Incoming>| {
        kept.lock().expect("seen").push(req.headers().clone());
        async { text(200, "ok") }
    })
    .await;
    (up, seen)
}

fn proxy_config(collector: &Collector, up: &Upstream, extra: &str) -> String {
    format!(
        "{}{}",
        traces_table(&collector.http_endpoint(), extra),
        simple_config(up.addr, "")
    )
}

fn by_kind(spans: &[Span], kind: SpanKind) -> Vec<Span> {
    spans
        .iter()
        .filter(|s| s.kind == kind as i32)
        .cloned()
        .collect()
}

fn is_error(span: &Span) -> bool {
    span.status
        .as_ref()
        .is_some_and(|s| s.code == OtelStatus::Error as i32)
}

#[tokio::test]
async fn a_proxied_request_is_a_server_span_with_a_client_span_per_attempt() {
    let collector = Collector::start().await;
    let (up, seen) = recording_upstream().await;
    let weir = Weir::start(&proxy_config(&collector, &up, "service_name = \"edge-1\"")).await;
    let (status, _, _) = get_with(&weir.url("web", "/a/b?q=1"), &[("user-agent", "t/1")]).await;
    assert_eq!(status, 200);
    let spans = collector.wait_spans(2, WAIT).await;
    collector.assert_all_taken();
    assert_eq!(collector.services(), ["edge-1"]);
    let server = &by_kind(&spans, SpanKind::Server)[0];
    let client = &by_kind(&spans, SpanKind::Client)[0];
    assert_eq!(server.name, "GET main");
    assert!(server.parent_span_id.is_empty(), "a new trace");
    for (key, want) in [
        ("http.request.method", "GET"),
        ("url.path", "/a/b"),
        ("url.scheme", "http"),
        ("http.response.status_code", "200"),
        ("server.address", "127.0.0.1"),
        ("network.protocol.version", "1.1"),
        ("client.address", "127.0.0.1"),
        ("user_agent.original", "t/1"),
        ("weir.route", "main"),
        ("weir.admission", "admitted"),
        ("http.response.body.size", "2"),
    ] {
        assert_eq!(
            attr(server, key).as_deref(),
            Some(want),
            "{key}: {server:#?}"
        );
    }
    assert_eq!(client.trace_id, server.trace_id);
    assert_eq!(
        client.parent_span_id, server.span_id,
        "the attempt is a child"
    );
    assert_eq!(client.name, "GET");
    assert_eq!(
        attr(client, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(
        attr(client, "server.port"),
        Some(up.addr.port().to_string())
    );
    assert_eq!(
        attr(client, "url.full"),
        Some(format!("http://{}/a/b?q=1", up.addr))
    );
    assert!(!is_error(client) && !is_error(server));
    assert!(server.start_time_unix_nano <= client.start_time_unix_nano);
    assert!(client.end_time_unix_nano <= server.end_time_unix_nano);
    // The upstream was told the attempt is its parent.
    let headers = seen.lock().expect("seen")[0].clone();
    let want = format!("00-{}-{}-01", hex(&server.trace_id), hex(&client.span_id));
    assert_eq!(headers["traceparent"], want.as_str());
}

#[tokio::test]
async fn a_failed_attempt_is_its_own_span_with_why() {
    let collector = Collector::start().await;
    let (good, _) = recording_upstream().await;
    let gone = closed_port().await;
    let config = format!(
        "{}[log]\naccess_log = false\n[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nservers = [\"http://{gone}\", \"http://{}\"]\nbalance = \"round_robin\"\n",
        traces_table(&collector.http_endpoint(), ""),
        good.addr
    );
    let weir = Weir::start(&config).await;
    // Round robin: one of the two requests is tried at the closed port first.
    for _ in 0..2 {
        assert_eq!(get_with(&weir.url("web", "/"), &[]).await.0, 200);
    }
    let spans = collector.wait_spans(5, WAIT).await;
    let clients = by_kind(&spans, SpanKind::Client);
    let failed: Vec<_> = clients.iter().filter(|s| is_error(s)).collect();
    assert_eq!(failed.len(), 1, "{clients:#?}");
    assert_eq!(
        attr(failed[0], "weir.failover.reason").as_deref(),
        Some("connect")
    );
    assert_eq!(attr(failed[0], "error.type").as_deref(), Some("connect"));
    let retried = clients
        .iter()
        .find(|s| s.trace_id == failed[0].trace_id && !is_error(s))
        .expect("the second attempt, in the same trace");
    assert_eq!(
        attr(retried, "http.request.resend_count").as_deref(),
        Some("1")
    );
}

#[tokio::test]
async fn a_trusted_client_context_is_continued_and_an_untrusted_one_is_not() {
    const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    const PARENT: &str = "b7ad6b7169203331";
    let sent = [
        ("traceparent", &*format!("00-{TRACE}-{PARENT}-01")),
        ("tracestate", "vendor=abc"),
    ];
    let sent: Vec<(&str, &str)> = sent.iter().map(|(k, v)| (*k, &**v)).collect();
    for trusted in [true, false] {
        let collector = Collector::start().await;
        let (up, seen) = recording_upstream().await;
        let extra = format!("trust_client_context = {trusted}");
        let weir = Weir::start(&proxy_config(&collector, &up, &extra)).await;
        assert_eq!(get_with(&weir.url("web", "/"), &sent).await.0, 200);
        let spans = collector.wait_spans(2, WAIT).await;
        let server = &by_kind(&spans, SpanKind::Server)[0];
        let client = &by_kind(&spans, SpanKind::Client)[0];
        let headers = seen.lock().expect("seen")[0].clone();
        let upstream_parent = headers["traceparent"].to_str().expect("text").to_string();
        assert_eq!(
            upstream_parent,
            format!("00-{}-{}-01", hex(&client.trace_id), hex(&client.span_id))
        );
        if trusted {
            assert_eq!(hex(&server.trace_id), TRACE, "continued");
            assert_eq!(hex(&server.parent_span_id), PARENT);
            assert_eq!(server.trace_state, "vendor=abc");
            assert_eq!(headers["tracestate"], "vendor=abc");
        } else {
            assert_ne!(hex(&server.trace_id), TRACE, "a trace of its own");
            assert!(server.parent_span_id.is_empty());
            assert!(
                headers.get("tracestate").is_none(),
                "not another trace's state"
            );
        }
    }
}

#[tokio::test]
async fn a_trusted_unsampled_parent_is_followed_and_ratio_zero_exports_nothing() {
    let collector = Collector::start().await;
    let (up, seen) = recording_upstream().await;
    let weir = Weir::start(&proxy_config(
        &collector,
        &up,
        "sampling_ratio = 0\ntrust_client_context = true",
    ))
    .await;
    let unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    for _ in 0..10 {
        assert_eq!(get_with(&weir.url("web", "/"), &[]).await.0, 200);
    }
    assert_eq!(
        get_with(&weir.url("web", "/"), &[("traceparent", unsampled)])
            .await
            .0,
        200
    );
    // A sampled parent is followed whatever the ratio: the control.
    let sampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert_eq!(
        get_with(&weir.url("web", "/"), &[("traceparent", sampled)])
            .await
            .0,
        200
    );
    let spans = collector.wait_spans(2, WAIT).await;
    assert_eq!(
        spans.len(),
        2,
        "only the sampled parent's request: {spans:#?}"
    );
    let seen = seen.lock().expect("seen").clone();
    assert!(seen[..10].iter().all(|h| h.get("traceparent").is_none()));
    assert_eq!(seen[10]["traceparent"], unsampled, "passed on as it came");
    assert_eq!(
        metric(&weir, "weir_trace_spans_exported_total").await,
        Some(2)
    );
}

/// An Anthropic route over two strict providers, the first answering
/// `status` once: two attempt spans, the GenAI attributes, the usage of
/// the streamed answer, the hint headers.
async fn llm_failover(status: u16) {
    let collector = Collector::start().await;
    let bad = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    bad.fail_next(1, Failure::new(status));
    let good = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "{}[log]\naccess_log = false\nusage_log = true\nusage_file = \"{{dir}}/usage.jsonl\"\n{}",
        traces_table(&collector.http_endpoint(), ""),
        llm_config(
            "anthropic",
            &[("first", bad.base_url()), ("second", good.base_url())],
            ""
        )
        .replacen("[log]\naccess_log = false\n", "", 1)
    );
    let weir = Weir::start_in(dir, &config).await;
    let body = serde_json::json!({
        "model": "claude-test", "max_tokens": 64, "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let (s, _, answer) = common::llm::post(
        &weir,
        "/v1/messages",
        body,
        &[
            ("x-api-key", "sk-ant-test"),
            ("anthropic-version", "2023-06-01"),
            ("x-claude-code-session-id", "sess-1"),
            ("x-claude-code-agent-id", "agent-2"),
            ("x-claude-code-parent-agent-id", "agent-1"),
            ("x-claude-code-request-class", "subagent"),
        ],
    )
    .await;
    assert_eq!(s, 200, "{answer}");
    good.assert_all_accepted();
    let (input, output) = streamed_usage(&answer);
    let spans = collector.wait_spans(3, WAIT).await;
    collector.assert_all_taken();
    let server = &by_kind(&spans, SpanKind::Server)[0];
    let mut attempts = by_kind(&spans, SpanKind::Client);
    attempts.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    let (first, second) = (&attempts[0], &attempts[1]);
    for a in [first, second] {
        assert_eq!(a.parent_span_id, server.span_id);
        assert_eq!(a.name, "chat claude-test");
        assert_eq!(attr(a, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(
            attr(a, "gen_ai.provider.name").as_deref(),
            Some("anthropic")
        );
        assert_eq!(
            attr(a, "gen_ai.request.model").as_deref(),
            Some("claude-test")
        );
    }
    assert!(is_error(first), "{first:#?}");
    assert_eq!(
        attr(first, "http.response.status_code"),
        Some(status.to_string())
    );
    let why = if status == 429 {
        "status_429"
    } else {
        "status_5xx"
    };
    assert_eq!(
        attr(first, "weir.failover.reason").as_deref(),
        Some(why),
        "{first:#?}"
    );
    assert_eq!(attr(first, "weir.upstream").as_deref(), Some("first"));
    assert!(!is_error(second), "{second:#?}");
    assert_eq!(attr(second, "weir.upstream").as_deref(), Some("second"));
    assert_eq!(
        attr(second, "http.response.status_code").as_deref(),
        Some("200")
    );
    for span in [server, second] {
        assert_eq!(
            attr(span, "gen_ai.usage.input_tokens"),
            Some(input.to_string())
        );
        assert_eq!(
            attr(span, "gen_ai.usage.output_tokens"),
            Some(output.to_string())
        );
        assert_eq!(
            attr(span, "gen_ai.response.model").as_deref(),
            Some("claude-test")
        );
        assert!(attr(span, "gen_ai.server.time_to_first_token").is_some());
        assert!(attr(span, "weir.llm.stream_duration").is_some());
        assert_eq!(
            attr(span, "gen_ai.response.finish_reasons").as_deref(),
            Some("end_turn"),
            "the stream's message_delta says why it ended"
        );
    }
    assert_eq!(second.events[0].name, "gen_ai.first_token");
    assert_eq!(
        attr(server, "gen_ai.request.max_tokens").as_deref(),
        Some("64")
    );
    assert_eq!(attr(server, "weir.llm.failovers").as_deref(), Some("1"));
    for (key, want) in [
        ("claude_code.session.id", "sess-1"),
        ("session.id", "sess-1"),
        ("claude_code.agent.id", "agent-2"),
        ("claude_code.parent_agent.id", "agent-1"),
        ("claude_code.request.class", "subagent"),
    ] {
        assert_eq!(attr(server, key).as_deref(), Some(want), "{key}");
    }
    assert!(
        attr(server, "weir.llm.request.body").is_none(),
        "content is off by default"
    );
    // The winner's provider was sent a traceparent naming its attempt.
    let journal = good.journal();
    let want = format!("00-{}-{}-01", hex(&second.trace_id), hex(&second.span_id));
    assert_eq!(journal[0].headers["traceparent"], want.as_str());
    // The usage record names the trace.
    let usage = std::fs::read_to_string(weir.dir.path().join("usage.jsonl")).unwrap_or_default();
    let this = common::eventually(WAIT, || {
        std::fs::read_to_string(weir.dir.path().join("usage.jsonl"))
            .is_ok_and(|t| t.contains(&hex(&server.trace_id)))
    })
    .await;
    assert!(this, "no trace id in the usage record: {usage}");
}

/// The input and output tokens a streamed Messages answer reported.
fn streamed_usage(answer: &str) -> (u64, u64) {
    let mut input = 0;
    let mut output = 0;
    for (name, data) in events(answer) {
        match name.as_str() {
            "message_start" => {
                input = data["message"]["usage"]["input_tokens"]
                    .as_u64()
                    .unwrap_or(0)
            }
            "message_delta" => output = data["usage"]["output_tokens"].as_u64().unwrap_or(0),
            _ => {}
        }
    }
    assert!(input > 0 && output > 0, "{answer}");
    (input, output)
}

#[tokio::test]
async fn an_llm_failover_after_a_503_shows_two_attempts_with_genai_attributes() {
    llm_failover(503).await;
}

#[tokio::test]
async fn an_llm_failover_after_a_429_shows_two_attempts_with_genai_attributes() {
    llm_failover(429).await;
}

#[tokio::test]
async fn prompts_are_exported_only_when_asked_for_and_cut_at_the_cap() {
    let collector = Collector::start().await;
    let up = common::llm::serving(&["hello"]).await;
    let config = format!(
        "{}{}",
        traces_table(
            &collector.http_endpoint(),
            "capture_content = true\nmax_content_size = 20"
        ),
        llm_config("anthropic", &[("up", up.url())], "")
    );
    let weir = Weir::start(&config).await;
    let body = common::llm::messages_body("m", false);
    let (s, _, _) = common::llm::post(&weir, "/v1/messages", &body, &[]).await;
    assert_eq!(s, 200);
    let spans = collector.wait_spans(2, WAIT).await;
    let server = &by_kind(&spans, SpanKind::Server)[0];
    assert_eq!(
        attr(server, "weir.llm.request.body"),
        Some(body[..20].to_string())
    );
}

/// A stalled or refusing collector, under load: every request served
/// without waiting for it, the spans dropped and counted.
#[tokio::test]
async fn a_collector_blackholed_down_or_refusing_never_slows_serving() {
    for mode in [Mode::Blackhole, Mode::Refuse] {
        let collector = Collector::start().await;
        collector.set_mode(mode);
        let (up, _) = recording_upstream().await;
        let weir = Weir::start(&proxy_config(
            &collector,
            &up,
            "queue_size = 16\nbatch_size = 8\nexport_timeout = \"30s\"",
        ))
        .await;
        serve_quickly(&weir).await;
        let dropped = eventually_async(WAIT, || async {
            metric(&weir, "weir_trace_spans_dropped_total")
                .await
                .unwrap_or(0)
                > 0
        })
        .await;
        assert!(dropped, "{mode:?}: {}", metrics(&weir).await);
        assert_eq!(
            metric(&weir, "weir_trace_spans_exported_total").await,
            Some(0)
        );
    }
    // Nothing listening at all.
    let (up, _) = recording_upstream().await;
    let gone = closed_port().await;
    let config = format!(
        "{}{}",
        traces_table(&format!("http://{gone}/v1/traces"), ""),
        simple_config(up.addr, "")
    );
    let weir = Weir::start(&config).await;
    serve_quickly(&weir).await;
    assert!(
        eventually_async(WAIT, || async {
            metric(&weir, "weir_trace_spans_dropped_total")
                .await
                .unwrap_or(0)
                > 0
        })
        .await
    );
}

/// 200 requests, 8 at a time: every one answered 200, none slower than
/// the collector would make it if serving waited on it.
async fn serve_quickly(weir: &Weir) {
    let url = weir.url("web", "/");
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for _ in 0..25 {
        let batch: Vec<_> = (0..8)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move {
                    let t = Instant::now();
                    let answer = tokio::time::timeout(Duration::from_secs(2), get_with(&url, &[]));
                    let status = answer.await.expect("answered within 2 s").0;
                    (status, t.elapsed())
                })
            })
            .collect();
        for b in batch {
            let (status, took) = b.await.expect("task");
            assert_eq!(status, 200);
            slowest = slowest.max(took);
        }
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a request took {slowest:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// An export the collector never answers is given up at its timeout, its
/// spans counted as dropped (the queue never filled).
#[tokio::test]
async fn an_export_past_its_timeout_is_dropped_and_counted() {
    let collector = Collector::start().await;
    collector.set_mode(Mode::Blackhole);
    let (up, _) = recording_upstream().await;
    let weir = Weir::start(&proxy_config(&collector, &up, "export_timeout = \"100ms\"")).await;
    assert_eq!(get_with(&weir.url("web", "/"), &[]).await.0, 200);
    assert!(eventually_metric(&weir, "weir_trace_spans_dropped_total", 2).await);
    assert_eq!(
        metric(&weir, "weir_trace_spans_exported_total").await,
        Some(0)
    );
}

#[tokio::test]
async fn spans_still_queued_at_shutdown_are_flushed() {
    let collector = Collector::start().await;
    let (up, _) = recording_upstream().await;
    let config = format!(
        "[telemetry.traces]\nendpoint = \"{}\"\nbatch_interval = \"1h\"\n{}",
        collector.http_endpoint(),
        simple_config(up.addr, "")
    );
    let mut weir = Weir::start(&config).await;
    assert_eq!(get_with(&weir.url("web", "/"), &[]).await.0, 200);
    assert!(collector.spans().is_empty(), "waits for its batch");
    weir.shutdown().await;
    assert_eq!(collector.spans().len(), 2, "flushed at exit");
}

#[tokio::test]
async fn grpc_exports_reach_the_collector() {
    let collector = Collector::start().await;
    let (up, _) = recording_upstream().await;
    let config = format!(
        "[telemetry.traces]\nendpoint = \"http://{}\"\nprotocol = \"grpc\"\nbatch_interval = \"20ms\"\n\
         headers = [\"x-tenant: weir-tests\"]\n{}",
        collector.addr,
        simple_config(up.addr, "")
    );
    let weir = Weir::start(&config).await;
    assert_eq!(get_with(&weir.url("web", "/"), &[]).await.0, 200);
    collector.wait_spans(2, WAIT).await;
    collector.assert_all_taken();
    assert_eq!(collector.last_headers()["x-tenant"], "weir-tests");
    assert!(eventually_metric(&weir, "weir_trace_spans_exported_total", 2).await);
}

/// A request shed at the process-wide gate is a span too: 503, the
/// admission decision and why.
#[tokio::test]
async fn a_shed_request_says_so_on_its_span() {
    let collector = Collector::start().await;
    let up = demo_upstream().await;
    let config = format!(
        "[server]\nmax_concurrent_requests = 1\n{}[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{up}\"\n",
        traces_table(&collector.http_endpoint(), "")
    );
    let weir = Weir::start(&config).await;
    let held = held_stream(&weir.url("web", "/sse?n=1000&interval_ms=50"), &[]).await;
    assert_eq!(get_with(&weir.url("web", "/"), &[]).await.0, 503);
    drop(held);
    let is_503 = |s: &Span| attr(s, "http.response.status_code").as_deref() == Some("503");
    let c = collector.clone();
    assert!(eventually(WAIT, move || c.spans().iter().any(is_503)).await);
    let spans = collector.spans();
    let refused = spans
        .iter()
        .find(|s| is_503(s))
        .expect("the shed request's span");
    assert_eq!(attr(refused, "weir.admission").as_deref(), Some("shed"));
    assert_eq!(
        attr(refused, "weir.admission.reason").as_deref(),
        Some("global")
    );
    assert!(attr(refused, "weir.route").is_none(), "shed before routing");
    assert!(is_error(refused));
}

#[tokio::test]
async fn a_budget_refusal_names_the_budget_and_its_payer_on_its_span() {
    let collector = Collector::start().await;
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let body = serde_json::json!({
        "model": "claude-test", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    });
    // Room for one request's reservation: the second finds the day spent.
    let reservation = (body.to_string().len() as u64).div_ceil(3) + 64;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("alice"), "tok-alice\n").expect("token");
    std::fs::write(dir.path().join("upstream-key"), "sk-ant-test\n").expect("key");
    let config = format!(
        "{}{}api_key_file = \"upstream-key\"\n\
         [[route.clients]]\nname = \"alice\"\ntoken_file = \"alice\"\ntokens_per_day = {}\n",
        traces_table(&collector.http_endpoint(), ""),
        llm_config("anthropic", &[("only", up.base_url())], ""),
        reservation + 10
    );
    let weir = Weir::start_in(dir, &config).await;
    let headers = [
        ("x-api-key", "tok-alice"),
        ("anthropic-version", "2023-06-01"),
    ];
    let (s, _, answer) = common::llm::post(&weir, "/v1/messages", &body, &headers).await;
    assert_eq!(s, 200, "{answer}");
    let (s, _, answer) = common::llm::post(&weir, "/v1/messages", &body, &headers).await;
    assert_eq!(s, 429, "{answer}");

    // Two server spans, one attempt: the refused request never left.
    let spans = collector.wait_spans(3, WAIT).await;
    let servers = by_kind(&spans, SpanKind::Server);
    assert_eq!(servers.len(), 2, "{servers:#?}");
    assert_eq!(by_kind(&spans, SpanKind::Client).len(), 1);
    let refused = servers
        .iter()
        .find(|s| attr(s, "http.response.status_code").as_deref() == Some("429"))
        .expect("the refused request's span");
    assert_eq!(
        attr(refused, "weir.llm.outcome").as_deref(),
        Some("over_budget")
    );
    assert_eq!(
        attr(refused, "weir.llm.budget.bound").as_deref(),
        Some("tokens_per_day")
    );
    assert_eq!(
        attr(refused, "weir.llm.budget.payer").as_deref(),
        Some("client token `alice`")
    );
    assert_eq!(
        attr(refused, "weir.client_token.name").as_deref(),
        Some("alice")
    );
    let served = servers.iter().find(|s| s.span_id != refused.span_id);
    assert!(
        served.is_some_and(|s| attr(s, "weir.llm.budget.bound").is_none()),
        "a served request names no budget"
    );
}
