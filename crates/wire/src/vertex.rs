//! Claude on Google Vertex AI: the Anthropic Messages API as Vertex serves
//! it from a project and region. The bodies, streams and most errors are
//! Anthropic's ([`super::anthropic`]); what is Vertex's own is here:
//!
//! - where a request goes ([`Place`]): `POST {base}/v1/projects/{project}/
//!   locations/{region}/publishers/anthropic/models/{model}:rawPredict`
//!   (`:streamRawPredict` for a stream), the model id in the path
//!   (`claude-sonnet-4-5@20250929`), and `…/models/count-tokens:rawPredict`
//!   for token counting; the base is `https://{region}-aiplatform.googleapis.com`
//!   (`https://aiplatform.googleapis.com` for the `global` region);
//! - the body ([`request_body`]): the Messages body without `model` and
//!   with `anthropic_version: "vertex-2023-10-16"` (count-tokens keeps its
//!   `model`, as Vertex asks);
//! - the credential: an OAuth 2 access token as `Authorization: Bearer`
//!   (weir gets it from a service account key or the metadata server; no
//!   client credential is ever passed through);
//! - Google's error envelope (`{"error":{"code":429,"message":…,
//!   "status":"RESOURCE_EXHAUSTED","details":[…]}}`), read into
//!   Anthropic's ([`anthropic_error`]) with its `RetryInfo` as a retry hint
//!   ([`retry_hint`]); errors Vertex relays from the model in Anthropic's
//!   own envelope pass unchanged.

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName};
use serde_json::{Map, Value};

/// The `anthropic_version` Vertex requires in the body.
pub const VERSION: &str = "vertex-2023-10-16";
/// The region whose endpoint has no region prefix.
pub const GLOBAL: &str = "global";
/// The OAuth 2 scope an access token for Vertex must carry.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The model segment of the token-counting endpoint.
const COUNT_TOKENS_MODEL: &str = "count-tokens";
/// A stream answer is asked of this method, a whole one of `rawPredict`.
const STREAM_METHOD: &str = "streamRawPredict";
const WHOLE_METHOD: &str = "rawPredict";

/// The base URL of a region's endpoint.
pub fn base_url(region: &str) -> String {
    if region == GLOBAL {
        "https://aiplatform.googleapis.com".to_string()
    } else {
        format!("https://{region}-aiplatform.googleapis.com")
    }
}

/// Whether `name` can be a Google Cloud project id (6–30 lowercase
/// letters, digits and `-`, starting with a letter) or a region
/// (`us-east5`, `europe-west1`, `global`): what can go in the path as is.
pub fn is_path_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An upstream's project and region: where its paths point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub project: String,
    pub region: String,
}

impl Place {
    /// The path of a Messages request for `model` (streamed or not), or
    /// of token counting (`model` None).
    pub fn path(&self, model: Option<&str>, stream: bool) -> String {
        let (model, method) = match model {
            Some(m) if stream => (path_segment(m), STREAM_METHOD),
            Some(m) => (path_segment(m), WHOLE_METHOD),
            None => (COUNT_TOKENS_MODEL.to_string(), WHOLE_METHOD),
        };
        format!(
            "/v1/projects/{}/locations/{}/publishers/anthropic/models/{model}:{method}",
            self.project, self.region
        )
    }
}

/// A model id as one path segment: letters, digits, `-`, `_`, `.` and `@`
/// as they are; anything else (a client's `/`, `:` or `?`) percent-encoded,
/// so it can never leave its segment or name another method.
fn path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'@') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A Messages request made Vertex's: what it is sent as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub body: Bytes,
    /// The model, which goes in the path.
    pub model: String,
    pub stream: bool,
}

/// Why a body cannot go to Vertex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfit(pub &'static str);

/// The Messages `body` (or, with `count`, a count_tokens body) as Vertex
/// takes it: `model` taken out to the path (a count keeps it, as Vertex's
/// count-tokens asks) and `anthropic_version` set to [`VERSION`] (on both,
/// as Anthropic's Vertex SDK sends them); the rest of the body as sent,
/// in its order.
pub fn request_body(body: &[u8], count: bool) -> Result<Request, Unfit> {
    let mut v: Map<String, Value> =
        serde_json::from_slice(body).map_err(|_| Unfit("the request body is not a JSON object"))?;
    let model = match v.get("model").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => return Err(Unfit("the request names no model")),
    };
    let stream = v.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !count {
        v.remove("model");
    }
    v.insert("anthropic_version".into(), VERSION.into());
    let body = serde_json::to_vec(&v).map_err(|_| Unfit("the request body cannot be written"))?;
    Ok(Request {
        body: body.into(),
        model,
        stream,
    })
}

/// A request arriving from any client: Vertex takes weir's access token
/// in `Authorization` and nothing of the client's credential; `openai-*`
/// headers are another vendor's and `anthropic-version` is in the body.
/// `anthropic-beta` stays: Vertex reads it.
pub(super) fn adopt_headers(headers: &mut HeaderMap) {
    super::remove_prefixed(headers, "openai-");
    headers.remove(AUTHORIZATION);
    headers.remove(HeaderName::from_static(super::anthropic::KEY_HEADER));
    headers.remove("anthropic-version");
}

/// Google's error envelope, as far as weir reads it.
fn google_error(body: &[u8]) -> Option<(u16, String, String, Value)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error")?.as_object()?;
    // Anthropic's envelope has `type` at the top; Google's never does.
    if v.get("type").is_some() {
        return None;
    }
    let status = e.get("status")?.as_str()?.to_string();
    let code = e.get("code").and_then(Value::as_u64).unwrap_or(0);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let details = e.get("details").cloned().unwrap_or(Value::Null);
    Some((u16::try_from(code).unwrap_or(0), status, message, details))
}

/// The Anthropic `error.type` for a Google status name, where the status
/// code alone would say less (`RESOURCE_EXHAUSTED` is a rate limit).
fn error_type(status: StatusCode, google: &str) -> &'static str {
    match google {
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => "invalid_request_error",
        "UNAUTHENTICATED" => "authentication_error",
        "PERMISSION_DENIED" => "permission_error",
        "NOT_FOUND" => "not_found_error",
        "RESOURCE_EXHAUSTED" => "rate_limit_error",
        "UNAVAILABLE" => "overloaded_error",
        "DEADLINE_EXCEEDED" | "INTERNAL" | "UNKNOWN" => "api_error",
        _ => super::anthropic::error_type(status),
    }
}

/// An error answer of Vertex's in Anthropic's envelope: Google's envelope
/// read into it (the message kept, the type from Google's status name);
/// None when the body already is Anthropic's (an error of the model's,
/// relayed by Vertex) or is no error envelope at all.
pub fn anthropic_error(status: StatusCode, body: &[u8]) -> Option<Bytes> {
    let (_, google, message, _) = google_error(body)?;
    let message = if message.is_empty() {
        format!("Vertex AI answered {google}")
    } else {
        format!("Vertex AI: {message}")
    };
    let kind = error_type(status, &google);
    Some(super::anthropic::typed_error_body(kind, &message).into())
}

/// The longest retry hint taken from an error body.
const MAX_HINT: Duration = Duration::from_secs(3600);

/// How long Google's error asks the client to wait: its
/// `google.rpc.RetryInfo` detail's `retryDelay` (`"30s"`, `"1.5s"`).
pub fn retry_hint(body: &[u8]) -> Option<Duration> {
    let (_, _, _, details) = google_error(body)?;
    let delay = details.as_array()?.iter().find_map(|d| {
        let kind = d.get("@type")?.as_str()?;
        kind.ends_with("google.rpc.RetryInfo")
            .then(|| d.get("retryDelay")?.as_str())
            .flatten()
    })?;
    let secs: f64 = delay.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::from_secs_f64(secs.min(MAX_HINT.as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    #[test]
    fn paths_name_the_project_region_model_and_method() {
        let place = Place {
            project: "my-proj".into(),
            region: "us-east5".into(),
        };
        assert_eq!(
            place.path(Some("claude-sonnet-4-5@20250929"), false),
            "/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
        );
        assert!(
            place
                .path(Some("m"), true)
                .ends_with("/models/m:streamRawPredict")
        );
        assert!(
            place
                .path(None, false)
                .ends_with("/models/count-tokens:rawPredict")
        );
        // A client's model id never leaves its segment or names a method.
        assert!(
            place
                .path(Some("../x:streamRawPredict?a"), false)
                .ends_with("/models/..%2Fx%3AstreamRawPredict%3Fa:rawPredict")
        );
        assert_eq!(base_url("global"), "https://aiplatform.googleapis.com");
        assert_eq!(
            base_url("europe-west1"),
            "https://europe-west1-aiplatform.googleapis.com"
        );
        assert!(is_path_name("my-proj-123") && is_path_name("global"));
        for bad in ["", "My-Proj", "a/b", "1abc", "us_east5", "x y"] {
            assert!(!is_path_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_body_loses_its_model_and_gains_vertex_version() {
        let r = request_body(
            br#"{"model":"claude-x@1","max_tokens":5,"stream":true,"anthropic_version":"2023-06-01","messages":[]}"#,
            false,
        )
        .expect("fits");
        assert_eq!((r.model.as_str(), r.stream), ("claude-x@1", true));
        let v: Value = serde_json::from_slice(&r.body).expect("json");
        assert!(v.get("model").is_none());
        assert_eq!(v["anthropic_version"], VERSION);
        assert_eq!(v["max_tokens"], 5);
        let count = request_body(br#"{"model":"m","messages":[]}"#, true).expect("fits");
        let v: Value = serde_json::from_slice(&count.body).expect("json");
        assert_eq!(v["model"], "m");
        assert_eq!(v["anthropic_version"], VERSION);
        assert!(!count.stream);
        assert!(request_body(b"[1]", false).is_err());
        assert!(request_body(br#"{"messages":[]}"#, false).is_err());
        assert!(request_body(br#"{"model":7}"#, false).is_err());
    }

    #[test]
    fn googles_errors_read_into_anthropics_and_anthropics_pass() {
        let limited = br#"{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}"#;
        let out = anthropic_error(StatusCode::TOO_MANY_REQUESTS, limited).expect("google's");
        let v: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("Quota exceeded"))
        );
        assert_eq!(retry_hint(limited), Some(Duration::from_secs(7)));
        let cases = [
            (400, "INVALID_ARGUMENT", "invalid_request_error"),
            (401, "UNAUTHENTICATED", "authentication_error"),
            (403, "PERMISSION_DENIED", "permission_error"),
            (503, "UNAVAILABLE", "overloaded_error"),
            (404, "NOT_FOUND", "not_found_error"),
        ];
        for (code, status, kind) in cases {
            let body =
                format!(r#"{{"error":{{"code":{code},"message":"m","status":"{status}"}}}}"#);
            let s = StatusCode::from_u16(code).expect("status");
            let v: Value =
                serde_json::from_slice(&anthropic_error(s, body.as_bytes()).expect("google's"))
                    .expect("json");
            assert_eq!(v["error"]["type"], kind, "{status}");
        }
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            anthropic_error(StatusCode::from_u16(529).expect("529"), anthropic),
            None
        );
        assert_eq!(anthropic_error(StatusCode::BAD_GATEWAY, b"<html>"), None);
        assert_eq!(
            retry_hint(br#"{"error":{"status":"RESOURCE_EXHAUSTED"}}"#),
            None
        );
        let bad = br#"{"error":{"status":"X","details":[{"@type":"google.rpc.RetryInfo","retryDelay":"-1s"}]}}"#;
        assert_eq!(retry_hint(bad), None);
    }

    #[test]
    fn no_client_credential_reaches_vertex() {
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("sk-ant"));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer client"));
        h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        h.insert("anthropic-beta", HeaderValue::from_static("context-1m"));
        h.insert("openai-beta", HeaderValue::from_static("x"));
        adopt_headers(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("anthropic-beta"));
    }
}
