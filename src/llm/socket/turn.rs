//! One turn of the WebSocket transport: a client's text frame read, a
//! `response.create` made into the body an HTTP `POST /v1/responses`
//! with `stream: true` would carry (the conversation expanded), sent
//! through the LLM pipeline as one request of its own — admitted,
//! recorded, accounted — and its answer sent back one event per text
//! frame, ending with the terminal event; an error answer becomes one
//! error frame with its status and headers.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use serde_json::{Map, Value};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use weir_wire::Endpoint;
use weir_wire::responses::websocket as ws;

use super::conversation::{self, Kept, NotFound, Previous};
use super::relay::Answered;
use super::{Bridge, Gone, Socket, error_frame, send};
use crate::llm::client::{self, Presented, Who};
use crate::llm::{Context, SharedLlmFacts, Turn, body, outgoing, usage};
use crate::respond::{ErrorShape, Payload, Recorded, RequestRecord, Rescue};
use crate::sync::Locked;

/// The most of a client's string an error message repeats.
const MAX_ECHOED: usize = 256;

/// The upgrade request's head as each turn's `POST` carries it: its
/// WebSocket fields removed, a JSON body announced.
pub(super) fn head_for_turns(mut head: http::request::Parts) -> http::request::Parts {
    head.method = http::Method::POST;
    let h = &mut head.headers;
    for name in [
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
    ] {
        h.remove(name);
    }
    // The transport's beta flag means nothing to an upstream spoken to
    // over SSE.
    let beta = h.get("openai-beta").and_then(|v| v.to_str().ok());
    if beta.is_some_and(|v| v.contains("responses_websockets")) {
        h.remove("openai-beta");
    }
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::TRANSFER_ENCODING);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    head
}

/// A 400 `invalid_request_error` frame saying `why`.
pub(super) fn invalid(why: &str) -> Message {
    let error = ws::error("invalid_request_error", "invalid_request", why, None);
    error_frame(400, error)
}

/// A client frame, parsed: its type, and the Responses body without the
/// transport's own fields.
struct Frame {
    kind: String,
    body: Map<String, Value>,
    generate: bool,
    previous: Option<String>,
    input: Vec<Value>,
}

fn parse(text: &str) -> Result<Frame, &'static str> {
    let mut body: Map<String, Value> =
        serde_json::from_str(text).map_err(|_| "a frame must be one JSON object")?;
    let Some(Value::String(kind)) = body.remove("type") else {
        return Err("a frame must name its `type`");
    };
    let generate = !matches!(body.remove("generate"), Some(Value::Bool(false)));
    let previous = match body.remove("previous_response_id") {
        Some(Value::String(id)) => Some(id),
        _ => None,
    };
    let input = conversation::items(body.remove("input"));
    Ok(Frame {
        kind,
        body,
        generate,
        previous,
        input,
    })
}

/// Serve one text frame; `Err` only when the socket is gone.
pub(super) async fn serve(
    bridge: &Bridge,
    socket: &mut Socket,
    kept: &mut Kept,
    text: Utf8Bytes,
) -> Result<(), Gone> {
    let llm = &bridge.open.llm;
    let len = text.len();
    let parsed = llm
        .offload
        .run_inline_up_to(weir_wire::body::SCAN_INLINE_MAX, len, move || {
            parse(text.as_str())
        })
        .await;
    let mut frame = match parsed {
        Ok(Ok(frame)) => frame,
        Ok(Err(why)) => return send(socket, invalid(why)).await,
        Err(_) => return send(socket, overloaded()).await,
    };
    match frame.kind.as_str() {
        ws::CREATE => {}
        ws::PROCESSED => return Ok(()),
        _ => {
            return send(
                socket,
                invalid("the frame's `type` must be `response.create`"),
            )
            .await;
        }
    }
    let input = std::mem::take(&mut frame.input);
    let (input, continued) = match kept.expand(frame.previous.as_deref(), input) {
        Ok(expanded) => expanded,
        Err(NotFound) => {
            llm.metrics
                .websocket_response("previous_response_not_found");
            return send(socket, not_found(frame.previous.as_deref())).await;
        }
    };
    let carried = continued.as_ref().map_or(0, |p| p.bytes);
    let bytes = carried.saturating_add(len as u64);
    if frame.generate {
        let request = (frame.body, input, continued);
        respond(bridge, socket, kept, request, bytes).await
    } else {
        warm_up(bridge, socket, kept, &frame.body, input, bytes).await
    }
}

/// The error Codex answers by sending the whole conversation again.
fn not_found(previous: Option<&str>) -> Message {
    let id = crate::respond::bounded(previous.unwrap_or_default(), MAX_ECHOED);
    let message = format!("Previous response with id '{id}' not found.");
    let error = ws::error(
        "invalid_request_error",
        "previous_response_not_found",
        &message,
        Some("previous_response_id"),
    );
    error_frame(400, error)
}

/// A warm-up (`generate: false`): no upstream is asked; a completed
/// response with no output, whose id the next request may continue.
async fn warm_up(
    bridge: &Bridge,
    socket: &mut Socket,
    kept: &mut Kept,
    body: &Map<String, Value>,
    input: Vec<Value>,
    bytes: u64,
) -> Result<(), Gone> {
    let llm = &bridge.open.llm;
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if llm.settings.choices(model).is_none() {
        llm.metrics.websocket_response("error");
        let shown = crate::respond::bounded(model, MAX_ECHOED);
        let message = format!("model `{shown}` is not served by this route");
        let error = ws::error(
            "invalid_request_error",
            "model_not_found",
            &message,
            Some("model"),
        );
        return send(socket, error_frame(404, error)).await;
    }
    let id = format!("resp_{:032x}", fastrand::u128(..));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for event in ws::warmup(&id, model, now) {
        send(socket, Message::text(event.to_string())).await?;
    }
    llm.metrics.websocket_response("warmup");
    keep(bridge, kept, id, input, bytes);
    Ok(())
}

/// Keep `items` under `id` when they fit the route's bound and the byte
/// budget; otherwise keep nothing.
fn keep(bridge: &Bridge, kept: &mut Kept, id: String, items: Vec<Value>, bytes: u64) {
    let open = &bridge.open;
    if open.route.max_request_body.is_some_and(|max| bytes > max) {
        return;
    }
    let client = match &bridge.token {
        Some((Who::Token(index), _)) => body::BodyClient::token(&open.route_name, *index),
        Some((Who::Key(key), _)) => body::BodyClient::token(&key.id, usize::MAX),
        None => body::BodyClient::address(bridge.peer),
    };
    if let Ok(held) = body::reserve(bytes, &open.llm.budget, client) {
        kept.keep(id, items, bytes, held);
    }
}

/// A `response.create` that generates (the frame's body, its complete
/// input and what it continued; about `size` bytes): one request through
/// the pipeline, its answer relayed; the conversation kept when it
/// completed, else the one it continued kept again (the client retries
/// with the same `previous_response_id`).
async fn respond(
    bridge: &Bridge,
    socket: &mut Socket,
    kept: &mut Kept,
    (request, input, continued): (Map<String, Value>, Vec<Value>, Option<Previous>),
    size: u64,
) -> Result<(), Gone> {
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let offload = &bridge.open.llm.offload;
    let built = offload
        .run_inline_up_to(weir_wire::body::SCAN_INLINE_MAX, size, move || {
            build(request, input)
        })
        .await;
    let (bytes, mut items) = match built {
        Ok(Some(built)) => built,
        Ok(None) => return send(socket, invalid("the frame could not be made a request")).await,
        Err(_) => return send(socket, overloaded()).await,
    };
    let sent = bytes.len() as u64;
    let answered = exchange(bridge, socket, bytes).await?;
    bridge.open.llm.metrics.websocket_response(answered.outcome);
    match (answered.completed, answered.id, continued) {
        (true, Some(id), _) => {
            items.extend(answered.output);
            let bytes = sent.saturating_add(answered.output_bytes);
            keep(bridge, kept, id, items, bytes);
        }
        (_, _, Some(previous)) => {
            items.truncate(previous.count);
            keep(bridge, kept, previous.id, items, previous.bytes);
        }
        _ => {}
    }
    Ok(())
}

/// The body of the `POST` a frame stands for (its complete input, a
/// stream asked for), and its input items given back to be kept.
fn build(mut request: Map<String, Value>, input: Vec<Value>) -> Option<(Bytes, Vec<Value>)> {
    request.insert("input".into(), Value::Array(input));
    request.insert("stream".into(), Value::Bool(true));
    let bytes = serde_json::to_vec(&request).ok()?;
    Some((
        Bytes::from(bytes),
        conversation::items(request.remove("input")),
    ))
}

/// Every slot for CPU-heavy work is taken.
fn overloaded() -> Message {
    let why = "the gateway is busy with other large requests; retry shortly";
    error_frame(
        503,
        ws::error("server_error", "server_is_overloaded", why, None),
    )
}

/// One request through the pipeline, recorded as an HTTP one is, and its
/// answer sent back.
async fn exchange(bridge: &Bridge, socket: &mut Socket, body: Bytes) -> Result<Answered, Gone> {
    let open = &bridge.open;
    let facts = SharedLlmFacts::default();
    // Every turn is the session the upgrade's head named.
    facts.locked().hinted(&bridge.head.headers);
    let mut record = RequestRecord {
        start: std::time::Instant::now(),
        client: bridge.peer,
        host: HeaderValue::from_str(&open.host).ok(),
        method: http::Method::POST,
        path: bridge.api_path.parse().ok(),
        status: 0,
        route: Some(open.route_name.clone()),
        route_metrics: Some(open.route_metrics.clone()),
        upstream: None,
        metrics: open.metrics.clone(),
        access_log: open.access_log,
        in_flight: None,
        admission: None,
        kind: Some(std::sync::Arc::new(crate::llm::LlmRecord(facts.clone()))),
        request_id: None,
        trace: open
            .tracer
            .as_ref()
            .and_then(|tracer| begin_trace(tracer, bridge)),
    };
    let shape = ErrorShape::Llm(open.llm.settings.protocol);
    let resp = match pipeline(bridge, &facts, &mut record, body).await {
        Ok(resp) => resp,
        Err(rescue) => rescue.answer(shape, &open.metrics, Some(&open.route_name)),
    };
    record.status = resp.status().as_u16();
    record.answered(resp.headers());
    let (parts, payload) = resp.into_parts();
    let body = Recorded::new(payload, Some(record));
    let streamed = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if parts.status.is_success() && streamed {
        super::relay::relay(socket, body).await
    } else {
        let resp = Response::from_parts(parts, body);
        super::relay::error_answer(socket, resp).await
    }
}

/// A turn's trace, as an HTTP request's (`POST` of the API path) made
/// from the upgrade's head, marked as a WebSocket turn.
fn begin_trace(
    tracer: &std::sync::Arc<crate::telemetry::trace::Tracer>,
    bridge: &Bridge,
) -> Option<Box<crate::telemetry::trace::Trace>> {
    let mut head = http::Request::from_parts(bridge.head.clone(), ());
    *head.method_mut() = http::Method::POST;
    let trace = crate::telemetry::trace::http::begin(tracer, &head, bridge.peer, bridge.open.tls)?;
    trace.server(|s| {
        crate::telemetry::trace::http::routed(s, &bridge.open.route_name);
        s.set("weir.llm.transport", "websocket");
    });
    Some(trace)
}

/// The pipeline's entry for one turn: the route's body limit, admission
/// (the process gate, the route's gate), the client token's limits, the
/// body held in the byte budget; then [`crate::llm::generate`].
async fn pipeline(
    bridge: &Bridge,
    facts: &SharedLlmFacts,
    record: &mut RequestRecord,
    body: Bytes,
) -> Result<Response<Payload>, Rescue> {
    let open = &bridge.open;
    let llm = &*open.llm;
    if let Some(limit) = open.route.max_request_body
        && body.len() as u64 > limit
    {
        return Err(
            Rescue::status(StatusCode::PAYLOAD_TOO_LARGE).saying(format!(
                "the request of {} bytes exceeds this route's limit of {limit}",
                body.len()
            )),
        );
    }
    let mut admission = open
        .admitter
        .admit(bridge.peer)
        .map_err(|s| Rescue::shed(s.label()))?;
    admission
        .enter_route(&open.gate)
        .map_err(|s| Rescue::shed(s.label()))?;
    record.admission = Some(admission);
    let mut cx = Context {
        route_name: &open.route_name,
        route: &open.route,
        body_rate: None,
        body_read_timeout: open.body_read_timeout,
        metrics: &open.metrics,
        facts,
        admission: &mut record.admission,
        started: record.start,
        rate: open.rate.as_ref(),
        peer: bridge.peer,
        host: &open.host,
        trace: record.trace.as_deref(),
    };
    let account = usage::Account::open(
        &open.route_name,
        &llm.settings,
        &llm.books,
        &llm.metrics,
        facts,
    );
    let presented = match &bridge.token {
        Some(found) => {
            client::limit(llm, found.clone(), Endpoint::Responses, &account, &mut cx).await?
        }
        None => {
            client::limit_address(&cx).await?;
            Presented::default()
        }
    };
    let client = presented.body_client(&cx);
    let read = body::hold(body, &llm.budget, client).map_err(crate::llm::read_refusal)?;
    let request = outgoing::Outgoing {
        parts: request_head(&bridge.head),
        protocol: llm.settings.protocol,
        path_and_query: path_and_query(bridge),
        strip: presented.strip,
        body: Bytes::new(),
        model_span: None,
        weir_state: false,
        model: None,
        conversation: None,
    };
    let turn = Turn {
        request,
        read,
        endpoint: Endpoint::Responses,
        deferred: presented.deferred,
        who: presented.who,
    };
    crate::llm::generate(llm, turn, &account, cx).await
}

/// A copy of the turns' head.
fn request_head(head: &http::request::Parts) -> http::request::Parts {
    let mut req = http::Request::new(());
    *req.method_mut() = head.method.clone();
    *req.uri_mut() = head.uri.clone();
    *req.version_mut() = head.version;
    *req.headers_mut() = head.headers.clone();
    req.into_parts().0
}

/// The API path with the upgrade's query.
fn path_and_query(bridge: &Bridge) -> String {
    match bridge.head.uri.query() {
        Some(q) => format!("{}?{q}", bridge.api_path),
        None => bridge.api_path.clone(),
    }
}
