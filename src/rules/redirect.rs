//! The `redirect` route kind: every request is answered with a redirect
//! to the route's target (nginx's `return 301 …`, Caddy's `redir`), its
//! placeholders filled from the request: `{host}` (as checked and
//! normalised), `{path}` (as routed), `{query}`, `{scheme}`. The request's
//! query is appended unless the target writes its own or the route drops
//! it. A `Location` that cannot be a header value (bytes from the client
//! no header can hold) is 400: the request cannot be redirected as asked.

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};

use super::Facts;
use crate::config::RedirectRoute;
use crate::respond::{Payload, Rescue};

/// The redirect for `req`, whose path is the one routed; `host` is its
/// normalised authority, `tls` how it came.
pub(crate) fn answer<B>(
    route: &RedirectRoute,
    req: &Request<B>,
    host: &str,
    peer: std::net::SocketAddr,
    tls: bool,
) -> Result<Response<Payload>, Rescue> {
    let facts = Facts {
        host: host.to_string(),
        peer,
        tls,
        method: req.method().clone(),
        path: req.uri().path().to_string(),
        query: req.uri().query().map(str::to_string),
        request_id: None,
    };
    let mut location = facts.render(&route.to);
    if route.keep_query
        && let Some(q) = req.uri().query()
    {
        location.push('?');
        location.push_str(q);
    }
    let Ok(location) = HeaderValue::from_str(&location) else {
        return Err(Rescue::status(StatusCode::BAD_REQUEST));
    };
    let mut resp = Response::new(Payload::empty());
    *resp.status_mut() = route.status;
    resp.headers_mut().insert(header::LOCATION, location);
    Ok(resp)
}
