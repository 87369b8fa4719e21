//! The endpoints that need no generation: `count_tokens` (forwarded to an
//! upstream that can count, else estimated here) and `GET /v1/models`
//! (relayed from an upstream of the route's own API, else the configured
//! models listed here).

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use tokio::time::Instant;

use super::answer::relay_verbatim;
use super::failover::finish;
use super::outgoing::{Outgoing, Prepared, Sent, send};
use super::upstream::LlmUpstream;
use super::{Context, LlmRoute};
use crate::config::Choice;
use crate::respond::{Payload, Rescue};
use crate::upstream::balance::{Outcome, Pick, Reason};
use weir_wire::Endpoint;
use weir_wire::translate::tokens;

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
            Prepared::Skip | Prepared::Invalid(_) | Prepared::Unserved(_) | Prepared::Busy => {
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

/// `GET /v1/models`: the first of the route's upstreams that answers.
pub(crate) async fn models(
    llm: &LlmRoute,
    request: &Outgoing,
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let settings = &llm.settings;
    let mut tried = 0;
    for upstream in &llm.upstreams {
        let Ok(mut pick) = upstream.group.pick(None, &[], Instant::now()) else {
            continue;
        };
        // Only an upstream of the route's own API lists models in the
        // client's format, and only one that lists the ids clients send.
        let api = upstream.config.api;
        if !settings.protocol.is_native(api) || !api.lists_models() {
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
        if let Sent::Response(resp) = sent {
            let served_by = settings
                .served_by_header
                .then_some(upstream.config.name.as_str());
            return Ok(relay_verbatim(resp, served_by));
        }
    }
    if tried == 0 {
        return Ok(local_models(settings));
    }
    Err(Rescue::status(StatusCode::BAD_GATEWAY)
        .saying(format!("no upstream answered ({tried} attempted)")))
}

/// The route's configured models in its protocol's list format, when no
/// upstream of its own API can list them.
fn local_models(settings: &crate::config::LlmSettings) -> Response<Payload> {
    let names = settings.models.iter().map(|(m, _)| m.as_str());
    let body = settings.protocol.model_list(names);
    let mut resp = Response::new(Payload::text(body.to_string()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}
