//! Step 2, the client: who a request presents — a client token of the
//! route, or a runtime key (`runtime_keys = true`, docs/decisions/083) —
//! checked before a byte of the body is read; then its limits; and, at
//! step 4, the models it may ask for.

use std::sync::Arc;

use http::header;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use subtle::ConstantTimeEq;

use super::{Context, KeyBook, LlmRoute, body, outgoing, usage};
use crate::admit::Budgeted;
use crate::admit::rate::{Client, Refusal};
use crate::cluster::{BudgetAsk, Cluster};
use crate::config::{AllowedModels, LlmSettings};
use crate::idp::{Refusal as IdpRefusal, looks_like_jwt};
use crate::keys::{Found, Key};
use crate::respond::Rescue;
use weir_wire::Endpoint;

/// Who a request presented, on a route that asks.
#[derive(Clone, Debug)]
pub(crate) enum Who {
    /// A client token of the route, by index.
    Token(usize),
    /// A runtime key.
    Key(Arc<Key>),
}

/// A client whose limits wait for the body: the fleet keeps its budget,
/// and step 4 decides its limits with the budget's reserve in one Redis
/// round trip, once the body says what to reserve.
#[derive(Clone)]
pub(crate) enum Deferred {
    /// A client token of the route, by index.
    Token(usize),
    /// A runtime key (or a person), with its book: its own rate and
    /// concurrency beside the route's rate.
    Key(Arc<Key>, KeyBook),
}

/// What authentication found: who, and the headers that carried it
/// (never forwarded).
pub(crate) type Presenting = (Who, outgoing::Carriers);

/// What the client step found.
#[derive(Default)]
pub(crate) struct Presented {
    /// The headers that carried the token or key: never forwarded.
    pub(crate) strip: outgoing::Carriers,
    /// Who, when their limits wait for the body.
    pub(crate) deferred: Option<Deferred>,
    /// Who presented, when the route asks: whose body's bytes, model list
    /// and budget these are.
    pub(crate) who: Option<Who>,
}

impl Presented {
    /// Who the body's bytes are counted under in the budget.
    pub(crate) fn body_client(&self, cx: &Context<'_>) -> body::BodyClient {
        match &self.who {
            Some(Who::Token(index)) => body::BodyClient::token(cx.route_name, *index),
            Some(Who::Key(key)) => body::BodyClient::token(&key.id, usize::MAX),
            None => body::BodyClient::address(cx.peer),
        }
    }
}

/// Step 2 for an HTTP request: who presents (else 401), then their rate
/// and concurrency, unless those wait for the body.
pub(crate) async fn admit(
    llm: &LlmRoute,
    req: &Request<Incoming>,
    endpoint: Endpoint,
    account: &usage::Account,
    cx: &mut Context<'_>,
) -> Result<Presented, Rescue> {
    let authenticated = authenticate(llm, req.headers(), cx).await;
    let Some(found) = authenticated.map_err(|r| r.closing_if_body(req))? else {
        return Ok(Presented::default());
    };
    limit(llm, found, endpoint, account, cx)
        .await
        .map_err(|r| r.closing_if_body(req))
}

/// Who `headers` present and the headers that carried it; `None` on a
/// route that does not ask. 401 for nobody valid, 403 for a key that does
/// not open this route, 429 for an address that keeps failing. A
/// WebSocket upgrade is checked here too, before it is accepted.
pub(crate) async fn authenticate(
    llm: &LlmRoute,
    headers: &http::HeaderMap,
    cx: &Context<'_>,
) -> Result<Option<Presenting>, Rescue> {
    let settings = &llm.settings;
    let keys = llm.books.keys.as_deref();
    if settings.client_tokens.is_empty() && keys.is_none() && llm.books.idp.is_none() {
        return Ok(None);
    }
    // An address that keeps failing is refused before its token is
    // looked at (so guessing is limited, not just answered differently).
    if let Some(secs) = llm.auth_failures.refused(cx.peer) {
        return Err(Rescue::status(StatusCode::TOO_MANY_REQUESTS)
            .retry_after(secs)
            .saying("too many failed client token authentications from this address"));
    }
    let presented = presented(headers);
    if let Some((index, carriers)) = client_token(settings, &presented) {
        return Ok(Some((Who::Token(index), carriers)));
    }
    if let Some(keys) = keys {
        for (at, value) in presented.iter().enumerate() {
            let Some(value) = value else {
                continue;
            };
            let mut carriers = outgoing::Carriers::default();
            carriers.0[at] = true;
            match keys.find(value) {
                Found::Live(key) if key.opens(cx.route_name) => {
                    return Ok(Some((Who::Key(key), carriers)));
                }
                Found::Live(key) => {
                    return Err(Rescue::status(StatusCode::FORBIDDEN)
                        .saying(format!("key `{}` may not be used on this route", key.name)));
                }
                Found::Expired => {
                    return Err(Rescue::status(StatusCode::UNAUTHORIZED)
                        .saying("this key has expired; ask for a new one"));
                }
                Found::Unknown => {}
            }
        }
    }
    if let Some(idp) = &llm.books.idp
        && let Some(at) = presented.iter().position(|v| v.is_some_and(looks_like_jwt))
    {
        let mut carriers = outgoing::Carriers::default();
        carriers.0[at] = true;
        let token = presented[at].unwrap_or_default();
        return match idp.identify(token).await {
            Ok(person) => Ok(Some((Who::Key(person), carriers))),
            Err(IdpRefusal::Invalid(why)) => {
                llm.auth_failures.failed(cx.peer);
                Err(Rescue::status(StatusCode::UNAUTHORIZED).saying(why))
            }
            Err(IdpRefusal::Forbidden(why)) => {
                Err(Rescue::status(StatusCode::FORBIDDEN).saying(why))
            }
            Err(IdpRefusal::Unavailable) => Err(Rescue::status(StatusCode::SERVICE_UNAVAILABLE)
                .retry_after(5)
                .saying(
                    "the identity provider's signing keys are not available yet; retry shortly",
                )),
        };
    }
    llm.auth_failures.failed(cx.peer);
    Err(Rescue::status(StatusCode::UNAUTHORIZED)
        .saying("a valid client token is required (x-api-key or Authorization: Bearer)"))
}

/// The credentials a request carries: `x-api-key`, then a bearer.
fn presented(headers: &http::HeaderMap) -> [Option<&str>; 2] {
    [
        headers.get("x-api-key").and_then(|v| v.to_str().ok()),
        headers
            .get(header::AUTHORIZATION)
            .and_then(weir_wire::fields::bearer),
    ]
    .map(|v| v.map(str::trim))
}

/// Step 2's limits for who presented: the rate and the concurrency, or,
/// when the fleet keeps a client token's budget, deferred to step 4. A
/// key is looked up again (a WebSocket's turns run long after the
/// upgrade: a key revoked since is refused here).
pub(crate) async fn limit(
    llm: &LlmRoute,
    (who, strip): Presenting,
    endpoint: Endpoint,
    account: &usage::Account,
    cx: &mut Context<'_>,
) -> Result<Presented, Rescue> {
    let index = match who {
        Who::Token(index) => index,
        Who::Key(key) => return limit_key(llm, (key, strip), endpoint, account, cx).await,
    };
    account.identify(index, cx.facts);
    let deferred = Deferred::Token(index);
    if endpoint.api().is_some() && account.budget_is_shared() {
        return Ok(Presented {
            strip,
            deferred: Some(deferred),
            who: Some(Who::Token(index)),
        });
    }
    limit_deferred(llm, &deferred, None, cx).await?;
    Ok(Presented {
        strip,
        deferred: None,
        who: Some(Who::Token(index)),
    })
}

/// A runtime key's limits: the route's rate for it, its own rate and its
/// own concurrency bound (across routes; the fleet's with `[cluster]`) —
/// or, when the fleet keeps its budget, all of them at step 4 with the
/// reserve.
async fn limit_key(
    llm: &LlmRoute,
    (key, strip): (Arc<Key>, outgoing::Carriers),
    endpoint: Endpoint,
    account: &usage::Account,
    cx: &mut Context<'_>,
) -> Result<Presented, Rescue> {
    // A runtime key is looked up again (a person from the IdP is as
    // their token says until it expires).
    let key = match &llm.books.keys {
        Some(keys) if !key.id.starts_with("idp:") => keys.by_id(&key.id).ok_or_else(|| {
            Rescue::status(StatusCode::UNAUTHORIZED).saying("this key has been revoked or rotated")
        })?,
        _ => key,
    };
    let book = llm.books.key_books.of(&key, llm.books.cluster.as_ref());
    let team = llm.books.teams.of(key.team.as_deref());
    account.identify_key(key.clone(), book.clone(), team, cx.facts);
    let deferred = Deferred::Key(key.clone(), book);
    if endpoint.api().is_some() && account.budget_is_shared() {
        return Ok(Presented {
            strip,
            deferred: Some(deferred),
            who: Some(Who::Key(key)),
        });
    }
    limit_deferred(llm, &deferred, None, cx).await?;
    Ok(Presented {
        strip,
        deferred: None,
        who: Some(Who::Key(key)),
    })
}

/// The limits of who presented — the route's rate for them; a token's
/// concurrency, or a key's own rate and concurrency — decided, with
/// `budget`'s reserve when the fleet keeps it, in one decision.
pub(crate) async fn limit_deferred(
    llm: &LlmRoute,
    deferred: &Deferred,
    budget: Option<(&Arc<Cluster>, BudgetAsk<'_>)>,
    cx: &mut Context<'_>,
) -> Result<Budgeted, Rescue> {
    let (client, id, limits) = match deferred {
        Deferred::Token(index) => (
            Client::Token(*index),
            llm.token_ids.get(*index).map(String::as_str),
            (llm.token_gates.get(*index), None),
        ),
        Deferred::Key(key, book) => (
            Client::Key(crate::upstream::balance::key(key.id.as_bytes())),
            Some(&*key.id),
            (Some(&*book.gate), book.rate.as_deref()),
        ),
    };
    crate::admit::limit_client_reserving(
        cx.rate.map(|r| &**r),
        client,
        id,
        limits,
        cx.admission.as_mut(),
        budget,
    )
    .await
    .map_err(|r| limit_refusal(r, cx))
}

/// A route without client tokens limits its clients by address (an HTTP
/// request is limited at the route's entry; a WebSocket turn here).
pub(crate) async fn limit_address(cx: &Context<'_>) -> Result<(), Rescue> {
    let Some(rate) = cx.rate else {
        return Ok(());
    };
    crate::admit::limit_client(Some(&**rate), Client::ip(cx.peer), None, None, None)
        .await
        .map_err(|r| limit_refusal(r, cx))
}

/// The answer to a client over one of its limits.
pub(crate) fn limit_refusal(refusal: Refusal, cx: &Context<'_>) -> Rescue {
    match refusal {
        Refusal::Limited(limited) => Rescue::rate_limited(limited, cx.peer, cx.route_name, cx.host)
            .saying("this client token is over its rate limit"),
        Refusal::KeyLimited(limited) => {
            Rescue::rate_limited(limited, cx.peer, cx.route_name, cx.host)
                .saying("this key is over its request rate (`rate_limit_per_second`)")
        }
        Refusal::Full => Rescue::status(StatusCode::TOO_MANY_REQUESTS)
            .retry_after(1)
            .counting(crate::respond::Counted::Shed("token"))
            .saying("too many requests in flight for this client token"),
        Refusal::Unavailable => Rescue::cluster_unavailable()
            .saying("the gateway cannot check this client token's limits now; retry shortly"),
    }
}

/// The models who presented may ask for (every model when nobody did).
pub(crate) fn models<'a>(
    settings: &'a LlmSettings,
    who: Option<&'a Who>,
) -> Option<&'a AllowedModels> {
    match who? {
        Who::Token(i) => settings.client_tokens.get(*i).map(|c| &c.models),
        Who::Key(key) => Some(&key.models),
    }
}

/// Step 4's first check: a model who presented may not use is refused
/// before any budget or upstream, in the client's shape.
pub(crate) fn may_use(
    settings: &LlmSettings,
    who: Option<&Who>,
    model: &str,
) -> Result<(), Rescue> {
    let Some(allowed) = models(settings, who) else {
        return Ok(());
    };
    if allowed.allows(model) {
        return Ok(());
    }
    let name = match who {
        Some(Who::Token(i)) => settings.client_tokens.get(*i).map(|c| c.name.as_str()),
        Some(Who::Key(key)) => Some(&*key.name),
        None => None,
    };
    Err(Rescue::status(StatusCode::FORBIDDEN).saying(format!(
        "client `{}` may not use model `{model}`",
        name.unwrap_or("-")
    )))
}

/// The configured client token among `presented`, by index, and the
/// headers that carried it (removed before forwarding, so the gateway's
/// token never reaches an upstream). Both `x-api-key` and
/// `Authorization: Bearer` are accepted: Claude Code sends the latter
/// when `ANTHROPIC_AUTH_TOKEN` is set, and some clients send both (an
/// OAuth token in one, the gateway key in the other).
fn client_token(
    settings: &LlmSettings,
    presented: &[Option<&str>; 2],
) -> Option<(usize, outgoing::Carriers)> {
    let mut found = None;
    let mut carriers = outgoing::Carriers::default();
    for (c, value) in presented.iter().enumerate() {
        let Some(value) = value else {
            continue;
        };
        // Compare against every token, in constant time per token.
        let mut here = None;
        for (i, t) in settings.client_tokens.iter().enumerate() {
            if bool::from(t.token.0.as_bytes().ct_eq(value.as_bytes())) && here.is_none() {
                here = Some(i);
            }
        }
        if let Some(i) = here {
            // Every header carrying a client token is weir's, never the
            // upstream's: one sent twice must not leak through the other.
            carriers.0[c] = true;
            found = found.or(Some(i));
        }
    }
    found.map(|i| (i, carriers))
}
