//! A mock LLM provider: a real HTTP server that answers the Anthropic
//! Messages and OpenAI Responses / Chat Completions APIs with canned text,
//! in each protocol's exact event format, streaming or not.
//!
//! What it answers is a script — a function from the request it received
//! to a [`Reply`] — so the demo can run a provider that always serves and
//! one that is always overloaded, and tests can make an upstream fail in
//! every way a real one does: a status with retry headers, a slow head,
//! pauses between events, a stall, a cut in the middle of an event, an
//! error event after some content. It records every request it received
//! (headers and body bytes) and how each reply ended (finished, or
//! abandoned by the client, which is how tests see cancellation).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A request the mock received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: http::Method,
    pub path: String,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Seen {
    /// The request body as JSON (null when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// Whether the client asked for a stream.
    pub fn streaming(&self) -> bool {
        self.json()["stream"].as_bool().unwrap_or(false)
    }

    pub fn model(&self) -> String {
        self.json()["model"].as_str().unwrap_or("").to_string()
    }
}

/// One step of a reply body.
#[derive(Debug, Clone)]
pub enum Step {
    Send(Bytes),
    Wait(Duration),
    /// End the connection abruptly (after whatever was sent).
    Cut,
    /// Send nothing more, and never end.
    Stall,
}

/// What the mock answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Before the response head.
    pub delay: Duration,
    pub body: Vec<Step>,
}

impl Reply {
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A running mock provider.
#[derive(Clone)]
pub struct MockLlm {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    finished: Arc<AtomicUsize>,
    abandoned: Arc<AtomicUsize>,
}

impl MockLlm {
    /// Requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replies sent to the end.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }

    /// Replies whose client went away before the end (the connection was
    /// closed under them).
    pub fn abandoned(&self) -> usize {
        self.abandoned.load(Ordering::SeqCst)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// Start a mock provider on `addr` (port 0 picks one).
pub async fn spawn(
    addr: SocketAddr,
    script: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
) -> std::io::Result<MockLlm> {
    let listener = TcpListener::bind(addr).await?;
    let mock = MockLlm {
        addr: listener.local_addr()?,
        seen: Arc::default(),
        finished: Arc::default(),
        abandoned: Arc::default(),
    };
    let script: Script = Arc::new(script);
    let server = mock.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // Head and body go out as separate writes: without this, Nagle
            // and delayed ACKs add 40 ms to every answer.
            let _ = stream.set_nodelay(true);
            let script = script.clone();
            let mock = server.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let script = script.clone();
                    let mock = mock.clone();
                    async move { Ok::<_, Infallible>(answer(req, &script, &mock).await) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(mock)
}

/// Counts a reply as abandoned when dropped before it finished — whether
/// the client left while the reply was waiting to start or mid-body.
struct Abandoned {
    done: bool,
    count: Arc<AtomicUsize>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if !self.done {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn answer(req: Request<Incoming>, script: &Script, mock: &MockLlm) -> Response<MockBody> {
    let guard = Abandoned {
        done: false,
        count: mock.abandoned.clone(),
    };
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let seen = Seen {
        method: parts.method,
        path: parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string(),
        headers: parts.headers,
        body,
    };
    let reply = script(&seen);
    mock.seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(seen);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let (tx, rx) = mpsc::channel(16);
    let steps = reply.body;
    let finished = mock.finished.clone();
    tokio::spawn(async move {
        for step in steps {
            match step {
                Step::Send(b) => {
                    if tx.send(Ok(b)).await.is_err() {
                        return;
                    }
                }
                Step::Wait(d) => tokio::time::sleep(d).await,
                Step::Cut => {
                    // Let what was sent reach the wire first: a cut that
                    // also swallowed the bytes before it would be a
                    // different failure.
                    let all = tx.max_capacity();
                    if let Ok(emptied) = tx.reserve_many(all).await {
                        drop(emptied);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = tx.send(Err(())).await;
                    return;
                }
                Step::Stall => {
                    tx.closed().await;
                    return;
                }
            }
        }
        finished.fetch_add(1, Ordering::SeqCst);
    });
    let mut resp = Response::new(MockBody { rx, guard });
    *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    for (name, value) in reply.headers {
        if let (Ok(n), Ok(v)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            resp.headers_mut().append(n, v);
        }
    }
    resp
}

/// The reply body: what the script's steps send; notes a client that left.
pub struct MockBody {
    rx: mpsc::Receiver<Result<Bytes, ()>>,
    guard: Abandoned,
}

#[derive(Debug)]
struct CutError;

impl std::fmt::Display for CutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scripted cut")
    }
}

impl std::error::Error for CutError {}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(Some(Err(()))) => {
                self.guard.done = true;
                Poll::Ready(Some(Err(Box::new(CutError))))
            }
            Poll::Ready(None) => {
                self.guard.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Which API a request is for, by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Messages,
    CountTokens,
    Responses,
    Chat,
    Models,
}

impl Api {
    pub fn of(seen: &Seen) -> Option<Api> {
        let path = seen.path.split('?').next().unwrap_or("");
        Some(match path.trim_end_matches('/') {
            p if p.ends_with("/v1/messages/count_tokens") => Api::CountTokens,
            p if p.ends_with("/v1/messages") => Api::Messages,
            p if p.ends_with("/v1/responses") => Api::Responses,
            p if p.ends_with("/v1/chat/completions") => Api::Chat,
            p if p.ends_with("/v1/models") => Api::Models,
            _ => return None,
        })
    }
}

fn sse_event(name: Option<&str>, data: &serde_json::Value) -> Bytes {
    Bytes::from(match name {
        Some(n) => format!("event: {n}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    })
}

/// The events of a streamed answer `words` (one delta each), in the API's
/// exact format.
pub fn stream_events(api: Api, model: &str, words: &[&str]) -> Vec<Bytes> {
    use serde_json::json;
    let mut out = Vec::new();
    match api {
        Api::Messages | Api::CountTokens | Api::Models => {
            out.push(sse_event(
                Some("message_start"),
                &json!({"type":"message_start","message":{"id":"msg_mock","type":"message","role":"assistant","model":model,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}),
            ));
            out.push(sse_event(
                Some("content_block_start"),
                &json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ));
            out.push(sse_event(Some("ping"), &json!({"type":"ping"})));
            for w in words {
                out.push(sse_event(
                    Some("content_block_delta"),
                    &json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":w}}),
                ));
            }
            out.push(sse_event(
                Some("content_block_stop"),
                &json!({"type":"content_block_stop","index":0}),
            ));
            out.push(sse_event(
                Some("message_delta"),
                &json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":words.len()}}),
            ));
            out.push(sse_event(
                Some("message_stop"),
                &json!({"type":"message_stop"}),
            ));
        }
        Api::Responses => {
            let text: String = words.concat();
            let response = |status: &str, output: serde_json::Value| json!({"id":"resp_mock","object":"response","created_at":0,"status":status,"model":model,"output":output,"usage":null});
            let item = json!({"id":"msg_mock","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":text,"annotations":[]}]});
            let mut seq = 0u64;
            let mut push = |name: &str, mut data: serde_json::Value| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(seq);
                seq += 1;
                out.push(sse_event(Some(name), &data));
            };
            push(
                "response.created",
                json!({"response": response("in_progress", json!([]))}),
            );
            push(
                "response.in_progress",
                json!({"response": response("in_progress", json!([]))}),
            );
            push(
                "response.output_item.added",
                json!({"output_index":0,"item":{"id":"msg_mock","type":"message","status":"in_progress","role":"assistant","content":[]}}),
            );
            push(
                "response.content_part.added",
                json!({"item_id":"msg_mock","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}),
            );
            for w in words {
                push(
                    "response.output_text.delta",
                    json!({"item_id":"msg_mock","output_index":0,"content_index":0,"delta":w,"logprobs":[]}),
                );
            }
            push(
                "response.output_text.done",
                json!({"item_id":"msg_mock","output_index":0,"content_index":0,"text":text,"logprobs":[]}),
            );
            push(
                "response.content_part.done",
                json!({"item_id":"msg_mock","output_index":0,"content_index":0,"part":{"type":"output_text","text":text,"annotations":[]}}),
            );
            push(
                "response.output_item.done",
                json!({"output_index":0,"item":item}),
            );
            let mut done = response("completed", json!([item]));
            done["usage"] = json!({"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":words.len(),"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12 + words.len()});
            push("response.completed", json!({"response": done}));
        }
        Api::Chat => {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| json!({"id":"chatcmpl-mock","object":"chat.completion.chunk","created":0,"model":model,"choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
            out.push(sse_event(
                None,
                &chunk(json!({"role":"assistant","content":""}), json!(null)),
            ));
            for w in words {
                out.push(sse_event(None, &chunk(json!({"content":w}), json!(null))));
            }
            out.push(sse_event(None, &chunk(json!({}), json!("stop"))));
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
    }
    out
}

/// The non-streamed answer `text` in the API's format.
pub fn json_answer(api: Api, model: &str, text: &str) -> serde_json::Value {
    use serde_json::json;
    match api {
        Api::Messages => {
            json!({"id":"msg_mock","type":"message","role":"assistant","model":model,"content":[{"type":"text","text":text}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":3}})
        }
        Api::CountTokens => json!({"input_tokens": 12}),
        Api::Responses => {
            json!({"id":"resp_mock","object":"response","created_at":0,"status":"completed","model":model,"output":[{"id":"msg_mock","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":text,"annotations":[]}]}],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}})
        }
        Api::Chat => {
            json!({"id":"chatcmpl-mock","object":"chat.completion","created":0,"model":model,"choices":[{"index":0,"message":{"role":"assistant","content":text},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}})
        }
        Api::Models => {
            json!({"data":[{"id":model,"type":"model","object":"model","display_name":model,"created_at":"2025-01-01T00:00:00Z"}],"object":"list","has_more":false,"first_id":model,"last_id":model})
        }
    }
}

/// A successful answer to `seen`: `words` streamed with `gap` between
/// events when it asked for a stream, else the JSON answer.
pub fn success(seen: &Seen, words: &[&str], gap: Duration) -> Reply {
    let Some(api) = Api::of(seen) else {
        return error(seen, 404, "not_found_error", "no such endpoint");
    };
    let model = seen.model();
    let model = if model.is_empty() { "mock" } else { &model };
    if seen.streaming() && api != Api::CountTokens {
        let mut body = Vec::new();
        for (i, e) in stream_events(api, model, words).into_iter().enumerate() {
            if i > 0 && !gap.is_zero() {
                body.push(Step::Wait(gap));
            }
            body.push(Step::Send(e));
        }
        Reply {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("request-id".into(), "req_mock_stream".into()),
            ],
            delay: Duration::ZERO,
            body,
        }
    } else {
        Reply {
            status: 200,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("request-id".into(), "req_mock_json".into()),
            ],
            delay: Duration::ZERO,
            body: vec![Step::Send(Bytes::from(
                json_answer(api, model, &words.concat()).to_string(),
            ))],
        }
    }
}

/// An HTTP error in the request's protocol's envelope.
pub fn error(seen: &Seen, status: u16, kind: &str, message: &str) -> Reply {
    let anthropic = matches!(Api::of(seen), Some(Api::Messages | Api::CountTokens))
        || seen.headers.contains_key("anthropic-version");
    let body = if anthropic {
        serde_json::json!({"type":"error","error":{"type":kind,"message":message},"request_id":"req_mock_error"})
    } else {
        serde_json::json!({"error":{"message":message,"type":kind,"param":null,"code":null}})
    };
    Reply {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        delay: Duration::ZERO,
        body: vec![Step::Send(Bytes::from(body.to_string()))],
    }
}

/// The tool the [`agent`] mock calls, and the arguments it sends, split
/// where a parser would least like it (inside a key, inside a value).
pub const AGENT_TOOL: &str = "read_file";
pub const AGENT_ARGUMENT_PIECES: &[&str] = &["{\"pa", "th\": \"no", "tes.txt\"}"];

/// The text of the tool result a request carries back, in any API.
fn tool_result(seen: &Seen) -> Option<String> {
    let v = seen.json();
    let text = |c: &serde_json::Value| match c {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    for m in v["messages"].as_array().into_iter().flatten() {
        if m["role"] == "tool" {
            return Some(text(&m["content"]));
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                return Some(text(&b["content"]));
            }
        }
    }
    for item in v["input"].as_array().into_iter().flatten() {
        if item["type"] == "function_call_output" {
            return Some(text(&item["output"]));
        }
    }
    None
}

/// A mock agent turn, in the request's API: without a tool result in the
/// request it calls [`AGENT_TOOL`] (streamed with its arguments in
/// [`AGENT_ARGUMENT_PIECES`]); with one, it answers `The file says: …`.
pub fn agent(seen: &Seen) -> Reply {
    use serde_json::json;
    let Some(api) = Api::of(seen) else {
        return error(seen, 404, "not_found_error", "no such endpoint");
    };
    if let Some(result) = tool_result(seen) {
        let answer = format!("The file says: {result}");
        return success(seen, &[answer.as_str()], Duration::ZERO);
    }
    if api == Api::CountTokens || api == Api::Models {
        return success(seen, &["-"], Duration::ZERO);
    }
    let model = seen.model();
    let args: String = AGENT_ARGUMENT_PIECES.concat();
    let json_reply = |body: serde_json::Value| Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        delay: Duration::ZERO,
        body: vec![Step::Send(Bytes::from(body.to_string()))],
    };
    if !seen.streaming() {
        return json_reply(match api {
            Api::Responses => {
                json!({"id":"resp_agent","object":"response","created_at":0,"status":"completed","model":model,
                "output":[{"id":"fc_agent","type":"function_call","status":"completed","call_id":"call_agent","name":AGENT_TOOL,"arguments":args}],
                "usage":{"input_tokens":20,"output_tokens":8,"total_tokens":28}})
            }
            Api::Chat => {
                json!({"id":"chatcmpl-agent","object":"chat.completion","created":0,"model":model,
                "choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_agent","type":"function","function":{"name":AGENT_TOOL,"arguments":args}}]},"finish_reason":"tool_calls"}],
                "usage":{"prompt_tokens":20,"completion_tokens":8,"total_tokens":28}})
            }
            _ => json!({"id":"msg_agent","type":"message","role":"assistant","model":model,
                "content":[{"type":"tool_use","id":"toolu_agent","name":AGENT_TOOL,"input":{"path":"notes.txt"}}],
                "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":8}}),
        });
    }
    let mut events = Vec::new();
    match api {
        Api::Responses => {
            let mut seq = 0u64;
            let mut push = |name: &str, mut data: serde_json::Value| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(seq);
                seq += 1;
                events.push(sse_event(Some(name), &data));
            };
            let response = |status: &str, output: serde_json::Value| json!({"id":"resp_agent","object":"response","created_at":0,"status":status,"model":model,"output":output,"usage":null});
            push(
                "response.created",
                json!({"response": response("in_progress", json!([]))}),
            );
            push(
                "response.output_item.added",
                json!({"output_index":0,"item":{"id":"fc_agent","type":"function_call","status":"in_progress","call_id":"call_agent","name":AGENT_TOOL,"arguments":""}}),
            );
            for piece in AGENT_ARGUMENT_PIECES {
                push(
                    "response.function_call_arguments.delta",
                    json!({"item_id":"fc_agent","output_index":0,"delta":piece}),
                );
            }
            push(
                "response.function_call_arguments.done",
                json!({"item_id":"fc_agent","output_index":0,"arguments":args}),
            );
            let item = json!({"id":"fc_agent","type":"function_call","status":"completed","call_id":"call_agent","name":AGENT_TOOL,"arguments":args});
            push(
                "response.output_item.done",
                json!({"output_index":0,"item":item}),
            );
            let mut done = response("completed", json!([item]));
            done["usage"] = json!({"input_tokens":20,"input_tokens_details":{"cached_tokens":0},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":28});
            push("response.completed", json!({"response": done}));
        }
        Api::Chat => {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| json!({"id":"chatcmpl-agent","object":"chat.completion.chunk","created":0,"model":model,"choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
            events.push(sse_event(
                None,
                &chunk(json!({"role":"assistant","content":null}), json!(null)),
            ));
            events.push(sse_event(None, &chunk(json!({"tool_calls":[{"index":0,"id":"call_agent","type":"function","function":{"name":AGENT_TOOL,"arguments":""}}]}), json!(null))));
            for piece in AGENT_ARGUMENT_PIECES {
                events.push(sse_event(
                    None,
                    &chunk(
                        json!({"tool_calls":[{"index":0,"function":{"arguments":piece}}]}),
                        json!(null),
                    ),
                ));
            }
            events.push(sse_event(None, &chunk(json!({}), json!("tool_calls"))));
            events.push(sse_event(None, &json!({"id":"chatcmpl-agent","object":"chat.completion.chunk","created":0,"model":model,"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":8,"total_tokens":28}})));
            events.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
        _ => {
            events.push(sse_event(Some("message_start"), &json!({"type":"message_start","message":{"id":"msg_agent","type":"message","role":"assistant","model":model,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}})));
            events.push(sse_event(Some("content_block_start"), &json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_agent","name":AGENT_TOOL,"input":{}}})));
            for piece in AGENT_ARGUMENT_PIECES {
                events.push(sse_event(Some("content_block_delta"), &json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":piece}})));
            }
            events.push(sse_event(
                Some("content_block_stop"),
                &json!({"type":"content_block_stop","index":0}),
            ));
            events.push(sse_event(Some("message_delta"), &json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":8}})));
            events.push(sse_event(
                Some("message_stop"),
                &json!({"type":"message_stop"}),
            ));
        }
    }
    Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        delay: Duration::ZERO,
        body: events.into_iter().map(Step::Send).collect(),
    }
}
