//! The one place that renders a response weir generates itself.
//!
//! Every 4xx/5xx that does not come from an upstream (no route, body too
//! large, upstream unreachable or slow, shed) is built here, so its shape is
//! decided once: plain routes answer `text/plain`, or JSON when the client
//! prefers it, with messages fixed per status so that nothing about the
//! upstream leaks to the client; LLM routes answer in their protocol's own
//! error envelope (the wire module's), with the error type its SDKs map to
//! an exception and a request id header; a gRPC request (any route, by its
//! `content-type`) is answered as gRPC servers answer: HTTP 200 with
//! `grpc-status` and `grpc-message` in a trailers-only response. 429 and
//! 503 always carry `Retry-After`, decided here and nowhere else.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::Payload;
use weir_wire::Protocol;

/// The longest `Retry-After` weir sends: the Anthropic SDK ignores larger
/// values, and the OpenAI SDK gives up above 120 s.
pub(crate) const MAX_RETRY_AFTER: u64 = 60;

/// How a generated error is written for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorShape {
    Text,
    Json,
    /// The protocol's own envelope and request id header.
    Llm(Protocol),
    /// A gRPC call's: HTTP 200, the status in `grpc-status`, no body.
    Grpc,
}

impl ErrorShape {
    /// A plain route answers a gRPC call in gRPC, and otherwise in JSON
    /// only when the client asks for it.
    pub(crate) fn for_plain_route(request_headers: &HeaderMap) -> Self {
        if is_grpc(request_headers) {
            return ErrorShape::Grpc;
        }
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

/// Whether a request is a gRPC call: `application/grpc`, with or without
/// a `+proto`/`+json` suffix or the gRPC-Web variants.
pub(crate) fn is_grpc(request_headers: &HeaderMap) -> bool {
    request_headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The gRPC status codes weir answers with (the numbers of gRPC's
/// `statuscodes.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GrpcCode(pub(crate) u8);

impl GrpcCode {
    pub(crate) const UNKNOWN: GrpcCode = GrpcCode(2);
    pub(crate) const DEADLINE_EXCEEDED: GrpcCode = GrpcCode(4);
    pub(crate) const PERMISSION_DENIED: GrpcCode = GrpcCode(7);
    pub(crate) const RESOURCE_EXHAUSTED: GrpcCode = GrpcCode(8);
    pub(crate) const UNIMPLEMENTED: GrpcCode = GrpcCode(12);
    pub(crate) const INTERNAL: GrpcCode = GrpcCode(13);
    pub(crate) const UNAVAILABLE: GrpcCode = GrpcCode(14);
    pub(crate) const UNAUTHENTICATED: GrpcCode = GrpcCode(16);

    /// The code for a status weir would have answered with, after gRPC's
    /// own HTTP-to-gRPC table where it has the status, with two of weir's
    /// own: a timeout is DEADLINE_EXCEEDED (the client's deadline or the
    /// route's passed), and a body over the limit is RESOURCE_EXHAUSTED
    /// (what gRPC servers answer for a message too large). The caller
    /// knows finer (a shed 503 is RESOURCE_EXHAUSTED, not UNAVAILABLE).
    pub(crate) fn for_status(status: StatusCode) -> Self {
        match status.as_u16() {
            400 => GrpcCode::INTERNAL,
            401 => GrpcCode::UNAUTHENTICATED,
            403 => GrpcCode::PERMISSION_DENIED,
            404 | 405 | 501 => GrpcCode::UNIMPLEMENTED,
            408 | 504 => GrpcCode::DEADLINE_EXCEEDED,
            413 | 429 | 431 => GrpcCode::RESOURCE_EXHAUSTED,
            502 | 503 => GrpcCode::UNAVAILABLE,
            _ => GrpcCode::UNKNOWN,
        }
    }
}

/// A gRPC error weir generates: a trailers-only response (HTTP 200, one
/// HEADERS frame that ends the stream) with `grpc-status` and the status's
/// fixed message in `grpc-message`. A retry hint goes out as
/// `grpc-retry-pushback-ms`, which gRPC's retry policy honours.
pub(crate) fn grpc_response(
    code: GrpcCode,
    status: StatusCode,
    retry_after: Option<u64>,
) -> Response<Payload> {
    let message = static_message(status)
        .or(status.canonical_reason())
        .unwrap_or("error");
    let mut resp = Response::new(Payload::empty());
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert("grpc-status", HeaderValue::from(u16::from(code.0)));
    if let Ok(v) = HeaderValue::from_str(&grpc_message(message)) {
        h.insert("grpc-message", v);
    }
    if let Some(seconds) = retry_after {
        let ms = seconds.clamp(1, MAX_RETRY_AFTER).saturating_mul(1000);
        h.insert("grpc-retry-pushback-ms", HeaderValue::from(ms));
    }
    resp
}

/// `grpc-message` is percent-encoded: printable ASCII but `%` as is,
/// every other byte as `%XX` (gRPC's PROTOCOL-HTTP2.md).
fn grpc_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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

        fn static_message(status: StatusCode) -> Option<&'static str> {
            Some(match status {
                $(StatusCode::$status => $msg,)*
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
    TOO_MANY_REQUESTS => 429, "too many requests";
    BAD_GATEWAY => 502, "upstream unavailable";
    SERVICE_UNAVAILABLE => 503, "overloaded, retry later";
    GATEWAY_TIMEOUT => 504, "upstream timed out";
}

/// The largest `retry-after-ms` the official SDKs honour (they require
/// less than 60,000).
const SDK_MAX_HINT_MS: u64 = 59_999;

/// Render a generated error response with the status's fixed message.
pub(crate) fn error_response(shape: ErrorShape, status: StatusCode) -> Response<Payload> {
    render(shape, status, None, None)
}

/// Render a generated error. `message` is used by the LLM shapes (it is
/// weir's own words, never an upstream's); plain shapes keep the fixed
/// message per status. `retry_after` says when the client may send the
/// request again; a 429 or 503 without one says 1 s. On LLM routes a retry
/// hint of at most [`MAX_RETRY_AFTER`] also goes out as `retry-after-ms`
/// and `x-should-retry: true`, which the official SDKs honour; a longer
/// one (only [`Rescue::retry_after_long`] gives one) with
/// `x-should-retry: false`.
pub(crate) fn render(
    shape: ErrorShape,
    status: StatusCode,
    message: Option<&str>,
    retry_after: Option<u64>,
) -> Response<Payload> {
    let mut resp = match shape {
        ErrorShape::Text | ErrorShape::Json => plain(shape, status),
        ErrorShape::Llm(protocol) => llm(protocol, status, message),
        ErrorShape::Grpc => {
            return grpc_response(GrpcCode::for_status(status), status, retry_after);
        }
    };
    let retry_after = retry_after
        .or(
            (status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE)
                .then_some(1),
        )
        .map(|s| s.max(1));
    if let Some(seconds) = retry_after {
        let h = resp.headers_mut();
        h.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        if matches!(shape, ErrorShape::Llm(_)) {
            if seconds <= MAX_RETRY_AFTER {
                // The SDKs take a hint only below 60 s; at 60 s they fall
                // back to their own short back-off.
                let ms = seconds.saturating_mul(1000).min(SDK_MAX_HINT_MS);
                h.insert("retry-after-ms", HeaderValue::from(ms));
                h.insert("x-should-retry", HeaderValue::from_static("true"));
            } else {
                // Only a long wait helps (a spent daily budget): the SDKs
                // must not retry on their own back-off meanwhile.
                h.insert("x-should-retry", HeaderValue::from_static("false"));
            }
        }
    } else if status == StatusCode::NOT_IMPLEMENTED && matches!(shape, ErrorShape::Llm(_)) {
        // The SDKs retry every status >= 500 unless told not to; nothing
        // weir cannot do now will it do on a retry.
        resp.headers_mut()
            .insert("x-should-retry", HeaderValue::from_static("false"));
    }
    resp
}

/// A request id for a response weir generates: unique per process, in the
/// `req_…` form clients log.
pub(crate) fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32)
    });
    // splitmix64: distinct counters give distinct, unordered-looking ids.
    let mut z = seed.wrapping_add(
        NEXT.fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("req_weir_{:016x}", z ^ (z >> 31))
}

fn llm(protocol: Protocol, status: StatusCode, message: Option<&str>) -> Response<Payload> {
    let message = message
        .or_else(|| static_message(status))
        .or(status.canonical_reason())
        .unwrap_or("error");
    let id = request_id();
    let (body, id_header) = protocol.error_body(status, message, &id);
    let mut resp = Response::new(Payload::text(body + "\n"));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(v) = HeaderValue::from_str(&id) {
        h.insert(id_header, v);
    }
    if let Some((name, value)) = protocol.error_type(status) {
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}

fn plain(shape: ErrorShape, status: StatusCode) -> Response<Payload> {
    let body = match static_body(status, shape) {
        Some(b) => Bytes::from_static(b.as_bytes()),
        // Any other status: its reason phrase, built once here.
        None => {
            let msg = status.canonical_reason().unwrap_or("error");
            Bytes::from(match shape {
                ErrorShape::Json => format!(
                    "{{\"error\":{{\"status\":{},\"message\":\"{msg}\"}}}}\n",
                    status.as_u16()
                ),
                _ => format!("{msg}\n"),
            })
        }
    };
    let content_type = match shape {
        ErrorShape::Json => "application/json",
        _ => "text/plain; charset=utf-8",
    };
    let mut resp = Response::new(Payload::text(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body;
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

    #[tokio::test]
    async fn llm_shapes_use_the_protocol_envelope_and_a_request_id() {
        let r = render(
            ErrorShape::Llm(Protocol::Anthropic),
            StatusCode::SERVICE_UNAVAILABLE,
            Some("model \"x\" is busy"),
            None,
        );
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        assert_eq!(r.headers()["x-should-retry"], "true");
        assert!(
            r.headers()["request-id"]
                .to_str()
                .expect("id")
                .starts_with("req_")
        );
        let v: serde_json::Value = serde_json::from_str(&body(r).await).expect("json");
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "overloaded_error");
        assert_eq!(v["error"]["message"], "model \"x\" is busy");
        assert!(v["request_id"].as_str().expect("id").starts_with("req_"));

        let r = render(
            ErrorShape::Llm(Protocol::OpenAi),
            StatusCode::UNAUTHORIZED,
            None,
            None,
        );
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
        assert!(r.headers().contains_key("x-request-id"));
        let v: serde_json::Value = serde_json::from_str(&body(r).await).expect("json");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], "invalid_api_key");
        assert!(v["error"]["param"].is_null());
        assert_ne!(request_id(), request_id());
        let limited = render(
            ErrorShape::Llm(Protocol::Anthropic),
            StatusCode::TOO_MANY_REQUESTS,
            None,
            Some(60),
        );
        assert_eq!(limited.headers()[header::RETRY_AFTER], "60");
        assert_eq!(
            limited.headers()["retry-after-ms"],
            "59999",
            "below the SDKs' 60 s"
        );
        let unsupported = render(
            ErrorShape::Llm(Protocol::OpenAi),
            StatusCode::NOT_IMPLEMENTED,
            None,
            None,
        );
        assert_eq!(unsupported.headers()["x-should-retry"], "false");
        let spent = render(
            ErrorShape::Llm(Protocol::OpenAi),
            StatusCode::TOO_MANY_REQUESTS,
            None,
            Some(7200),
        );
        assert_eq!(spent.headers()[header::RETRY_AFTER], "7200");
        assert_eq!(spent.headers()["x-should-retry"], "false");
        assert!(spent.headers().get("retry-after-ms").is_none());
    }

    #[tokio::test]
    async fn grpc_calls_get_a_trailers_only_answer_with_the_status() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc+proto"),
        );
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(ErrorShape::for_plain_route(&h), ErrorShape::Grpc);
        let r = render(ErrorShape::Grpc, StatusCode::NOT_FOUND, None, None);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-type"], "application/grpc");
        assert_eq!(r.headers()["grpc-status"], "12");
        assert_eq!(
            r.headers()["grpc-message"],
            "no route for this host and path"
        );
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
        assert!(r.body().is_end_stream(), "trailers-only: no body at all");
        let r = render(
            ErrorShape::Grpc,
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            Some(3),
        );
        assert_eq!(r.headers()["grpc-status"], "14");
        assert_eq!(r.headers()["grpc-retry-pushback-ms"], "3000");
        assert_eq!(body(r).await, "");
        assert_eq!(grpc_message("50% off\n\u{e9}"), "50%25 off%0A%C3%A9");
        for (status, code) in [
            (400, 13),
            (401, 16),
            (403, 7),
            (408, 4),
            (413, 8),
            (429, 8),
            (502, 14),
            (504, 4),
            (418, 2),
        ] {
            let status = StatusCode::from_u16(status).expect("status");
            assert_eq!(GrpcCode::for_status(status), GrpcCode(code), "{status}");
        }
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
