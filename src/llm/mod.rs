//! LLM API gateway routes (`kind = "anthropic"` and `kind = "openai"`):
//! the clients are coding agents (Claude Code speaks Anthropic Messages,
//! Codex speaks OpenAI Responses), the upstreams are model providers.
//!
//! A request goes through these steps, each a function [`serve`] calls in
//! turn:
//!
//! 1. **endpoint** — the API path under the route's mount point names an
//!    endpoint of the route's protocol, or 404 in that protocol's shape.
//! 2. **client token** — checked before a byte of the body is read (401);
//!    then the token's own concurrency bound, or a runtime key's own rate
//!    and concurrency (429, never queued) — unless the fleet keeps the
//!    token's or key's budget: then its limits wait for step 4, where one
//!    Redis script decides them with the budget's reserve.
//! 3. **body** — read whole under the route limit, the minimum data rate
//!    and the process-wide byte budget (503 when spent); the top-level
//!    `model` is found without re-serialising the document.
//! 4. **model** — the model's ordered upstreams, or the route's default
//!    list, or 404; then the client token's budget reserved ([`usage`],
//!    [`ledger`]): 429 when it is spent, before any upstream is contacted.
//! 5. **failover** ([`failover`]) — upstreams in order, skipping those
//!    cooling down, each attempt's request built by [`outgoing`], moving
//!    on before the first content byte; then the answer is relayed,
//!    streams through [`relay::Relay`], whole answers by [`answer`].
//!    `count_tokens` and `GET /v1/models` need no generation: [`local`].

mod answer;
mod aws;
pub(crate) mod body;
mod client;
mod entra;
mod facts;
mod failover;
mod framed;
mod google;
mod invoke;
mod keyed;
pub(crate) mod ledger;
mod local;
mod me;
mod oauth;
mod offload;
mod outgoing;
mod refresh;
mod relay;
mod socket;
mod tenants;
mod traced;
pub(crate) mod upstream;
pub(crate) mod usage;

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

pub(crate) use body::ByteBudget;
use body::ReadError;
pub(crate) use facts::{LlmRecord, SharedLlmFacts};
use keyed::KeyBook;
pub(crate) use keyed::{KeyBooks, TeamBooks, TeamLedgers};

pub(crate) use offload::Offload;
pub(crate) use socket::{Opening, accept as accept_websocket, asks_upgrade as asks_websocket};
use upstream::LlmUpstream;
pub(crate) use usage::Books;
use weir_wire::body::{Model, ModelError};

use crate::admit::auth_failures::AuthFailures;
use crate::admit::rate::{Client, RateLimit};
use crate::admit::{Admission, TokenGate};
use crate::cluster::Cluster;
use crate::config::{Choice, LlmSettings, RouteConfig, UpstreamSettings};
use crate::respond::{Payload, Rescue};
use crate::sync::Locked;
use crate::telemetry::{LlmRouteMetrics, Metrics};
use crate::upstream::{BodyRate, RequestBody};
use weir_wire::Endpoint;

/// An LLM route's long-lived parts: its settings, a pooled client and a
/// cooldown per upstream, a gate per client token, and the byte budget.
pub(crate) struct LlmRoute {
    pub(crate) settings: Arc<LlmSettings>,
    pub(crate) upstreams: Vec<Arc<LlmUpstream>>,
    token_gates: Vec<TokenGate>,
    /// Each client token's name in the fleet's keys (a hash: the token
    /// never leaves the process); empty without a cluster.
    token_ids: Vec<String>,
    pub(super) budget: ByteBudget,
    /// Where CPU-heavy work on a large body runs (shared process-wide).
    offload: Offload,
    /// Each client token's budget ledger, and where usage records go.
    pub(crate) books: Books,
    /// Its series, over its models, upstreams and client tokens.
    pub(crate) metrics: Arc<LlmRouteMetrics>,
    /// Failed client-token authentications per address (with client
    /// tokens): [`AUTH_FAILURE_BURST`] at once, then one per 10 s.
    auth_failures: AuthFailures,
}

/// Failed client-token authentications an address may make at once on a
/// route; then [`AUTH_FAILURES_PER_MINUTE`]. More than the admin API's 5:
/// a team behind one NAT address shares it, and one misconfigured tool
/// must not lock out the others for long.
pub(crate) const AUTH_FAILURE_BURST: u32 = 10;
pub(crate) const AUTH_FAILURES_PER_MINUTE: u32 = 6;

impl LlmRoute {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        route: &Arc<str>,
        settings: Arc<LlmSettings>,
        upstream_settings: &UpstreamSettings,
        tls: &rustls::ClientConfig,
        budget: ByteBudget,
        offload: Offload,
        books: Books,
        workers: usize,
        metrics: &Metrics,
        cluster: Option<&Arc<Cluster>>,
    ) -> Self {
        let mut books = books;
        // A client token's name in the fleet's Redis keys: the same on
        // every instance, and not the token.
        let token_ids: Vec<String> = match cluster {
            Some(_) => settings
                .client_tokens
                .iter()
                .map(|c| c.token.digest_hex(8))
                .collect(),
            None => Vec::new(),
        };
        books.fleet = cluster.map(|c| usage::Fleet {
            cluster: c.clone(),
            keys: token_ids.iter().map(|t| c.budget_key(route, t)).collect(),
        });
        let series = metrics.llm_route(
            route,
            settings.models.iter().map(|(m, _)| m.as_str()),
            settings.upstreams.iter().map(|u| u.name.as_str()),
            settings.client_tokens.iter().map(|c| c.name.as_str()),
        );
        LlmRoute {
            auth_failures: AuthFailures::new(AUTH_FAILURES_PER_MINUTE, AUTH_FAILURE_BURST),
            metrics: Arc::new(series),
            upstreams: settings
                .upstreams
                .iter()
                .map(|u| {
                    Arc::new(LlmUpstream::new(
                        route,
                        u,
                        upstream_settings,
                        tls,
                        workers,
                        metrics,
                        cluster,
                    ))
                })
                .collect(),
            token_gates: (0..settings.client_tokens.len())
                .map(|i| {
                    let shared = cluster.map(|c| (c, c.lease_key(route, &token_ids[i])));
                    TokenGate::new(settings.max_concurrent_per_token, shared)
                })
                .collect(),
            token_ids,
            budget,
            offload,
            books,
            settings,
        }
    }
}

/// What [`serve`] needs from the request lifecycle.
pub(crate) struct Context<'a> {
    pub(crate) route_name: &'a Arc<str>,
    pub(crate) route: &'a RouteConfig,
    pub(crate) body_rate: Option<BodyRate>,
    /// The whole time the body may take to arrive.
    pub(crate) body_read_timeout: std::time::Duration,
    pub(crate) metrics: &'a Arc<Metrics>,
    pub(crate) facts: &'a SharedLlmFacts,
    pub(crate) admission: &'a mut Option<Admission>,
    pub(crate) started: std::time::Instant,
    /// The route's per-client rate limit, counted here by client token
    /// when the route has tokens.
    pub(crate) rate: Option<&'a Arc<RateLimit>>,
    pub(crate) peer: std::net::IpAddr,
    pub(crate) host: &'a str,
    /// The request's spans, when it is traced ([`traced`]).
    pub(crate) trace: Option<&'a crate::telemetry::trace::Trace>,
}

/// Serve one request on an LLM route: the steps of the module doc, in
/// the order the request travels.
pub(crate) async fn serve(
    llm: &LlmRoute,
    req: Request<Incoming>,
    mut cx: Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let account = usage::Account::open(
        cx.route_name,
        &llm.settings,
        &llm.books,
        &llm.metrics,
        cx.facts,
    );
    if me::asks(&req, &cx.route.path) {
        return me::answer(llm, &req, &cx).await;
    }
    cx.facts.locked().hinted(req.headers());
    let (endpoint, api_path) = find_endpoint(&llm.settings, &req, &cx)?;
    let presented = client::admit(llm, &req, endpoint, &account, &mut cx).await?;
    let declared = declared_length(&req, &cx)?;
    let (request, incoming) =
        outgoing_request(req, api_path, presented.strip, llm.settings.protocol);
    if !endpoint.routes_by_model() {
        let allowed = client::models(&llm.settings, presented.who.as_ref());
        return local::models(llm, &request, allowed, &cx).await;
    }
    let client = presented.body_client(&cx);
    let mut read = read_body(llm, incoming, (declared, client), &cx).await?;
    let mut request = request;
    let bedrock = llm.settings.protocol == weir_wire::Protocol::Bedrock;
    if bedrock {
        invoke::into_messages(&mut request, &mut read, &llm.offload).await?;
    }
    let turn = Turn {
        request,
        read,
        endpoint,
        deferred: presented.deferred,
        who: presented.who,
    };
    let answer = generate(llm, turn, &account, cx).await?;
    if bedrock {
        let timeout = llm.settings.stream_idle_timeout;
        return Ok(invoke::answer(answer, timeout).await);
    }
    Ok(answer)
}

/// A request whose body is read whole (over HTTP, or one WebSocket
/// frame's, [`socket`]), and what steps 4 and 5 need to know of its
/// client token.
struct Turn {
    request: outgoing::Outgoing,
    /// The body and its place in the byte budget, held until the
    /// attempts end.
    read: body::ReadBody,
    endpoint: Endpoint,
    /// Who presented, when their limits wait for the body (step 2).
    deferred: Option<client::Deferred>,
    /// Who presented, when the route asks: whose model list step 4
    /// checks.
    who: Option<client::Who>,
}

/// Steps 4 and 5 for a body read whole: model, budget, failover and the
/// relay. The one seam both an HTTP request and a WebSocket
/// `response.create` frame enter the pipeline by.
async fn generate(
    llm: &LlmRoute,
    turn: Turn,
    account: &usage::Account,
    mut cx: Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let Turn {
        mut request,
        read,
        endpoint,
        deferred,
        who,
    } = turn;
    request.body = read.bytes.clone();
    let (model, entry) = read_model(llm, &request.body, &cx).await?;
    if let Some(t) = cx.trace {
        traced::request(t, &model, &request.body);
    }
    let Some(choices) = llm.settings.choices(&model.name) else {
        return Err(Rescue::status(StatusCode::NOT_FOUND).saying(format!(
            "model `{}` is not served by this route",
            model.name
        )));
    };
    client::may_use(&llm.settings, who.as_ref(), &model.name)?;
    if endpoint.api().is_some() {
        reserve_budget(llm, account, &request, &model, choices, deferred, &mut cx).await?;
    }
    request.model_span = Some(model.span);
    request.weir_state = model.weir_state;
    request.model = Some(model.name);
    request.conversation = conversation(&request.parts.headers, model.conversation.as_deref());

    // Step: failover, then relay.
    let result = if endpoint == Endpoint::CountTokens {
        local::count_tokens(llm, &request, choices, &cx).await
    } else {
        failover::run(llm, &request, endpoint, choices, entry, &cx).await
    };
    // The body's budget reservation ends with the attempts.
    drop(read);
    result.map(|mut resp| {
        if let Some(warning) = account.warning()
            && let Ok(v) = HeaderValue::from_str(&warning)
        {
            resp.headers_mut().insert("x-weir-budget-warning", v);
        }
        resp
    })
}

/// Step 1, endpoint: the path as it is, or under the route's mount point,
/// names an endpoint of the route's protocol (else 404); with the API path
/// it was found at.
fn find_endpoint(
    settings: &LlmSettings,
    req: &Request<Incoming>,
    cx: &Context<'_>,
) -> Result<(Endpoint, String), Rescue> {
    let full = req.uri().path();
    let found = [full, api_path(&cx.route.path, full)]
        .into_iter()
        .find_map(|p| {
            Some((
                Endpoint::find(settings.protocol, req.method(), p)?,
                p.to_string(),
            ))
        });
    found.ok_or_else(|| {
        Rescue::status(StatusCode::NOT_FOUND).saying(format!(
            "{} {} is not an endpoint of this {} route",
            req.method(),
            req.uri().path(),
            settings.protocol.name()
        ))
    })
}

/// The body's declared length; a declared body over the route's limit is
/// refused unread.
fn declared_length(req: &Request<Incoming>, cx: &Context<'_>) -> Result<Option<u64>, Rescue> {
    let declared = weir_wire::fields::content_length(req.headers());
    if let (Some(limit), Some(len)) = (cx.route.max_request_body, declared)
        && len > limit
    {
        return Err(Rescue::status(StatusCode::PAYLOAD_TOO_LARGE)
            .saying(format!(
                "request body of {len} bytes exceeds this route's limit of {limit}"
            ))
            .closing());
    }
    Ok(declared)
}

/// The request as it will be sent upstream, its body still to be read
/// (and that body): the API path with the client's query, and the header
/// that carried weir's client token to strip.
fn outgoing_request(
    req: Request<Incoming>,
    api_path: String,
    strip: outgoing::Carriers,
    protocol: weir_wire::Protocol,
) -> (outgoing::Outgoing, Incoming) {
    let (parts, incoming) = req.into_parts();
    let path_and_query = match parts.uri.query() {
        Some(q) => format!("{api_path}?{q}"),
        None => api_path,
    };
    let request = outgoing::Outgoing {
        parts,
        protocol,
        path_and_query,
        strip,
        body: bytes::Bytes::new(),
        model_span: None,
        weir_state: false,
        model: None,
        conversation: None,
    };
    (request, incoming)
}

/// Step 3, body: read whole under the route's limit, its minimum data
/// rate, `body_read_timeout` and the process-wide byte budget, which
/// holds it until dropped (counted under its client, for fairness).
async fn read_body(
    llm: &LlmRoute,
    incoming: Incoming,
    (declared, client): (Option<u64>, body::BodyClient),
    cx: &Context<'_>,
) -> Result<body::ReadBody, Rescue> {
    let body = RequestBody::new(incoming, cx.route.max_request_body, cx.body_rate);
    body::read(body, declared, &llm.budget, client, cx.body_read_timeout)
        .await
        .map_err(read_refusal)
}

/// The answer to a body that could not be read, or held.
fn read_refusal(e: ReadError) -> Rescue {
    match e {
        ReadError::TooLarge => Rescue::status(StatusCode::PAYLOAD_TOO_LARGE)
            .saying("request body exceeds this route's limit")
            .closing(),
        ReadError::TooSlow => Rescue::status(StatusCode::REQUEST_TIMEOUT)
            .saying("request body arrived too slowly")
            .closing()
            .counting(crate::respond::Counted::ConnectionClosed("body_rate")),
        ReadError::Unreadable => Rescue::status(StatusCode::BAD_REQUEST)
            .saying("request body could not be read")
            .closing(),
        ReadError::TimedOut => Rescue::status(StatusCode::REQUEST_TIMEOUT)
            .saying("request body took longer than the gateway allows")
            .closing()
            .counting(crate::respond::Counted::ConnectionClosed(
                "body_read_timeout",
            )),
        ReadError::OverBudget => Rescue::shed("llm_body_budget")
            .saying("the gateway is holding too many request bodies; retry shortly")
            .closing(),
        ReadError::Heaviest => Rescue::shed("llm_body_heaviest")
            .saying(
                "the gateway is holding too many of this client's request bodies; retry shortly",
            )
            .closing(),
    }
}

/// Step 4, model: found by a scan at memchr speed (~6 GB/s: 256 KiB in
/// about the time a hand-off to the blocking pool takes), off the serving
/// thread only past that; named in the request's facts with its
/// configured entry (or `default`: a bounded label, by index), which is
/// returned with it.
async fn read_model(
    llm: &LlmRoute,
    body: &bytes::Bytes,
    cx: &Context<'_>,
) -> Result<(Model, usize), Rescue> {
    let parse = body.clone();
    let model = llm
        .offload
        .run_inline_up_to(weir_wire::body::SCAN_INLINE_MAX, parse.len(), move || {
            weir_wire::body::model(&parse)
        })
        .await
        .map_err(|_| busy())?;
    let model = model.map_err(|e| {
        Rescue::status(StatusCode::BAD_REQUEST).saying(match e {
            ModelError::NotJson => "the request body is not valid JSON".to_string(),
            ModelError::Missing => "the request body names no `model`".to_string(),
            ModelError::DuplicateKey => "the request body gives a top-level key twice".to_string(),
            ModelError::FoldedKey(field) => format!(
                "the request body has a top-level key that differs from `{field}` only in case"
            ),
            ModelError::BadLimit(field) => format!("`{field}` must be a whole number"),
        })
    })?;
    let models = &llm.settings.models;
    let entry = (llm.metrics).model(models.iter().position(|(m, _)| *m == model.name));
    let mut f = cx.facts.locked();
    f.model = Some(model.name.clone());
    f.model_index = Some(entry);
    f.stream = model.stream;
    drop(f);
    Ok((model, entry))
}

/// Step 4, budget: the payer's (and its team's) reserved before any
/// upstream is contacted, priced at the dearest model it may be sent as;
/// when the fleet keeps it, in one decision with the token's or key's
/// limits `deferred` from step 2.
async fn reserve_budget(
    llm: &LlmRoute,
    account: &usage::Account,
    request: &outgoing::Outgoing,
    model: &Model,
    choices: &[Choice],
    deferred: Option<client::Deferred>,
    cx: &mut Context<'_>,
) -> Result<(), Rescue> {
    let served = choices
        .iter()
        .map(|c| c.model.as_deref().unwrap_or(&model.name));
    let want = account.want(request.body.len(), model.max_output, served);
    match (want, deferred) {
        (Some(want), Some(deferred)) => {
            let ask = account.budget_ask(&want);
            let budgeted = client::limit_deferred(llm, &deferred, ask, cx).await?;
            account.take(budgeted, want, cx.facts)
        }
        // Limits deferred with no budget to reserve: decided alone.
        (None, Some(deferred)) => client::limit_deferred(llm, &deferred, None, cx)
            .await
            .map(|_| ()),
        // A team's budget the fleet keeps, its payer's limits decided at
        // step 2: its own decision.
        (Some(want), None) if want.is_shared() => {
            let budgeted = crate::admit::limit_client_reserving(
                None,
                Client::ip(cx.peer),
                None,
                (None, None),
                None,
                account.budget_ask(&want),
            )
            .await
            .map_err(|r| client::limit_refusal(r, cx))?;
            account.take(budgeted, want, cx.facts)
        }
        (Some(want), None) => account.reserve(want, cx.facts),
        (None, None) => Ok(()),
    }
}

/// The conversation a request belongs to, hashed for the upstreams that
/// keep a conversation on one member (`hash_key = "conversation"`):
/// Claude Code's session header, else what the body names.
fn conversation(headers: &http::HeaderMap, body: Option<&str>) -> Option<u64> {
    let header = headers
        .get("x-claude-code-session-id")
        .map(|v| v.as_bytes())
        .filter(|v| !v.is_empty());
    header
        .or(body.map(str::as_bytes))
        .map(crate::upstream::balance::key)
}

/// 503 when every slot for CPU-heavy work is taken.
fn busy() -> Rescue {
    Rescue::shed("llm_cpu").saying("the gateway is busy with other large requests; retry shortly")
}

/// The API path under the route's mount point (an LLM route is mounted at
/// its `path`, so `/anthropic/v1/messages` under `/anthropic` is
/// `/v1/messages`).
fn api_path<'a>(mount: &str, path: &'a str) -> &'a str {
    let mount = mount.trim_end_matches('/');
    match path.strip_prefix(mount) {
        Some(rest) if rest.starts_with('/') => rest,
        _ => path,
    }
}

impl Rescue {
    /// Close after answering when the request has a body weir did not read.
    fn closing_if_body<B>(self, req: &Request<B>) -> Self {
        let has_body = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v != HeaderValue::from_static("0"))
            || req.headers().contains_key(header::TRANSFER_ENCODING);
        if has_body { self.closing() } else { self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_point_is_stripped() {
        assert_eq!(api_path("/", "/v1/messages"), "/v1/messages");
        assert_eq!(
            api_path("/anthropic", "/anthropic/v1/messages"),
            "/v1/messages"
        );
        assert_eq!(
            api_path("/anthropic/", "/anthropic/v1/models"),
            "/v1/models"
        );
    }
}
