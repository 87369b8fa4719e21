//! The one place that renders a response weir generates itself.
//!
//! Every 4xx/5xx that does not come from an upstream (no route, body too
//! large, upstream unreachable or slow, shed) is built here, so its shape is
//! decided once: plain routes answer `text/plain`, or JSON when the client
//! prefers it. 429 and 503 always carry `Retry-After`. Messages are fixed
//! per status so that nothing about the upstream leaks to the client.

use bytes::Bytes;
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

/// The fixed, leak-free bodies for each status weir generates, as static
/// text and JSON, so rendering an error (a shed storm renders thousands a
/// second) allocates nothing for its body.
macro_rules! bodies {
    ($($status:ident => $code:literal, $msg:literal;)*) => {
        fn static_body(status: StatusCode, shape: ErrorShape) -> Option<&'static str> {
            Some(match (status, shape) {
                $(
                    (StatusCode::$status, ErrorShape::Text) => concat!($msg, "\n"),
                    (StatusCode::$status, ErrorShape::Json) => concat!(
                        "{\"error\":{\"status\":", $code, ",\"message\":\"", $msg, "\"}}\n"
                    ),
                )*
                _ => return None,
            })
        }
    };
}

bodies! {
    BAD_REQUEST => 400, "bad request";
    NOT_FOUND => 404, "no route for this host and path";
    METHOD_NOT_ALLOWED => 405, "method not allowed";
    REQUEST_TIMEOUT => 408, "request timed out";
    PAYLOAD_TOO_LARGE => 413, "request body too large";
    REQUEST_HEADER_FIELDS_TOO_LARGE => 431, "request header fields too large";
    TOO_MANY_REQUESTS => 429, "too many requests";
    BAD_GATEWAY => 502, "upstream unavailable";
    SERVICE_UNAVAILABLE => 503, "overloaded, retry later";
    GATEWAY_TIMEOUT => 504, "upstream timed out";
}

/// Render a generated error response.
pub fn error_response(shape: ErrorShape, status: StatusCode) -> Response<Payload> {
    let body = match static_body(status, shape) {
        Some(b) => Bytes::from_static(b.as_bytes()),
        // Any other status: its reason phrase, built once here.
        None => {
            let msg = status.canonical_reason().unwrap_or("error");
            Bytes::from(match shape {
                ErrorShape::Text => format!("{msg}\n"),
                ErrorShape::Json => format!(
                    "{{\"error\":{{\"status\":{},\"message\":\"{msg}\"}}}}\n",
                    status.as_u16()
                ),
            })
        }
    };
    let content_type = match shape {
        ErrorShape::Text => "text/plain; charset=utf-8",
        ErrorShape::Json => "application/json",
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
        let r = error_response(ErrorShape::Json, StatusCode::IM_A_TEAPOT);
        assert_eq!(
            body(r).await,
            "{\"error\":{\"status\":418,\"message\":\"I'm a teapot\"}}\n"
        );
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
