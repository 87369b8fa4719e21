//! Azure OpenAI in front of the Responses and Chat emulators: the same
//! bodies and streams (those rules are OpenAI's, checked by `responses`
//! and `chat`), reached the way an Azure resource is reached, with Azure's
//! own refusals. Sources: learn.microsoft.com, "Azure OpenAI in Azure AI
//! Foundry Models v1 API" (api-version-lifecycle), the REST reference
//! (deployment paths, `api-key`), "Content filtering" (the 400 with
//! `content_filter` and `innererror`), and "Quotas and limits" (429 with
//! `retry-after` and `retry-after-ms`).
//!
//! - The key is the `api-key` header; an `Authorization` header is taken
//!   for an Entra ID token: with [`Azure::with_entra`], one the Entra
//!   stand-in ([`super::entra`]) issued and not expired passes, any other
//!   is 401 (Azure's "Access token is missing, invalid, … or have
//!   expired"); without, every bearer is 401.
//! - v1 (`Azure::v1`): `/openai/v1/responses`, `/openai/v1/chat/completions`,
//!   `GET /openai/v1/models`; an `api-version` query is refused (400); the
//!   body's `model` must be a deployment (404 `DeploymentNotFound`).
//! - Dated (`Azure::dated`): `/openai/deployments/{deployment}/chat/completions`
//!   and `/openai/responses` (model = deployment in the body), each with
//!   `?api-version=` the resource's version; without it, 404 `Resource
//!   not found`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::HeaderMap;
use serde_json::{Value, json};

use super::entra::{Entra, EntraState};
use super::{Failure, Rejection};

/// One Azure OpenAI resource: its key, deployments and API surface.
#[derive(Clone, Debug)]
pub struct Azure {
    pub key: String,
    pub deployments: Vec<String>,
    /// None: the v1 API; else the dated `api-version` it is called with.
    pub api_version: Option<String>,
    /// The Entra ID whose tokens it takes, when it takes them.
    pub entra: Option<Arc<EntraState>>,
}

impl Azure {
    pub fn v1(key: &str, deployments: &[&str]) -> Azure {
        Azure {
            key: key.into(),
            deployments: deployments.iter().map(|d| d.to_string()).collect(),
            api_version: None,
            entra: None,
        }
    }

    /// Taking the tokens `entra` issues as well as its key.
    pub fn with_entra(mut self, entra: &Entra) -> Azure {
        self.entra = Some(entra.state.clone());
        self
    }

    pub fn dated(key: &str, version: &str, deployments: &[&str]) -> Azure {
        Azure {
            api_version: Some(version.into()),
            ..Azure::v1(key, deployments)
        }
    }

    /// The OpenAI path (`/v1/responses`, `/v1/chat/completions`,
    /// `/v1/models`) this request stands for, once the key, the surface
    /// and the deployment pass Azure's rules.
    pub(crate) fn admit(
        &self,
        parts: &http::request::Parts,
        body: Option<&Value>,
    ) -> Result<String, Rejection> {
        self.authenticate(&parts.headers)?;
        let path = parts.uri.path();
        let version = parts.uri.query().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("api-version="))
                .map(str::to_string)
        });
        let model = body.and_then(|b| b["model"].as_str());
        let (canonical, deployment) = match &self.api_version {
            None => {
                if version.is_some() {
                    return Err(Rejection::bad(
                        "api-version query parameter is not allowed when using the /v1 path",
                    )
                    .code("BadRequest"));
                }
                let rest = path.strip_prefix("/openai").ok_or_else(not_found)?;
                if !rest.starts_with("/v1/") {
                    return Err(not_found());
                }
                (rest.to_string(), model)
            }
            Some(want) => {
                match version {
                    None => return Err(not_found()),
                    Some(v) if &v != want => {
                        return Err(Rejection::new(
                            404,
                            format!("The API version `{v}` is not supported by this resource"),
                        )
                        .code("404"));
                    }
                    Some(_) => {}
                }
                match path {
                    "/openai/responses" => ("/v1/responses".to_string(), model),
                    "/openai/models" => ("/v1/models".to_string(), None),
                    _ => {
                        let deployment = path
                            .strip_prefix("/openai/deployments/")
                            .and_then(|r| r.strip_suffix("/chat/completions"))
                            .ok_or_else(not_found)?;
                        ("/v1/chat/completions".to_string(), Some(deployment))
                    }
                }
            }
        };
        if canonical != "/v1/models" {
            let known = deployment.is_some_and(|d| self.deployments.iter().any(|k| k == d));
            if !known {
                return Err(Rejection::new(
                    404,
                    "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.",
                )
                .code("DeploymentNotFound"));
            }
        }
        Ok(canonical)
    }

    fn authenticate(&self, headers: &HeaderMap) -> Result<(), Rejection> {
        if let Some(bearer) = headers.get(http::header::AUTHORIZATION) {
            let token = bearer.to_str().ok().and_then(|b| b.strip_prefix("Bearer "));
            if let (Some(entra), Some(token)) = (&self.entra, token)
                && entra.valid(token)
            {
                return Ok(());
            }
            if let Some(entra) = &self.entra {
                entra.bad_tokens.fetch_add(1, Ordering::SeqCst);
            }
            return Err(Rejection::new(
                401,
                "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired.",
            )
            .code("401"));
        }
        let key = headers.get("api-key").and_then(|v| v.to_str().ok());
        if key != Some(self.key.as_str()) {
            return Err(Rejection::new(
                401,
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.",
            )
            .code("401"));
        }
        Ok(())
    }
}

fn not_found() -> Rejection {
    Rejection::new(404, "Resource not found").code("404")
}

/// The content filter refusing a prompt: 400, `code: "content_filter"`,
/// the categories in `innererror`.
pub fn content_filter() -> Failure {
    let message = "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.";
    let mut f = Failure::new(400).with_message(message);
    f.body = Some(json!({"error": {
        "message": message,
        "type": null,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {
                "hate": {"filtered": true, "severity": "high"},
                "self_harm": {"filtered": false, "severity": "safe"},
                "sexual": {"filtered": false, "severity": "safe"},
                "violence": {"filtered": false, "severity": "safe"},
            },
        },
    }}));
    f
}

/// Azure's 429: both retry hints, in seconds and milliseconds.
pub fn rate_limited(seconds: u64) -> Failure {
    let mut f = Failure::new(429)
        .with_header("retry-after", &seconds.to_string())
        .with_header("retry-after-ms", &(seconds * 1000).to_string())
        .with_message("Requests to the Responses_Create Operation under Azure OpenAI API have exceeded the token rate limit of your current tier. Please retry after 2 seconds.");
    f.body = Some(json!({"error": {"code": "429", "message": f.message.clone()}}));
    f
}

/// A 429 whose only hint is Azure's own `x-ms-retry-after-ms` (as Azure
/// AI services' gateways answer: no `retry-after`, no `retry-after-ms`).
pub fn rate_limited_ms_only(ms: u64) -> Failure {
    let mut f = Failure::new(429)
        .with_header("x-ms-retry-after-ms", &ms.to_string())
        .with_message("Rate limit is exceeded. Try again later.");
    f.body = Some(json!({"error": {"code": "429", "message": f.message.clone()}}));
    f
}
