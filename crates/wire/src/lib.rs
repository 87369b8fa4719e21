//! What each LLM API means on the wire, one module per API.
//!
//! weir speaks three wire APIs: [`anthropic`] Messages (Claude Code),
//! [`responses`] OpenAI Responses (Codex) and [`chat`] OpenAI Chat
//! Completions (vLLM, Ollama, OpenRouter…), with what the two OpenAI APIs
//! share in [`openai`], and what Azure OpenAI serves them with of its own
//! (paths, key header, content-filter refusals) in [`azure`], what
//! Amazon Bedrock serves Messages with (paths, body, event-stream framing,
//! exceptions) in [`bedrock`], and what Google Vertex AI serves Messages
//! with of its own (paths, body, error envelope) in [`vertex`]. Each
//! module owns everything about its API:
//! endpoints, the credential header, the error envelope and its
//! status ↔ error-type table, how stream events are classed, where usage
//! is reported, the keep-alive and in-band error bytes, and the limits the
//! real service enforces. [`sse`] frames and writes server-sent events for
//! all of them.
//!
//! Beside them: [`fields`] (request header fields read one way), [`skim`]
//! and [`body`] (an LLM request's top-level fields, found in one pass),
//! and [`translate`] (every client API on every upstream API, and local
//! token counting).
//!
//! This crate is pure: no runtime, no HTTP stack, no I/O. It knows
//! bytes, JSON and HTTP's types, so it builds fast, is what the fuzz
//! targets exercise, and the compiler keeps the rest of weir out of it.
//!
//! Everything above asks this crate and decides nothing protocol-specific
//! itself: the relay asks how an event is classed and what error ends a
//! broken stream, failover asks which header carries a key, the renderer
//! asks for the envelope. A fourth API is one new module here plus its
//! translation pairs ([`translate`]); nothing in the relay, failover,
//! `respond` or `config` changes.

#![forbid(unsafe_code)]

/// What every piece of state weir makes for another vendor (a thinking
/// signature, a carried reasoning block, a search result) starts with,
/// inside its JSON string; a request that goes back untranslated is looked
/// at again only when one of its strings starts so.
pub const WEIR_STATE_MARK: &str = "weir.";

pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod body;
pub mod chat;
pub mod entra;
pub mod fields;
pub mod google;
pub mod openai;
pub mod responses;
pub mod skim;
pub mod sse;
pub mod translate;
pub mod vertex;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

/// The API family a route speaks to its clients (`kind` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Anthropic Messages (`/v1/messages`, `count_tokens`, `/v1/models`).
    Anthropic,
    /// OpenAI Responses and Chat Completions (`/v1/responses`,
    /// `/v1/chat/completions`, `/v1/models`).
    OpenAi,
    /// Amazon Bedrock's `InvokeModel` with Anthropic bodies
    /// (`/model/{id}/invoke`, `/invoke-with-response-stream`): Claude Code
    /// in Bedrock mode. Served as Messages ([`bedrock::client`]).
    Bedrock,
}

impl Protocol {
    /// Every protocol, with the name the config uses for it.
    pub const ALL: [Protocol; 3] = [Protocol::Anthropic, Protocol::OpenAi, Protocol::Bedrock];

    pub fn from_name(name: &str) -> Option<Protocol> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Anthropic => "anthropic",
            Protocol::OpenAi => "openai",
            Protocol::Bedrock => "bedrock",
        }
    }

    /// The provider's own base URL, for upstreams that name none.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Protocol::Anthropic | Protocol::Bedrock => anthropic::BASE_URL,
            Protocol::OpenAi => openai::BASE_URL,
        }
    }

    /// The API an upstream of this route speaks unless it says otherwise.
    pub fn default_upstream(self) -> UpstreamApi {
        match self {
            Protocol::Anthropic | Protocol::Bedrock => UpstreamApi::Anthropic,
            Protocol::OpenAi => UpstreamApi::OpenAi,
        }
    }

    /// The API an upstream of this route speaks when it names `asked`, or
    /// why it cannot: an upstream speaking a whole family of APIs that is
    /// not the route's own must say which one to translate to.
    pub fn upstream_api(self, asked: Option<UpstreamApi>) -> Result<UpstreamApi, String> {
        match asked {
            None => Ok(self.default_upstream()),
            Some(api) if !api.is_specific() && !self.is_native(api) => Err(format!(
                "`{}` names more than one API; on a route of kind `{}` say which one the upstream is translated to",
                api.name(),
                self.name()
            )),
            Some(api) => Ok(api),
        }
    }

    /// Whether an upstream speaking `api` answers this route's clients in
    /// their own format (so its model list, say, can be relayed as is).
    pub fn is_native(self, api: UpstreamApi) -> bool {
        match self {
            // A Bedrock client's request is made a Messages one first.
            Protocol::Anthropic | Protocol::Bedrock => api == UpstreamApi::Anthropic,
            Protocol::OpenAi => !matches!(
                api,
                UpstreamApi::Anthropic | UpstreamApi::Bedrock | UpstreamApi::Vertex
            ),
        }
    }

    /// A generated error in this protocol's envelope, and the header its
    /// request id travels in.
    pub fn error_body(
        self,
        status: StatusCode,
        message: &str,
        request_id: &str,
    ) -> (String, &'static str) {
        match self {
            Protocol::Anthropic => (
                anthropic::error_body(status, message, Some(request_id)),
                anthropic::REQUEST_ID_HEADER,
            ),
            Protocol::OpenAi => (
                openai::error_body(status, message),
                openai::REQUEST_ID_HEADER,
            ),
            Protocol::Bedrock => (
                bedrock::client::error_body(message),
                bedrock::client::REQUEST_ID_HEADER,
            ),
        }
    }

    /// The header naming a generated error's type, for a protocol whose
    /// clients read it there rather than in the body (Bedrock's
    /// `x-amzn-ErrorType`), and its value.
    pub fn error_type(self, status: StatusCode) -> Option<(&'static str, &'static str)> {
        (self == Protocol::Bedrock).then(|| {
            (
                bedrock::client::ERROR_TYPE_HEADER,
                bedrock::client::exception_for(status),
            )
        })
    }

    /// The list `GET /v1/models` returns, in this protocol's format.
    pub fn model_list<'a>(self, names: impl Iterator<Item = &'a str>) -> serde_json::Value {
        match self {
            Protocol::Anthropic | Protocol::Bedrock => anthropic::model_list(names),
            Protocol::OpenAi => openai::model_list(names),
        }
    }
}

/// The most model ids taken from one upstream's list: real lists hold a
/// few dozen to a few hundred.
pub const MAX_LISTED_MODELS: usize = 1000;

/// The longest model id taken from an upstream's list, in bytes.
const MAX_LISTED_MODEL_ID: usize = 256;

/// The model ids of a `GET /v1/models` answer, in its order: both APIs
/// list them as `data[].id` (Anthropic's entries are `{type: "model",
/// id, …}`, OpenAI's `{object: "model", id, …}`). Entries without a
/// string id, or with one past 256 bytes, are left out; at most
/// [`MAX_LISTED_MODELS`] are taken. A body that is not such a list
/// lists nothing.
pub fn listed_models(body: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        data: Vec<serde_json::Value>,
    }
    let Ok(list) = serde_json::from_slice::<List>(body) else {
        return Vec::new();
    };
    list.data
        .iter()
        .filter_map(|entry| entry.get("id")?.as_str())
        .filter(|id| !id.is_empty() && id.len() <= MAX_LISTED_MODEL_ID)
        .take(MAX_LISTED_MODELS)
        .map(str::to_string)
        .collect()
}

/// The API an LLM upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamApi {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses and Chat Completions both (OpenAI itself).
    OpenAi,
    /// OpenAI Responses only.
    OpenAiResponses,
    /// OpenAI Chat Completions only (vLLM, Ollama, OpenRouter, most
    /// self-hosted servers).
    OpenAiChat,
    /// Azure OpenAI, Responses and Chat Completions both ([`azure`]).
    Azure,
    /// Azure OpenAI, Responses only.
    AzureResponses,
    /// Azure OpenAI, Chat Completions only.
    AzureChat,
    /// Amazon Bedrock's Anthropic models: Messages on `bedrock-runtime`
    /// ([`bedrock`]).
    Bedrock,
    /// Anthropic Messages on Google Vertex AI ([`vertex`]).
    Vertex,
}

impl UpstreamApi {
    /// Every upstream API, with the name the config uses for it.
    pub const ALL: [UpstreamApi; 9] = [
        UpstreamApi::Anthropic,
        UpstreamApi::OpenAiResponses,
        UpstreamApi::OpenAiChat,
        UpstreamApi::OpenAi,
        UpstreamApi::AzureResponses,
        UpstreamApi::AzureChat,
        UpstreamApi::Azure,
        UpstreamApi::Bedrock,
        UpstreamApi::Vertex,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UpstreamApi::Anthropic => "anthropic",
            UpstreamApi::OpenAi => "openai",
            UpstreamApi::OpenAiResponses => "openai_responses",
            UpstreamApi::OpenAiChat => "openai_chat",
            UpstreamApi::Azure => "azure",
            UpstreamApi::AzureResponses => "azure_responses",
            UpstreamApi::AzureChat => "azure_chat",
            UpstreamApi::Bedrock => "bedrock",
            UpstreamApi::Vertex => "vertex",
        }
    }

    pub fn from_name(name: &str) -> Option<UpstreamApi> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The wire APIs this upstream serves, the preferred first (a Messages
    /// request to OpenAI itself is translated to Responses).
    pub fn apis(self) -> &'static [Api] {
        match self {
            UpstreamApi::Anthropic | UpstreamApi::Bedrock | UpstreamApi::Vertex => &[Api::Messages],
            UpstreamApi::OpenAi | UpstreamApi::Azure => &[Api::Responses, Api::Chat],
            UpstreamApi::OpenAiResponses | UpstreamApi::AzureResponses => &[Api::Responses],
            UpstreamApi::OpenAiChat | UpstreamApi::AzureChat => &[Api::Chat],
        }
    }

    /// Whether this is Azure OpenAI: its paths are an [`azure::Surface`]'s.
    pub fn is_azure(self) -> bool {
        matches!(
            self,
            UpstreamApi::Azure | UpstreamApi::AzureResponses | UpstreamApi::AzureChat
        )
    }

    /// Whether the upstream's `GET /v1/models` lists the ids its clients
    /// ask for. Azure's lists the resource's base models, not the
    /// deployments a route sends; Bedrock's runtime lists none: the
    /// route's own list is the truth.
    pub fn lists_models(self) -> bool {
        !self.is_azure() && !matches!(self, UpstreamApi::Bedrock | UpstreamApi::Vertex)
    }

    /// Whether the answers come in AWS's event-stream framing and errors
    /// named by `x-amzn-ErrorType` ([`bedrock`]): read through
    /// [`bedrock::SseDecoder`] and [`bedrock::error_answer`] into the
    /// Messages stream and envelope before anything else reads them.
    pub fn frames_answers(self) -> bool {
        self == UpstreamApi::Bedrock
    }

    /// An error answer in this API's own envelope, when the upstream
    /// sends another (Vertex's Google envelope, read into Anthropic's);
    /// None when it already is.
    pub fn own_error(self, status: StatusCode, body: &[u8]) -> Option<Bytes> {
        match self {
            UpstreamApi::Vertex => vertex::anthropic_error(status, body),
            _ => None,
        }
    }

    /// Whether this upstream's error answers may come in another
    /// envelope than its API's ([`UpstreamApi::own_error`] reads them in).
    pub fn has_own_errors(self) -> bool {
        self == UpstreamApi::Vertex
    }

    /// How long an error answer's body asks to wait before retrying, for
    /// an upstream that says it there rather than in `retry-after`
    /// (Vertex's `RetryInfo`).
    pub fn body_retry_hint(self, body: &[u8]) -> Option<std::time::Duration> {
        match self {
            UpstreamApi::Vertex => vertex::retry_hint(body),
            _ => None,
        }
    }

    /// Whether an error answer says the upstream's policy refused the
    /// prompt itself (Azure's content filter): every upstream under the
    /// same policy would, so it is the client's answer, never failed over.
    pub fn refuses_prompt(self, status: StatusCode, body: &[u8]) -> bool {
        status == StatusCode::BAD_REQUEST && self.is_azure() && azure::refuses_prompt(body)
    }

    /// Whether this names one wire API, so a client of another family can
    /// be translated to it unambiguously.
    pub fn is_specific(self) -> bool {
        self.apis().len() == 1
    }

    /// Whether this upstream serves `endpoint` as the client sent it.
    pub fn serves(self, endpoint: Endpoint) -> bool {
        match endpoint {
            // Bedrock's runtime has no model list.
            Endpoint::Models => self != UpstreamApi::Bedrock,
            Endpoint::CountTokens => matches!(self, UpstreamApi::Anthropic | UpstreamApi::Vertex),
            _ => endpoint.api().is_some_and(|a| self.apis().contains(&a)),
        }
    }

    /// The header an upstream key travels in, and its value.
    pub fn key_header(self, key: &str) -> (http::HeaderName, String) {
        match self {
            UpstreamApi::Anthropic => anthropic::key_header(key),
            UpstreamApi::Vertex => (http::header::AUTHORIZATION, format!("Bearer {key}")),
            api if api.is_azure() => azure::key_header(key),
            UpstreamApi::Bedrock => bedrock::key_header(key),
            _ => openai::key_header(key),
        }
    }

    /// Make a client's headers fit a request translated to this API: the
    /// other family's headers dropped, the client's own credential moved
    /// to this API's header when it is passed through, and any header
    /// this API requires added.
    pub fn adopt_headers(self, headers: &mut HeaderMap, passthrough: bool) {
        match self {
            UpstreamApi::Anthropic => anthropic::adopt_headers(headers, passthrough),
            UpstreamApi::Vertex => vertex::adopt_headers(headers),
            api if api.is_azure() => azure::adopt_headers(headers, passthrough),
            UpstreamApi::Bedrock => bedrock::adopt_headers(headers, passthrough),
            _ => openai::adopt_headers(headers, passthrough),
        }
    }
}

/// An endpoint an LLM route serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// Anthropic `POST /v1/messages`.
    Messages,
    /// Anthropic `POST /v1/messages/count_tokens`.
    CountTokens,
    /// `GET /v1/models`, both protocols.
    Models,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// OpenAI `POST /v1/chat/completions`.
    ChatCompletions,
}

impl Endpoint {
    /// The endpoint `method` + `path` names on a route speaking `protocol`.
    pub fn find(protocol: Protocol, method: &Method, path: &str) -> Option<Endpoint> {
        let path = path.trim_end_matches('/');
        if protocol == Protocol::Bedrock {
            // The runtime's two calls only: no model list, no counting.
            let call = bedrock::client::Invocation::of(path);
            return (method == Method::POST && call.is_some()).then_some(Endpoint::Messages);
        }
        if path == "/v1/models" {
            return (method == Method::GET).then_some(Endpoint::Models);
        }
        if method != Method::POST {
            return None;
        }
        match protocol {
            Protocol::Anthropic | Protocol::Bedrock => anthropic::endpoint(path),
            Protocol::OpenAi => [responses::endpoint(path), chat::endpoint(path)]
                .into_iter()
                .flatten()
                .next(),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
            Endpoint::Models => "models",
            Endpoint::Responses => "responses",
            Endpoint::ChatCompletions => "chat_completions",
        }
    }

    /// Whether the request body names a model to route by.
    pub fn routes_by_model(self) -> bool {
        self != Endpoint::Models
    }

    /// The wire API of a generation endpoint (whose answers may stream).
    pub fn api(self) -> Option<Api> {
        match self {
            Endpoint::Messages => Some(Api::Messages),
            Endpoint::Responses => Some(Api::Responses),
            Endpoint::ChatCompletions => Some(Api::Chat),
            Endpoint::CountTokens | Endpoint::Models => None,
        }
    }
}

/// One wire API that generates, each with its own module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Messages,
    Responses,
    Chat,
}

impl Api {
    pub const ALL: [Api; 3] = [Api::Messages, Api::Responses, Api::Chat];

    /// The API path a generation request is sent to.
    pub fn path(self) -> &'static str {
        match self {
            Api::Messages => anthropic::MESSAGES_PATH,
            Api::Responses => responses::PATH,
            Api::Chat => chat::PATH,
        }
    }

    pub fn endpoint(self) -> Endpoint {
        match self {
            Api::Messages => Endpoint::Messages,
            Api::Responses => Endpoint::Responses,
            Api::Chat => Endpoint::ChatCompletions,
        }
    }

    /// The usage a whole (non-streamed) answer of this API reports, and
    /// why it ended.
    pub fn answer_facts(self, body: &[u8]) -> (Option<Usage>, Option<Finish>) {
        /// Only `usage` and the end's fields are built; the rest of the
        /// answer is skipped unparsed (a `Value` of a whole answer cost
        /// more than the rest of the request's handling by weir).
        #[derive(serde::Deserialize)]
        struct Whole {
            #[serde(default)]
            usage: serde_json::Value,
            /// Messages.
            #[serde(default)]
            stop_reason: Option<String>,
            /// Responses.
            #[serde(default)]
            status: Option<String>,
            #[serde(default)]
            incomplete_details: serde_json::Value,
            /// Chat Completions.
            #[serde(default)]
            choices: Vec<Choice>,
        }
        #[derive(serde::Deserialize)]
        struct Choice {
            #[serde(default)]
            finish_reason: Option<String>,
        }
        let Ok(whole) = serde_json::from_slice::<Whole>(body) else {
            return (None, None);
        };
        let u = &whole.usage;
        match self {
            Api::Messages => (
                anthropic::usage(u),
                whole.stop_reason.as_deref().map(Finish::of),
            ),
            Api::Responses => (
                responses::usage(u),
                responses::finish(whole.status.as_deref(), &whole.incomplete_details),
            ),
            Api::Chat => (
                chat::usage(u),
                whole
                    .choices
                    .first()
                    .and_then(|c| c.finish_reason.as_deref())
                    .map(Finish::of),
            ),
        }
    }

    /// The keep-alive sent after upstream silence, in this API's stream.
    pub fn keepalive(self) -> Bytes {
        match self {
            Api::Messages => anthropic::keepalive(),
            Api::Responses | Api::Chat => openai::keepalive(),
        }
    }

    /// A watcher for one stream of this API.
    pub fn watch(self) -> Watch {
        Watch {
            api: self,
            next_sequence: 0,
        }
    }
}

/// What a stream event means for failover and accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventClass {
    /// Before any content (`message_start`, `response.created`, a role-only
    /// chat chunk): held while failover is still possible.
    Preamble,
    /// The model produced something: no failover past this point.
    Content,
    /// An error reported inside the stream.
    Error,
    /// The stream's success terminator (`message_stop`,
    /// `response.completed`/`incomplete`, `[DONE]`).
    Done,
    /// A keep-alive (`ping`, comments).
    KeepAlive,
}

/// Token usage as an event or answer reports it, in one convention for
/// every API (Anthropic's): `input` excludes cached input, which is
/// `cache_read` (and `cache_write`). Streams report running totals;
/// numbers that are not non-negative integers count as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// What one event of a stream says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    pub class: EventClass,
    pub usage: Option<Usage>,
    /// Why the answer ended, on the event that says it.
    pub finish: Option<Finish>,
}

impl Observed {
    fn of(class: EventClass, usage: Option<Usage>) -> Observed {
        Observed {
            class,
            usage,
            finish: None,
        }
    }
}

/// Why an answer ended, as its API says it (`end_turn`, `tool_use`,
/// `stop`, `tool_calls`, `max_output_tokens`…): one of the values the
/// APIs document, else `other` (an upstream's text is never kept as is:
/// it becomes a label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish(&'static str);

impl Finish {
    const KNOWN: &'static [&'static str] = &[
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "function_call",
        "completed",
        "max_output_tokens",
        "incomplete",
        "failed",
    ];

    pub fn of(said: &str) -> Finish {
        Finish(
            Self::KNOWN
                .iter()
                .find(|k| **k == said)
                .copied()
                .unwrap_or("other"),
        )
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }
}

/// Reads one stream's events as they pass, keeping what its API needs to
/// end the stream well (the Responses API's sequence numbers).
#[derive(Debug, Clone)]
pub struct Watch {
    api: Api,
    next_sequence: u64,
}

impl Watch {
    /// Class and usage of one complete event (`name` its SSE `event:`
    /// field, `data` its joined data).
    pub fn observe(&mut self, name: Option<&str>, data: &str) -> Observed {
        if name.is_none() && data.is_empty() {
            return Observed::of(EventClass::KeepAlive, None);
        }
        match self.api {
            Api::Messages => anthropic::observe(name, data),
            Api::Responses => {
                if let Some(n) = responses::sequence_number(data) {
                    self.next_sequence = self.next_sequence.max(n.saturating_add(1));
                }
                responses::observe(name, data)
            }
            Api::Chat => chat::observe(data),
        }
    }

    /// The error that ends a stream which broke after content reached the
    /// client, in the stream's own format, with the API's terminal event:
    /// the client learns the answer is incomplete instead of seeing a
    /// clean end.
    pub fn in_band_error(&self, message: &str) -> Bytes {
        match self.api {
            Api::Messages => anthropic::in_band_error(message),
            Api::Responses => responses::in_band_error(message, self.next_sequence),
            Api::Chat => chat::in_band_error(message),
        }
    }
}

/// Drop every header whose name starts with `prefix` (another vendor's
/// `anthropic-*` / `openai-*` headers mean nothing to this one).
/// A name (an Azure deployment, a Bedrock model id) as one path
/// segment: unreserved bytes kept, everything else (a `/`, a `?`, the
/// `:` of a Bedrock version) percent-encoded, so it can never leave its
/// segment.
fn path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn remove_prefixed(headers: &mut HeaderMap, prefix: &str) {
    let stale: Vec<_> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(prefix))
        .cloned()
        .collect();
    for k in stale {
        headers.remove(k);
    }
}

/// The `type` of a JSON object: what every block, part, item, event and
/// tool of the three APIs is tagged by.
pub(crate) fn type_of(v: &serde_json::Value) -> Option<&str> {
    v["type"].as_str()
}

/// A field of a typed wire shape read tolerantly: of another type than
/// its own (a count that is a string, details that are `null`), it is
/// its default, and the rest of the shape is still read (053: no field
/// of the wrong type fails the whole).
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    use serde::Deserialize as _;
    let v = serde_json::Value::deserialize(d)?;
    Ok(T::deserialize(v).unwrap_or_default())
}

/// A typed wire shape read from a JSON value: its default when the value
/// is not an object. Every field of such a shape is [`lenient`], so an
/// object always reads.
fn read_shape<T: serde::de::DeserializeOwned + Default>(v: &serde_json::Value) -> Option<T> {
    v.is_object().then(|| T::deserialize(v).unwrap_or_default())
}

/// A typed wire shape as a JSON value.
fn shape_value<T: serde::Serialize>(shape: &T) -> serde_json::Value {
    serde_json::to_value(shape).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_by_protocol() {
        let a = Protocol::Anthropic;
        let o = Protocol::OpenAi;
        assert_eq!(
            Endpoint::find(a, &Method::POST, "/v1/messages"),
            Some(Endpoint::Messages)
        );
        assert_eq!(
            Endpoint::find(a, &Method::POST, "/v1/messages/count_tokens"),
            Some(Endpoint::CountTokens)
        );
        assert_eq!(Endpoint::find(a, &Method::POST, "/v1/responses"), None);
        assert_eq!(Endpoint::find(a, &Method::GET, "/v1/messages"), None);
        assert_eq!(
            Endpoint::find(o, &Method::POST, "/v1/chat/completions"),
            Some(Endpoint::ChatCompletions)
        );
        assert_eq!(
            Endpoint::find(o, &Method::POST, "/v1/responses/"),
            Some(Endpoint::Responses)
        );
        assert_eq!(
            Endpoint::find(o, &Method::GET, "/v1/models"),
            Some(Endpoint::Models)
        );
        assert_eq!(Endpoint::find(o, &Method::POST, "/v1/models"), None);
    }

    #[test]
    fn events_are_classified_per_api() {
        use EventClass::*;
        let class =
            |api: Api, name: Option<&str>, data: &str| api.watch().observe(name, data).class;
        let m = Api::Messages;
        assert_eq!(class(m, Some("message_start"), "{}"), Preamble);
        assert_eq!(class(m, Some("ping"), "{}"), KeepAlive);
        assert_eq!(class(m, Some("content_block_start"), "{}"), Content);
        assert_eq!(class(m, Some("error"), "{}"), Error);
        assert_eq!(class(m, Some("message_stop"), "{}"), Done);
        assert_eq!(class(m, None, ""), KeepAlive);
        let r = Api::Responses;
        assert_eq!(class(r, Some("response.created"), "{}"), Preamble);
        assert_eq!(
            class(r, None, r#"{"type":"response.in_progress"}"#),
            Preamble
        );
        assert_eq!(class(r, Some("response.output_item.added"), "{}"), Content);
        assert_eq!(class(r, Some("response.failed"), "{}"), Error);
        assert_eq!(class(r, Some("response.completed"), "{}"), Done);
        let c = Api::Chat;
        assert_eq!(
            class(
                c,
                None,
                r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#
            ),
            Preamble
        );
        assert_eq!(
            class(c, None, r#"{"choices":[{"delta":{"content":"Hi"}}]}"#),
            Content
        );
        assert_eq!(class(c, None, r#"{"error":{"message":"x"}}"#), Error);
        assert_eq!(class(c, None, "[DONE]"), Done);
    }

    #[test]
    fn why_an_answer_ended_is_read_from_each_api_streamed_or_whole() {
        let finish = |api: Api, name: Option<&str>, data: &str| {
            api.watch().observe(name, data).finish.map(Finish::as_str)
        };
        let delta = r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}"#;
        assert_eq!(
            finish(Api::Messages, Some("message_delta"), delta),
            Some("tool_use")
        );
        let text = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"stop_reason"}}"#;
        assert_eq!(
            finish(Api::Messages, Some("content_block_delta"), text),
            None
        );
        let chunk = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#;
        assert_eq!(finish(Api::Chat, None, chunk), Some("tool_calls"));
        let done = r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":1,"output_tokens":2}}}"#;
        assert_eq!(
            finish(Api::Responses, Some("response.incomplete"), done),
            Some("max_output_tokens")
        );
        // An upstream's own words become a label, never kept as sent.
        let odd = r#"{"type":"message_delta","delta":{"stop_reason":"a novel reason"},"usage":{}}"#;
        assert_eq!(
            finish(Api::Messages, Some("message_delta"), odd),
            Some("other")
        );
        let whole = |api: Api, body: &str| api.answer_facts(body.as_bytes()).1.map(Finish::as_str);
        assert_eq!(
            whole(
                Api::Messages,
                r#"{"content":[],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":2}}"#
            ),
            Some("max_tokens")
        );
        assert_eq!(
            whole(
                Api::Chat,
                r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{}}"#
            ),
            Some("stop")
        );
        assert_eq!(
            whole(
                Api::Responses,
                r#"{"status":"completed","output":[],"usage":{}}"#
            ),
            Some("completed")
        );
        assert_eq!(whole(Api::Messages, "not json"), None);
    }

    #[test]
    fn usage_is_read_from_each_api() {
        let usage =
            |api: Api, name: Option<&str>, data: &str| api.watch().observe(name, data).usage;
        let start = r#"{"type":"message_start","message":{"usage":{"input_tokens":12,"cache_read_input_tokens":3,"cache_creation_input_tokens":4,"output_tokens":1}}}"#;
        assert_eq!(
            usage(Api::Messages, Some("message_start"), start),
            Some(Usage {
                input: 12,
                output: 1,
                cache_read: 3,
                cache_write: 4
            })
        );
        let delta = r#"{"type":"message_delta","usage":{"output_tokens":40}}"#;
        assert_eq!(
            usage(Api::Messages, Some("message_delta"), delta).map(|u| u.output),
            Some(40)
        );
        let done = r#"{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":6,"input_tokens_details":{"cached_tokens":2}}},"sequence_number":9}"#;
        assert_eq!(
            usage(Api::Responses, Some("response.completed"), done),
            Some(Usage {
                input: 3,
                output: 6,
                cache_read: 2,
                cache_write: 0
            })
        );
        let chunk = r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":8}}"#;
        assert_eq!(
            usage(Api::Chat, None, chunk).map(|u| (u.input, u.output)),
            Some((7, 8))
        );
        assert_eq!(usage(Api::Messages, Some("ping"), "{}"), None);
        // A number where usage should be is no usage, not a panic.
        let wrong = r#"{"type":"message_start","message":{"usage":5}}"#;
        assert_eq!(usage(Api::Messages, Some("message_start"), wrong), None);
        let huge = r#"{"type":"message_delta","usage":{"output_tokens":18446744073709551615}}"#;
        assert_eq!(
            usage(Api::Messages, Some("message_delta"), huge).map(|u| u.output),
            Some(u64::MAX)
        );
    }

    /// A count of the wrong type (a string, a negative or fractional
    /// number, details that are not an object) is 0, or for a running
    /// Messages total keeps the count before; the other counts of the same
    /// object are still read.
    #[test]
    fn a_usage_field_of_the_wrong_type_spoils_only_itself() {
        let messages = serde_json::json!({"input_tokens": "many", "output_tokens": 9,
            "cache_read_input_tokens": -1, "cache_creation_input_tokens": 2.5,
            "server_tool_use": {"web_search_requests": 1}});
        assert_eq!(
            anthropic::usage(&messages),
            Some(Usage {
                input: 0,
                output: 9,
                cache_read: 0,
                cache_write: 0
            })
        );
        let mut total = Usage {
            input: 4,
            output: 1,
            cache_read: 3,
            cache_write: 2,
        };
        anthropic::update_usage(&mut total, &messages);
        assert_eq!(
            total,
            Usage {
                input: 4,
                output: 9,
                cache_read: 3,
                cache_write: 2
            }
        );
        let responses = serde_json::json!({"input_tokens": 10, "output_tokens": null,
            "input_tokens_details": {"cached_tokens": "4"}, "output_tokens_details": 7});
        assert_eq!(
            responses::usage(&responses),
            Some(Usage {
                input: 10,
                output: 0,
                cache_read: 0,
                cache_write: 0
            })
        );
        let chat = serde_json::json!({"prompt_tokens": 10, "completion_tokens": [1],
            "prompt_tokens_details": null, "completion_tokens_details": {"reasoning_tokens": "x"}});
        assert_eq!(
            chat::usage(&chat),
            Some(Usage {
                input: 10,
                output: 0,
                cache_read: 0,
                cache_write: 0
            })
        );
        let chat = serde_json::json!({"prompt_tokens": 10, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 6}});
        assert_eq!(
            chat::usage(&chat),
            Some(Usage {
                input: 4,
                output: 3,
                cache_read: 6,
                cache_write: 0
            })
        );
    }

    #[test]
    fn a_broken_responses_stream_ends_after_the_last_sequence_number() {
        let mut w = Api::Responses.watch();
        w.observe(
            Some("response.output_text.delta"),
            r#"{"type":"response.output_text.delta","sequence_number":6}"#,
        );
        let e = w.in_band_error("cut");
        let text = std::str::from_utf8(&e).expect("utf8");
        let events: Vec<serde_json::Value> = text
            .split("\n\n")
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|d| serde_json::from_str(d).expect("json"))
            .collect();
        assert_eq!(events[0]["type"], "error");
        assert_eq!(events[0]["sequence_number"], 7);
        assert_eq!(events[1]["type"], "response.failed");
        assert_eq!(events[1]["sequence_number"], 8);
        assert_eq!(events[1]["response"]["status"], "failed");
        // An upstream's u64::MAX sequence number saturates.
        w.observe(
            None,
            r#"{"type":"x","sequence_number":18446744073709551615}"#,
        );
        let _ = w.in_band_error("cut");
    }

    #[test]
    fn upstream_apis_serve_and_name() {
        for api in UpstreamApi::ALL {
            assert_eq!(UpstreamApi::from_name(api.name()), Some(api));
        }
        assert!(UpstreamApi::OpenAi.serves(Endpoint::ChatCompletions));
        assert!(!UpstreamApi::OpenAiResponses.serves(Endpoint::ChatCompletions));
        assert!(!UpstreamApi::OpenAiChat.serves(Endpoint::CountTokens));
        assert!(UpstreamApi::Anthropic.serves(Endpoint::CountTokens));
        assert!(!UpstreamApi::OpenAi.is_specific());
        assert!(!UpstreamApi::Azure.is_specific());
        assert!(UpstreamApi::AzureChat.serves(Endpoint::ChatCompletions));
        assert!(!UpstreamApi::AzureResponses.serves(Endpoint::ChatCompletions));
        assert!(Protocol::OpenAi.is_native(UpstreamApi::AzureResponses));
        assert_eq!(
            UpstreamApi::AzureChat.key_header("k").0.as_str(),
            azure::KEY_HEADER
        );
        let filtered = br#"{"error":{"code":"content_filter"}}"#;
        assert!(UpstreamApi::Azure.refuses_prompt(StatusCode::BAD_REQUEST, filtered));
        assert!(!UpstreamApi::OpenAi.refuses_prompt(StatusCode::BAD_REQUEST, filtered));
        assert!(!UpstreamApi::Azure.refuses_prompt(StatusCode::FORBIDDEN, filtered));
        assert!(UpstreamApi::OpenAi.lists_models() && !UpstreamApi::Azure.lists_models());
        assert!(Protocol::OpenAi.is_native(UpstreamApi::OpenAiChat));
        assert!(!Protocol::Anthropic.is_native(UpstreamApi::OpenAiChat));
    }

    #[test]
    fn listed_models_are_read_from_either_apis_list() {
        let anthropic = br#"{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude"},{"type":"model","id":"claude-haiku-4-5"}],"has_more":false}"#;
        assert_eq!(
            listed_models(anthropic),
            ["claude-sonnet-4-5", "claude-haiku-4-5"]
        );
        let openai = br#"{"object":"list","data":[{"id":"gpt-5","object":"model"},{"id":7},{"object":"model"},{"id":""}]}"#;
        assert_eq!(listed_models(openai), ["gpt-5"]);
        let long = format!(
            r#"{{"data":[{{"id":"{}"}},{{"id":"ok"}}]}}"#,
            "m".repeat(257)
        );
        assert_eq!(listed_models(long.as_bytes()), ["ok"]);
        assert!(listed_models(b"not json").is_empty());
        assert!(listed_models(br#"{"data":{"id":"x"}}"#).is_empty());
        let many: Vec<String> = (0..1500).map(|i| format!(r#"{{"id":"m{i}"}}"#)).collect();
        let many = format!(r#"{{"data":[{}]}}"#, many.join(","));
        assert_eq!(listed_models(many.as_bytes()).len(), MAX_LISTED_MODELS);
    }
}
