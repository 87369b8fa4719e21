//! What an LLM route learns about one request as it is served (the model,
//! the upstream, tokens, how it ended), and what it does with it when the
//! response has ended: settle its usage and write its access line. The
//! generic record (`respond::RequestRecord`) carries it as the route
//! kind's [`KindRecord`], knowing nothing of what is in it.

use std::sync::Arc;

use crate::respond::{AccessLine, KindRecord, MAX_MODEL_FIELD, Outcome, bounded};
use crate::sync::Locked;

/// What an LLM route does once a request's response has ended (its last
/// byte sent, or the client gone): settle its budget, count its usage per
/// client, write its usage record. Called exactly once per request, with
/// the facts as they stand then.
pub(crate) trait Accounting: Send + Sync {
    fn ended(&self, facts: &LlmFacts, status: u16, elapsed: std::time::Duration);
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
        let (f, accountant) = {
            let mut f = self.0.locked();
            let accountant = f.accountant.take();
            (f.clone(), accountant)
        };
        if let Some(a) = accountant {
            a.0.ended(&f, line.status, line.elapsed);
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
        );
    }
}
