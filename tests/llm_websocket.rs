//! Codex's Responses-over-WebSocket transport through the real weir: a
//! tokio-tungstenite client opens `GET /v1/responses` on an `openai` route
//! and sends `response.create` frames; the upstreams are the strict
//! provider emulators (spoken to over SSE) or, where a slow stream is
//! needed, the demo mock.

mod common;

use std::time::Duration;

use common::llm::*;
use common::provider::{Failure, Options, Provider, ProviderApi, Script, Verdict};
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const ANSWER: &str = "Hello from the provider.";

/// weir with one `openai` route over `up` (speaking weir's `protocol`),
/// its key in weir's directory, plus `extra` config before the route.
async fn weir_over_provider(up: &Provider, protocol: &str, top: &str, route: &str) -> Weir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("key"), "sk-upstream").expect("key");
    let keys = format!("protocol = \"{protocol}\"\napi_key_file = \"{{dir}}/key\"\n");
    let config = llm_config_with("openai", &[("up", up.base_url(), keys)], route);
    Weir::start_in(dir, &format!("{top}\n{config}")).await
}

/// A text provider speaking Responses, weir over it (with `top` config
/// and `route` keys), and a WebSocket open on the route.
async fn connected(top: &str, route: &str) -> (Provider, Weir, Ws) {
    let up = text_provider(ProviderApi::Responses).await;
    let weir = weir_over_provider(&up, "openai", top, route).await;
    let ws = open(&weir, "/v1/responses", None).await.expect("upgrade");
    (up, weir, ws)
}

async fn text_provider(api: ProviderApi) -> Provider {
    Provider::spawn(api, Options::default().script(Script::Text(ANSWER.into()))).await
}

async fn open(weir: &Weir, path: &str, token: Option<&str>) -> Result<Ws, tungstenite::Error> {
    let url = format!("ws://{}{path}", weir.addr("web"));
    let mut req = url.into_client_request().expect("request");
    let h = req.headers_mut();
    h.insert(
        "openai-beta",
        "responses_websockets=2026-02-06".parse().expect("value"),
    );
    if let Some(token) = token {
        h.insert(
            "authorization",
            format!("Bearer {token}").parse().expect("value"),
        );
    }
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

fn create(input: &[Value], previous: Option<&str>) -> Message {
    let mut frame = json!({
        "type": "response.create",
        "model": "gpt-5-codex",
        "instructions": "Be brief.",
        "input": input,
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
    });
    if let Some(id) = previous {
        frame["previous_response_id"] = json!(id);
    }
    Message::text(frame.to_string())
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// The next JSON text frame.
async fn next(ws: &mut Ws) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("the socket is open")
            .expect("a frame");
        match message {
            Message::Text(text) => return serde_json::from_str(&text).expect("JSON frame"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// Frames up to and including the terminal event (or an error frame).
async fn until_terminal(ws: &mut Ws) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let event = next(ws).await;
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        events.push(event);
        if matches!(
            kind.as_str(),
            "response.completed" | "response.failed" | "response.incomplete" | "error"
        ) {
            return events;
        }
    }
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?"))
        .collect()
}

fn text_of(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap_or_default())
        .collect()
}

fn completed_id(events: &[Value]) -> String {
    let last = events.last().expect("events");
    assert_eq!(last["type"], "response.completed", "{events:#?}");
    last["response"]["id"].as_str().expect("id").to_string()
}

#[tokio::test]
async fn a_turn_is_relayed_event_by_event_to_its_terminal_event() {
    let (up, weir, mut ws) = connected("", "").await;
    ws.send(create(&[user("Say hello")], None))
        .await
        .expect("send");
    let events = until_terminal(&mut ws).await;
    let kinds = kinds(&events);
    assert_eq!(kinds.first(), Some(&"response.created"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"response.completed"), "{kinds:?}");
    assert!(kinds.len() > 3, "one frame per event: {kinds:?}");
    assert_eq!(text_of(&events), ANSWER);
    up.assert_all_accepted();
    let journal = up.journal();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].body["stream"], true);
    assert!(journal[0].headers.get("openai-beta").is_none());
    assert!(
        eventually_metric(
            &weir,
            "weir_llm_websocket_responses_total{route=\"llm\",outcome=\"completed\"}",
            1
        )
        .await
    );
    let upgrades = "weir_llm_websocket_upgrades_total{route=\"llm\",outcome=\"accepted\"}";
    assert_eq!(metric(&weir, upgrades).await, Some(1));
    let completed = "weir_llm_requests_total{route=\"llm\",model=\"default\",upstream=\"up\",outcome=\"completed\"}";
    assert!(
        eventually_metric(&weir, completed, 1).await,
        "the turn is an LLM request"
    );
}

#[tokio::test]
async fn a_turn_is_translated_to_an_anthropic_upstream() {
    let up = text_provider(ProviderApi::Anthropic).await;
    let weir = weir_over_provider(&up, "anthropic", "", "").await;
    let mut ws = open(&weir, "/v1/responses", None).await.expect("upgrade");
    ws.send(create(&[user("Say hello")], None))
        .await
        .expect("send");
    let events = until_terminal(&mut ws).await;
    completed_id(&events);
    assert_eq!(text_of(&events), ANSWER);
    up.assert_all_accepted();
    assert_eq!(up.journal()[0].path, "/v1/messages");
}

#[tokio::test]
async fn the_upgrade_is_refused_before_it_happens_without_a_client_token() {
    let up = text_provider(ProviderApi::Responses).await;
    let (dir, tokens) = client_tokens("tok-codex\n");
    let dir_keys = format!(
        "protocol = \"openai\"\napi_key_file = \"{}/key\"\n",
        dir.path().display()
    );
    std::fs::write(dir.path().join("key"), "sk-upstream").expect("key");
    let config = llm_config_with("openai", &[("up", up.base_url(), dir_keys)], tokens);
    let weir = Weir::start_in(dir, &config).await;
    let Err(tungstenite::Error::Http(refused)) = open(&weir, "/v1/responses", None).await else {
        panic!("an upgrade without a token must be refused");
    };
    assert_eq!(refused.status(), 401);
    let body: Value =
        serde_json::from_slice(refused.body().as_deref().unwrap_or_default()).expect("JSON");
    assert!(
        body["error"]["message"].is_string(),
        "OpenAI's shape: {body}"
    );
    let wrong = open(&weir, "/v1/responses", Some("tok-other")).await;
    assert!(matches!(wrong, Err(tungstenite::Error::Http(r)) if r.status() == 401));
    // Another path answers as it always did.
    let other = open(&weir, "/v1/chat/completions", Some("tok-codex")).await;
    assert!(matches!(other, Err(tungstenite::Error::Http(r)) if r.status() == 404));
    let mut ws = open(&weir, "/v1/responses", Some("tok-codex"))
        .await
        .expect("upgrade");
    ws.send(create(&[user("Say hello")], None))
        .await
        .expect("send");
    completed_id(&until_terminal(&mut ws).await);
    let refused = "weir_llm_websocket_upgrades_total{route=\"llm\",outcome=\"refused\"}";
    assert_eq!(metric(&weir, refused).await, Some(2));
    assert!(up.journal().iter().all(|e| {
        e.headers
            .get("authorization")
            .is_none_or(|v| v != "Bearer tok-codex")
    }));
}

#[tokio::test]
async fn a_second_frame_while_one_runs_gets_an_error_frame() {
    let up = trickling().await;
    let weir = weir_over("openai", &up, "").await;
    let mut ws = open(&weir, "/v1/responses", None).await.expect("upgrade");
    ws.send(create(&[user("Count")], None)).await.expect("send");
    assert_eq!(next(&mut ws).await["type"], "response.created");
    // A client saying it has handled a response is not a second one.
    let processed = json!({"type": "response.processed", "response_id": "resp_0"});
    ws.send(Message::text(processed.to_string()))
        .await
        .expect("send");
    ws.send(create(&[user("Again")], None)).await.expect("send");
    let mut events = Vec::new();
    let mut busy = None;
    loop {
        let event = next(&mut ws).await;
        if event["type"] == "error" {
            assert!(
                busy.is_none(),
                "one error frame, for the one create: {event}"
            );
            busy = Some(event);
            continue;
        }
        let done = event["type"] == "response.completed";
        events.push(event);
        if done {
            break;
        }
    }
    let busy = busy.expect("an error frame for the second response.create");
    assert_eq!(busy["status"], 400);
    assert_eq!(busy["error"]["code"], "response_in_progress");
    assert_eq!(text_of(&events), "abcdefgh", "the first response runs on");
    assert_eq!(up.seen().len(), 1, "the second frame reached no upstream");
}

#[tokio::test]
async fn previous_response_id_continues_the_conversation_kept_by_the_bridge() {
    let (up, _weir, mut ws) = connected("", "").await;
    ws.send(create(&[user("first")], None)).await.expect("send");
    let first = completed_id(&until_terminal(&mut ws).await);
    ws.send(create(&[user("second")], Some(&first)))
        .await
        .expect("send");
    completed_id(&until_terminal(&mut ws).await);
    up.assert_all_accepted();
    let journal = up.journal();
    assert_eq!(journal.len(), 2);
    let input = journal[1].body["input"].as_array().expect("input").clone();
    // first, the answer's items (its reasoning, sealed, and its message),
    // second.
    assert_eq!(input.len(), 4, "{input:#?}");
    assert!(input[0].to_string().contains("first"));
    assert_eq!(input[1]["type"], "reasoning");
    assert!(input[1]["encrypted_content"].is_string());
    assert!(
        input[2].to_string().contains(ANSWER),
        "the answer kept: {}",
        input[2]
    );
    assert!(input[3].to_string().contains("second"));
    assert!(journal[1].body.get("previous_response_id").is_none());

    ws.send(create(&[user("third")], Some("resp_elsewhere")))
        .await
        .expect("send");
    let refused = next(&mut ws).await;
    assert_eq!(refused["type"], "error");
    assert_eq!(refused["status"], 400);
    assert_eq!(refused["error"]["code"], "previous_response_not_found");
    assert_eq!(up.journal().len(), 2, "no upstream was asked");
}

#[tokio::test]
async fn a_warm_up_is_answered_without_an_upstream_and_can_be_continued() {
    let (up, weir, mut ws) = connected("", "").await;
    let mut warm = json!({
        "type": "response.create",
        "model": "gpt-5-codex",
        "input": [user("warm")],
        "store": false,
        "generate": false,
    });
    ws.send(Message::text(warm.to_string()))
        .await
        .expect("send");
    let events = until_terminal(&mut ws).await;
    assert_eq!(kinds(&events), ["response.created", "response.completed"]);
    assert_eq!(events[1]["response"]["output"], json!([]));
    let id = completed_id(&events);
    assert!(up.journal().is_empty(), "a warm-up asks no upstream");
    warm["generate"] = json!(true);
    ws.send(create(&[user("now")], Some(&id)))
        .await
        .expect("send");
    completed_id(&until_terminal(&mut ws).await);
    let journal = up.journal();
    assert_eq!(journal.len(), 1);
    let input = journal[0].body["input"].to_string();
    assert!(input.contains("warm") && input.contains("now"), "{input}");
    let warmups = "weir_llm_websocket_responses_total{route=\"llm\",outcome=\"warmup\"}";
    assert_eq!(metric(&weir, warmups).await, Some(1));
}

#[tokio::test]
async fn an_upstream_429_becomes_an_error_frame_with_its_status_and_headers() {
    let up = text_provider(ProviderApi::Responses).await;
    up.fail_next(1, Failure::new(429).with_header("retry-after", "7"));
    let weir = weir_over_provider(&up, "openai", "", "").await;
    let mut ws = open(&weir, "/v1/responses", None).await.expect("upgrade");
    ws.send(create(&[user("Say hello")], None))
        .await
        .expect("send");
    let error = next(&mut ws).await;
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["status"], 429, "{error}");
    assert!(error["error"]["message"].is_string(), "{error}");
    assert!(error["headers"]["retry-after"].is_string(), "{error}");
    assert!(matches!(
        up.journal()[0].verdict,
        Verdict::Failed { status: 429 }
    ));
}

#[tokio::test]
async fn the_connection_age_limit_ends_it_with_websocket_connection_limit_reached() {
    let (_up, _weir, mut ws) = connected("[connections]\ntunnel_max_lifetime = \"1s\"\n", "").await;
    let ended = next(&mut ws).await;
    assert_eq!(ended["type"], "error");
    assert_eq!(ended["error"]["code"], "websocket_connection_limit_reached");
    let close = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    assert!(
        matches!(close, Ok(Some(Ok(Message::Close(_)))) | Ok(None)),
        "then the connection closes: {close:?}"
    );
}

/// Between turns a connection holds no request slot: with one slot in
/// the whole process, an HTTP request is served while the socket is open,
/// and the socket's next turn is served after it. Pings are answered.
#[tokio::test]
async fn an_idle_socket_holds_no_request_slot() {
    let (_up, weir, mut ws) = connected("[server]\nmax_concurrent_requests = 1\n", "").await;
    let body = json!({
        "model": "gpt-5-codex",
        "input": [user("over HTTP")],
        "store": false,
    });
    let served = eventually_async(Duration::from_secs(3), || async {
        post(&weir, "/v1/responses", &body, &[]).await.0 == 200
    })
    .await;
    assert!(
        served,
        "the open socket must not hold the only request slot"
    );
    ws.send(Message::Ping("are you there".into()))
        .await
        .expect("ping");
    let pong = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    assert!(
        matches!(&pong, Ok(Some(Ok(Message::Pong(p)))) if p.as_ref() == b"are you there"),
        "{pong:?}"
    );
    ws.send(create(&[user("Say hello")], None))
        .await
        .expect("send");
    completed_id(&until_terminal(&mut ws).await);
}

/// The conversation a connection keeps is bounded by the route's body
/// limit: past it nothing is kept, and a continuation is answered
/// `previous_response_not_found` (Codex then sends the whole input).
#[tokio::test]
async fn a_conversation_past_the_body_limit_is_not_kept() {
    let (up, _weir, mut ws) = connected("", "max_request_body = \"3KiB\"\n").await;
    // A request under the limit whose answer takes the whole past it.
    let long = "word ".repeat(500);
    ws.send(create(&[user(&long)], None)).await.expect("send");
    let first = completed_id(&until_terminal(&mut ws).await);
    ws.send(create(&[user("more")], Some(&first)))
        .await
        .expect("send");
    let refused = next(&mut ws).await;
    assert_eq!(
        refused["error"]["code"], "previous_response_not_found",
        "{refused}"
    );
    assert_eq!(up.journal().len(), 1);
}

/// A connection with no frame for `tunnel_idle_timeout` between turns is
/// closed (1001), not left holding its slot.
#[tokio::test]
async fn an_idle_connection_is_closed_after_the_tunnel_idle_timeout() {
    let (_up, weir, mut ws) = connected("[connections]\ntunnel_idle_timeout = \"1s\"\n", "").await;
    let closed = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    let Ok(Some(Ok(Message::Close(Some(frame))))) = closed else {
        panic!("a close frame within 5 s: {closed:?}");
    };
    assert_eq!(u16::from(frame.code), 1001);
    let idle = "weir_tunnels_closed_total{reason=\"idle_timeout\"}";
    assert!(eventually_metric(&weir, idle, 1).await);
}

/// A continuation that fails leaves the conversation it continued kept:
/// the client's retry with the same `previous_response_id` is expanded.
#[tokio::test]
async fn a_failed_continuation_can_be_retried_with_the_same_previous_response_id() {
    let (up, _weir, mut ws) = connected("", "").await;
    ws.send(create(&[user("first")], None)).await.expect("send");
    let first = completed_id(&until_terminal(&mut ws).await);
    up.fail_next(1, Failure::new(500));
    ws.send(create(&[user("second")], Some(&first)))
        .await
        .expect("send");
    let failed = next(&mut ws).await;
    assert_eq!(failed["type"], "error", "{failed}");
    ws.send(create(&[user("second")], Some(&first)))
        .await
        .expect("send");
    completed_id(&until_terminal(&mut ws).await);
    let journal = up.journal();
    let last = journal.last().expect("requests");
    assert_eq!(last.verdict, Verdict::Accepted);
    let input = last.body["input"].as_array().expect("input");
    assert_eq!(
        input.len(),
        4,
        "first, its answer's two items, second: {input:#?}"
    );
}

/// A client token's model list is checked on every frame, not at the
/// upgrade: a frame naming a model the token may not use gets a 403 error
/// frame and reaches no upstream, and the socket serves the next frame.
#[tokio::test]
async fn each_frames_model_is_checked_against_the_tokens_model_list() {
    let up = text_provider(ProviderApi::Responses).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("key"), "sk-upstream").expect("key");
    std::fs::write(dir.path().join("codex"), "tok-codex\n").expect("token");
    let keys = "protocol = \"openai\"\napi_key_file = \"{dir}/key\"\n".to_string();
    let route =
        "[[route.clients]]\nname = \"codex\"\ntoken_file = \"codex\"\nmodels = [\"gpt-5-codex\"]\n";
    let config = llm_config_with("openai", &[("up", up.base_url(), keys)], route);
    let weir = Weir::start_in(dir, &config).await;
    let mut ws = open(&weir, "/v1/responses", Some("tok-codex"))
        .await
        .expect("upgrade");

    let mut frame = json!({
        "type": "response.create", "model": "gpt-5-pro", "store": false, "stream": true,
        "input": [user("hi")],
    });
    ws.send(Message::text(frame.to_string()))
        .await
        .expect("send");
    let refused = next(&mut ws).await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["status"], 403, "{refused}");
    assert_eq!(refused["error"]["code"], "permission_denied", "{refused}");
    assert!(up.journal().is_empty(), "refused before any upstream");

    frame["model"] = json!("gpt-5-codex");
    ws.send(Message::text(frame.to_string()))
        .await
        .expect("send");
    let events = until_terminal(&mut ws).await;
    assert_eq!(
        kinds(&events).last(),
        Some(&"response.completed"),
        "{events:?}"
    );
    assert_eq!(up.journal().len(), 1);
}

#[tokio::test]
async fn each_turn_is_traced_as_a_request_with_the_upgrades_session() {
    use common::otlp::{Collector, attr, traces_table};
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
    let collector = Collector::start().await;
    let up = text_provider(ProviderApi::Responses).await;
    let top = traces_table(&collector.http_endpoint(), "");
    let weir = weir_over_provider(&up, "openai", &top, "").await;
    let url = format!("ws://{}/v1/responses", weir.addr("web"));
    let mut req = url.into_client_request().expect("request");
    let h = req.headers_mut();
    h.insert(
        "openai-beta",
        "responses_websockets=2026-02-06".parse().expect("value"),
    );
    h.insert("session_id", "codex-sess-9".parse().expect("value"));
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("upgrade");
    for _ in 0..2 {
        ws.send(create(&[user("Say hello")], None))
            .await
            .expect("send");
        completed_id(&until_terminal(&mut ws).await);
    }
    // The upgrade's own span, then each turn a server span with its
    // attempt's client span.
    let spans = collector.wait_spans(5, Duration::from_secs(10)).await;
    assert!(spans.iter().any(|s| s.name == "GET llm"), "{spans:#?}");
    let servers: Vec<_> = spans
        .iter()
        .filter(|s| s.kind == SpanKind::Server as i32 && s.name == "POST llm")
        .collect();
    assert_eq!(servers.len(), 2, "{spans:#?}");
    assert_ne!(servers[0].trace_id, servers[1].trace_id, "a trace per turn");
    for s in &servers {
        assert_eq!(attr(s, "weir.llm.transport").as_deref(), Some("websocket"));
        assert_eq!(attr(s, "http.request.method").as_deref(), Some("POST"));
        assert_eq!(attr(s, "session.id").as_deref(), Some("codex-sess-9"));
        assert_eq!(
            attr(s, "gen_ai.request.model").as_deref(),
            Some("gpt-5-codex")
        );
        assert!(attr(s, "gen_ai.usage.output_tokens").is_some(), "{s:#?}");
        let attempt = spans
            .iter()
            .find(|c| c.kind == SpanKind::Client as i32 && c.parent_span_id == s.span_id)
            .expect("the turn's attempt");
        assert_eq!(
            attr(attempt, "gen_ai.provider.name").as_deref(),
            Some("openai")
        );
    }
}

// permessage-deflate (RFC 7692), spoken by the tests' own frame-level
// client (tests/common/wsraw.rs), which sees each frame's RSV1 bit.

use common::wsraw::{RawWs, Received, deflate};

/// What Codex offers (tungstenite's deflate default).
const CODEX_OFFER: &str = "permessage-deflate; client_max_window_bits";

async fn raw(weir: &Weir, offer: Option<&str>) -> RawWs {
    let beta = [("openai-beta", "responses_websockets=2026-02-06")];
    RawWs::open(weir.addr("web"), "/v1/responses", offer, &beta).await
}

fn create_text(input: &[Value], previous: Option<&str>) -> String {
    create(input, previous)
        .into_text()
        .expect("text")
        .to_string()
}

/// Events to the terminal one, each with whether it came compressed.
async fn raw_until_terminal(ws: &mut RawWs) -> (Vec<Value>, Vec<bool>) {
    let (mut events, mut compressed) = (Vec::new(), Vec::new());
    loop {
        let Some(Received::Text {
            text,
            compressed: c,
        }) = ws.message().await
        else {
            panic!("closed before the terminal event: {events:#?}");
        };
        let event: Value = serde_json::from_str(&text).expect("JSON frame");
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        events.push(event);
        compressed.push(c);
        if matches!(
            kind.as_str(),
            "response.completed" | "response.failed" | "response.incomplete" | "error"
        ) {
            return (events, compressed);
        }
    }
}

/// A client offering deflate gets it, and the answer's frames come
/// compressed (RSV1) and inflate to the events: over two turns, so the
/// window kept across messages and the one dropped between turns both
/// decode.
#[tokio::test]
async fn a_turn_is_answered_compressed_when_the_client_offers_deflate() {
    let up = text_provider(ProviderApi::Responses).await;
    let weir = weir_over_provider(&up, "openai", "", "").await;
    let mut ws = raw(&weir, Some(CODEX_OFFER)).await;
    assert_eq!(ws.extensions.as_deref(), Some("permessage-deflate"));
    let mut previous: Option<String> = None;
    for turn in ["Say hello", "Again"] {
        let frame = create_text(&[user(turn)], previous.as_deref());
        ws.send_frame(true, false, 0x1, frame.as_bytes()).await;
        let (events, compressed) = raw_until_terminal(&mut ws).await;
        assert_eq!(text_of(&events), ANSWER);
        assert_eq!(
            compressed.last(),
            Some(&true),
            "the terminal event compressed"
        );
        previous = Some(completed_id(&events));
    }
    assert_eq!(up.journal().len(), 2);
    up.assert_all_accepted();
}

/// A request frame compressed by the client, split over a frame with
/// RSV1 and a continuation, is inflated and served; the context
/// parameters offered are echoed.
#[tokio::test]
async fn a_compressed_fragmented_request_frame_is_accepted() {
    let up = text_provider(ProviderApi::Responses).await;
    let weir = weir_over_provider(&up, "openai", "", "").await;
    let offer = "permessage-deflate; client_no_context_takeover; server_no_context_takeover";
    let mut ws = raw(&weir, Some(offer)).await;
    assert_eq!(
        ws.extensions.as_deref(),
        Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover")
    );
    for turn in ["compressed hello", "compressed again"] {
        let body = deflate(create_text(&[user(turn)], None).as_bytes());
        let (first, rest) = body.split_at(body.len() / 2);
        ws.send_frame(false, true, 0x1, first).await;
        ws.send_frame(true, false, 0x0, rest).await;
        let (events, _) = raw_until_terminal(&mut ws).await;
        assert_eq!(text_of(&events), ANSWER, "{events:#?}");
    }
    let journal = up.journal();
    assert_eq!(journal.len(), 2);
    assert!(
        journal[1].body["input"]
            .to_string()
            .contains("compressed again")
    );
}

/// The peak resident size of this process (weir runs in it), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// A decompression bomb — a 0.5 MB frame that inflates to 512 MiB — is
/// refused once it passes the message limit (`max_request_body`), with a
/// close 1009, never inflated whole.
#[tokio::test]
async fn a_compressed_frame_inflating_past_the_limit_is_refused_with_1009() {
    let up = text_provider(ProviderApi::Responses).await;
    let weir = weir_over_provider(&up, "openai", "", "max_request_body = \"1MiB\"\n").await;
    let mut ws = raw(&weir, Some(CODEX_OFFER)).await;
    // 1 MiB of spaces as one self-contained block run, 512 times over.
    let mut unit = deflate(&vec![b' '; 1 << 20]);
    unit.extend_from_slice(&[0x00, 0x00, 0xff, 0xff]);
    let mut bomb = unit.repeat(512);
    bomb.truncate(bomb.len() - 4);
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let before = peak_rss();
    ws.send_frame(true, true, 0x1, &bomb).await;
    let Some(Received::Close(code)) = ws.message().await else {
        panic!("a close frame");
    };
    assert_eq!(code, 1009);
    let grew = peak_rss().saturating_sub(before);
    assert!(grew < 128 << 20, "peak RSS grew {grew} bytes");
    let closed = "weir_tunnels_closed_total{reason=\"message_too_big\"}";
    assert!(eventually_metric(&weir, closed, 1).await);
    assert!(up.journal().is_empty());
}

/// Without an offer — or with one weir declines (a server window under
/// 15 bits) — the 101 names no extension and no frame is compressed.
#[tokio::test]
async fn a_client_without_the_offer_gets_no_extension() {
    let up = text_provider(ProviderApi::Responses).await;
    let weir = weir_over_provider(&up, "openai", "", "").await;
    for offer in [None, Some("permessage-deflate; server_max_window_bits=10")] {
        let mut ws = raw(&weir, offer).await;
        assert_eq!(ws.extensions, None, "{offer:?}");
        let frame = create_text(&[user("Say hello")], None);
        ws.send_frame(true, false, 0x1, frame.as_bytes()).await;
        let (events, compressed) = raw_until_terminal(&mut ws).await;
        assert_eq!(text_of(&events), ANSWER);
        assert!(compressed.iter().all(|c| !c), "{offer:?}");
    }
}
