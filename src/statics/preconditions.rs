//! Conditional requests on a file (RFC 9110 §13.2.2, in its order):
//! `If-Match` (strong comparison) or else `If-Unmodified-Since` → 412;
//! then `If-None-Match` (weak comparison) → 304, or else
//! `If-Modified-Since` → 304. `If-Modified-Since` is ignored when
//! `If-None-Match` is present (§13.1.3); nginx checks both. A list is
//! compared as nginx's `ngx_http_test_if_match` does. Pure.

use http::HeaderMap;
use http::header::{IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE};

/// What the preconditions decide.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Precondition {
    Proceed,
    /// 304: the client's copy is current.
    NotModified,
    /// 412: the client's condition is false.
    Failed,
}

/// Evaluate the request's preconditions against the file's strong
/// `etag` and its modification time in whole seconds since the epoch.
pub(super) fn evaluate(headers: &HeaderMap, etag: &str, modified: Option<u64>) -> Precondition {
    if let Some(list) = joined(headers, IF_MATCH) {
        if !matches(&list, etag, false) {
            return Precondition::Failed;
        }
    } else if let (Some(since), Some(modified)) = (date(headers, IF_UNMODIFIED_SINCE), modified)
        && modified > since
    {
        return Precondition::Failed;
    }
    if let Some(list) = joined(headers, IF_NONE_MATCH) {
        return match matches(&list, etag, true) {
            true => Precondition::NotModified,
            false => Precondition::Proceed,
        };
    }
    match (date(headers, IF_MODIFIED_SINCE), modified) {
        (Some(since), Some(modified)) if modified <= since => Precondition::NotModified,
        _ => Precondition::Proceed,
    }
}

/// Every line of a header, joined as one list.
fn joined(headers: &HeaderMap, name: http::header::HeaderName) -> Option<String> {
    let mut lines = headers.get_all(name).iter().filter_map(|v| v.to_str().ok());
    let first = lines.next()?.to_string();
    Some(lines.fold(first, |mut all, line| {
        all.push(',');
        all.push_str(line);
        all
    }))
}

/// An HTTP date header as seconds since the epoch; unparseable is absent.
pub(super) fn date(headers: &HeaderMap, name: http::header::HeaderName) -> Option<u64> {
    let text = headers.get(name)?.to_str().ok()?;
    epoch_seconds(httpdate::parse_http_date(text.trim()).ok()?)
}

pub(super) fn epoch_seconds(t: std::time::SystemTime) -> Option<u64> {
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// Whether `etag` is in `list` (`*` is any): weakly, `W/` ignored on both
/// sides; strongly, a weak tag never matches.
fn matches(list: &str, etag: &str, weak: bool) -> bool {
    if list.trim() == "*" {
        return true;
    }
    let etag = match weak {
        true => etag.strip_prefix("W/").unwrap_or(etag),
        false => etag,
    };
    list.split(',')
        .map(|tag| tag.trim_matches([' ', '\t']))
        .map(|tag| match weak {
            true => tag.strip_prefix("W/").unwrap_or(tag),
            false => tag,
        })
        .any(|tag| tag == etag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Precondition::*;

    const TAG: &str = "\"5f5e1000-400\"";
    const MTIME: u64 = 1_600_000_000; // Sun, 13 Sep 2020 12:26:40 GMT

    fn eval(pairs: &[(&str, &str)]) -> Precondition {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        evaluate(&h, TAG, Some(MTIME))
    }

    #[test]
    fn if_none_match_compares_weakly_and_wins_over_if_modified_since() {
        assert_eq!(eval(&[("if-none-match", TAG)]), NotModified);
        assert_eq!(
            eval(&[("if-none-match", "W/\"5f5e1000-400\"")]),
            NotModified
        );
        assert_eq!(
            eval(&[("if-none-match", "\"x\", \"5f5e1000-400\"")]),
            NotModified
        );
        assert_eq!(
            eval(&[("if-none-match", "\"x\""), ("if-none-match", TAG)]),
            NotModified
        );
        assert_eq!(eval(&[("if-none-match", "*")]), NotModified);
        assert_eq!(eval(&[("if-none-match", "\"other\"")]), Proceed);
        // RFC 9110 §13.1.3: If-Modified-Since is not looked at.
        assert_eq!(
            eval(&[
                ("if-none-match", "\"other\""),
                ("if-modified-since", "Sun, 13 Sep 2020 12:26:40 GMT")
            ]),
            Proceed
        );
    }

    #[test]
    fn if_modified_since_is_not_modified_at_or_after_the_file() {
        assert_eq!(
            eval(&[("if-modified-since", "Sun, 13 Sep 2020 12:26:40 GMT")]),
            NotModified
        );
        assert_eq!(
            eval(&[("if-modified-since", "Mon, 14 Sep 2020 00:00:00 GMT")]),
            NotModified
        );
        assert_eq!(
            eval(&[("if-modified-since", "Sun, 13 Sep 2020 12:26:39 GMT")]),
            Proceed
        );
        assert_eq!(eval(&[("if-modified-since", "yesterday")]), Proceed);
    }

    #[test]
    fn if_match_and_if_unmodified_since_fail_with_412() {
        assert_eq!(eval(&[("if-match", TAG)]), Proceed);
        assert_eq!(eval(&[("if-match", "*")]), Proceed);
        assert_eq!(
            eval(&[("if-match", "W/\"5f5e1000-400\"")]),
            Failed,
            "strong"
        );
        assert_eq!(eval(&[("if-match", "\"other\"")]), Failed);
        assert_eq!(
            eval(&[("if-unmodified-since", "Sun, 13 Sep 2020 12:26:39 GMT")]),
            Failed
        );
        assert_eq!(
            eval(&[("if-unmodified-since", "Sun, 13 Sep 2020 12:26:40 GMT")]),
            Proceed
        );
        // If-Match present: If-Unmodified-Since is not looked at.
        assert_eq!(
            eval(&[
                ("if-match", TAG),
                ("if-unmodified-since", "Sun, 13 Sep 2020 12:26:39 GMT")
            ]),
            Proceed
        );
    }
}
