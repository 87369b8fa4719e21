//! A request's id: taken from a trusted proxy's header, or made here.
//!
//! Made: 32 hex digits, the first 12 the milliseconds since the Unix epoch
//! (ids sort by time, and two processes cannot repeat each other's ids
//! unless they draw the same 80 random bits in the same millisecond), the
//! other 20 random. Not a secret: nothing is authorised by it, so a fast
//! thread-local generator will do. Taken: only from a peer in
//! `server.trusted_proxies` (as `X-Forwarded-For` is), and only a value of
//! at most [`MAX_LEN`] bytes of `[A-Za-z0-9._:+/=-]`, so a client cannot
//! put a log line's worth of text or a quote into every log and upstream.

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use ipnet::IpNet;

/// The longest id taken from a trusted proxy (a UUID is 36; a W3C
/// traceparent 55).
pub(crate) const MAX_LEN: usize = 128;

/// The header an id is trusted in from when the route names none.
pub(crate) static DEFAULT_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The request's id: the trusted proxy's, when it sent a valid one in
/// `header`, else a new one.
pub(crate) fn resolve(
    headers: &HeaderMap,
    header: &HeaderName,
    peer: IpAddr,
    trusted_proxies: &[IpNet],
) -> HeaderValue {
    let trusted = || trusted_proxies.iter().any(|net| net.contains(&peer));
    match headers.get(header) {
        Some(v) if acceptable(v.as_bytes()) && trusted() => v.clone(),
        _ => generate(),
    }
}

fn acceptable(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= MAX_LEN
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._:+/=-".contains(b))
}

/// A new id: 48 bits of milliseconds and 80 random bits, in hex.
pub(crate) fn generate() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let random = (u128::from(fastrand::u64(..)) << 16) | u128::from(fastrand::u16(..));
    let value = (u128::from(millis & 0xffff_ffff_ffff) << 80) | (random & ((1 << 80) - 1));
    let mut out = [0u8; 32];
    for (i, digit) in out.iter_mut().enumerate() {
        *digit = HEX[((value >> (124 - 4 * i)) & 0xf) as usize];
    }
    // Hex digits are header text.
    HeaderValue::from_bytes(&out).unwrap_or_else(|_| HeaderValue::from_static("-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_ids_are_hex_time_first_and_distinct() {
        let (a, b) = (generate(), generate());
        assert_eq!(a.len(), 32);
        assert!(a.as_bytes().iter().all(u8::is_ascii_hexdigit));
        assert_ne!(a, b);
        assert_eq!(a.as_bytes()[..8], b.as_bytes()[..8], "time comes first");
    }

    #[test]
    fn only_a_trusted_peer_names_the_id_and_only_a_bounded_one() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let mut h = HeaderMap::new();
        h.insert(&DEFAULT_HEADER, HeaderValue::from_static("edge-42"));
        let inside: IpAddr = "10.1.2.3".parse().expect("ip");
        let outside: IpAddr = "192.0.2.1".parse().expect("ip");
        assert_eq!(resolve(&h, &DEFAULT_HEADER, inside, &trusted), "edge-42");
        assert_ne!(resolve(&h, &DEFAULT_HEADER, outside, &trusted), "edge-42");
        h.insert(&DEFAULT_HEADER, HeaderValue::from_static("a\"b"));
        assert_ne!(resolve(&h, &DEFAULT_HEADER, inside, &trusted), "a\"b");
        let long = "a".repeat(MAX_LEN + 1);
        h.insert(&DEFAULT_HEADER, HeaderValue::from_str(&long).expect("text"));
        assert_eq!(resolve(&h, &DEFAULT_HEADER, inside, &trusted).len(), 32);
    }
}
