//! What an LLM request's spans say, by OpenTelemetry's GenAI semantic
//! conventions: the request (model, output limit, and with
//! `capture_content` the prompt) on the server span; each attempt's
//! provider and model on its client span. What the request learned as it
//! was served (usage, time to first token, the client token's name, the
//! spend) is put on the spans when it ends, by `facts`. Only a traced
//! request comes here.

use bytes::Bytes;
use http_body_util::Full;
use weir_wire::body::Model;

use super::upstream::{LlmMember, LlmUpstream};
use crate::telemetry::trace::{self, Trace};

/// What every generating endpoint is, as `gen_ai.operation.name`.
const OPERATION: &str = "chat";

/// The request as the client sent it, once its model is known.
pub(super) fn request(t: &Trace, model: &Model, body: &Bytes) {
    t.server(|s| {
        s.set("gen_ai.operation.name", OPERATION);
        s.set("gen_ai.request.model", bounded(&model.name));
        if let Some(max) = model.max_output {
            s.set("gen_ai.request.max_tokens", max);
        }
        if let Some(limit) = t.content_limit() {
            s.set("weir.llm.request.body", prefix(body, limit));
        }
    });
}

/// At most `limit` bytes of `body` as text, cut at a character boundary
/// (bytes that are no UTF-8 replaced).
fn prefix(body: &[u8], limit: usize) -> String {
    let cut = body.get(..body.len().min(limit)).unwrap_or(body);
    match std::str::from_utf8(cut) {
        Ok(text) => text.to_string(),
        // Cut inside a character: up to it.
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(cut.get(..e.valid_up_to()).unwrap_or(cut)).into_owned()
        }
        Err(_) => String::from_utf8_lossy(cut).into_owned(),
    }
}

/// An attempt at `member` of `upstream` for `model`: its client span, and
/// its trace context on the request.
pub(super) fn attempt(
    t: &Trace,
    req: &mut http::Request<Full<Bytes>>,
    upstream: &LlmUpstream,
    member: &LlmMember,
    model: &str,
) {
    let model = bounded(model);
    t.attempt(format!("{OPERATION} {model}"), |s| {
        trace::http::attempt(s, req.method(), req.uri(), &member.label);
        s.set("gen_ai.operation.name", OPERATION);
        s.set("gen_ai.provider.name", provider(upstream.config.api.name()));
        s.set("gen_ai.request.model", model);
        s.set("weir.upstream", upstream.config.name.as_str());
    })
    .apply(req.headers_mut());
}

/// OpenTelemetry's `gen_ai.provider.name` for an upstream API, by the
/// API's config name (`anthropic`, `openai_chat`, `azure_responses`, …).
fn provider(api: &str) -> &str {
    const NAMES: &[(&str, &str)] = &[
        ("anthropic", "anthropic"),
        ("openai", "openai"),
        ("azure", "azure.ai.openai"),
        ("bedrock", "aws.bedrock"),
        ("vertex", "gcp.vertex_ai"),
    ];
    NAMES
        .iter()
        .find(|(prefix, _)| api.starts_with(prefix))
        .map_or(api, |(_, name)| name)
}

pub(super) fn bounded(s: &str) -> String {
    trace::http::bounded(s, crate::respond::MAX_MODEL_FIELD)
}
