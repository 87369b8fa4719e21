//! The one place that renders a response weir generates itself.
//!
//! Every 4xx/5xx that does not come from an upstream (no route, body too
//! large, upstream unreachable or slow, shed) is built here, so its shape is
//! decided once: plain routes answer `text/plain`, or JSON when the client
//! prefers it. 429 and 503 always carry `Retry-After`. Messages are fixed
//! per status so that nothing about the upstream leaks to the client.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::Payload;

/// How a generated error is written for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorShape {
    Text,
    Json,
}

impl ErrorShape {
    /// A plain route answers in JSON only when the client asks for it.
    pub fn for_plain_route(request_headers: &HeaderMap) -> Self {
        let wants_json = request_headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("application/json"));
        if wants_json {
            ErrorShape::Json
        } else {
            ErrorShape::Text
        }
    }
}

/// The fixed, leak-free message for each status weir generates.
fn message(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad request",
        StatusCode::NOT_FOUND => "no route for this host and path",
        StatusCode::METHOD_NOT_ALLOWED => "method not allowed",
        StatusCode::REQUEST_TIMEOUT => "request timed out",
        StatusCode::PAYLOAD_TOO_LARGE => "request body too large",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "request header fields too large",
        StatusCode::TOO_MANY_REQUESTS => "too many requests",
        StatusCode::BAD_GATEWAY => "upstream unavailable",
        StatusCode::SERVICE_UNAVAILABLE => "overloaded, retry later",
        StatusCode::GATEWAY_TIMEOUT => "upstream timed out",
        _ => status.canonical_reason().unwrap_or("error"),
    }
}

/// Render a generated error response.
pub fn error_response(shape: ErrorShape, status: StatusCode) -> Response<Payload> {
    let msg = message(status);
    let (content_type, body) = match shape {
        ErrorShape::Text => ("text/plain; charset=utf-8", format!("{msg}\n")),
        ErrorShape::Json => (
            "application/json",
            format!(
                "{{\"error\":{{\"status\":{},\"message\":\"{msg}\"}}}}\n",
                status.as_u16()
            ),
        ),
    };
    let mut resp = Response::new(Payload::text(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
        h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body(r: Response<Payload>) -> String {
        let bytes = r.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf8")
    }

    #[tokio::test]
    async fn shapes_and_retry_after() {
        let r = error_response(ErrorShape::Json, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(
            body(r).await,
            "{\"error\":{\"status\":503,\"message\":\"overloaded, retry later\"}}\n"
        );
        let r = error_response(ErrorShape::Text, StatusCode::BAD_GATEWAY);
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
        assert_eq!(body(r).await, "upstream unavailable\n");
    }

    #[test]
    fn json_only_when_asked() {
        let mut h = HeaderMap::new();
        assert_eq!(ErrorShape::for_plain_route(&h), ErrorShape::Text);
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, */*"),
        );
        assert_eq!(ErrorShape::for_plain_route(&h), ErrorShape::Json);
    }
}
