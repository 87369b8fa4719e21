//! Response compression: gzip, Brotli and zstd, negotiated from the
//! request's `Accept-Encoding` and applied to the response body as it
//! streams.
//!
//! A route kind that serves bodies calls two things: [`Asked::of`] with
//! the request, before the request is consumed, and [`respond`] with the
//! response head and body it produced. Everything a compressing route
//! decides is here: which responses are never compressed (already
//! encoded, partial, `no-transform`, event streams, upgrades, no body),
//! the headers a compressed response carries (`Content-Encoding`, `Vary`,
//! a weak `ETag`, no `Content-Length`), and the body that compresses on
//! the connection's own task ([`body`]). A route without `[route.compress]`
//! never reaches this module.

mod body;
mod encoder;
mod negotiate;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;

use crate::config::{Coding, Compression};
use crate::respond::Payload;

use self::body::Compressed;
use self::encoder::Encoder;

/// `Content-Digest` (RFC 9530) is a digest of the content as sent, which
/// compression changes.
const CONTENT_DIGEST: HeaderName = HeaderName::from_static("content-digest");

/// What a request asks of a compressing route, read before the request
/// goes on to be served.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    /// The coding to answer with, if the response is one to compress.
    coding: Option<Coding>,
    /// A HEAD gets the headers a GET would, with no body.
    head: bool,
}

impl Asked {
    pub(crate) fn of<B>(settings: &Compression, req: &Request<B>) -> Asked {
        let h = req.headers();
        // A range is of the representation as stored, which a coding
        // would change; a client asking `no-transform` (RFC 9111
        // §5.2.1.6) wants the bytes as the origin sent them.
        let coding = if h.contains_key(header::RANGE) || no_transform(h) {
            None
        } else {
            negotiate::choose(h, &settings.algorithms)
        };
        Asked {
            coding,
            head: req.method() == Method::HEAD,
        }
    }
}

/// The response compressed as `asked`, when `settings` say it is one to
/// compress; otherwise as it is, with `Vary: Accept-Encoding` when only
/// the request's codings kept it so (a cache must not give a compressed
/// copy to a client that asked for none, nor the reverse).
pub(crate) fn respond(
    settings: &Compression,
    asked: &Asked,
    resp: Response<Payload>,
) -> Response<Payload> {
    if !compressible(settings, &resp, asked.head) {
        return resp;
    }
    let (mut parts, payload) = resp.into_parts();
    vary_on_accept_encoding(&mut parts.headers);
    let Some(coding) = asked.coding else {
        return Response::from_parts(parts, payload);
    };
    let encoder = match Encoder::new(coding, settings.levels) {
        Ok(e) => e,
        Err(e) => {
            tracing::debug!(coding = coding.token(), error = %e, "compression not started");
            return Response::from_parts(parts, payload);
        }
    };
    compressed_headers(&mut parts.headers, coding);
    if asked.head {
        return Response::from_parts(parts, payload);
    }
    let body = Payload::Stream(Box::pin(Compressed::new(payload, encoder)));
    Response::from_parts(parts, body)
}

/// Whether the response is one this route compresses: a status with a
/// body of its own (not 1xx — an upgrade's 101 included —, 204, 206 or
/// 304), not encoded yet, not a part (`Content-Range`), not marked
/// `no-transform`, of a listed type and never an event stream (SSE must
/// reach the client event by event, unbuffered), of at least `min_size`
/// when its length is declared, and with a body (a HEAD has none; it is
/// judged by its headers, as the GET would be).
fn compressible(settings: &Compression, resp: &Response<Payload>, head: bool) -> bool {
    let status = resp.status();
    if status.is_informational()
        || matches!(
            status,
            StatusCode::NO_CONTENT | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED
        )
    {
        return false;
    }
    let h = resp.headers();
    if h.contains_key(header::CONTENT_ENCODING)
        || h.contains_key(header::CONTENT_RANGE)
        || no_transform(h)
    {
        return false;
    }
    let Some(content_type) = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    if is_event_stream(content_type) || !settings.types.iter().any(|t| t.matches(content_type)) {
        return false;
    }
    let declared = weir_wire::fields::content_length(h);
    if declared.is_some_and(|n| n == 0 || n < settings.min_size) {
        return false;
    }
    head || !resp.body().is_end_stream()
}

fn is_event_stream(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// `Cache-Control: no-transform` (RFC 9111 §5.2.1.6, §5.2.2.6).
fn no_transform(h: &HeaderMap) -> bool {
    h.get_all(header::CACHE_CONTROL)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
}

/// `Accept-Encoding` added to `Vary`, in the one field line, unless it
/// (or `*`) is there already.
fn vary_on_accept_encoding(h: &mut HeaderMap) {
    let listed = || {
        h.get_all(header::VARY)
            .iter()
            .flat_map(|v| v.as_bytes().split(|b| *b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|t| !t.is_empty())
    };
    if listed().any(|t| t == b"*" || t.eq_ignore_ascii_case(b"accept-encoding")) {
        return;
    }
    let mut merged = Vec::new();
    for t in listed() {
        merged.extend_from_slice(t);
        merged.extend_from_slice(b", ");
    }
    merged.extend_from_slice(b"Accept-Encoding");
    if let Ok(v) = HeaderValue::from_bytes(&merged) {
        h.insert(header::VARY, v);
    }
}

/// The headers of a response about to be compressed with `coding`: its
/// coding named; no length (the body is sent chunked, or as HTTP/2 DATA
/// to its end); no `Accept-Ranges` (a range of this response would be of
/// the compressed bytes, while a range request is answered uncompressed);
/// no digest of the old content; a strong `ETag` made weak (RFC 9110
/// §8.8.3: the compressed bytes are not the ones the tag was given to,
/// though they mean the same).
fn compressed_headers(h: &mut HeaderMap, coding: Coding) {
    h.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(coding.token()),
    );
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::ACCEPT_RANGES);
    h.remove(CONTENT_DIGEST);
    if let Some(tag) = h.get(header::ETAG)
        && tag.as_bytes().first() == Some(&b'"')
    {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(tag.as_bytes());
        if let Ok(v) = HeaderValue::from_bytes(&weak) {
            h.insert(header::ETAG, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Levels, TypePattern};

    fn settings() -> Compression {
        Compression {
            algorithms: Coding::ALL.to_vec(),
            types: ["text/*", "application/json"]
                .iter()
                .filter_map(|t| TypePattern::parse(t))
                .collect(),
            min_size: 256,
            levels: Levels {
                gzip: 6,
                brotli: 4,
                zstd: 3,
            },
        }
    }

    #[test]
    fn vary_is_merged_into_one_line_once() {
        let mut h = HeaderMap::new();
        vary_on_accept_encoding(&mut h);
        assert_eq!(h[header::VARY], "Accept-Encoding");
        let mut h = HeaderMap::new();
        h.append(header::VARY, HeaderValue::from_static("Origin"));
        h.append(header::VARY, HeaderValue::from_static("Cookie, "));
        vary_on_accept_encoding(&mut h);
        assert_eq!(h.get_all(header::VARY).iter().count(), 1);
        assert_eq!(h[header::VARY], "Origin, Cookie, Accept-Encoding");
        for already in ["accept-encoding", "Origin, ACCEPT-ENCODING", "*"] {
            let mut h = HeaderMap::new();
            h.insert(header::VARY, HeaderValue::from_static(already));
            vary_on_accept_encoding(&mut h);
            assert_eq!(h[header::VARY], already);
        }
    }

    #[test]
    fn strong_etags_are_weakened_and_weak_ones_kept() {
        let mut h = HeaderMap::new();
        h.insert(header::ETAG, HeaderValue::from_static("\"v1\""));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("900"));
        h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        compressed_headers(&mut h, Coding::Zstd);
        assert_eq!(h[header::ETAG], "W/\"v1\"");
        assert_eq!(h[header::CONTENT_ENCODING], "zstd");
        assert!(!h.contains_key(header::CONTENT_LENGTH));
        assert!(!h.contains_key(header::ACCEPT_RANGES));
        let mut h = HeaderMap::new();
        h.insert(header::ETAG, HeaderValue::from_static("W/\"v1\""));
        compressed_headers(&mut h, Coding::Gzip);
        assert_eq!(h[header::ETAG], "W/\"v1\"");
    }

    fn response(status: u16, headers: &[(&str, &str)], body: &'static str) -> Response<Payload> {
        let mut r = Response::new(Payload::text(body));
        *r.status_mut() = StatusCode::from_u16(status).expect("status");
        for (k, v) in headers {
            r.headers_mut().append(
                HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        r
    }

    #[test]
    fn what_is_never_compressed() {
        let s = settings();
        let long = "x";
        let html = ("content-type", "text/html");
        let yes = |r: &Response<Payload>| compressible(&s, r, false);
        assert!(yes(&response(200, &[html], long)));
        assert!(
            yes(&response(404, &[html], long)),
            "an error page is a page"
        );
        for status in [101, 204, 206, 304] {
            assert!(!yes(&response(status, &[html], long)), "{status}");
        }
        assert!(!yes(&response(
            200,
            &[html, ("content-encoding", "gzip")],
            long
        )));
        assert!(!yes(&response(
            200,
            &[html, ("content-range", "bytes 0-0/9")],
            long
        )));
        assert!(!yes(&response(
            200,
            &[html, ("cache-control", "public, No-Transform")],
            long
        )));
        assert!(!yes(&response(
            200,
            &[("content-type", "text/event-stream; charset=utf-8")],
            long
        )));
        assert!(!yes(&response(200, &[("content-type", "image/png")], long)));
        assert!(!yes(&response(200, &[], long)), "no type");
        assert!(!yes(&response(
            200,
            &[html, ("content-length", "255")],
            long
        )));
        assert!(yes(&response(
            200,
            &[html, ("content-length", "256")],
            long
        )));
        assert!(!yes(&response(200, &[html], "")), "no body");
        assert!(
            compressible(
                &s,
                &response(200, &[html, ("content-length", "9000")], ""),
                true
            ),
            "a HEAD is judged by its headers"
        );
    }
}
