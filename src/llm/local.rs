//! The endpoints that need no generation: `count_tokens` (forwarded to an
//! upstream that can count, else estimated here) and `GET /v1/models`
//! (the route's own model names, and what its default upstreams list,
//! in the client's format).

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use tokio::time::Instant;

use super::answer::relay_verbatim;
use super::failover::finish;
use super::outgoing::{Outgoing, Prepared, Sent, send};
use super::upstream::LlmUpstream;
use super::{Context, LlmRoute};
use crate::config::{AllowedModels, Choice};
use crate::respond::{Payload, Rescue};
use crate::upstream::balance::{Outcome, Pick, Reason};
use http_body_util::{BodyExt, Limited};
use weir_wire::translate::tokens;
use weir_wire::{Endpoint, Protocol};

/// `count_tokens`: the first upstream that answers; an upstream without
/// the endpoint (404/405) means 501 `not_supported`, which makes Claude
/// Code fall back to its own estimate instead of breaking.
pub(crate) async fn count_tokens(
    llm: &LlmRoute,
    request: &Outgoing,
    choices: &[Choice],
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let settings = &llm.settings;
    for choice in choices {
        let upstream = &llm.upstreams[choice.upstream];
        let Ok(mut pick) = upstream
            .group
            .pick(request.conversation, &[], Instant::now())
        else {
            continue;
        };
        let prepared = request
            .for_upstream(
                upstream,
                Endpoint::CountTokens,
                choice.model.as_deref(),
                &llm.offload,
            )
            .await;
        let draft = match prepared {
            Prepared::Ready(draft) => draft,
            // An upstream of another API cannot count Anthropic's tokens:
            // weir estimates them itself.
            Prepared::Skip if !upstream.config.api.serves(Endpoint::CountTokens) => {
                return count_locally(llm, &request.body).await;
            }
            Prepared::Skip
            | Prepared::Invalid(_)
            | Prepared::Unserved(_)
            | Prepared::Busy
            | Prepared::Unavailable(_) => {
                continue;
            }
        };
        let Some(req) = draft.for_member(pick.target()) else {
            continue;
        };
        let sent = send(upstream, req, settings.first_byte_timeout).await;
        answered(upstream, &mut pick, &sent, cx);
        match sent {
            Sent::Response(resp)
                if matches!(
                    resp.status(),
                    StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
                ) =>
            {
                break;
            }
            // Vertex counts tokens for some models in some regions only,
            // and answers in Google's envelope: weir's estimate instead.
            Sent::Response(resp)
                if upstream.config.vertex.is_some() && !resp.status().is_success() =>
            {
                break;
            }
            Sent::Response(resp) => {
                let served_by = settings
                    .served_by_header
                    .then_some(upstream.config.name.as_str());
                return Ok(relay_verbatim(resp, served_by));
            }
            Sent::Refused | Sent::Failed(_) => continue,
        }
    }
    Err(Rescue::status(StatusCode::NOT_IMPLEMENTED)
        .saying("count_tokens is not supported by the upstreams of this route"))
}

/// What an exchange that generates nothing tells the group: reachable or
/// not. Its status says nothing of the member's load.
fn answered(
    upstream: &LlmUpstream,
    pick: &mut Pick<super::upstream::LlmMember>,
    sent: &Sent,
    cx: &Context<'_>,
) {
    match sent {
        Sent::Response(_) => finish(pick, Outcome::Answered(std::time::Duration::ZERO), cx),
        Sent::Refused => {
            if let Some((_, change)) = upstream.group.refused(pick.index(), Instant::now()) {
                pick.target().changed(
                    cx.metrics,
                    cx.route_name,
                    change,
                    Reason::Unreachable.name(),
                );
            }
        }
        Sent::Failed(_) => {}
    }
}

/// The estimate, worked out off the serving thread when the body is large.
async fn count_locally(llm: &LlmRoute, body: &bytes::Bytes) -> Result<Response<Payload>, Rescue> {
    let body = body.clone();
    let n = llm
        .offload
        .run(body.len(), move || tokens::count(&body))
        .await
        .map_err(|_| super::busy())?
        .ok_or_else(|| {
            Rescue::status(StatusCode::BAD_REQUEST).saying("the request body is not valid JSON")
        })?;
    let mut resp = Response::new(Payload::text(
        serde_json::json!({ "input_tokens": n }).to_string(),
    ));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// `GET /v1/models`: the names this route answers to, in the client's
/// list format — its configured model names (aliases) in config order,
/// then, when names it does not list pass through to its
/// `default_upstreams`, what the first of those that answers lists. An
/// upstream's list is never relayed as it is: its ids need not be names
/// the route answers to, and agents fill their model pickers from it. A
/// client token with a model list sees only the names it may use.
pub(crate) async fn models(
    llm: &LlmRoute,
    request: &Outgoing,
    allowed: Option<&AllowedModels>,
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let settings = &llm.settings;
    let mut names: Vec<&str> = settings.models.iter().map(|(m, _)| m.as_str()).collect();
    let listed = match passed_through(settings).next() {
        Some(_) => listed_by_default(llm, request, cx).await,
        None => Ok(Vec::new()),
    };
    let listed = match listed {
        Ok(listed) => listed,
        Err(rescue) if names.is_empty() => return Err(rescue),
        Err(_) => {
            tracing::warn!(
                route = &**cx.route_name,
                "no default upstream listed its models: listing the configured names only"
            );
            Vec::new()
        }
    };
    let mut seen: std::collections::HashSet<&str> = names.iter().copied().collect();
    names.extend(
        listed
            .iter()
            .map(String::as_str)
            .filter(|id| seen.insert(id)),
    );
    // A client sees the names it may use.
    if let Some(allowed) = allowed {
        names.retain(|name| allowed.allows(name));
    }
    Ok(model_list(settings.protocol, names.into_iter()))
}

/// The default choices that pass the client's model name through: a
/// choice that names its own model serves every name as that one, so its
/// upstream's list says nothing of what the route answers to.
fn passed_through(settings: &crate::config::LlmSettings) -> impl Iterator<Item = &Choice> {
    settings
        .default_upstreams
        .iter()
        .filter(|c| c.model.is_none())
}

/// The model ids of the first default upstream that lists them (in its
/// own API's format: both are read), in the order a request would try
/// them.
async fn listed_by_default(
    llm: &LlmRoute,
    request: &Outgoing,
    cx: &Context<'_>,
) -> Result<Vec<String>, Rescue> {
    let settings = &llm.settings;
    let mut tried = 0;
    for choice in passed_through(settings) {
        let upstream = &llm.upstreams[choice.upstream];
        let Ok(mut pick) = upstream.group.pick(None, &[], Instant::now()) else {
            continue;
        };
        // Azure lists its base models, not the deployments a request
        // names: its list says nothing of what the route answers to.
        if !upstream.config.api.lists_models() {
            continue;
        }
        let prepared = request
            .for_upstream(upstream, Endpoint::Models, None, &llm.offload)
            .await;
        let Prepared::Ready(draft) = prepared else {
            continue;
        };
        let Some(req) = draft.for_member(pick.target()) else {
            continue;
        };
        tried += 1;
        let sent = send(upstream, req, settings.first_byte_timeout).await;
        answered(upstream, &mut pick, &sent, cx);
        if let Sent::Response(resp) = sent
            && resp.status().is_success()
        {
            let read = Limited::new(resp.into_body(), MAX_MODEL_LIST).collect();
            if let Ok(Ok(body)) = tokio::time::timeout(settings.first_byte_timeout, read).await {
                return Ok(weir_wire::listed_models(&body.to_bytes()));
            }
        }
    }
    Err(Rescue::status(StatusCode::BAD_GATEWAY)
        .saying(format!("no upstream listed its models ({tried} attempted)")))
}

/// The most of an upstream's model list read: a few hundred entries of
/// metadata are tens of KiB.
const MAX_MODEL_LIST: usize = 4 * 1024 * 1024;

/// `names` in `protocol`'s list format.
fn model_list<'a>(protocol: Protocol, names: impl Iterator<Item = &'a str>) -> Response<Payload> {
    let body = protocol.model_list(names);
    let mut resp = Response::new(Payload::text(body.to_string()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}
