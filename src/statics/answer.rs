//! A found file's answer, header for header as nginx's static module
//! writes it: `ETag` as nginx's `"<mtime hex>-<length hex>"` (strong),
//! `Last-Modified`, `Accept-Ranges: bytes` on a whole file only; 304 with
//! the validators and no `Content-Type`/`Content-Length`; 206 with
//! `Content-Range`; 416 with `Content-Range: bytes */len`. No charset is
//! added (nginx's default). A precompressed sibling adds
//! `Content-Encoding`; a route that has siblings says
//! `Vary: Accept-Encoding` on every answer.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode};
use tokio::sync::OwnedSemaphorePermit;

use super::body::FileBody;
use super::preconditions::{self, Precondition};
use super::range::{self, Ranged};
use super::resolve::Opened;
use crate::config::StaticSettings;
use crate::respond::{ErrorShape, Payload, Rescue, error_response};

/// The answer to a GET (or, without its body, a HEAD) of `file`.
pub(super) fn file<B>(
    file: Opened,
    req: &Request<B>,
    head: bool,
    slot: OwnedSemaphorePermit,
    settings: &StaticSettings,
) -> Result<Response<Payload>, Rescue> {
    let modified = file.modified.and_then(preconditions::epoch_seconds);
    let etag = format!("\"{:x}-{:x}\"", modified.unwrap_or(0), file.len);
    let mut validators = HeaderMap::new();
    if let Some(t) = file.modified.filter(|_| modified.is_some())
        && let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(t))
    {
        validators.insert(header::LAST_MODIFIED, v);
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        validators.insert(header::ETAG, v);
    }
    let mut resp = match preconditions::evaluate(req.headers(), &etag, modified) {
        Precondition::Failed => return Err(Rescue::status(StatusCode::PRECONDITION_FAILED)),
        Precondition::NotModified => {
            let mut resp = Response::new(Payload::empty());
            *resp.status_mut() = StatusCode::NOT_MODIFIED;
            resp
        }
        Precondition::Proceed => match range::select(req.headers(), file.len, &etag, modified) {
            Ranged::Unsatisfiable => return Ok(unsatisfiable(req, file.len)),
            Ranged::Whole => {
                let mut resp = content(file, 0, None, head, slot);
                resp.headers_mut()
                    .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
                resp
            }
            Ranged::Part { start, end } => {
                let len = file.len;
                let mut resp = content(file, start, Some(end), head, slot);
                *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
                let range = format!("bytes {start}-{}/{len}", end.saturating_sub(1));
                if let Ok(v) = HeaderValue::from_str(&range) {
                    resp.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                resp
            }
        },
    };
    let h = resp.headers_mut();
    h.extend(validators);
    if let Some(cache) = &settings.cache_control {
        h.insert(header::CACHE_CONTROL, cache.clone());
    }
    if !settings.precompressed.is_empty() {
        h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    Ok(resp)
}

/// 200 or 206 with the file's bytes from `start` to `end` (its end when
/// `None`), or only the head for HEAD.
fn content(
    file: Opened,
    start: u64,
    end: Option<u64>,
    head: bool,
    slot: OwnedSemaphorePermit,
) -> Response<Payload> {
    let end = end.unwrap_or(file.len);
    let len = end.saturating_sub(start);
    let body = match head {
        true => Payload::empty(),
        false => Payload::Stream(Box::pin(FileBody::new(file.file, start, len, slot))),
    };
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(file.content_type),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    if let Some(encoding) = file.encoding {
        h.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static(encoding.name()),
        );
    }
    resp
}

/// 416 in the route's shape, with the length the client can ask within.
fn unsatisfiable<B>(req: &Request<B>, len: u64) -> Response<Payload> {
    let mut resp = error_response(
        ErrorShape::for_plain_route(req.headers()),
        StatusCode::RANGE_NOT_SATISFIABLE,
    );
    if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
        resp.headers_mut().insert(header::CONTENT_RANGE, v);
    }
    resp
}
