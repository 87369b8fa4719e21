//! Answers relayed whole: an upstream's response passed on as it is, or
//! read (bounded) and rewritten into the client's API; error bodies read
//! to be relayed later.

use bytes::Bytes;
use http::Response;
use http::StatusCode;
use http::header::{self, HeaderValue};
use http_body_util::{BodyExt, Limited};

use super::outgoing::{Outgoing, Translation};
use crate::proxy::headers::remove_hop_by_hop;
use crate::respond::{Payload, Rescue};

/// An error body is read whole to be relayed later; bounded (provider
/// error bodies are a few hundred bytes).
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// Relay an upstream response as it is (streaming its body).
pub fn relay_verbatim(
    resp: Response<hyper::body::Incoming>,
    served_by: Option<&str>,
) -> Response<Payload> {
    let mut resp = resp.map(Payload::Upstream);
    remove_hop_by_hop(resp.headers_mut());
    served_by_header(&mut resp, served_by);
    resp
}

pub fn served_by_header(resp: &mut Response<Payload>, served_by: Option<&str>) {
    if let Some(name) = served_by
        && let Ok(v) = HeaderValue::from_str(name)
    {
        resp.headers_mut().insert("x-weir-upstream", v);
    }
}

pub fn is_event_stream(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

pub fn json_content(headers: &mut http::HeaderMap) {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.remove(header::CONTENT_LENGTH);
}

/// The most a whole (non-streamed) answer may be: it is read whole for its
/// usage and for translation.
const MAX_WHOLE_BODY: usize = 32 * 1024 * 1024;

/// A whole answer read (bounded), to read its usage and to translate it.
pub async fn read_whole(
    body: hyper::body::Incoming,
    timeout: std::time::Duration,
) -> Result<Bytes, Rescue> {
    let read = Limited::new(body, MAX_WHOLE_BODY).collect();
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        _ => Err(Rescue::status(StatusCode::BAD_GATEWAY)
            .saying("the upstream's answer could not be read")),
    }
}

/// A whole answer read by [`read_whole`], relayed as the upstream sent it.
pub fn relay_whole(
    mut parts: http::response::Parts,
    bytes: Bytes,
    served_by: Option<&str>,
) -> Response<Payload> {
    remove_hop_by_hop(&mut parts.headers);
    let mut resp = Response::from_parts(parts, Payload::text(bytes));
    served_by_header(&mut resp, served_by);
    resp
}

/// A whole answer from an upstream of another API, in the client's: an
/// error keeps its status in the client's envelope; a success is
/// assembled into the client's object.
pub fn translate_whole(
    translation: Translation,
    mut parts: http::response::Parts,
    bytes: Bytes,
    request: &Outgoing,
    served_by: Option<&str>,
) -> Result<Response<Payload>, Rescue> {
    let translated = if parts.status.is_success() {
        let model = request.model.as_deref().unwrap_or_default();
        (translation.pair)
            .response(&bytes, model, &translation.names)
            .ok_or_else(|| {
                Rescue::status(StatusCode::BAD_GATEWAY)
                    .saying("the upstream's answer could not be translated")
            })?
    } else {
        translation.pair.error(parts.status, &bytes)
    };
    remove_hop_by_hop(&mut parts.headers);
    json_content(&mut parts.headers);
    let mut resp = Response::from_parts(parts, Payload::text(translated));
    served_by_header(&mut resp, served_by);
    Ok(resp)
}

pub async fn read_error_body(body: hyper::body::Incoming, timeout: std::time::Duration) -> Bytes {
    let read = Limited::new(body, MAX_ERROR_BODY).collect();
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    }
}
