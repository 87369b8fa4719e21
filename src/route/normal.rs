//! Hosts and paths as the upstream will read them, before routing
//! ([065](../../docs/decisions/065-hosts-and-paths-normalised-before-routing.md)).
//!
//! A route is chosen by what the upstream will resolve, not by the bytes
//! the client chose: a Host must be a name or an address (RFC 9110 §7.2,
//! RFC 3986 §3.2.2) and is lower-cased; a path has its unreserved escapes
//! decoded (`%2e` is a dot), its empty segments merged and its dot segments
//! removed (RFC 3986 §6.2.2, §5.2.4). What is routed is what is forwarded.
//!
//! Pure: no I/O, nothing of its callers. Both run on every request, so the
//! common case — a clean host, a path without `%`, `\`, `//` or a dot
//! segment — is one scan and borrows; only a change allocates.

use std::borrow::Cow;

/// A Host that passed: its authority as forwarded (lower-case name, no
/// trailing dot, the port as sent) and the name routing uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host<'a> {
    authority: Cow<'a, str>,
    name_len: usize,
}

impl Host<'_> {
    /// The host name or bracketed IP literal, without the port: what routes.
    pub fn name(&self) -> &str {
        self.authority.get(..self.name_len).unwrap_or_default()
    }

    /// `name[:port]`: what goes upstream as `Host` and `X-Forwarded-Host`.
    pub fn authority(&self) -> &str {
        &self.authority
    }
}

/// The longest host name DNS can carry (RFC 1035 §2.3.4, without the
/// trailing dot).
const MAX_NAME: usize = 253;

/// Check a Host (or `:authority`): a reg-name of letters, digits, `-`,
/// `_` and dots, or a bracketed IPv6 literal, then an optional port of
/// 1 to 5 digits up to 65535. Anything else — userinfo, a path, `\`,
/// control characters, an empty label (`..`), an empty port, sub-delims
/// or escapes RFC 3986 allows but no DNS name holds — is `None`.
pub fn host(raw: &str) -> Option<Host<'_>> {
    let (name, bare, upper) = if raw.starts_with('[') {
        let end = raw.find(']')?.checked_add(1)?;
        let name = raw.get(..end)?;
        valid_ip_literal(name)?;
        (name, name, name.bytes().any(|b| b.is_ascii_uppercase()))
    } else {
        let (name, upper) = reg_name(raw)?;
        (name, name.strip_suffix('.').unwrap_or(name), upper)
    };
    let port = match raw.get(name.len()..)? {
        "" => None,
        rest => Some(rest.strip_prefix(':').filter(|p| valid_port(p))?),
    };
    if !upper && bare.len() == name.len() {
        return Some(Host {
            authority: Cow::Borrowed(raw),
            name_len: name.len(),
        });
    }
    let mut authority = bare.to_ascii_lowercase();
    if let Some(p) = port {
        authority.push(':');
        authority.push_str(p);
    }
    Some(Host {
        authority: Cow::Owned(authority),
        name_len: bare.len(),
    })
}

/// The reg-name `raw` starts with, up to a `:` or its end, and whether it
/// has upper case: dot-separated labels of letters, digits, `-` and `_`,
/// none empty, one trailing dot allowed, at most [`MAX_NAME`] bytes
/// without it. One pass over the bytes, by a table (this runs on every
/// request).
fn reg_name(raw: &str) -> Option<(&str, bool)> {
    let mut label = 0usize;
    let mut upper = false;
    let mut end = raw.len();
    for (i, b) in raw.bytes().enumerate() {
        match HOST_BYTE[usize::from(b)] {
            LABEL => label += 1,
            UPPER => {
                label += 1;
                upper = true;
            }
            DOT if label > 0 => label = 0,
            COLON => {
                end = i;
                break;
            }
            _ => return None,
        }
    }
    let name = raw.get(..end)?;
    // A name that ends in a dot ended its last label there.
    let bare = if label == 0 { end.checked_sub(1)? } else { end };
    (bare > 0 && bare <= MAX_NAME).then_some((name, upper))
}

const OTHER: u8 = 0;
const LABEL: u8 = 1;
const UPPER: u8 = 2;
const DOT: u8 = 3;
const COLON: u8 = 4;

/// What each byte is in a Host.
static HOST_BYTE: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = match c {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => LABEL,
            b'A'..=b'Z' => UPPER,
            b'.' => DOT,
            b':' => COLON,
            _ => OTHER,
        };
        b += 1;
    }
    t
};

/// 1 to 5 digits, at most 65535.
fn valid_port(p: &str) -> bool {
    (1..=5).contains(&p.len())
        && p.bytes()
            .try_fold(0u32, |n, b| {
                b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
            })
            .is_some_and(|n| n <= u32::from(u16::MAX))
}

/// `[v6]`: an IPv6 address as std reads it (no zone, no IPvFuture).
fn valid_ip_literal(name: &str) -> Option<()> {
    let inner = name.strip_prefix('[')?.strip_suffix(']')?;
    inner.parse::<std::net::Ipv6Addr>().ok().map(|_| ())
}

/// A path as routed and forwarded, and whether the client's path holds
/// what a route must refuse unless it takes raw paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path<'a> {
    pub path: Cow<'a, str>,
    pub refused: Option<Refused>,
}

/// Why a path is refused with 400 on a route that normalises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `%2f`, `%5c` or `%00` (any case), or a raw `\`: a separator or NUL
    /// the upstream may decode into the path after weir routed it.
    EncodedSeparator,
    /// A `%` not followed by two hex digits.
    BadEscape,
}

/// Normalise an origin-form path: unreserved escapes decoded (`%2e` → `.`,
/// `%41` → `A`), other escapes' hex upper-cased, `//` merged, dot segments
/// removed. A path that does not start with `/` (`*`) is left as it is.
/// Idempotent: a normalised path normalises to itself.
pub fn path(raw: &str) -> Path<'_> {
    let borrowed = |refused| Path {
        path: Cow::Borrowed(raw),
        refused,
    };
    if !raw.starts_with('/') || is_clean(raw) {
        return borrowed(None);
    }
    let (decoded, refused) = decode_unreserved(raw);
    let path = remove_dot_segments(&decoded);
    if path == raw {
        return borrowed(refused);
    }
    Path {
        path: Cow::Owned(path),
        refused,
    }
}

/// Nothing to do: no `%`, no `\`, and no segment after the leading `/`
/// that is empty (`//`; a trailing `/` is fine), `.` or `..`. One pass
/// over the bytes, counting the current segment and whether it is all
/// dots so far.
fn is_clean(raw: &str) -> bool {
    let dot_segment = |len: usize, dots: bool| dots && (1..=2).contains(&len);
    let (mut len, mut dots) = (0usize, true);
    for b in raw.bytes().skip(1) {
        match b {
            b'%' | b'\\' => return false,
            b'/' if len == 0 || dot_segment(len, dots) => return false,
            b'/' => (len, dots) = (0, true),
            b'.' => len += 1,
            _ => (len, dots) = (len + 1, false),
        }
    }
    !dot_segment(len, dots)
}

/// Percent-escapes of unreserved characters (RFC 3986 §2.3) decoded; the
/// others kept, hex upper-cased (§6.2.2.1). `%2f`, `%5c`, `%00` and a raw
/// `\` are kept but reported, as is a `%` without two hex digits (which
/// becomes `%25`).
fn decode_unreserved(raw: &str) -> (String, Option<Refused>) {
    let mut out = String::with_capacity(raw.len());
    let mut refused = None;
    let bytes = raw.as_bytes();
    // Start of the run not yet copied; `%`, hex digits and `\` are ASCII,
    // so every index here is on a character boundary.
    let mut copied = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' {
            refused = refused.or(Some(Refused::EncodedSeparator));
        }
        if b != b'%' {
            i += 1;
            continue;
        }
        out.push_str(raw.get(copied..i).unwrap_or_default());
        let hex = (bytes.get(i + 1).copied(), bytes.get(i + 2).copied());
        let value = match hex {
            (Some(h), Some(l)) => hex_value(h).zip(hex_value(l)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match value {
            Some(v) if is_unreserved(v) => out.push(char::from(v)),
            Some(v) => {
                if matches!(v, b'/' | b'\\' | 0) {
                    refused = refused.or(Some(Refused::EncodedSeparator));
                }
                out.push('%');
                out.push(char::from(HEX[usize::from(v >> 4)]));
                out.push(char::from(HEX[usize::from(v & 0xf)]));
            }
            None => {
                // Written as the escape it would have to be, so the
                // characters after it cannot form an escape with it later
                // (`%a%41` is `%25aA`, not `%aA`): normalising twice
                // changes nothing.
                refused = refused.or(Some(Refused::BadEscape));
                out.push_str("%25");
                i += 1;
                copied = i;
                continue;
            }
        }
        i += 3;
        copied = i;
    }
    out.push_str(raw.get(copied..).unwrap_or_default());
    (out, refused)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// RFC 3986 §5.2.4 on an absolute path, with empty segments merged first
/// (nginx's `merge_slashes`): one pass over the segments, a `..` taking
/// back the last one kept. A path ending in an empty, `.` or `..` segment
/// keeps its trailing `/`, as the RFC's algorithm leaves it.
fn remove_dot_segments(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut segments = path.split('/').skip(1).peekable();
    while let Some(seg) = segments.next() {
        let last = segments.peek().is_none();
        match seg {
            "" | "." => {}
            ".." => {
                let cut = out.rfind('/').unwrap_or(0);
                out.truncate(cut);
            }
            _ => {
                out.push('/');
                out.push_str(seg);
                continue;
            }
        }
        if last {
            out.push('/');
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests;
