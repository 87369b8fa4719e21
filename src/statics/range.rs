//! One byte range of a file (RFC 9110 §14), parsed as nginx's
//! `ngx_http_range_parse` does with `max_ranges 1`, so that the same
//! `Range` header gets the same answer from both: a syntax error or no
//! satisfiable range is 416; a second satisfiable range means the whole
//! file (200: weir sends no multipart/byteranges); a range starting at 0
//! that covers nothing (an empty file) is the whole file. `If-Range`
//! matches the strong ETag byte for byte, or the modification time to the
//! second. Pure.

use http::HeaderMap;
use http::header::{IF_RANGE, RANGE};

/// How much of the file goes out.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ranged {
    Whole,
    /// `start..end` (end exclusive): 206.
    Part {
        start: u64,
        end: u64,
    },
    /// 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// nginx's bound on a number in a range: `off_t`'s largest.
const MAX_OFFSET: u64 = i64::MAX as u64;

/// The range to send of a file of `len` bytes with these validators.
pub(super) fn select(headers: &HeaderMap, len: u64, etag: &str, modified: Option<u64>) -> Ranged {
    let Some(range) = headers.get(RANGE).map(|v| v.as_bytes()) else {
        return Ranged::Whole;
    };
    let Some(spec) = range
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case(b"bytes=") && range.len() >= 7)
        .and(range.get(6..))
    else {
        return Ranged::Whole;
    };
    if let Some(if_range) = headers.get(IF_RANGE).map(|v| v.as_bytes()) {
        let current = if if_range.len() >= 2 && if_range.ends_with(b"\"") {
            if_range == etag.as_bytes()
        } else {
            let date = std::str::from_utf8(if_range)
                .ok()
                .and_then(|d| httpdate::parse_http_date(d.trim()).ok())
                .and_then(super::preconditions::epoch_seconds);
            date.is_some() && date == modified
        };
        if !current {
            return Ranged::Whole;
        }
    }
    parse(spec, len)
}

/// The byte after `p`, or NUL at the end (nginx reads a C string).
fn at(spec: &[u8], p: usize) -> u8 {
    spec.get(p).copied().unwrap_or(0)
}

fn skip_spaces(spec: &[u8], p: &mut usize) {
    while at(spec, *p) == b' ' {
        *p += 1;
    }
}

/// Digits from `p` as a number up to [`MAX_OFFSET`]; `None` past it.
fn number(spec: &[u8], p: &mut usize) -> Option<u64> {
    let mut n: u64 = 0;
    while at(spec, *p).is_ascii_digit() {
        n = n
            .checked_mul(10)?
            .checked_add(u64::from(at(spec, *p) - b'0'))
            .filter(|n| *n <= MAX_OFFSET)?;
        *p += 1;
    }
    Some(n)
}

/// The ranges after `bytes=`, one at most.
fn parse(spec: &[u8], len: u64) -> Ranged {
    let mut p = 0;
    let mut found: Option<(u64, u64)> = None;
    loop {
        skip_spaces(spec, &mut p);
        let (start, end) = if at(spec, p) == b'-' {
            // `-n`: the last n bytes.
            p += 1;
            if !at(spec, p).is_ascii_digit() {
                return Ranged::Unsatisfiable;
            }
            let Some(n) = number(spec, &mut p) else {
                return Ranged::Unsatisfiable;
            };
            skip_spaces(spec, &mut p);
            if !matches!(at(spec, p), b',' | 0) {
                return Ranged::Unsatisfiable;
            }
            (len.saturating_sub(n), len)
        } else {
            if !at(spec, p).is_ascii_digit() {
                return Ranged::Unsatisfiable;
            }
            let Some(start) = number(spec, &mut p) else {
                return Ranged::Unsatisfiable;
            };
            skip_spaces(spec, &mut p);
            if at(spec, p) != b'-' {
                return Ranged::Unsatisfiable;
            }
            p += 1;
            skip_spaces(spec, &mut p);
            if matches!(at(spec, p), b',' | 0) {
                (start, len)
            } else {
                if !at(spec, p).is_ascii_digit() {
                    return Ranged::Unsatisfiable;
                }
                let Some(last) = number(spec, &mut p) else {
                    return Ranged::Unsatisfiable;
                };
                skip_spaces(spec, &mut p);
                if !matches!(at(spec, p), b',' | 0) {
                    return Ranged::Unsatisfiable;
                }
                (start, if last >= len { len } else { last + 1 })
            }
        };
        if start < end {
            if found.is_some() {
                return Ranged::Whole;
            }
            found = Some((start, end));
        } else if start == 0 {
            return Ranged::Whole;
        }
        if at(spec, p) != b',' {
            break;
        }
        p += 1;
    }
    match found {
        Some((start, end)) => Ranged::Part { start, end },
        None => Ranged::Unsatisfiable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ranged::*;

    fn range(r: &str, len: u64) -> Ranged {
        let mut h = HeaderMap::new();
        h.insert(RANGE, r.parse().expect("value"));
        select(&h, len, "\"a-b\"", Some(100))
    }

    #[test]
    fn single_ranges_as_nginx_reads_them() {
        assert_eq!(range("bytes=0-9", 100), Part { start: 0, end: 10 });
        assert_eq!(
            range("bytes=90-", 100),
            Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            range("bytes=-10", 100),
            Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(range("bytes=-1000", 100), Part { start: 0, end: 100 });
        assert_eq!(
            range("bytes=50-1000", 100),
            Part {
                start: 50,
                end: 100
            }
        );
        assert_eq!(range("BYTES= 1 - 2 ", 100), Part { start: 1, end: 3 });
        assert_eq!(range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(range("bytes=-0", 100), Unsatisfiable);
        assert_eq!(range("bytes=5-3", 100), Unsatisfiable);
        assert_eq!(range("bytes=abc", 100), Unsatisfiable);
        assert_eq!(range("bytes=1-2x", 100), Unsatisfiable);
        assert_eq!(range("bytes=99999999999999999999-", 100), Unsatisfiable);
        assert_eq!(range("bytes=", 100), Whole, "too short: not a range");
        assert_eq!(range("items=0-1", 100), Whole);
        assert_eq!(range("bytes=0-", 0), Whole, "an empty file");
        assert_eq!(range("bytes=-5", 0), Whole);
        assert_eq!(
            range("bytes=0-1,5-6", 100),
            Whole,
            "two ranges: the whole file"
        );
        assert_eq!(range("bytes=0-1,500-600", 100), Part { start: 0, end: 2 });
        assert_eq!(range("bytes=0-1,x", 100), Unsatisfiable);
    }

    #[test]
    fn if_range_matches_the_etag_or_the_date_exactly() {
        let with = |if_range: &str| {
            let mut h = HeaderMap::new();
            h.insert(RANGE, "bytes=0-0".parse().expect("value"));
            h.insert(IF_RANGE, if_range.parse().expect("value"));
            select(&h, 10, "\"a-b\"", Some(1_600_000_000))
        };
        assert_eq!(with("\"a-b\""), Part { start: 0, end: 1 });
        assert_eq!(with("W/\"a-b\""), Whole);
        assert_eq!(with("\"c-d\""), Whole);
        assert_eq!(
            with("Sun, 13 Sep 2020 12:26:40 GMT"),
            Part { start: 0, end: 1 }
        );
        assert_eq!(with("Sun, 13 Sep 2020 12:26:41 GMT"), Whole);
        assert_eq!(with("soon"), Whole);
    }
}
