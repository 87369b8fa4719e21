//! Trying a model's upstreams in order, before the first content byte.
//!
//! Each attempt is a fresh request to the next upstream (Pingora's "fresh
//! upstream pick over a retry buffer": the body was read once and is sent
//! again as it is). The same upstream is never asked twice for one request:
//! a duplicate generation may be billed. An attempt is passed over when the
//! upstream cannot be reached, gives no response head within
//! `first_byte_timeout`, answers a status in `failover_on`, or opens a
//! stream and reports an error before any content. Anything else — a
//! success, or a status the client must see (400, 401, 403, 404, 413) — is
//! relayed at once.
//!
//! When every upstream fails, the most useful failure is relayed verbatim
//! (a 429 before a 5xx: its headers tell the client when to come back);
//! when none answered, 502 says how many were tried. Upstreams that said
//! when to come back (429/503/529 with a retry hint), or that refused
//! connections, cool down and are skipped; when all of a model's upstreams
//! are cooling, the answer is immediate, with the soonest recovery as
//! `Retry-After`.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use tokio::time::Instant;

use super::body::splice;
use super::relay::{Held, Relay, Tally};
use super::translate::{Pair, tokens};
use super::upstream::{Cooling, LlmUpstream, retry_hint};
use super::{Context, LlmRoute};
use crate::config::{Choice, Credential};
use crate::proxy::headers::remove_hop_by_hop;
use crate::respond::{Payload, Rescue, StreamBody};
use crate::wire::Endpoint;

/// The request as it will be sent upstream, attempt after attempt.
pub struct Outgoing {
    pub parts: http::request::Parts,
    pub path_and_query: String,
    /// The header that carried weir's own client token: never forwarded.
    pub strip: Option<HeaderName>,
    pub body: Bytes,
    pub model_span: Option<std::ops::Range<usize>>,
    /// The model the client asked for (echoed in translated answers).
    pub model: Option<String>,
}

/// A request made ready for one upstream.
enum Prepared {
    /// Send it; translate the answer back when a pair is given.
    Ready(Box<http::Request<Full<Bytes>>>, Option<Pair>),
    /// This upstream cannot serve this endpoint (no translation exists).
    Skip,
    /// The client's body could not be translated: a 400 for the client.
    Invalid(String),
}

/// An error body is read whole to be relayed later; bounded (provider
/// error bodies are a few hundred bytes).
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// A failed attempt weir may relay if nothing better comes.
struct Answered {
    /// 3: rate limited (tells the client when to return); 2: overloaded,
    /// server error, or an error inside the stream.
    rank: u8,
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

enum Sent {
    Response(Response<hyper::body::Incoming>),
    /// Could not connect (the upstream is cooling now).
    Refused,
    /// Connected, but no head in time, or the exchange broke.
    Failed(&'static str),
}

impl Outgoing {
    /// The request for `upstream`, with the model it knows the requested
    /// one by, translated when it speaks another API than the client.
    fn for_upstream(
        &self,
        upstream: &LlmUpstream,
        endpoint: Endpoint,
        model: Option<&str>,
    ) -> Prepared {
        let Ok(pair) = Pair::between(endpoint, upstream.config.api) else {
            return Prepared::Skip;
        };
        let base = &upstream.config.url;
        let path = format!(
            "{}{}",
            base.path().trim_end_matches('/'),
            match pair {
                // The client's query (`?beta=true`) means nothing to the other API.
                Some(p) => p.upstream_api().path(),
                None => &self.path_and_query,
            }
        );
        let (Some(scheme), Some(authority)) = (base.scheme(), base.authority()) else {
            return Prepared::Skip;
        };
        let Ok(uri) = http::Uri::builder()
            .scheme(scheme.clone())
            .authority(authority.clone())
            .path_and_query(path)
            .build()
        else {
            return Prepared::Skip;
        };
        let mut headers = self.parts.headers.clone();
        remove_hop_by_hop(&mut headers);
        for h in [
            header::HOST,
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::EXPECT,
        ] {
            headers.remove(h);
        }
        if let Some(h) = &self.strip {
            headers.remove(h);
        }
        let passthrough = upstream.config.credential == Credential::Passthrough;
        if pair.is_some() {
            upstream.config.api.adopt_headers(&mut headers, passthrough);
        }
        if let Credential::Key(key) = &upstream.config.credential {
            headers.remove(header::AUTHORIZATION);
            headers.remove("x-api-key");
            let (name, value) = upstream.config.api.key_header(&key.0);
            let Ok(value) = HeaderValue::from_str(&value) else {
                return Prepared::Skip;
            };
            headers.insert(name, value);
        }
        // Streams must arrive as plain SSE for weir to read their events.
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        let body = match (pair, model, &self.model_span) {
            (Some(p), _, _) => {
                let model = model.or(self.model.as_deref()).unwrap_or_default();
                match p.request(&self.body, model) {
                    Ok(b) => {
                        headers.insert(
                            header::CONTENT_TYPE,
                            HeaderValue::from_static("application/json"),
                        );
                        b
                    }
                    Err(e) => return Prepared::Invalid(e.to_string()),
                }
            }
            (None, Some(m), Some(span)) => splice(&self.body, span, m),
            _ => self.body.clone(),
        };
        let mut req = http::Request::new(Full::new(body));
        *req.method_mut() = self.parts.method.clone();
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        Prepared::Ready(Box::new(req), pair)
    }
}

async fn send(
    upstream: &LlmUpstream,
    req: http::Request<Full<Bytes>>,
    timeout: std::time::Duration,
) -> Sent {
    match tokio::time::timeout(timeout, upstream.client.get().request(req)).await {
        Err(_) => Sent::Failed("timeout"),
        Ok(Err(e)) if e.is_connect() => {
            upstream.refused(Instant::now());
            Sent::Refused
        }
        Ok(Err(_)) => Sent::Failed("broken"),
        Ok(Ok(resp)) => {
            upstream.answered();
            Sent::Response(resp)
        }
    }
}

/// Relay an upstream response as it is (streaming its body).
fn relay_verbatim(
    resp: Response<hyper::body::Incoming>,
    served_by: Option<&str>,
) -> Response<Payload> {
    let mut resp = resp.map(Payload::Upstream);
    remove_hop_by_hop(resp.headers_mut());
    served_by_header(&mut resp, served_by);
    resp
}

fn served_by_header(resp: &mut Response<Payload>, served_by: Option<&str>) {
    if let Some(name) = served_by
        && let Ok(v) = HeaderValue::from_str(name)
    {
        resp.headers_mut().insert("x-weir-upstream", v);
    }
}

fn is_event_stream(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The messages, responses and chat completions endpoints.
pub async fn run(
    llm: &LlmRoute,
    request: &Outgoing,
    endpoint: Endpoint,
    choices: &[Choice],
    model_label: &Arc<str>,
    cx: &Context<'_>,
) -> Result<Response<Payload>, Rescue> {
    let settings = &llm.settings;
    let mut best: Option<Answered> = None;
    let mut tried = 0usize;
    let mut skipped = 0usize;
    let mut cooling: Vec<(Instant, Cooling)> = Vec::new();
    let note_failover = |reason: &'static str| {
        cx.metrics.llm_failover(cx.route_name, model_label, reason);
        let mut f = cx.facts.lock().unwrap_or_else(|e| e.into_inner());
        f.failovers += 1;
    };
    for choice in choices {
        let upstream = &llm.upstreams[choice.upstream];
        let name: Arc<str> = upstream.config.name.as_str().into();
        let now = Instant::now();
        if let Some(c) = upstream.cooling(now) {
            cooling.push(c);
            note_failover("cooling");
            continue;
        }
        let (req, pair) = match request.for_upstream(upstream, endpoint, choice.model.as_deref()) {
            Prepared::Ready(req, pair) => (*req, pair),
            Prepared::Skip => {
                skipped += 1;
                continue;
            }
            Prepared::Invalid(why) => {
                return Err(Rescue::status(StatusCode::BAD_REQUEST).saying(why));
            }
        };
        tried += 1;
        cx.facts.lock().unwrap_or_else(|e| e.into_inner()).upstream = Some(name.clone());
        let resp = match send(upstream, req, settings.first_byte_timeout).await {
            Sent::Response(r) => r,
            Sent::Refused => {
                report_cooldown(cx, &name, upstream);
                note_failover("connect");
                continue;
            }
            Sent::Failed(reason) => {
                note_failover(reason);
                continue;
            }
        };
        let status = resp.status();
        let served_by = settings.served_by_header.then_some(&*name);
        if settings.failover_on.contains(&status.as_u16()) {
            if let Some(wait) = retry_hint(resp.headers()) {
                let why = if status == StatusCode::TOO_MANY_REQUESTS {
                    Some(Cooling::RateLimited)
                } else if matches!(status.as_u16(), 503 | 529) {
                    Some(Cooling::Overloaded)
                } else {
                    None
                };
                if let Some(why) = why {
                    upstream.hinted(Instant::now(), wait, why);
                    report_cooldown(cx, &name, upstream);
                }
            }
            let rank = if status == StatusCode::TOO_MANY_REQUESTS {
                3
            } else {
                2
            };
            let (mut parts, body) = resp.into_parts();
            let mut body = read_error_body(body, settings.first_byte_timeout).await;
            if let Some(p) = pair {
                body = p.error(parts.status, &body);
                json_content(&mut parts.headers);
            }
            note_failover(if rank == 3 {
                "status_429"
            } else {
                "status_5xx"
            });
            keep_best(
                &mut best,
                Answered {
                    rank,
                    status: parts.status,
                    headers: parts.headers,
                    body,
                },
            );
            continue;
        }
        let tally = Tally {
            metrics: cx.metrics.clone(),
            route: cx.route_name.clone(),
            model_label: model_label.clone(),
            upstream: name.clone(),
            facts: cx.facts.clone(),
            started: cx.started,
        };
        let streamed = endpoint
            .api()
            .filter(|_| status.is_success() && is_event_stream(resp.headers()));
        let Some(client_api) = streamed else {
            // Relayed at once: a JSON answer, or a status the client must see.
            let outcome = if status.is_success() {
                "completed"
            } else {
                "relayed_error"
            };
            if status.is_success() {
                tally.first_content();
            }
            cx.metrics
                .llm_request(cx.route_name, model_label, &name, outcome);
            return Ok(match pair {
                None => relay_verbatim(resp, served_by),
                Some(p) => {
                    translate_whole(p, resp, request, settings.stream_idle_timeout, served_by)
                        .await?
                }
            });
        };

        // A stream: hold its preamble until content shows it is good.
        let (parts, body) = resp.into_parts();
        let client_model = request.model.as_deref().unwrap_or_default();
        let mut relay = Relay::new(
            body,
            client_api,
            pair.map(|p| p.stream(client_model)),
            settings.sse_keepalive,
            settings.stream_idle_timeout,
            tally,
        );
        match relay.hold_preamble(settings.first_token_timeout).await {
            Held::Content | Held::TimedOut => {
                let stream: StreamBody = Box::pin(relay);
                let mut resp = Response::from_parts(parts, Payload::Stream(stream));
                remove_hop_by_hop(resp.headers_mut());
                resp.headers_mut().remove(header::CONTENT_LENGTH);
                served_by_header(&mut resp, served_by);
                return Ok(resp);
            }
            Held::Broken => {
                // Cut before any content: nothing worth relaying.
                note_failover("broken");
                relay.abandon();
            }
            Held::Error => {
                // An error before any content: pass this upstream over; its
                // stream so far is what the client gets if nothing better.
                note_failover("preamble_error");
                let body = Bytes::from(relay.held_bytes());
                relay.abandon();
                keep_best(
                    &mut best,
                    Answered {
                        rank: 2,
                        status: parts.status,
                        headers: parts.headers,
                        body,
                    },
                );
            }
        }
    }
    if let Some(b) = best {
        cx.metrics
            .llm_request(cx.route_name, model_label, &"-".into(), "relayed_error");
        let mut resp = Response::new(Payload::text(b.body));
        *resp.status_mut() = b.status;
        *resp.headers_mut() = b.headers;
        remove_hop_by_hop(resp.headers_mut());
        resp.headers_mut().remove(header::CONTENT_LENGTH);
        return Ok(resp);
    }
    if tried == 0 && cooling.is_empty() && skipped > 0 {
        return Err(Rescue::status(StatusCode::NOT_IMPLEMENTED).saying(format!(
            "no upstream of this model speaks {}, and weir does not translate it to theirs",
            endpoint.label()
        )));
    }
    if tried == 0 && !cooling.is_empty() {
        let now = Instant::now();
        let soonest = cooling.iter().map(|(u, _)| *u).min().unwrap_or(now);
        let wait = soonest.saturating_duration_since(now).as_secs_f64().ceil() as u64;
        let all_limited = cooling.iter().all(|(_, c)| *c == Cooling::RateLimited);
        let status = if all_limited {
            StatusCode::TOO_MANY_REQUESTS
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        return Err(Rescue::status(status).retry_after(wait).saying(format!(
            "every upstream for this model is cooling down ({} {}); retry in {wait} s",
            cooling.len(),
            if all_limited {
                "rate limited"
            } else {
                "unavailable"
            }
        )));
    }
    Err(Rescue::status(StatusCode::BAD_GATEWAY).saying(format!(
        "all upstreams failed ({tried} attempted, {} cooling down)",
        cooling.len()
    )))
}

fn json_content(headers: &mut http::HeaderMap) {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.remove(header::CONTENT_LENGTH);
}

/// The most a whole (non-streamed) answer may be for translation.
const MAX_TRANSLATED_BODY: usize = 32 * 1024 * 1024;

/// A whole answer from an upstream of another API, in the client's: an
/// error keeps its status in the client's envelope; a success is
/// assembled into the client's object.
async fn translate_whole(
    pair: Pair,
    resp: Response<hyper::body::Incoming>,
    request: &Outgoing,
    timeout: std::time::Duration,
    served_by: Option<&str>,
) -> Result<Response<Payload>, Rescue> {
    let (mut parts, body) = resp.into_parts();
    let read = Limited::new(body, MAX_TRANSLATED_BODY).collect();
    let bytes = match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => {
            return Err(Rescue::status(StatusCode::BAD_GATEWAY)
                .saying("the upstream's answer could not be read"));
        }
    };
    let translated = if parts.status.is_success() {
        pair.response(&bytes, request.model.as_deref().unwrap_or_default())
            .ok_or_else(|| {
                Rescue::status(StatusCode::BAD_GATEWAY)
                    .saying("the upstream's answer could not be translated")
            })?
    } else {
        pair.error(parts.status, &bytes)
    };
    remove_hop_by_hop(&mut parts.headers);
    json_content(&mut parts.headers);
    let mut resp = Response::from_parts(parts, Payload::text(translated));
    served_by_header(&mut resp, served_by);
    Ok(resp)
}

fn keep_best(best: &mut Option<Answered>, new: Answered) {
    if best.as_ref().is_none_or(|b| new.rank > b.rank) {
        *best = Some(new);
    }
}

fn report_cooldown(cx: &Context<'_>, name: &Arc<str>, upstream: &LlmUpstream) {
    if let Some((until, _)) = upstream.cooling(Instant::now()) {
        let left = until.saturating_duration_since(Instant::now());
        let unix = std::time::SystemTime::now() + left;
        let secs = unix
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        cx.metrics.llm_cooldown(cx.route_name, name, secs);
    }
}

async fn read_error_body(body: hyper::body::Incoming, timeout: std::time::Duration) -> Bytes {
    let read = Limited::new(body, MAX_ERROR_BODY).collect();
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    }
}

/// `count_tokens`: the first upstream that answers; an upstream without
/// the endpoint (404/405) means 501 `not_supported`, which makes Claude
/// Code fall back to its own estimate instead of breaking.
pub async fn count_tokens(
    llm: &LlmRoute,
    request: &Outgoing,
    choices: &[Choice],
) -> Result<Response<Payload>, Rescue> {
    let settings = &llm.settings;
    for choice in choices {
        let upstream = &llm.upstreams[choice.upstream];
        if upstream.cooling(Instant::now()).is_some() {
            continue;
        }
        let req =
            match request.for_upstream(upstream, Endpoint::CountTokens, choice.model.as_deref()) {
                Prepared::Ready(req, _) => *req,
                // An upstream of another API cannot count Anthropic's tokens:
                // weir estimates them itself.
                Prepared::Skip if !upstream.config.api.serves(Endpoint::CountTokens) => {
                    return count_locally(&request.body);
                }
                Prepared::Skip | Prepared::Invalid(_) => continue,
            };
        match send(upstream, req, settings.first_byte_timeout).await {
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

fn count_locally(body: &[u8]) -> Result<Response<Payload>, Rescue> {
    let n = tokens::count(body).ok_or_else(|| {
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
pub async fn models(llm: &LlmRoute, request: &Outgoing) -> Result<Response<Payload>, Rescue> {
    let settings = &llm.settings;
    let mut tried = 0;
    for upstream in &llm.upstreams {
        if upstream.cooling(Instant::now()).is_some() {
            continue;
        }
        // Only an upstream of the route's own API lists models in the
        // client's format.
        if !settings.protocol.is_native(upstream.config.api) {
            continue;
        }
        let Prepared::Ready(req, _) = request.for_upstream(upstream, Endpoint::Models, None) else {
            continue;
        };
        let req = *req;
        tried += 1;
        if let Sent::Response(resp) = send(upstream, req, settings.first_byte_timeout).await {
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
