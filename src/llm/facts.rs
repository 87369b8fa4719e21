//! What an LLM route learns about one request as it is served (the model,
//! the upstream, tokens, how it ended), and what it does with it when the
//! response has ended: settle its usage and write its access line. The
//! generic record (`respond::RequestRecord`) carries it as the route
//! kind's [`KindRecord`], knowing nothing of what is in it.

use std::sync::Arc;

use crate::respond::{AccessLine, KindRecord, MAX_MODEL_FIELD, Outcome, bounded};
use crate::sync::Locked;
use crate::telemetry::trace::{Event, Span, Value};

/// What an LLM route does once a request's response has ended (its last
/// byte sent, or the client gone): settle its budget, count its usage per
/// client, write its usage record. Called exactly once per request, with
/// the facts as they stand then.
pub(crate) trait Accounting: Send + Sync {
    /// Returns the request's spend, when its model has a price.
    fn ended(&self, facts: &LlmFacts, status: u16, elapsed: std::time::Duration) -> Option<f64>;
}

/// The route's [`Accounting`] for one request, kept with its facts.
#[derive(Clone)]
pub(crate) struct Accountant(pub(crate) Arc<dyn Accounting>);

impl std::fmt::Debug for Accountant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Accountant")
    }
}

/// What an LLM route learned about a request, for its access-log line and
/// its usage record.
#[derive(Debug, Default, Clone)]
pub(crate) struct LlmFacts {
    /// The model as the client named it.
    pub(crate) model: Option<String>,
    /// The configured model entry (or `default`): a bounded label, by its
    /// index in the route's metrics (`LlmRouteMetrics::model`).
    pub(crate) model_index: Option<usize>,
    /// The model id sent to the upstream that served (what is priced).
    pub(crate) served_model: Option<String>,
    /// The client token's configured name.
    pub(crate) client: Option<Arc<str>>,
    /// The upstream member that served (or the last one tried).
    pub(crate) upstream: Option<Arc<str>>,
    /// The configured upstream that served (or the last one tried), by
    /// its index in the route's upstreams.
    pub(crate) upstream_index: Option<usize>,
    /// How the answer ended, once an upstream's answer is relayed
    /// (completed, upstream_error, client_cancel, relayed_error), or why
    /// weir answered itself (over_budget).
    pub(crate) outcome: Option<&'static str>,
    /// An upstream reported usage (in the final event, or the whole body).
    pub(crate) usage_reported: bool,
    /// The request id the client was given (the upstream's, or weir's own).
    pub(crate) request_id: Option<String>,
    /// Whether the client asked for a stream.
    pub(crate) stream: bool,
    /// Settles the request's usage when its response ends.
    pub(crate) accountant: Option<Accountant>,
    /// Upstreams moved past before one served.
    pub(crate) failovers: u32,
    pub(crate) first_token_ms: Option<u64>,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cache_read_tokens: u64,
    pub(crate) cache_write_tokens: u64,
    /// Why the answer ended, as the upstream said it.
    pub(crate) finish: Option<&'static str>,
    /// The budget that refused the request: its bound and whose it is
    /// (`key `…` (id)`, `team `…``; never a secret).
    pub(crate) refused_by: Option<(&'static str, String)>,
    /// The trace the request is in, when it is traced.
    pub(crate) trace_id: Option<String>,
    /// What the request cost, once settled (with prices).
    pub(crate) spend: Option<f64>,
    /// The coding agent's session, from its hint header ([`LlmFacts::hinted`]).
    pub(crate) session: Option<String>,
    /// The (sub)agent within the session, from its hint header.
    pub(crate) agent: Option<String>,
}

/// The headers a coding agent names its session in: Claude Code's, then
/// Codex's (the trace's `session.id` reads the same ones).
const SESSION_HEADERS: [&str; 2] = ["x-claude-code-session-id", "session_id"];
/// The header Claude Code names the agent in (a subagent's own id).
const AGENT_HEADER: &str = "x-claude-code-agent-id";
/// The most of a session or agent id kept: ids are UUIDs (36 bytes), and a
/// client must not make every usage row large.
const MAX_HINT: usize = 128;

impl LlmFacts {
    /// Keep the session and agent the request's head names.
    pub(crate) fn hinted(&mut self, headers: &http::HeaderMap) {
        let hint = |name: &str| {
            let v = headers.get(name)?.to_str().ok()?.trim();
            (!v.is_empty()).then(|| bounded(v, MAX_HINT).to_string())
        };
        self.session = SESSION_HEADERS.into_iter().find_map(hint);
        self.agent = hint(AGENT_HEADER);
    }
}

pub(crate) type SharedLlmFacts = Arc<std::sync::Mutex<LlmFacts>>;

/// An LLM request's facts as the generic record carries them.
pub(crate) struct LlmRecord(pub(crate) SharedLlmFacts);

impl KindRecord for LlmRecord {
    fn answered(&self, headers: &http::HeaderMap) {
        // The id the client was given: the provider's, or weir's own.
        let id = ["request-id", "x-request-id"]
            .into_iter()
            .find_map(|h| headers.get(h)?.to_str().ok());
        self.0.locked().request_id = id.map(str::to_string);
    }

    fn ended(&self, line: &AccessLine<'_>) {
        let (mut f, accountant) = {
            let mut f = self.0.locked();
            let accountant = f.accountant.take();
            (f.clone(), accountant)
        };
        f.trace_id = line.trace_id.map(str::to_string);
        if let Some(a) = accountant {
            let spend = a.0.ended(&f, line.status, line.elapsed);
            if line.trace_id.is_some() {
                self.0.locked().spend = spend;
            }
        }
        if !line.enabled {
            return;
        }
        // The relay knows better than the transport: a client that hung up
        // once it had the terminal event was served in full.
        let outcome = match (line.outcome, f.outcome) {
            (Outcome::Aborted, Some("completed")) => Outcome::Complete,
            (o, _) => o,
        };
        tracing::info!(
            target: "weir::access",
            client = %line.client,
            host = line.host.unwrap_or("-"),
            method = %line.method,
            path = line.path,
            status = line.status,
            bytes = line.bytes,
            duration_ms = line.elapsed.as_millis() as u64,
            route = line.route,
            outcome = ?outcome,
            model = f.model.as_deref().map_or("-", |m| bounded(m, MAX_MODEL_FIELD)),
            upstream = f.upstream.as_deref().unwrap_or("-"),
            failovers = f.failovers,
            first_token_ms = f.first_token_ms.unwrap_or(0),
            input_tokens = f.input_tokens,
            output_tokens = f.output_tokens,
            cache_read_tokens = f.cache_read_tokens,
            cache_write_tokens = f.cache_write_tokens,
            trace_id = line.trace_id,
        );
    }

    fn traced(&self, server: &mut Span, answered: Option<&mut Span>) {
        traced(&self.0.locked(), server, answered);
    }
}

/// The ended request's facts on its server span and on the attempt that
/// answered.
fn traced(f: &LlmFacts, server: &mut Span, answered: Option<&mut Span>) {
    if let Some(client) = &f.client {
        server.set("weir.client_token.name", &**client);
    }
    if let Some(spend) = f.spend {
        server.set("weir.llm.spend", spend);
    }
    if let Some(outcome) = f.outcome {
        server.set("weir.llm.outcome", outcome);
    }
    if let Some((bound, payer)) = &f.refused_by {
        server.set("weir.llm.budget.bound", *bound);
        server.set("weir.llm.budget.payer", payer.as_str());
    }
    server.set("weir.llm.failovers", u64::from(f.failovers));
    if let Some(upstream) = &f.upstream {
        server.set("weir.upstream.server", &**upstream);
    }
    let usage = usage(f, server.start, server_end_estimate(server));
    for (k, v) in &usage.0 {
        server.set(k, v.clone());
    }
    if let Some(a) = answered {
        for (k, v) in usage.0 {
            a.set(k, v);
        }
        a.events.extend(usage.1);
    }
}

/// The usage attributes and the first-token event, when there was one.
fn usage(f: &LlmFacts, start: u64, end: u64) -> (Vec<(&'static str, Value)>, Option<Event>) {
    let mut a: Vec<(&'static str, Value)> = Vec::new();
    if let Some(m) = &f.served_model {
        a.push(("gen_ai.response.model", super::traced::bounded(m).into()));
    }
    if f.usage_reported {
        a.push(("gen_ai.usage.input_tokens", f.input_tokens.into()));
        a.push(("gen_ai.usage.output_tokens", f.output_tokens.into()));
        a.push((
            "gen_ai.usage.cache_read.input_tokens",
            f.cache_read_tokens.into(),
        ));
        a.push((
            "gen_ai.usage.cache_creation.input_tokens",
            f.cache_write_tokens.into(),
        ));
    }
    if let Some(finish) = f.finish {
        a.push((
            "gen_ai.response.finish_reasons",
            Value::StrList(vec![finish.to_string()]),
        ));
    }
    let first = f.first_token_ms.map(|ms| {
        let at = start.saturating_add(ms.saturating_mul(1_000_000));
        a.push((
            "gen_ai.server.time_to_first_token",
            Value::Float(ms as f64 / 1000.0),
        ));
        a.push((
            "weir.llm.stream_duration",
            Value::Float(end.saturating_sub(at) as f64 / 1e9),
        ));
        Event {
            name: "gen_ai.first_token",
            at,
            attributes: Vec::new(),
        }
    });
    (a, first)
}

/// The span's end if set, else now (the server span is ended after this).
fn server_end_estimate(s: &Span) -> u64 {
    if s.end != 0 {
        s.end
    } else {
        crate::telemetry::trace::now()
    }
}
