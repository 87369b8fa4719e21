//! Azure OpenAI: the OpenAI Responses and Chat Completions APIs as Azure
//! serves them from a resource (`https://{resource}.openai.azure.com`).
//! The bodies, streams and error envelope are OpenAI's ([`super::openai`],
//! [`super::responses`], [`super::chat`]); what is Azure's own is here:
//!
//! - where a request goes ([`Surface`]): the v1 API
//!   (`/openai/v1/responses`, `/openai/v1/chat/completions`, no
//!   `api-version`), where the body's `model` names the deployment; or the
//!   older deployment paths of a dated `api-version`
//!   (`/openai/deployments/{deployment}/chat/completions?api-version=…`,
//!   and `/openai/responses?api-version=…` for the Responses API, which
//!   has no deployment path), where the path names it;
//! - the key, sent in `api-key` (an Entra ID token, when a client's own
//!   credential is passed through, stays `Authorization: Bearer`);
//! - the content filter's refusal of a prompt: 400 with `code:
//!   "content_filter"` (and `innererror.code:
//!   "ResponsibleAIPolicyViolation"`), which says the prompt is refused,
//!   not that the upstream failed ([`refuses_prompt`]). A filtered answer
//!   (`finish_reason: "content_filter"`, a Responses `content_filter`
//!   incomplete reason) is the OpenAI APIs' own and is read there.

use http::header::{HeaderMap, HeaderName};
use serde_json::Value;

use super::Api;

/// The header Azure reads a resource key from.
pub const KEY_HEADER: &str = "api-key";
/// The error code of a prompt (or an answer) the content filter refused.
pub const CONTENT_FILTER: &str = "content_filter";
/// The inner error code Azure gives a content-filter refusal.
pub const POLICY_VIOLATION: &str = "ResponsibleAIPolicyViolation";
/// The `api_version` that names the v1 API.
pub const V1: &str = "v1";

/// Which of Azure's two API surfaces an upstream is called on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Surface {
    /// `/openai/v1/…`, no `api-version`; the body's `model` is the
    /// deployment.
    #[default]
    V1,
    /// The deployment paths of this dated `api-version`
    /// (`2024-10-21`, `2025-04-01-preview`).
    Dated(String),
}

impl Surface {
    /// The surface an `api_version` value names, or why it names none:
    /// `v1`, or a date `YYYY-MM-DD` with an optional `-preview`.
    pub fn from_version(version: &str) -> Result<Surface, String> {
        if version == V1 {
            return Ok(Surface::V1);
        }
        let date = version.strip_suffix("-preview").unwrap_or(version);
        let b = date.as_bytes();
        let dated = b.len() == 10
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                _ => c.is_ascii_digit(),
            });
        if dated {
            Ok(Surface::Dated(version.to_string()))
        } else {
            Err(format!(
                "`{version}` is not an Azure OpenAI API version: `v1`, or a date such as `2024-10-21` (or `2025-04-01-preview`)"
            ))
        }
    }

    /// The path (and query) of `api`'s requests for `deployment` (the
    /// model id sent upstream), or of the model list (`api` None); None
    /// for an API Azure does not serve (Messages).
    pub fn path(&self, api: Option<Api>, deployment: &str) -> Option<String> {
        let tail = match api {
            None => "models",
            Some(Api::Responses) => "responses",
            Some(Api::Chat) => "chat/completions",
            Some(Api::Messages) => return None,
        };
        Some(match (self, api) {
            (Surface::V1, _) => format!("/openai/v1/{tail}"),
            (Surface::Dated(v), Some(Api::Chat)) => format!(
                "/openai/deployments/{}/{tail}?api-version={v}",
                super::path_segment(deployment)
            ),
            (Surface::Dated(v), _) => format!("/openai/{tail}?api-version={v}"),
        })
    }
}

/// Whether `name` can be a deployment's: 1 to 64 letters, digits, `-`,
/// `_` and `.`.
pub fn is_deployment_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub(super) fn key_header(key: &str) -> (HeaderName, String) {
    (HeaderName::from_static(KEY_HEADER), key.to_string())
}

/// A request arriving from another client than Azure's: as for OpenAI
/// (`anthropic-*` dropped), and a passed-through `x-api-key` moved to
/// `api-key`. A passed-through `Authorization: Bearer` stays: Azure
/// takes Entra ID tokens there.
pub(super) fn adopt_headers(headers: &mut HeaderMap, passthrough: bool) {
    let name = HeaderName::from_static(KEY_HEADER);
    super::openai::adopt_key(headers, passthrough, name, str::to_string);
}

/// Whether an error answer (of status 400) is the content filter refusing
/// the prompt: `error.code` `content_filter`, or the inner error's
/// `ResponsibleAIPolicyViolation`. Such a prompt is refused by the
/// policy wherever it goes; it is the client's answer, not a failure.
pub fn refuses_prompt(body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let error = &v["error"];
    error["code"].as_str() == Some(CONTENT_FILTER)
        || error["innererror"]["code"].as_str() == Some(POLICY_VIOLATION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{AUTHORIZATION, HeaderValue};

    #[test]
    fn versions_name_a_surface() {
        assert_eq!(Surface::from_version("v1"), Ok(Surface::V1));
        assert_eq!(
            Surface::from_version("2024-10-21"),
            Ok(Surface::Dated("2024-10-21".into()))
        );
        assert!(Surface::from_version("2025-04-01-preview").is_ok());
        for bad in [
            "",
            "v2",
            "2024-10",
            "2024/10/21",
            "latest",
            "2024-10-21-beta",
        ] {
            assert!(Surface::from_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_per_surface_and_api() {
        let v1 = Surface::V1;
        assert_eq!(
            v1.path(Some(Api::Responses), "gpt-5").as_deref(),
            Some("/openai/v1/responses")
        );
        assert_eq!(
            v1.path(Some(Api::Chat), "x").as_deref(),
            Some("/openai/v1/chat/completions")
        );
        assert_eq!(v1.path(None, "x").as_deref(), Some("/openai/v1/models"));
        assert_eq!(v1.path(Some(Api::Messages), "x"), None);
        let dated = Surface::Dated("2024-10-21".into());
        assert_eq!(
            dated.path(Some(Api::Chat), "my-gpt.4o").as_deref(),
            Some("/openai/deployments/my-gpt.4o/chat/completions?api-version=2024-10-21")
        );
        assert_eq!(
            dated.path(Some(Api::Chat), "a/b?c").as_deref(),
            Some("/openai/deployments/a%2Fb%3Fc/chat/completions?api-version=2024-10-21")
        );
        assert_eq!(
            dated.path(Some(Api::Responses), "x").as_deref(),
            Some("/openai/responses?api-version=2024-10-21")
        );
    }

    #[test]
    fn a_content_filter_refusal_is_known_by_either_code() {
        let outer = br#"{"error":{"code":"content_filter","message":"filtered","status":400}}"#;
        let inner =
            br#"{"error":{"code":null,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}"#;
        assert!(refuses_prompt(outer));
        assert!(refuses_prompt(inner));
        assert!(!refuses_prompt(br#"{"error":{"code":"invalid_value"}}"#));
        assert!(!refuses_prompt(b"not json"));
        assert!(!refuses_prompt(br#"{"error":"content_filter"}"#));
    }

    #[test]
    fn a_passed_through_key_moves_to_api_key_and_a_bearer_stays() {
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static(" k "));
        h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        adopt_headers(&mut h, true);
        assert_eq!(h.get(KEY_HEADER).map(|v| v.as_bytes()), Some(&b"k"[..]));
        assert!(h.get("anthropic-version").is_none() && h.get("x-api-key").is_none());
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer entra"));
        adopt_headers(&mut h, true);
        assert!(h.get(KEY_HEADER).is_none() && h.contains_key(AUTHORIZATION));
    }
}
