//! Header rules at the proxy boundary: hop-by-hop removal (RFC 9110 §7.6.1)
//! and the X-Forwarded-* / X-Real-IP headers.

use std::net::IpAddr;
use std::time::Duration;

use http::HeaderMap;
use http::header::{self, HeaderName, HeaderValue};
use ipnet::IpNet;

/// Headers that describe one connection, never the message (RFC 9110
/// §7.6.1), plus the proxy credentials of RFC 2616 §13.5.1, which are meant
/// for a proxy and must not leak past it. `Trailer` is end-to-end: hyper
/// needs it to send the trailer fields it names. A `static`, not a
/// `const`: a `const` array is made and dropped again at every use, once
/// per header name of every message.
static HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
];

pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub(crate) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
pub(crate) const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Remove hop-by-hop headers, including every header named in `Connection`.
/// `Upgrade` is removed too; the tunnel code puts it back where it belongs.
///
/// One pass over the names finds the ones present (a message carries one
/// or two of them, often none), so only those are removed, instead of a
/// hashed lookup for every name on the list on every message.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let mut present: Vec<HeaderName> = Vec::new();
    for name in headers.keys() {
        if HOP_BY_HOP.contains(name) || name == header::UPGRADE {
            present.push(name.clone());
        }
    }
    if present.is_empty() {
        return;
    }
    if present.contains(&header::CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
            .collect();
        present.extend(named);
    }
    for name in present {
        headers.remove(name);
    }
}

/// Clean a client's request headers for forwarding upstream, on every
/// route kind: hop-by-hop headers removed, and `Expect` — weir answers
/// `100-continue` itself (hyper sends 100 when the body is first read), so
/// the upstream must not wait for a second one.
pub(crate) fn clean_request(headers: &mut HeaderMap) {
    remove_hop_by_hop(headers);
    headers.remove(header::EXPECT);
    join_cookies(headers);
}

/// HTTP/2 may split `cookie` into one field per pair ("crumbs"); before
/// the request goes on as HTTP/1.1 they are joined into one field with
/// "; " (RFC 9113 §8.2.3) — many servers read only the first `Cookie`
/// line. One field (the common case) is left as it is.
fn join_cookies(headers: &mut HeaderMap) {
    let mut crumbs = headers.get_all(header::COOKIE).iter();
    if crumbs.next().is_none() || crumbs.next().is_none() {
        return;
    }
    let mut joined: Vec<u8> = Vec::new();
    for crumb in headers.get_all(header::COOKIE) {
        if !joined.is_empty() {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(crumb.as_bytes());
    }
    // Each crumb was a valid value, and so is "; " between them.
    if let Ok(v) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, v);
    }
}

/// Whether the client accepts trailers (`TE: trailers`), which is needed to
/// ask the upstream for them once `TE` itself has been removed.
pub(crate) fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
}

/// A gRPC client's deadline, from `grpc-timeout`: at most 8 digits and a
/// unit (`H`, `M`, `S`, `m`, `u`, `n`), as the gRPC spec writes it.
/// Anything else is ignored, as if the header were absent, so a
/// malformed value cannot shorten or lengthen the route's own timeout.
pub(crate) fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get("grpc-timeout")?.as_bytes();
    let (unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 99,999,999: no arithmetic below can overflow.
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// What the edge knows about the connection a request came in on.
pub(crate) struct Forwarding<'a> {
    pub(crate) peer: IpAddr,
    /// `peer` as header text.
    pub(crate) peer_text: &'a HeaderValue,
    pub(crate) tls: bool,
    /// The Host the client asked for, checked and normalised (lower-case
    /// name, no trailing dot, the port as sent).
    pub(crate) host: Option<&'a str>,
    pub(crate) trusted_proxies: &'a [IpNet],
}

/// Set X-Forwarded-For/-Proto/-Host and X-Real-IP.
///
/// From an untrusted peer, whatever the client sent is replaced: the edge is
/// the only source of truth. From a trusted proxy, its X-Forwarded-For is
/// kept and the peer appended, X-Real-IP becomes the right-most address that
/// is not itself a trusted proxy, and its Proto/Host are kept.
pub(crate) fn set_forwarded(headers: &mut HeaderMap, f: &Forwarding<'_>) {
    let trusted = f.trusted_proxies.iter().any(|n| n.contains(&f.peer));
    if trusted {
        let peer = f.peer.to_string();
        let prior: Vec<&str> = headers
            .get_all(&X_FORWARDED_FOR)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let real_ip = prior
            .iter()
            .rev()
            .filter_map(|s| s.parse::<IpAddr>().ok())
            .find(|ip| !f.trusted_proxies.iter().any(|n| n.contains(ip)))
            .map_or_else(|| peer.clone(), |ip| ip.to_string());
        let mut chain = prior.join(", ");
        if !chain.is_empty() {
            chain.push_str(", ");
        }
        chain.push_str(&peer);
        set(headers, X_FORWARDED_FOR, &chain);
        set(headers, X_REAL_IP, &real_ip);
    } else {
        // The common case: one value for both headers, no chain to build,
        // the text made once per connection.
        headers.insert(X_FORWARDED_FOR, f.peer_text.clone());
        headers.insert(X_REAL_IP, f.peer_text.clone());
        // RFC 7239's header is not produced by weir; a client's copy would
        // be a spoofing vector for upstreams that read it.
        headers.remove(header::FORWARDED);
    }
    if !(trusted && headers.contains_key(&X_FORWARDED_PROTO)) {
        headers.insert(
            X_FORWARDED_PROTO,
            HeaderValue::from_static(if f.tls { "https" } else { "http" }),
        );
    }
    if !(trusted && headers.contains_key(&X_FORWARDED_HOST)) {
        match f.host {
            Some(h) => set(headers, X_FORWARDED_HOST, h),
            None => {
                headers.remove(&X_FORWARDED_HOST);
            }
        }
    }
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    match HeaderValue::from_str(value) {
        Ok(v) => {
            headers.insert(name, v);
        }
        Err(_) => {
            headers.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        h
    }

    #[test]
    fn cookie_crumbs_are_joined_into_one_field() {
        let mut h = map(&[("cookie", "a=1"), ("x", "1"), ("cookie", "b=2; c=3")]);
        clean_request(&mut h);
        let all: Vec<_> = h.get_all(header::COOKIE).iter().collect();
        assert_eq!(all, ["a=1; b=2; c=3"]);
        let mut one = map(&[("cookie", "a=1")]);
        clean_request(&mut one);
        assert_eq!(one.get_all(header::COOKIE).iter().count(), 1);
    }

    #[test]
    fn removes_hop_by_hop_and_connection_named_headers() {
        let mut h = map(&[
            ("connection", "close, X-Secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("x-kept", "1"),
        ]);
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn untrusted_peer_replaces_forwarded_headers() {
        let mut h = map(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=6.6.6.6"),
        ]);
        set_forwarded(
            &mut h,
            &Forwarding {
                peer: "192.0.2.1".parse().expect("ip"),
                peer_text: &HeaderValue::from_static("192.0.2.1"),
                tls: false,
                host: Some("example.com"),
                trusted_proxies: &[],
            },
        );
        assert_eq!(h["x-forwarded-for"], "192.0.2.1");
        assert_eq!(h["x-real-ip"], "192.0.2.1");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "example.com");
        assert!(!h.contains_key("forwarded"));
    }

    #[test]
    fn trusted_peer_appends_and_finds_real_client() {
        let mut h = map(&[
            ("x-forwarded-for", "203.0.113.9, 10.0.0.2"),
            ("x-forwarded-proto", "https"),
        ]);
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        set_forwarded(
            &mut h,
            &Forwarding {
                peer: "10.0.0.1".parse().expect("ip"),
                peer_text: &HeaderValue::from_static("10.0.0.1"),
                tls: false,
                host: Some("example.com"),
                trusted_proxies: &trusted,
            },
        );
        assert_eq!(h["x-forwarded-for"], "203.0.113.9, 10.0.0.2, 10.0.0.1");
        assert_eq!(h["x-real-ip"], "203.0.113.9");
        assert_eq!(h["x-forwarded-proto"], "https");
    }

    #[test]
    fn grpc_timeout_is_eight_digits_and_a_unit_or_nothing() {
        let t = |v: &str| grpc_timeout(&map(&[("grpc-timeout", v)]));
        assert_eq!(t("250m"), Some(Duration::from_millis(250)));
        assert_eq!(t("3S"), Some(Duration::from_secs(3)));
        assert_eq!(t("2M"), Some(Duration::from_secs(120)));
        assert_eq!(t("99999999H"), Some(Duration::from_secs(99_999_999 * 3600)));
        assert_eq!(t("10u"), Some(Duration::from_micros(10)));
        assert_eq!(t("7n"), Some(Duration::from_nanos(7)));
        for bad in [
            "",
            "S",
            "100000000S",
            "1s",
            "-1S",
            "1.5S",
            "1 S",
            "18446744073709551616n",
        ] {
            assert_eq!(t(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }

    #[test]
    fn te_trailers_detection() {
        assert!(accepts_trailers(&map(&[("te", "gzip, Trailers")])));
        assert!(!accepts_trailers(&map(&[("te", "gzip")])));
    }
}
