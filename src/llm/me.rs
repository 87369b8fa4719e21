//! `GET /v1/me` on an LLM route (under its mount point): who the request's
//! credential is — a client token, a runtime key or a person from the IdP
//! — what it may use, and its budget now, for the person holding it.
//! Nothing upstream is asked; the credential is checked as any request's.

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::client::{self, Who};
use super::{Context, LlmRoute, usage};
use crate::respond::{Payload, Rescue};

/// Whether the request asks for `/v1/me` (at the route's mount point or
/// the root).
pub(crate) fn asks(req: &Request<Incoming>, mount: &str) -> bool {
    req.method() == Method::GET && super::api_path(mount, req.uri().path()) == "/v1/me"
}

/// Answer `/v1/me`: 401 as any request without a valid credential; 404 on
/// a route that asks for none (there is no one to describe).
pub(crate) async fn answer(
    llm: &LlmRoute,
    req: &Request<Incoming>,
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let Some((who, _)) = client::authenticate(llm, req.headers(), cx).await? else {
        return Err(Rescue::status(StatusCode::NOT_FOUND)
            .saying("this route asks for no client token: there is no one to describe"));
    };
    let now = usage::unix_now();
    let settings = &llm.settings;
    let mut me = serde_json::Map::new();
    let (budget, view) = match &who {
        Who::Token(i) => {
            let (Some(c), Some(ledger)) =
                (settings.client_tokens.get(*i), llm.books.ledgers.get(*i))
            else {
                return Err(Rescue::status(StatusCode::NOT_FOUND));
            };
            me.insert("client".into(), c.name.clone().into());
            me.insert("kind".into(), "client_token".into());
            (c.budget, ledger.view(&c.budget))
        }
        Who::Key(key) => {
            me.insert("client".into(), key.name.to_string().into());
            let person = key.id.starts_with("idp:");
            me.insert("kind".into(), if person { "idp" } else { "key" }.into());
            if !person {
                me.insert("key".into(), key.id.to_string().into());
            }
            me.insert("user".into(), key.user.as_deref().into());
            me.insert("team".into(), key.team.as_deref().into());
            me.insert("expires_at".into(), key.expires_at.into());
            let (own, team) = usage::keyed_view(&llm.books, key).await;
            if let Some(team) = team {
                me.insert("team_budget".into(), team.json(now));
            }
            (own.budget, own.view)
        }
    };
    let models = client::models(settings, Some(&who)).filter(|m| !m.0.is_empty());
    me.insert("models".into(), models.map(|m| m.0.clone()).into());
    me.insert("route".into(), cx.route_name.to_string().into());
    me.insert("in_flight".into(), view.in_flight.into());
    me.insert("warn_at".into(), budget.warn_at.into());
    me.insert("budget".into(), usage::windows(&view, now).into());
    let mut resp = Response::new(Payload::text(format!(
        "{}\n",
        serde_json::Value::Object(me)
    )));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}
