//! One attempt's request: the buffered request made ready for one
//! upstream once (the client's token removed, the model it knows the
//! requested one by, translated when it speaks another API: a [`Draft`]),
//! then for each member tried (its URL, its key in the header its API
//! reads), and sending it under the first-byte timeout.

use super::framed::{UpstreamBody, unframe};
use super::offload::{Busy, Offload};
use super::refresh::FIRST_WAIT;
use super::upstream::{LlmMember, LlmUpstream};
use crate::config::{BedrockSettings, Credential, UpstreamApi};
use crate::upstream::headers::clean_request;
use bytes::Bytes;
use http::Response;
use http::header::{self, HeaderValue};
use http_body_util::Full;
use weir_wire::body::splice;
use weir_wire::translate::{Pair, ToolNames, TranslateError, native};
use weir_wire::{Endpoint, Protocol, bedrock, vertex};

/// The request as it will be sent upstream, attempt after attempt.
pub(crate) struct Outgoing {
    pub(crate) parts: http::request::Parts,
    /// The client's API family: its headers are another family's to adopt
    /// when even an untranslated request (`GET /v1/models`) crosses over.
    pub(crate) protocol: Protocol,
    pub(crate) path_and_query: String,
    /// The header that carried weir's own client token: never forwarded.
    pub(crate) strip: Carriers,
    pub(crate) body: Bytes,
    pub(crate) model_span: Option<std::ops::Range<usize>>,
    /// Whether the body may carry state weir made for another vendor.
    pub(crate) weir_state: bool,
    /// The model the client asked for (echoed in translated answers).
    pub(crate) model: Option<String>,
    /// The conversation's hash, for upstreams that keep a conversation on
    /// one member.
    pub(crate) conversation: Option<u64>,
}

/// How one attempt's answer is translated back: the pair, and the tool
/// names shortened in its request.
pub(crate) struct Translation {
    pub(crate) pair: Pair,
    pub(crate) names: ToolNames,
    pub(crate) include_usage: bool,
}

/// A request made ready for one upstream, to be sent to any of its
/// members: translated (or spliced) once, whichever endpoint and key
/// take it.
pub(crate) struct Draft {
    api: UpstreamApi,
    method: http::Method,
    /// The API path (and query), after each member's base path.
    path: String,
    /// Without a key: each member's own goes in.
    headers: http::HeaderMap,
    body: Bytes,
    /// How the answer is translated back, when it is.
    pub(crate) translation: Option<Translation>,
    /// The region a request signed with AWS credentials is signed for.
    region: Option<String>,
}

impl Draft {
    /// The request for `member`: its URL, its key. None when they cannot
    /// make a request (a key that is no header value).
    pub(crate) fn for_member(&self, member: &LlmMember) -> Option<http::Request<Full<Bytes>>> {
        let base = &member.url;
        let path = format!("{}{}", base.path().trim_end_matches('/'), self.path);
        let uri = http::Uri::builder()
            .scheme(base.scheme()?.clone())
            .authority(base.authority()?.clone())
            .path_and_query(path)
            .build()
            .ok()?;
        let mut headers = self.headers.clone();
        if let Credential::Key(key) = &member.credential {
            headers.remove(header::AUTHORIZATION);
            headers.remove("x-api-key");
            let (name, value) = self.api.key_header(&key.0);
            headers.insert(name, HeaderValue::from_str(&value).ok()?);
        }
        let mut req = http::Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        let refreshed;
        let keys = match &member.credential {
            Credential::Aws(keys) => Some(keys),
            Credential::AwsWebIdentity(_) => {
                refreshed = member.aws.as_ref()?.current()?;
                Some(&*refreshed)
            }
            _ => None,
        };
        if let Some(keys) = keys {
            // Last, on the bytes that are sent.
            let region = self.region.as_deref()?;
            let now = std::time::SystemTime::now();
            let service = bedrock::SIGNING_SERVICE;
            super::aws::sign_request(&mut req, &self.body, keys, region, service, now)?;
        }
        Some(req)
    }
}

/// A request made ready for one upstream.
pub(crate) enum Prepared {
    /// Send it to a member; translate the answer back when the draft
    /// says how.
    Ready(Box<Draft>),
    /// This upstream cannot serve this endpoint (no translation exists).
    Skip,
    /// The client's body could not be translated: a 400 for the client.
    Invalid(String),
    /// This upstream cannot do what the request asks (say, search the
    /// web): the next may; if none can, a 400 saying why.
    Unserved(String),
    /// Every slot for heavy work is taken: shed.
    Busy,
    /// The upstream has no credential to send yet (its token endpoint is
    /// down): the next may serve; if none can, a 503 saying why.
    Unavailable(String),
}

pub(crate) enum Sent {
    /// The answer, framed as the client's API family frames it
    /// ([`unframe`]).
    Response(Response<UpstreamBody>),
    /// Could not connect.
    Refused,
    /// Connected, but no head in time, or the exchange broke.
    Failed(&'static str),
}

impl Outgoing {
    /// The path (and query) of this request on `upstream`: an Azure
    /// upstream's surface's (the deployment is the model id sent), the
    /// translated API's, or the client's own. None when the upstream has
    /// no path for it.
    fn upstream_path(
        &self,
        upstream: &LlmUpstream,
        endpoint: Endpoint,
        pair: Option<Pair>,
        model: Option<&str>,
    ) -> Option<String> {
        let api = pair.map_or(endpoint.api(), |p| Some(p.upstream_api()));
        if let Some(surface) = &upstream.config.azure {
            let deployment = model.or(self.model.as_deref()).unwrap_or_default();
            return surface.path(api, deployment);
        }
        if upstream.config.bedrock.is_some() {
            // Bedrock's path names the model and the stream: made with
            // its body ([`Self::for_bedrock`]).
            return Some(String::new());
        }
        Some(match pair {
            // The client's query (`?beta=true`) means nothing to the other API.
            Some(p) => p.upstream_api().path().to_string(),
            None => self.path_and_query.clone(),
        })
    }

    /// The request for `upstream`, with the model it knows the requested
    /// one by, translated when it speaks another API than the client.
    pub(crate) async fn for_upstream(
        &self,
        upstream: &LlmUpstream,
        endpoint: Endpoint,
        model: Option<&str>,
        offload: &Offload,
    ) -> Prepared {
        let Ok(pair) = Pair::between(endpoint, upstream.config.api) else {
            return Prepared::Skip;
        };
        let Some(path) = self.upstream_path(upstream, endpoint, pair, model) else {
            return Prepared::Skip;
        };
        let mut headers = self.parts.headers.clone();
        clean_request(&mut headers);
        // The upstream's authority and the body's length are the new
        // request's own.
        headers.remove(header::HOST);
        headers.remove(header::CONTENT_LENGTH);
        self.strip.strip(&mut headers);
        // An upstream's keys are all its own, or the client's passed through.
        let passthrough = upstream
            .config
            .keys
            .iter()
            .all(|k| k.credential == Credential::Passthrough);
        if pair.is_some() || !self.protocol.is_native(upstream.config.api) {
            upstream.config.api.adopt_headers(&mut headers, passthrough);
        }
        if upstream
            .config
            .keys
            .iter()
            .any(|k| k.credential == Credential::Refreshed)
        {
            // weir's token replaces whatever credential the client sent.
            headers.remove("x-api-key");
            headers.remove(upstream.config.api.key_header("").0);
            match refreshed_token(upstream).await {
                Ok(value) => {
                    headers.insert(header::AUTHORIZATION, value);
                }
                Err(why) => return Prepared::Unavailable(why),
            }
        }
        // Streams must arrive as plain SSE for weir to read their events.
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        let mut translation = None;
        let body = match (pair, model, &self.model_span) {
            (Some(p), _, _) => {
                let model = model
                    .or(self.model.as_deref())
                    .unwrap_or_default()
                    .to_string();
                let body = self.body.clone();
                let accepts = upstream.config.accepts;
                let translated = offload
                    .run(body.len(), move || p.request_for(&body, &model, accepts))
                    .await;
                match translated {
                    Ok(Ok(t)) => {
                        headers.insert(
                            header::CONTENT_TYPE,
                            HeaderValue::from_static("application/json"),
                        );
                        translation = Some(Translation {
                            pair: p,
                            names: t.names,
                            include_usage: t.include_usage,
                        });
                        t.body
                    }
                    Ok(Err(TranslateError::Unserved(why))) => return Prepared::Unserved(why),
                    Ok(Err(e)) => return Prepared::Invalid(e.to_string()),
                    Err(Busy) => return Prepared::Busy,
                }
            }
            // A conversation that crossed protocols: what weir made for
            // the other vendor would be refused here as forged.
            (None, _, _) if native::carries_weir_state(endpoint, self.weir_state) => {
                let body = self.body.clone();
                let named = model.map(str::to_string);
                let stripped = offload
                    .run(body.len(), move || {
                        native::without_weir_state(endpoint, &body, named.as_deref())
                    })
                    .await;
                match stripped {
                    Ok(Some(b)) => b,
                    Ok(None) => match (model, &self.model_span) {
                        (Some(m), Some(span)) => splice(&self.body, span, m),
                        _ => self.body.clone(),
                    },
                    Err(Busy) => return Prepared::Busy,
                }
            }
            (None, Some(m), Some(span)) => splice(&self.body, span, m),
            _ => self.body.clone(),
        };
        let (path, body) = match &upstream.config.vertex {
            None => (path, body),
            Some(v) => match vertex_request(&v.place, endpoint, body, offload).await {
                Ok(made) => made,
                Err(refused) => return refused,
            },
        };
        let mut draft = Draft {
            api: upstream.config.api,
            method: self.parts.method.clone(),
            path,
            headers,
            body,
            translation,
            region: None,
        };
        if let Some(settings) = &upstream.config.bedrock {
            let model = model.or(self.model.as_deref()).unwrap_or_default();
            if let Err(refused) = self.for_bedrock(&mut draft, settings, model, offload).await {
                return refused;
            }
        }
        Prepared::Ready(Box::new(draft))
    }

    /// A Messages request made into Bedrock's: `model` and `stream` moved
    /// from the body to the path, `anthropic_version` and the client's
    /// betas put in the body, the answer's type asked for.
    async fn for_bedrock(
        &self,
        draft: &mut Draft,
        settings: &BedrockSettings,
        model: &str,
        offload: &Offload,
    ) -> Result<(), Prepared> {
        let body = draft.body.clone();
        let betas = bedrock::betas(&self.parts.headers);
        let made = offload
            .run(body.len(), move || bedrock::request_body(&body, &betas))
            .await;
        let made = match made {
            Ok(Ok(made)) => made,
            Ok(Err(why)) => return Err(Prepared::Invalid(why)),
            Err(Busy) => return Err(Prepared::Busy),
        };
        draft.path = bedrock::path(model, made.stream);
        draft.body = Bytes::from(made.body);
        draft.region = Some(settings.region.clone());
        let accept = if made.stream {
            bedrock::EVENT_STREAM
        } else {
            "application/json"
        };
        let headers = &mut draft.headers;
        headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(())
    }
}

/// A Messages (or count_tokens) request as Vertex AI takes it at
/// `place`: its path (the model in it) and its body ([`vertex::request_body`]).
async fn vertex_request(
    place: &vertex::Place,
    endpoint: Endpoint,
    body: Bytes,
    offload: &Offload,
) -> Result<(String, Bytes), Prepared> {
    let count = endpoint == Endpoint::CountTokens;
    let made = offload
        .run(body.len(), move || vertex::request_body(&body, count))
        .await;
    match made {
        Ok(Ok(r)) => Ok((place.path((!count).then_some(&*r.model), r.stream), r.body)),
        Ok(Err(vertex::Unfit(why))) => Err(Prepared::Invalid(why.into())),
        Err(Busy) => Err(Prepared::Busy),
    }
}

/// The `Authorization: Bearer` value of the access token weir got for
/// `upstream` (an OAuth 2 token, Google's or Entra ID's; waiting for the
/// first one, when none has come yet), or why there is none.
async fn refreshed_token(upstream: &LlmUpstream) -> Result<HeaderValue, String> {
    let Some(token) = &upstream.token else {
        return Err("no runtime to fetch the upstream's access token on".into());
    };
    let value = token.get(FIRST_WAIT).await.map_err(|why| {
        format!(
            "no access token for upstream `{}`: {why}",
            upstream.config.name
        )
    })?;
    HeaderValue::from_str(&format!("Bearer {value}"))
        .map_err(|_| "the access token is no header value".to_string())
}

pub(crate) async fn send(
    upstream: &LlmUpstream,
    req: http::Request<Full<Bytes>>,
    timeout: std::time::Duration,
) -> Sent {
    match tokio::time::timeout(timeout, upstream.client.get().request(req)).await {
        Err(_) => Sent::Failed("timeout"),
        Ok(Err(e)) if e.is_connect() => Sent::Refused,
        Ok(Err(_)) => Sent::Failed("broken"),
        Ok(Ok(resp)) if upstream.config.api.frames_answers() => {
            Sent::Response(unframe(resp, timeout).await)
        }
        Ok(Ok(resp)) => Sent::Response(resp.map(UpstreamBody::Plain)),
    }
}

/// Which of `x-api-key` and `Authorization` carried a client token: both
/// are removed before the request goes upstream.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Carriers(pub(crate) [bool; 2]);

impl Carriers {
    /// Remove the headers that carried a client token.
    pub(crate) fn strip(self, headers: &mut http::HeaderMap) {
        if self.0[0] {
            headers.remove("x-api-key");
        }
        if self.0[1] {
            headers.remove(header::AUTHORIZATION);
        }
    }
}
