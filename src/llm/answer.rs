//! Answers relayed whole: an upstream's response passed on as it is, or
//! read (bounded) and rewritten into the client's API; error bodies read
//! to be relayed later.

use bytes::Bytes;
use http::Response;
use http::StatusCode;
use http::header::{self, HeaderValue};

use super::body::{Answer, ByteBudget, Prefixed, ReadError, read_answer};
use super::framed::UpstreamBody;
use super::outgoing::{Outgoing, Translation};
use crate::respond::{Payload, Rescue};
use crate::upstream::headers::remove_hop_by_hop;

pub(crate) use super::framed::read_error_body;

/// Relay an upstream response as it is (streaming its body).
pub(crate) fn relay_verbatim(
    resp: Response<UpstreamBody>,
    served_by: Option<&str>,
) -> Response<Payload> {
    let mut resp = resp.map(UpstreamBody::into_payload);
    remove_hop_by_hop(resp.headers_mut());
    served_by_header(&mut resp, served_by);
    resp
}

pub(crate) fn served_by_header(resp: &mut Response<Payload>, served_by: Option<&str>) {
    if let Some(name) = served_by
        && let Ok(v) = HeaderValue::from_str(name)
    {
        resp.headers_mut().insert("x-weir-upstream", v);
    }
}

pub(crate) fn is_event_stream(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

pub(crate) fn json_content(headers: &mut http::HeaderMap) {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.remove(header::CONTENT_LENGTH);
}

/// The most a whole (non-streamed) answer may be: it is read whole to be
/// translated. A real answer is a few KiB.
const MAX_WHOLE_BODY: usize = 32 * 1024 * 1024;

/// The most of a native whole answer held for its usage: a larger one is
/// relayed as it streams, uncounted.
const MAX_COUNTED_BODY: usize = 1024 * 1024;

/// A whole answer read under the byte budget, to read its usage and to
/// translate it: one to translate must be held whole (at most 32 MiB);
/// a native one past 1 MiB or the budget comes back to be streamed on.
pub(crate) async fn read_whole(
    body: UpstreamBody,
    declared: Option<u64>,
    budget: &ByteBudget,
    translated: bool,
    timeout: std::time::Duration,
) -> Result<Answer, Rescue> {
    let limit = if translated {
        MAX_WHOLE_BODY
    } else {
        MAX_COUNTED_BODY
    };
    let read = read_answer(body, declared, budget, limit, translated);
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(read)) => Ok(read),
        Ok(Err(ReadError::OverBudget)) => Err(Rescue::shed("llm_body_budget")),
        _ => Err(Rescue::status(StatusCode::BAD_GATEWAY)
            .saying("the upstream's answer could not be read")),
    }
}

/// A native answer too large to hold: what was read, then the rest.
pub(crate) fn relay_streaming(
    mut parts: http::response::Parts,
    head: Bytes,
    rest: UpstreamBody,
    served_by: Option<&str>,
) -> Response<Payload> {
    remove_hop_by_hop(&mut parts.headers);
    let body: crate::respond::StreamBody = Box::pin(Prefixed::new(head, rest));
    let mut resp = Response::from_parts(parts, Payload::Stream(body));
    served_by_header(&mut resp, served_by);
    resp
}

/// A whole answer read by [`read_whole`], relayed as the upstream sent it.
pub(crate) fn relay_whole(
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
pub(crate) fn translate_whole(
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
