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
    let (name, port) = split_port(raw)?;
    if let Some(p) = port
        && !valid_port(p)
    {
        return None;
    }
    let bare = if name.starts_with('[') {
        valid_ip_literal(name)?;
        name
    } else {
        let bare = name.strip_suffix('.').unwrap_or(name);
        valid_reg_name(bare).then_some(bare)?
    };
    let lower = !bare.bytes().any(|b| b.is_ascii_uppercase());
    if lower && bare.len() == name.len() {
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

/// `name` and the port after its `:`, if any. A bracketed literal ends at
/// its `]`; a reg-name holds no `:`, so a second one is refused.
fn split_port(raw: &str) -> Option<(&str, Option<&str>)> {
    let end = match raw.strip_prefix('[') {
        Some(rest) => rest.find(']')?.checked_add(2)?,
        None => raw.find(':').unwrap_or(raw.len()),
    };
    let (name, rest) = raw.split_at_checked(end)?;
    match rest.strip_prefix(':') {
        Some(port) => Some((name, Some(port))),
        None if rest.is_empty() => Some((name, None)),
        None => None,
    }
}

fn valid_port(p: &str) -> bool {
    (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
}

/// `[v6]`: an IPv6 address as std reads it (no zone, no IPvFuture).
fn valid_ip_literal(name: &str) -> Option<()> {
    let inner = name.strip_prefix('[')?.strip_suffix(']')?;
    inner.parse::<std::net::Ipv6Addr>().ok().map(|_| ())
}

/// Dot-separated labels of letters, digits, `-` and `_`, none empty.
fn valid_reg_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
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

/// Nothing to do: no `%`, no `\`, and no segment after the first `/` that
/// is empty (`//`, but a trailing `/` is fine), `.` or `..`.
fn is_clean(raw: &str) -> bool {
    if raw.bytes().any(|b| b == b'%' || b == b'\\') {
        return false;
    }
    let mut segments = raw.split('/').skip(1).peekable();
    while let Some(seg) = segments.next() {
        let last = segments.peek().is_none();
        if seg == "." || seg == ".." || (seg.is_empty() && !last) {
            return false;
        }
    }
    true
}

/// Percent-escapes of unreserved characters (RFC 3986 §2.3) decoded; the
/// others kept, hex upper-cased (§6.2.2.1). `%2f`, `%5c`, `%00` and a raw
/// `\` are kept but reported, as is a `%` without two hex digits.
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
                refused = refused.or(Some(Refused::BadEscape));
                out.push('%');
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
