//! Static routes (`kind = "static"`): files from a directory, answered
//! as nginx's static module answers them.
//!
//! A request goes down this module in order: the method (GET and HEAD;
//! 405 with `Allow` otherwise), the path as a file path under the root
//! ([`path`]: decoded, hidden names refused), one of the process's file
//! slots ([`FileSlots`]: a full set is 503, never a queue), the lookup on
//! a blocking thread ([`resolve`]: canonical paths checked against the
//! root, the index, the fallback, a precompressed sibling), then the
//! answer ([`answer`]: validators, preconditions, one range) with the file
//! streamed in 64 KiB reads off the serving threads ([`body`]), the slot
//! held until the body ends or is dropped.

mod answer;
mod body;
mod encoding;
mod path;
mod preconditions;
mod range;
mod resolve;

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::{RouteConfig, StaticSettings};
use crate::respond::{ErrorShape, Payload, Rescue, error_response};
use resolve::Found;

/// The process's bound on files static routes hold open: each request
/// takes one slot from its lookup until its body has been sent (or the
/// client has gone), so a flood of static requests holds at most this
/// many descriptors and blocking threads.
#[derive(Clone)]
pub(crate) struct FileSlots(Arc<Semaphore>);

impl FileSlots {
    pub(crate) fn new(max: usize) -> Self {
        FileSlots(Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))))
    }

    /// A slot, or `None` when all are taken (the request is shed).
    fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

/// A static route, ready to serve.
pub(crate) struct StaticSite {
    settings: Arc<StaticSettings>,
    /// The route's path prefix, when `strip_prefix` maps the rest of the
    /// path under the root (nginx's `alias`) instead of the whole path
    /// (nginx's `root`).
    strip: Option<String>,
    slots: FileSlots,
}

impl StaticSite {
    pub(crate) fn new(
        settings: Arc<StaticSettings>,
        route: &RouteConfig,
        slots: FileSlots,
    ) -> Self {
        StaticSite {
            settings,
            strip: route.strip_prefix.then(|| route.path.clone()),
            slots,
        }
    }
}

/// Serve `req` from the site. The path is the one the lifecycle routed:
/// normalised, no dot segments.
pub(crate) async fn serve<B>(
    site: &StaticSite,
    req: &Request<B>,
) -> Result<Response<Payload>, Rescue> {
    let head = match *req.method() {
        http::Method::GET => false,
        http::Method::HEAD => true,
        _ => return Ok(not_allowed(req)),
    };
    let uri_path = req.uri().path();
    let wanted = path::under_root(site.strip.as_deref(), uri_path, site.settings.serve_hidden)
        .ok_or(Rescue::status(StatusCode::BAD_REQUEST))?;
    let slot = site
        .slots
        .try_take()
        .ok_or_else(|| Rescue::shed("static_files"))?;
    let accepted = encoding::accepted(req.headers(), &site.settings.precompressed);
    let settings = site.settings.clone();
    let found = tokio::task::spawn_blocking(move || resolve::resolve(&settings, wanted, &accepted))
        .await
        .map_err(|_| Rescue::status(StatusCode::INTERNAL_SERVER_ERROR))?;
    match found {
        Found::File(file) => answer::file(file, req, head, slot, &site.settings),
        Found::Directory => Ok(to_directory(req)),
        Found::NoIndex => Err(Rescue::status(StatusCode::FORBIDDEN)),
        Found::Missing => Err(Rescue::status(StatusCode::NOT_FOUND)),
    }
}

/// 405 with the methods a static route answers; the connection is closed
/// when a body may follow unread.
fn not_allowed<B>(req: &Request<B>) -> Response<Payload> {
    let mut resp = error_response(
        ErrorShape::for_plain_route(req.headers()),
        StatusCode::METHOD_NOT_ALLOWED,
    );
    let h = resp.headers_mut();
    h.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    let body_follows = req.headers().contains_key(header::TRANSFER_ENCODING)
        || weir_wire::fields::content_length(req.headers()).is_some_and(|n| n > 0);
    if body_follows {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// A directory asked for without its `/`: 301 to the path with it, the
/// query kept (as nginx).
fn to_directory<B>(req: &Request<B>) -> Response<Payload> {
    let location = match req.uri().query() {
        Some(q) => format!("{}/?{q}", req.uri().path()),
        None => format!("{}/", req.uri().path()),
    };
    let mut resp = Response::new(Payload::empty());
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}
