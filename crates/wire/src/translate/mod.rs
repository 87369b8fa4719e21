//! Protocol translation between the LLM APIs, so any client runs on any
//! upstream: Claude Code (Anthropic Messages) on an OpenAI Responses or
//! Chat Completions upstream, Codex (OpenAI Responses) on an Anthropic or
//! Chat Completions upstream, and Chat Completions clients on an
//! Anthropic or Responses upstream. The two pairs between the OpenAI APIs
//! go through Messages (`shared::compose`).
//!
//! Pure: a request body in, a request body out; an upstream event in, the
//! client's events out; an upstream error in, the client's error out. No
//! I/O, no clock, so every mapping is tested against golden fixtures
//! without sockets. A stream translator never holds an upstream event: it
//! emits what each event maps to as soon as it has it (some map to
//! nothing, some to several).
//!
//! Fields with no equivalent are dropped, never passed through as unknown
//! fields the upstream would reject; docs/llm-gateway.md lists them.

mod chat_messages;
mod messages_chat;
mod messages_responses;
pub mod native;
mod responses_messages;
mod shared;
pub mod tokens;

use bytes::Bytes;
use http::StatusCode;
use serde_json::Value;

use self::shared::{compose, errors};
use crate::openai::Accepts;
use crate::{Api, Endpoint, UpstreamApi, anthropic, chat, responses};

/// A translation: the client's API → the upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pair {
    /// Claude Code on an OpenAI Responses upstream.
    MessagesToResponses,
    /// Claude Code on a Chat Completions upstream.
    MessagesToChat,
    /// Codex on an Anthropic upstream.
    ResponsesToMessages,
    /// A Chat Completions client on an Anthropic upstream.
    ChatToMessages,
    /// A Chat Completions client on a Responses upstream (through Messages).
    ChatToResponses,
    /// Codex on a Chat Completions upstream (through Messages).
    ResponsesToChat,
}

impl Pair {
    /// Every pair, for tests and fuzzing.
    pub const ALL: [Pair; 6] = [
        Pair::MessagesToResponses,
        Pair::MessagesToChat,
        Pair::ResponsesToMessages,
        Pair::ChatToMessages,
        Pair::ChatToResponses,
        Pair::ResponsesToChat,
    ];
}

/// Every pair weir translates: (client API, upstream API, pair).
const PAIRS: [(Api, Api, Pair); 6] = [
    (Api::Messages, Api::Responses, Pair::MessagesToResponses),
    (Api::Messages, Api::Chat, Pair::MessagesToChat),
    (Api::Responses, Api::Messages, Pair::ResponsesToMessages),
    (Api::Chat, Api::Messages, Pair::ChatToMessages),
    (Api::Chat, Api::Responses, Pair::ChatToResponses),
    (Api::Responses, Api::Chat, Pair::ResponsesToChat),
];

/// Why a request cannot go to an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Untranslatable;

/// What the answer's translation needs to know of the client's request:
/// tool names an upstream would refuse as too long, by the short form sent
/// in their place (used to shorten the client's names on the way up and to
/// restore them in the answer); Codex's freeform (`custom`) tools, whose
/// calls go back as `custom_tool_call`s; and whether the client set its own
/// output limit (only then is an answer cut at it `incomplete`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNames {
    short: Vec<(String, String)>,
    custom: Vec<String>,
    client_limit: bool,
}

impl ToolNames {
    /// The long names of a Messages request (its tools, its tool choice,
    /// the tool calls in its history).
    fn of_messages_request(v: &Value) -> Self {
        let mut names = Vec::new();
        let mut note = |name: &Value| {
            if let Some(n) = name.as_str()
                && let short = crate::openai::short_tool_name(n)
                && short != n
                && !names.iter().any(|(_, long): &(String, String)| long == n)
            {
                names.push((short.into_owned(), n.to_string()));
            }
        };
        for t in v["tools"].as_array().into_iter().flatten() {
            note(&t["name"]);
        }
        note(&v["tool_choice"]["name"]);
        for m in v["messages"].as_array().into_iter().flatten() {
            for b in m["content"].as_array().into_iter().flatten() {
                if crate::type_of(b) == Some(anthropic::block::TOOL_USE) {
                    note(&b["name"]);
                }
            }
        }
        ToolNames {
            short: names,
            ..ToolNames::default()
        }
    }

    /// Whether `name` is one of the client's freeform tools.
    pub fn is_custom(&self, name: &Value) -> bool {
        name.as_str()
            .is_some_and(|n| self.custom.iter().any(|c| c == n))
    }

    /// The name to send upstream.
    pub fn short(&self, name: &Value) -> Value {
        match name.as_str() {
            Some(n) => match self.short.iter().find(|(_, long)| long == n) {
                Some((short, _)) => short.as_str().into(),
                None => name.clone(),
            },
            None => name.clone(),
        }
    }

    /// The client's name for one the upstream answered with.
    pub fn original(&self, name: &Value) -> Value {
        match name.as_str() {
            Some(n) => match self.short.iter().find(|(short, _)| short == n) {
                Some((_, long)) => long.as_str().into(),
                None => name.clone(),
            },
            None => name.clone(),
        }
    }
}

/// A request translated for the upstream.
#[derive(Debug)]
pub struct Translated {
    pub body: Bytes,
    pub names: ToolNames,
    /// A Chat Completions client asked for the usage chunk
    /// (`stream_options.include_usage`).
    pub include_usage: bool,
}

/// A request body weir could not translate.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    #[error("the request body is not a JSON object")]
    NotAnObject,
    #[error("{0}")]
    Invalid(String),
    /// This upstream cannot do what the request asks (a web search on a
    /// Chat Completions server): another upstream of the model may.
    #[error("{0}")]
    Unserved(String),
}

impl Pair {
    /// What it takes to send `endpoint`'s request to an upstream speaking
    /// `api`: nothing (`None`), a translation, or it cannot be done. An
    /// upstream that serves the endpoint itself is never translated to;
    /// otherwise the first of its APIs with a pair wins.
    pub fn between(endpoint: Endpoint, api: UpstreamApi) -> Result<Option<Pair>, Untranslatable> {
        if api.serves(endpoint) {
            return Ok(None);
        }
        let client = endpoint.api().ok_or(Untranslatable)?;
        api.apis()
            .iter()
            .find_map(|to| {
                PAIRS
                    .iter()
                    .find(|(from, into, _)| *from == client && into == to)
                    .map(|(_, _, pair)| *pair)
            })
            .map(Some)
            .ok_or(Untranslatable)
    }

    /// The upstream's API (its path, how its stream is framed and
    /// classified).
    pub fn upstream_api(self) -> Api {
        PAIRS
            .iter()
            .find(|(_, _, p)| *p == self)
            .map_or(Api::Messages, |(_, to, _)| *to)
    }

    /// The request body for the upstream, naming `model`, and the tool
    /// names shortened on the way.
    pub fn request(self, body: &[u8], model: &str) -> Result<Translated, TranslateError> {
        self.translate(body, model, None)
    }

    /// [`Pair::request`] made fit for what the upstream `accepts`: the
    /// parameters its model would refuse left out (see
    /// [`crate::openai::Accepts`]).
    pub fn request_for(
        self,
        body: &[u8],
        model: &str,
        accepts: Accepts,
    ) -> Result<Translated, TranslateError> {
        self.translate(body, model, Some(accepts))
    }

    fn translate(
        self,
        body: &[u8],
        model: &str,
        accepts: Option<Accepts>,
    ) -> Result<Translated, TranslateError> {
        let v: Value = serde_json::from_slice(body).map_err(|_| TranslateError::NotAnObject)?;
        if !v.is_object() {
            return Err(TranslateError::NotAnObject);
        }
        let (out, names) = match self {
            Pair::MessagesToResponses => {
                let names = ToolNames::of_messages_request(&v);
                (messages_responses::request(&v, model, &names)?, names)
            }
            Pair::MessagesToChat => {
                let names = ToolNames::of_messages_request(&v);
                (messages_chat::request(&v, model, &names)?, names)
            }
            Pair::ResponsesToMessages => responses_messages::request(&v, model)?,
            Pair::ChatToMessages => (chat_messages::request(&v, model)?, ToolNames::default()),
            Pair::ChatToResponses => compose::chat_to_responses(&v, model)?,
            Pair::ResponsesToChat => compose::responses_to_chat(&v, model)?,
        };
        let mut out = out;
        if let (Some(accepts), Some(fields)) = (accepts, out.as_object_mut()) {
            let reasoning = accepts.reasoning.for_model(model);
            match self.upstream_api() {
                Api::Responses => responses::fit(fields, reasoning),
                Api::Chat => chat::fit(fields, reasoning, accepts.max_tokens),
                Api::Messages => {}
            }
        }
        Ok(Translated {
            body: Bytes::from(out.to_string()),
            names,
            include_usage: v["stream_options"]["include_usage"] == true,
        })
    }

    /// A whole (non-streamed) upstream answer in the client's API;
    /// `None` when the upstream's body is not what its API returns.
    pub fn response(self, body: &[u8], client_model: &str, names: &ToolNames) -> Option<Bytes> {
        let v: Value = serde_json::from_slice(body).ok()?;
        let out = match self {
            Pair::MessagesToResponses => messages_responses::whole(&v, client_model, names)?,
            Pair::MessagesToChat => messages_chat::whole(&v, client_model, names)?,
            Pair::ResponsesToMessages => responses_messages::whole(&v, client_model, names)?,
            Pair::ChatToMessages => chat_messages::whole(&v, client_model)?,
            Pair::ChatToResponses => chat_messages::whole(
                &messages_responses::whole(&v, client_model, names)?,
                client_model,
            )?,
            Pair::ResponsesToChat => responses_messages::whole(
                &messages_chat::whole(&v, client_model, names)?,
                client_model,
                names,
            )?,
        };
        Some(Bytes::from(out.to_string()))
    }

    /// An upstream error body in the client's envelope; the status stays
    /// (a 429 or 529 must reach Claude Code as such, or it stops backing
    /// off).
    pub fn error(self, status: StatusCode, body: &[u8]) -> Bytes {
        match self {
            Pair::MessagesToResponses | Pair::MessagesToChat => errors::to_anthropic(status, body),
            Pair::ResponsesToMessages | Pair::ChatToMessages => errors::to_openai(status, body),
            Pair::ChatToResponses | Pair::ResponsesToChat => errors::openai_envelope(status, body),
        }
    }

    /// A translator for one streamed answer.
    pub fn stream(self, client_model: &str, names: ToolNames) -> Stream {
        match self {
            Pair::MessagesToResponses => {
                Stream::FromResponses(messages_responses::Stream::new(client_model, names))
            }
            Pair::MessagesToChat => {
                Stream::FromChat(messages_chat::Stream::new(client_model, names))
            }
            Pair::ResponsesToMessages => {
                Stream::ToResponses(responses_messages::Stream::new(client_model, names))
            }
            Pair::ChatToMessages => Stream::ToChat(chat_messages::Stream::new(client_model)),
            Pair::ChatToResponses => Stream::ToChatFromResponses(
                Box::new(messages_responses::Stream::new(client_model, names)),
                chat_messages::Stream::new(client_model),
            ),
            Pair::ResponsesToChat => Stream::ToResponsesFromChat(
                messages_chat::Stream::new(client_model, names.clone()),
                Box::new(responses_messages::Stream::new(client_model, names)),
            ),
        }
    }
}

/// An upstream event name that makes a translator fail, for tests.
#[cfg(feature = "test-steps")]
pub const FAIL_EVENT: &str = "weir.test.translator_failure";

/// One streamed answer being translated, event by event.
pub enum Stream {
    FromResponses(messages_responses::Stream),
    FromChat(messages_chat::Stream),
    ToResponses(responses_messages::Stream),
    ToChat(chat_messages::Stream),
    /// A Responses upstream's events, through Messages, to a Chat client.
    ToChatFromResponses(Box<messages_responses::Stream>, chat_messages::Stream),
    /// A Chat upstream's chunks, through Messages, to a Responses client.
    ToResponsesFromChat(messages_chat::Stream, Box<responses_messages::Stream>),
}

impl Stream {
    /// The client's events for one upstream event (`name` is its SSE
    /// `event:` field, `data` its data), appended to `out`.
    pub fn event(&mut self, name: Option<&str>, data: &str, out: &mut Vec<Bytes>) {
        // Tests reach the relay's handling of a failed translator with
        // this event; the release binary has no such hook.
        #[cfg(feature = "test-steps")]
        if name == Some(FAIL_EVENT) {
            panic!("translator failure requested by a test");
        }
        match self {
            Stream::FromResponses(s) => s.event(name, data, out),
            Stream::FromChat(s) => s.event(data, out),
            Stream::ToResponses(s) => s.event(name, data, out),
            Stream::ToChat(s) => s.event(name, data, out),
            Stream::ToChatFromResponses(hub, s) => {
                let mut mid = Vec::new();
                hub.event(name, data, &mut mid);
                compose::chain(mid, |n, d, o| s.event(n, d, o), out);
            }
            Stream::ToResponsesFromChat(hub, s) => {
                let mut mid = Vec::new();
                hub.event(data, &mut mid);
                compose::chain(mid, |n, d, o| s.event(n, d, o), out);
            }
        }
    }

    /// Whether the answer kept for the stream's final events is past its
    /// bound (a Responses client's `response.completed` carries the whole
    /// output): the stream must then be ended with an error.
    pub fn over_bound(&self) -> bool {
        match self {
            Stream::ToResponses(s) => s.over_bound(),
            Stream::ToResponsesFromChat(_, s) => s.over_bound(),
            _ => false,
        }
    }

    /// A Chat Completions client asked for the usage chunk.
    pub fn include_usage(&mut self, on: bool) {
        if let Stream::ToChat(s) | Stream::ToChatFromResponses(_, s) = self {
            s.include_usage(on);
        }
    }
}

#[cfg(test)]
mod tests;
