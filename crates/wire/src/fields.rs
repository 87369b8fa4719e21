//! Request header fields weir reads in more than one place, each parsed
//! one way: a bearer credential (the scheme is case-insensitive, RFC 9110
//! §11.1), a declared `Content-Length`, and whether `Connection` names
//! `upgrade`.

use http::HeaderMap;
use http::header::{CONNECTION, CONTENT_LENGTH, HeaderValue};

/// The token of an `Authorization: Bearer <token>` value, trimmed.
pub fn bearer(value: &HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The body length a request declares, when it declares a valid one.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether a `Connection` field (on any of its lines) names the
/// `upgrade` option (RFC 9110 §7.6.1, §7.8).
pub fn connection_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_whatever_the_scheme_case() {
        for v in ["Bearer abc", "bearer abc", "BEARER  abc "] {
            assert_eq!(bearer(&HeaderValue::from_static(v)), Some("abc"), "{v}");
        }
        for v in ["Basic abc", "Bearer", "Bearer  ", "abc"] {
            assert_eq!(bearer(&HeaderValue::from_static(v)), None, "{v}");
        }
    }

    #[test]
    fn content_length_is_a_number_or_nothing() {
        let mut h = HeaderMap::new();
        assert_eq!(content_length(&h), None);
        h.insert(CONTENT_LENGTH, HeaderValue::from_static("42"));
        assert_eq!(content_length(&h), Some(42));
        h.insert(CONTENT_LENGTH, HeaderValue::from_static("-1"));
        assert_eq!(content_length(&h), None);
    }
}
