//! Error pages: a route's file served instead of the body weir generates
//! for a 4xx or 5xx (through [`super::Rescue`]), and, with
//! `intercept_upstream_errors`, instead of an upstream's error body. The
//! status stays; the page was read with the config, so serving it is a
//! clone of its bytes.

use http::Response;
use http::header::{self, HeaderValue};

use super::Payload;
use crate::config::{ErrorPage, ErrorPages};

/// `resp` (weir's own answer) with the page as its body: its headers
/// (`Retry-After`, `WWW-Authenticate`, `Connection`) kept.
pub(crate) fn serve(resp: Response<Payload>, page: &ErrorPage) -> Response<Payload> {
    let (mut parts, _generated) = resp.into_parts();
    parts
        .headers
        .insert(header::CONTENT_TYPE, page.content_type.clone());
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Payload::text(page.body.clone()))
}

/// An upstream's error answer replaced by the route's page for its
/// status, when it has one (nginx's `proxy_intercept_errors`). Of the
/// upstream's headers only those the client needs to act on the status
/// are kept; its body is dropped unread.
pub(crate) fn intercept(resp: Response<Payload>, pages: &ErrorPages) -> Response<Payload> {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let Some(page) = pages.for_status(status.as_u16()) else {
        return resp;
    };
    let mut out = Response::new(Payload::text(page.body.clone()));
    *out.status_mut() = status;
    let h = out.headers_mut();
    for name in [header::WWW_AUTHENTICATE, header::RETRY_AFTER, header::ALLOW] {
        for v in resp.headers().get_all(&name) {
            h.append(name.clone(), v.clone());
        }
    }
    h.insert(header::CONTENT_TYPE, page.content_type.clone());
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    out
}
