//! A provider emulator for the tests: an upstream as strict as the real
//! Anthropic Messages, OpenAI Responses and OpenAI Chat Completions
//! services, where weir's demo mock (src/demo/llm) accepts whatever it is
//! sent.
//!
//! It is an independent reading of the providers' documented rules and
//! deliberately imports nothing from weir (`wire`, `llm`): sharing weir's
//! code would make it agree with weir by construction. Each rule names its
//! source next to it; see also ../shared/LLM-PROTOCOLS.md §4 and §6.
//!
//! # Use
//!
//! ```ignore
//! let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
//! // weir's upstream url = up.base_url()
//! up.set_script(Script::RoundTrip { command: "echo hi".into() });
//! up.fail_turn(2, Failure::new(529));        // conversation turn 2 fails
//! up.fail_next(1, Failure::new(429).with_header("retry-after", "1"));
//! // ... drive weir ...
//! up.assert_all_accepted();                  // panics with each rejection
//! let seen = up.journal();                   // every request and its verdict
//! ```
//!
//! - [`Provider::spawn`]`(api, options)` starts a real hyper HTTP/1.1 server
//!   on 127.0.0.1:0 speaking one API ([`ProviderApi`]); [`Provider::base_url`]
//!   is `http://127.0.0.1:<port>` (no path: the API paths are the real ones,
//!   `/v1/messages`, `/v1/responses`, `/v1/chat/completions`, and
//!   `GET /v1/models` on each).
//! - Stable API for other tests: [`Provider::spawn`], [`Provider::base_url`],
//!   [`Provider::journal`] / [`Provider::rejections`] /
//!   [`Provider::assert_all_accepted`], [`Provider::set_script`],
//!   [`Provider::set_shape`], [`Provider::set_reasoning_model`],
//!   [`Provider::fail_turn`], [`Provider::fail_next`]; [`Options`] (with
//!   `script`, `shape`, `reasoning_model` builders), [`Script`], [`Shape`],
//!   [`Failure`], [`Entry`], [`Verdict`].
//! - Every request is checked against the API's rules first; a violation
//!   is answered 400 (401, 404, 413) in the API's own error envelope with
//!   the real `type`/`code`/`param`, and recorded as [`Verdict::Rejected`].
//! - An accepted request is answered by the [`Script`], streamed or not as
//!   asked, in the API's exact event format, bent by the [`Shape`] options
//!   into the shapes some real servers send. Scripted failures
//!   ([`Provider::fail_turn`], [`Provider::fail_next`]) replace the answer
//!   of an accepted request ([`Verdict::Failed`]).
//! - With [`Options::azure`], a Responses or Chat emulator is an Azure
//!   OpenAI resource ([`azure`]): Azure's paths, `api-key` and
//!   deployments, then the same API's rules.
//! - The provider is stateless like the real ones: a "turn" is read from
//!   the request's history (1 + the assistant turns in it), and the
//!   round-trip script recognises the result of its own tool call there.
//! - Thinking signatures (Anthropic) and `encrypted_content` (Responses)
//!   are sealed with a key only this emulator holds, so one that weir made
//!   up, or carried from the other API, fails as on the real services.
//!   All emulators in a test process share the key, as one provider's
//!   servers do.

#![allow(dead_code)]

pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod chat;
pub mod entra;
pub mod responses;
mod script;
pub mod sts;
pub mod vertex;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::channel::{Channel, Sender};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

// Not every test that builds the emulator names the search script's words.
#[allow(unused_imports)]
pub use script::{AFTER_SEARCH, CITED, NO_SEARCH, SEARCH_URL, Script};

/// The API one emulator speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderApi {
    /// Anthropic Messages: `POST /v1/messages` (also `?beta=true`) and
    /// `/v1/messages/count_tokens`.
    Anthropic,
    /// OpenAI Responses: `POST /v1/responses`.
    Responses,
    /// OpenAI Chat Completions: `POST /v1/chat/completions`.
    Chat,
}

/// How an emulator behaves; `Options::default()` is a reasoning model,
/// the round-trip script running `echo weir-fidelity`, the reference
/// stream shapes and a 32 MiB body limit.
#[derive(Clone, Debug)]
pub struct Options {
    /// Whether the model is a reasoning model (OpenAI: `reasoning` /
    /// `reasoning_effort` accepted, non-default `temperature`/`top_p`
    /// refused; the reverse otherwise). Anthropic ignores it.
    pub reasoning_model: bool,
    pub script: Script,
    pub shape: Shape,
    /// The largest request body accepted (413 above it).
    pub max_body: usize,
    /// Served as an Azure OpenAI resource (Responses and Chat only).
    pub azure: Option<azure::Azure>,
    /// Served as Amazon Bedrock (Anthropic only).
    pub bedrock: Option<bedrock::Bedrock>,
    /// Served as Claude on Vertex AI (Anthropic only).
    pub vertex: Option<vertex::Vertex>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            reasoning_model: true,
            script: Script::RoundTrip {
                command: "echo weir-fidelity".into(),
            },
            shape: Shape::default(),
            // Anthropic documents 32 MB for Messages (LLM-PROTOCOLS §4).
            max_body: 32 << 20,
            azure: None,
            bedrock: None,
            vertex: None,
        }
    }
}

impl Options {
    pub fn script(mut self, script: Script) -> Self {
        self.script = script;
        self
    }

    pub fn shape(mut self, shape: Shape) -> Self {
        self.shape = shape;
        self
    }

    pub fn reasoning_model(mut self, yes: bool) -> Self {
        self.reasoning_model = yes;
        self
    }

    pub fn vertex(mut self, vertex: vertex::Vertex) -> Self {
        self.vertex = Some(vertex);
        self
    }

    pub fn azure(mut self, azure: azure::Azure) -> Self {
        self.azure = Some(azure);
        self
    }

    pub fn bedrock(mut self, bedrock: bedrock::Bedrock) -> Self {
        self.bedrock = Some(bedrock);
        self
    }
}

/// Stream shapes real servers send that differ from the reference
/// (OpenAI's own) format. All off by default.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    /// Responses: no `response.output_item.added` and no
    /// `response.content_part.added` (some Responses-compatible servers;
    /// LiteLLM's streaming iterator).
    pub responses_no_added: bool,
    /// Chat: the reasoning as `reasoning_content` deltas (DeepSeek, Kimi,
    /// vLLM) and on the whole message.
    pub chat_reasoning_content: bool,
    /// Chat: DeepSeek's thinking mode (also Kimi's): an assistant message
    /// with `tool_calls` in the history must carry its `reasoning_content`
    /// back, or the request is refused (api-docs.deepseek.com/guides/
    /// thinking_mode, "Tool calls"; decolua/9router#355). Implies nothing
    /// about the answers: set `chat_reasoning_content` for those.
    pub chat_reasoning_required: bool,
    /// Chat: a tool call's first chunk carries the name and the first
    /// piece of arguments but no `id`; the id arrives in a later chunk.
    pub chat_late_tool_id: bool,
    /// Chat: usage on the chunk that carries `finish_reason` instead of
    /// OpenAI's separate final chunk with `choices: []`, and sent whether
    /// or not `stream_options.include_usage` asked for it (llama.cpp, some
    /// vLLM versions).
    pub chat_usage_on_finish: bool,
}

/// A scripted failure in place of an accepted request's answer.
#[derive(Clone, Debug)]
pub struct Failure {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The error message, in the API's envelope with the status's type.
    pub message: String,
    /// The whole error body instead, when the service's is its own.
    pub body: Option<Value>,
}

impl Failure {
    pub fn new(status: u16) -> Self {
        Failure {
            status,
            headers: Vec::new(),
            message: format!("scripted failure {status}"),
            body: None,
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn with_message(mut self, message: &str) -> Self {
        self.message = message.into();
        self
    }
}

/// What the emulator made of one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Accepted,
    /// Refused by a rule: the status and the error message sent.
    Rejected {
        status: u16,
        message: String,
    },
    /// Accepted, then answered with a scripted [`Failure`].
    Failed {
        status: u16,
    },
}

/// One request the emulator received.
#[derive(Clone, Debug)]
pub struct Entry {
    pub method: http::Method,
    /// Path and query, as sent.
    pub path: String,
    pub headers: HeaderMap,
    /// The parsed body (`Null` when it was not JSON).
    pub body: Value,
    /// The conversation turn read from the history (1 for a first request).
    pub turn: usize,
    pub verdict: Verdict,
}

/// A refusal: what the API answers for a broken request.
#[derive(Clone, Debug)]
pub(crate) struct Rejection {
    pub status: u16,
    pub message: String,
    /// OpenAI's `param`.
    pub param: Option<String>,
    /// OpenAI's `code`.
    pub code: Option<&'static str>,
    /// The whole error body, when the service's envelope is its own
    /// (Vertex's Google envelope).
    pub body: Option<Value>,
}

impl Rejection {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Rejection {
            status,
            message: message.into(),
            param: None,
            code: None,
            body: None,
        }
    }

    pub fn bad(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }
}

/// What an accepted request is answered with.
pub(crate) enum Answer {
    Json(Value),
    /// SSE events, each sent as its own frame.
    Events(Vec<String>),
}

/// One SSE event: `event: name` (when named) and `data: json`.
pub(crate) fn sse(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// A running emulator; stopped when dropped.
pub struct Provider {
    api: ProviderApi,
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

struct State {
    api: ProviderApi,
    options: Mutex<Options>,
    journal: Mutex<Vec<Entry>>,
    failures: Mutex<Failures>,
}

#[derive(Default)]
struct Failures {
    by_turn: HashMap<usize, Failure>,
    next: VecDeque<Failure>,
    /// By the credential sent (`x-api-key`, or `Authorization: Bearer`):
    /// a provider limits each key on its own.
    by_key: HashMap<String, Failure>,
}

impl Provider {
    /// An emulator of `api` on 127.0.0.1:0.
    pub async fn spawn(api: ProviderApi, options: Options) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State {
            api,
            options: Mutex::new(options),
            journal: Mutex::new(Vec::new()),
            failures: Mutex::new(Failures::default()),
        });
        let shared = state.clone();
        let task = serve_http1(listener, move |req| {
            let state = shared.clone();
            async move { state.serve(req).await }
        });
        Provider {
            api,
            addr,
            state,
            task,
        }
    }

    pub fn api(&self) -> ProviderApi {
        self.api
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn journal(&self) -> Vec<Entry> {
        self.state.journal.lock().expect("journal").clone()
    }

    /// The requests refused by a rule.
    pub fn rejections(&self) -> Vec<Entry> {
        self.journal()
            .into_iter()
            .filter(|e| matches!(e.verdict, Verdict::Rejected { .. }))
            .collect()
    }

    /// Panics naming each refused request and why, with its body.
    pub fn assert_all_accepted(&self) {
        let refused = self.rejections();
        if refused.is_empty() {
            return;
        }
        let mut report = format!(
            "{:?} emulator refused {} request(s):",
            self.api,
            refused.len()
        );
        for e in &refused {
            report.push_str(&format!(
                "\n- {} turn {}: {:?}\n  body: {}",
                e.path, e.turn, e.verdict, e.body
            ));
        }
        panic!("{report}");
    }

    pub fn set_script(&self, script: Script) {
        self.state.options.lock().expect("options").script = script;
    }

    pub fn set_shape(&self, shape: Shape) {
        self.state.options.lock().expect("options").shape = shape;
    }

    pub fn set_reasoning_model(&self, yes: bool) {
        self.state.options.lock().expect("options").reasoning_model = yes;
    }

    /// Answer every accepted request of conversation turn `turn` (1-based,
    /// read from the history) with `failure`.
    pub fn fail_turn(&self, turn: usize, failure: Failure) {
        let mut failures = self.state.failures.lock().expect("failures");
        failures.by_turn.insert(turn, failure);
    }

    /// Answer every accepted request sent with the credential `key` (in
    /// `x-api-key` or as a bearer token) with `failure`, as a provider
    /// answers a key over its own rate limit.
    pub fn fail_key(&self, key: &str, failure: Failure) {
        let mut failures = self.state.failures.lock().expect("failures");
        failures.by_key.insert(key.into(), failure);
    }

    /// Answer the next `k` accepted requests with `failure`.
    pub fn fail_next(&self, k: usize, failure: Failure) {
        let mut failures = self.state.failures.lock().expect("failures");
        failures.next.extend(std::iter::repeat_n(failure, k));
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Body = Channel<Bytes, Infallible>;

/// Serve each connection `listener` accepts in HTTP/1.1, each request
/// answered by `answer`, until the task is aborted.
pub(crate) fn serve_http1<F, Fut, B>(
    listener: TcpListener,
    answer: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let reply = answer(req);
                    async move { Ok::<_, Infallible>(reply.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

impl State {
    async fn serve(&self, req: Request<Incoming>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let options = self.options.lock().expect("options").clone();
        let raw = Limited::new(body, options.max_body).collect().await;
        let mut sent = None;
        let (json, checked) = match raw {
            Ok(raw) => {
                let raw = raw.to_bytes();
                let mut json = serde_json::from_slice::<Value>(&raw).ok();
                match &options.bedrock {
                    Some(b) => match b.admit(&parts, &raw, json.as_ref()) {
                        Ok((body, turns)) => {
                            let checked = anthropic::validate(&body, turns).map(|()| Route::Create);
                            (body, checked)
                        }
                        Err(r) => (json.unwrap_or(Value::Null), Err(r)),
                    },
                    None => {
                        sent = json.clone();
                        // Vertex's rules first; then its body is a Messages body.
                        let admitted = match &options.vertex {
                            Some(v) => v.admit(&parts, json.as_ref()).map(|(path, body)| {
                                json = body;
                                Some(path)
                            }),
                            None => Ok(None),
                        };
                        let checked = admitted
                            .and_then(|vertex| self.check(&parts, json.as_ref(), &options, vertex));
                        (json.unwrap_or(Value::Null), checked)
                    }
                }
            }
            Err(_) => (Value::Null, Err(self.too_large())),
        };
        let turn = match self.api {
            ProviderApi::Anthropic => anthropic::turn(&json),
            ProviderApi::Responses => responses::turn(&json),
            ProviderApi::Chat => chat::turn(&json),
        };
        let mut entry = Entry {
            method: parts.method.clone(),
            path,
            headers: parts.headers.clone(),
            body: sent.unwrap_or_else(|| json.clone()),
            turn,
            verdict: Verdict::Accepted,
        };
        let response = match checked {
            Err(rejection) => {
                entry.verdict = Verdict::Rejected {
                    status: rejection.status,
                    message: rejection.message.clone(),
                };
                match &options.bedrock {
                    Some(_) => {
                        let (headers, body) = bedrock::error_parts(&rejection);
                        self.error(rejection.status, &headers, body)
                    }
                    None => {
                        let body =
                            (rejection.body.clone()).unwrap_or_else(|| self.envelope(&rejection));
                        self.error(rejection.status, &[], body)
                    }
                }
            }
            Ok(route) => match self.scheduled_failure(turn, &parts.headers) {
                Some(failure) => {
                    entry.verdict = Verdict::Failed {
                        status: failure.status,
                    };
                    let rejection = Rejection::new(failure.status, failure.message.clone());
                    let body = (failure.body.clone()).unwrap_or_else(|| self.envelope(&rejection));
                    self.error(failure.status, &failure.headers, body)
                }
                None => self.answer(route, &json, &options),
            },
        };
        self.journal.lock().expect("journal").push(entry);
        response
    }

    fn scheduled_failure(&self, turn: usize, headers: &HeaderMap) -> Option<Failure> {
        let mut failures = self.failures.lock().expect("failures");
        if let Some(f) = failures.next.pop_front() {
            return Some(f);
        }
        let bearer = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
        let azure_key = headers.get("api-key").and_then(|v| v.to_str().ok());
        if let Some(f) = [key, bearer, azure_key]
            .into_iter()
            .flatten()
            .find_map(|k| failures.by_key.get(k))
        {
            return Some(f.clone());
        }
        failures.by_turn.get(&turn).cloned()
    }

    /// Headers, path, content type and the body's rules.
    fn check(
        &self,
        parts: &http::request::Parts,
        json: Option<&Value>,
        options: &Options,
        vertex_path: Option<String>,
    ) -> Result<Route, Rejection> {
        let azure_path = match &options.azure {
            Some(azure) => Some(azure.admit(parts, json)?),
            None => vertex_path,
        };
        let path = azure_path.as_deref().unwrap_or(parts.uri.path());
        let post = parts.method == http::Method::POST;
        let route = match (self.api, path, post) {
            (ProviderApi::Anthropic, "/v1/messages", true) => Route::Create,
            (ProviderApi::Anthropic, "/v1/messages/count_tokens", true) => Route::CountTokens,
            (ProviderApi::Responses, "/v1/responses", true) => Route::Create,
            (ProviderApi::Chat, "/v1/chat/completions", true) => Route::Create,
            (_, "/v1/models", false) if parts.method == http::Method::GET => Route::Models,
            _ => return Err(self.not_found(path)),
        };
        match self.api {
            // Azure's key was checked with its path.
            _ if azure_path.is_some() => {}
            ProviderApi::Anthropic => anthropic::authenticate(&parts.headers)?,
            ProviderApi::Responses | ProviderApi::Chat => openai_authenticate(&parts.headers)?,
        }
        if route == Route::Models {
            return Ok(route);
        }
        let json_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let Some(body) = json.filter(|_| json_type) else {
            return Err(self.unparsable());
        };
        if !body.is_object() {
            return Err(self.unparsable());
        }
        match (self.api, route) {
            (ProviderApi::Anthropic, Route::CountTokens) => {
                anthropic::validate_count(body, anthropic::system_turns(&parts.headers))?
            }
            (ProviderApi::Anthropic, _) => {
                anthropic::validate(body, anthropic::system_turns(&parts.headers))?
            }
            (ProviderApi::Responses, _) => responses::validate(body, options)?,
            (ProviderApi::Chat, _) => chat::validate(body, options)?,
        }
        Ok(route)
    }

    fn answer(&self, route: Route, body: &Value, options: &Options) -> Response<Body> {
        if route == Route::Models {
            return respond(200, &[], Answer::Json(self.models()));
        }
        if route == Route::CountTokens {
            let n = approximate_tokens(body);
            return respond(
                200,
                &[],
                Answer::Json(serde_json::json!({"input_tokens": n})),
            );
        }
        let view = match self.api {
            ProviderApi::Anthropic => anthropic::view(body),
            ProviderApi::Responses => responses::view(body, options),
            ProviderApi::Chat => chat::view(body, options),
        };
        let plan = script::plan(&options.script, &view);
        let answer = match self.api {
            ProviderApi::Anthropic => anthropic::answer(&plan, &view, body),
            ProviderApi::Responses => responses::answer(&plan, &view, body, &options.shape),
            ProviderApi::Chat => chat::answer(&plan, &view, body, &options.shape),
        };
        match (&options.bedrock, answer) {
            (Some(b), Answer::Events(events)) => respond_frames(bedrock::frames(&events, b), b),
            (_, answer) => respond(200, &[], answer),
        }
    }

    /// The model list in the API's shape: one model, the emulator's.
    fn models(&self) -> Value {
        let id = "emulated-model";
        match self.api {
            ProviderApi::Anthropic => serde_json::json!({
                "data": [{"type": "model", "id": id, "display_name": "Emulated", "created_at": "2026-01-01T00:00:00Z"}],
                "has_more": false, "first_id": id, "last_id": id,
            }),
            _ => serde_json::json!({
                "object": "list",
                "data": [{"id": id, "object": "model", "created": 0, "owned_by": "emulator"}],
            }),
        }
    }

    fn envelope(&self, r: &Rejection) -> Value {
        match self.api {
            ProviderApi::Anthropic => anthropic::envelope(r),
            ProviderApi::Responses | ProviderApi::Chat => openai_envelope(r),
        }
    }

    fn error(&self, status: u16, headers: &[(String, String)], body: Value) -> Response<Body> {
        respond(status, headers, Answer::Json(body))
    }

    fn not_found(&self, path: &str) -> Rejection {
        match self.api {
            ProviderApi::Anthropic => Rejection::new(404, "Not Found"),
            _ => Rejection::new(404, format!("Invalid URL (POST {path})")),
        }
    }

    fn unparsable(&self) -> Rejection {
        match self.api {
            ProviderApi::Anthropic => Rejection::bad(
                "There was an error parsing the body of your request. Please check that it is valid JSON.",
            ),
            // OpenAI's answer to a body that is not a JSON object.
            _ => Rejection::bad(
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)",
            ),
        }
    }

    fn too_large(&self) -> Rejection {
        match self.api {
            ProviderApi::Anthropic => {
                Rejection::new(413, "Request exceeds the maximum allowed number of bytes.")
            }
            _ => Rejection::new(413, "Request too large.").code("request_too_large"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Create,
    CountTokens,
    /// `GET /v1/models`, which the agents list at start.
    Models,
}

fn respond(status: u16, headers: &[(String, String)], answer: Answer) -> Response<Body> {
    let (mut tx, body): (Sender<Bytes, Infallible>, Body) = Channel::new(16);
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).expect("status"))
        .header("request-id", format!("req_emu{}", fastrand::u64(..)))
        .header("x-request-id", format!("req_emu{}", fastrand::u64(..)));
    for (name, value) in headers {
        response = response.header(name.as_str(), value.as_str());
    }
    let chunks = match answer {
        Answer::Json(v) => {
            response = response.header("content-type", "application/json");
            vec![v.to_string()]
        }
        Answer::Events(events) => {
            response = response
                .header("content-type", "text/event-stream; charset=utf-8")
                .header("cache-control", "no-cache");
            events
        }
    };
    tokio::spawn(async move {
        for chunk in chunks {
            if tx.send_data(Bytes::from(chunk)).await.is_err() {
                return;
            }
        }
    });
    response.body(body).expect("response")
}

/// A Bedrock stream: its frames, then (when it stalls) a `ping` chunk
/// every 20 ms until the reader goes away, counted in `cancelled`.
fn respond_frames(frames: Vec<Vec<u8>>, b: &bedrock::Bedrock) -> Response<Body> {
    let (mut tx, body): (Sender<Bytes, Infallible>, Body) = Channel::new(16);
    let response = Response::builder()
        .status(200)
        .header("content-type", "application/vnd.amazon.eventstream")
        .header("x-amzn-requestid", format!("emu{}", fastrand::u64(..)))
        .header("x-amzn-bedrock-content-type", "application/json");
    let stall = b.stall_after;
    let cancelled = b.cancelled.clone();
    tokio::spawn(async move {
        for (i, f) in frames.into_iter().enumerate() {
            if stall == Some(i) {
                let ping = bedrock::chunk(&serde_json::json!({"type": "ping"}));
                loop {
                    if tx.send_data(Bytes::from(ping.clone())).await.is_err() {
                        cancelled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
            if tx.send_data(Bytes::from(f)).await.is_err() {
                return;
            }
        }
    });
    response.body(body).expect("response")
}

/// OpenAI's credentials: `Authorization: Bearer <key>`.
fn openai_authenticate(headers: &HeaderMap) -> Result<(), Rejection> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| !k.trim().is_empty());
    if bearer {
        Ok(())
    } else {
        Err(Rejection::new(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username. You can obtain an API key from https://platform.openai.com/account/api-keys.",
        ))
    }
}

/// `{"error":{"message","type","param","code"}}` (LLM-PROTOCOLS §4).
fn openai_envelope(r: &Rejection) -> Value {
    let kind = match r.status {
        401 => "invalid_request_error",
        404 => "invalid_request_error",
        429 => "rate_limit_error",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    };
    serde_json::json!({"error": {
        "message": r.message,
        "type": kind,
        "param": r.param,
        "code": r.code.or(match r.status {
            401 => Some("invalid_api_key"),
            429 => Some("rate_limit_exceeded"),
            _ => None,
        }),
    }})
}

/// The OpenAI field limits shared by Responses and Chat: a string at most
/// `max` characters (`string_above_max_length`).
pub(crate) fn max_length(param: &str, value: &Value, max: usize) -> Result<(), Rejection> {
    let Some(s) = value.as_str() else {
        return Ok(());
    };
    let n = s.chars().count();
    if n > max {
        return Err(Rejection::bad(format!(
            "Invalid '{param}': string too long. Expected a string with maximum length {max}, but got a string with length {n} instead."
        ))
        .param(param)
        .code("string_above_max_length"));
    }
    Ok(())
}

/// OpenAI's function name rule: "Must be a-z, A-Z, 0-9, or contain
/// underscores and dashes, with a maximum length of 64" (openai-node
/// `FunctionDefinition.name`, generated from the OpenAPI spec).
pub(crate) fn openai_tool_name(param: &str, name: &Value) -> Result<(), Rejection> {
    max_length(param, name, 64)?;
    let ok = name.as_str().is_some_and(|s| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    if ok {
        Ok(())
    } else {
        Err(Rejection::bad(format!(
            "Invalid '{param}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
        ))
        .param(param)
        .code("invalid_value"))
    }
}

/// Unknown top-level parameters: OpenAI's `unknown_parameter`.
pub(crate) fn openai_known(body: &Value, known: &[&str]) -> Result<(), Rejection> {
    for key in body.as_object().into_iter().flat_map(|o| o.keys()) {
        if !known.contains(&key.as_str()) {
            return Err(Rejection::bad(format!("Unknown parameter: '{key}'."))
                .param(key.clone())
                .code("unknown_parameter"));
        }
    }
    Ok(())
}

/// The body rules Responses and Chat share: only `known` fields, a
/// `model`, and `user` / `safety_identifier` of at most 64 characters
/// (LLM-PROTOCOLS §6, maximhq/bifrost#1000).
pub(crate) fn openai_common(body: &Value, known: &[&str]) -> Result<(), Rejection> {
    openai_known(body, known)?;
    if !body["model"].is_string() {
        return Err(Rejection::bad("Missing required parameter: 'model'.")
            .param("model")
            .code("missing_required_parameter"));
    }
    max_length("user", &body["user"], 64)?;
    max_length("safety_identifier", &body["safety_identifier"], 64)
}

/// OpenAI's `unsupported_parameter` for a parameter the model refuses.
pub(crate) fn unsupported(param: &str) -> Rejection {
    Rejection::bad(format!(
        "Unsupported parameter: '{param}' is not supported with this model."
    ))
    .param(param)
    .code("unsupported_parameter")
}

/// The text of a tool result's content: a string, or the `text` of each
/// part of an array (the three APIs share this shape).
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// A rough token count for usage: a token per four bytes of the body.
pub(crate) fn approximate_tokens(body: &Value) -> u64 {
    (body.to_string().len() / 4).max(1) as u64
}

/// Seal `text` as `kind` with the emulator's key: the text (so a thinking
/// block whose text was omitted still carries it) and a MAC over kind and
/// text. Only this emulator can make one; [`unseal`] checks it.
pub(crate) fn seal(kind: &str, text: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let tag = aws_lc_rs::hmac::sign(&key(), format!("{kind}\0{text}").as_bytes());
    format!("{}.{}", b64.encode(text), b64.encode(tag.as_ref()))
}

/// The sealed text, when `token` is one [`seal`] made for `kind`.
pub(crate) fn unseal(kind: &str, token: &str) -> Option<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (text, tag) = token.split_once('.')?;
    let text = String::from_utf8(b64.decode(text).ok()?).ok()?;
    let tag = b64.decode(tag).ok()?;
    aws_lc_rs::hmac::verify(&key(), format!("{kind}\0{text}").as_bytes(), &tag).ok()?;
    Some(text)
}

fn key() -> aws_lc_rs::hmac::Key {
    aws_lc_rs::hmac::Key::new(
        aws_lc_rs::hmac::HMAC_SHA256,
        b"weir provider emulator: only the emulator seals thinking",
    )
}

/// A fresh id with `prefix`, marked as this emulator's.
pub(crate) fn id(prefix: &str) -> String {
    format!("{prefix}emu{:016x}", fastrand::u64(..))
}

/// `text` in pieces of about `n` bytes, cut at char boundaries: deltas.
pub(crate) fn pieces(text: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if cur.len() >= n {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
