//! Which precompressed siblings a client accepts (RFC 9110 §12.5.3):
//! the route's list, in its order of preference, less what the client's
//! `Accept-Encoding` does not name (or names with `q=0`). No header means
//! identity only, as nginx's `gzip_static` reads it. Pure.

use http::HeaderMap;
use http::header::ACCEPT_ENCODING;

use crate::config::Precompressed;

/// The encodings of `offered` the client accepts, best first.
pub(super) fn accepted(headers: &HeaderMap, offered: &[Precompressed]) -> Vec<Precompressed> {
    if offered.is_empty() {
        return Vec::new();
    }
    // Per offered coding: its q is > 0, as named or through `*`.
    let mut named: [Option<bool>; 3] = [None; 3];
    let mut any: Option<bool> = None;
    for item in headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or_default().trim();
        let wanted = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
            .all(|q| q.trim().parse::<f32>().is_ok_and(|q| q > 0.0));
        if coding == "*" {
            any = Some(wanted);
            continue;
        }
        let slot = Precompressed::ALL.iter().position(|p| {
            coding.eq_ignore_ascii_case(p.name())
                || (*p == Precompressed::Gzip && coding.eq_ignore_ascii_case("x-gzip"))
        });
        if let Some(slot) = slot.and_then(|i| named.get_mut(i)) {
            *slot = Some(wanted);
        }
    }
    offered
        .iter()
        .copied()
        .filter(|p| {
            let i = Precompressed::ALL.iter().position(|a| a == p);
            i.and_then(|i| named.get(i).copied().flatten())
                .or(any)
                .unwrap_or(false)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Precompressed::*;

    fn with(ae: &str) -> Vec<Precompressed> {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, ae.parse().expect("value"));
        accepted(&h, &[Br, Zstd, Gzip])
    }

    #[test]
    fn the_routes_order_among_what_the_client_accepts() {
        assert_eq!(with("gzip, deflate, br"), [Br, Gzip]);
        assert_eq!(with("gzip;q=0.5, br;q=0"), [Gzip]);
        assert_eq!(with("zstd"), [Zstd]);
        assert_eq!(with("*"), [Br, Zstd, Gzip]);
        assert_eq!(with("*;q=0, gzip"), [Gzip]);
        assert_eq!(with("identity"), []);
        assert_eq!(with("GZIP;Q=1.0"), [Gzip]);
        assert_eq!(with("x-gzip"), [Gzip]);
        assert_eq!(accepted(&HeaderMap::new(), &[Br, Gzip]), []);
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, "br, gzip".parse().expect("value"));
        assert_eq!(accepted(&h, &[Gzip]), [Gzip], "only what the route offers");
    }
}
