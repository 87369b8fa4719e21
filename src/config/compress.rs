//! A route's response compression (`[route.compress]`): which codings,
//! for which content types, from what size, at which levels. Data only;
//! `crate::compress` applies it.

/// A content coding weir can apply to a response (RFC 9110 §8.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    /// `br` (RFC 7932).
    Brotli,
    /// `zstd` (RFC 8878).
    Zstd,
    /// `gzip` (RFC 1952).
    Gzip,
}

impl Coding {
    pub(crate) const ALL: [Coding; 3] = [Coding::Brotli, Coding::Zstd, Coding::Gzip];

    /// The token, as `Accept-Encoding`, `Content-Encoding` and the config
    /// write it.
    pub(crate) fn token(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    pub(crate) fn from_token(token: &str) -> Option<Coding> {
        Coding::ALL
            .into_iter()
            .find(|c| c.token().eq_ignore_ascii_case(token))
    }
}

/// What a compressing route does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compression {
    /// The codings offered, in the server's order of preference (a tie
    /// between q-values goes to the earlier).
    pub(crate) algorithms: Vec<Coding>,
    /// The media types compressed.
    pub(crate) types: Vec<TypePattern>,
    /// A declared `Content-Length` below this is sent as it is.
    pub(crate) min_size: u64,
    pub(crate) levels: Levels,
}

/// The level each coding compresses at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Levels {
    /// 1 to 9 (zlib's scale).
    pub(crate) gzip: u32,
    /// 0 to 11.
    pub(crate) brotli: u32,
    /// 1 to 19.
    pub(crate) zstd: u32,
}

/// The defaults, and their bounds.
pub(crate) mod default {
    pub(crate) const ALGORITHMS: [&str; 3] = ["br", "zstd", "gzip"];
    pub(crate) const TYPES: [&str; 8] = [
        "text/*",
        "application/json",
        "application/javascript",
        "application/xml",
        "image/svg+xml",
        "application/wasm",
        "*/*+json",
        "*/*+xml",
    ];
    pub(crate) const MIN_SIZE: u64 = 256;
    pub(crate) const GZIP_LEVEL: u32 = 6;
    pub(crate) const BROTLI_LEVEL: u32 = 4;
    pub(crate) const ZSTD_LEVEL: u32 = 3;
    pub(crate) const GZIP_LEVELS: std::ops::RangeInclusive<u64> = 1..=9;
    pub(crate) const BROTLI_LEVELS: std::ops::RangeInclusive<u64> = 0..=11;
    pub(crate) const ZSTD_LEVELS: std::ops::RangeInclusive<u64> = 1..=19;
}

/// A media type pattern: `type/subtype`, `type/*`, or `type/*+suffix`
/// (RFC 6838 §4.2.8's structured-syntax suffix), where `type` may be `*`.
/// Kept lower-case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TypePattern {
    /// `None` for `*`.
    top: Option<String>,
    sub: Subtype,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Subtype {
    Any,
    Exact(String),
    /// With its `+`.
    Suffix(String),
}

impl TypePattern {
    /// The pattern `text` writes, if it is one.
    pub(crate) fn parse(text: &str) -> Option<TypePattern> {
        let lower = text.trim().to_ascii_lowercase();
        let (top, sub) = lower.split_once('/')?;
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        };
        let top = match top {
            "*" => None,
            t if token(t) => Some(t.to_string()),
            _ => return None,
        };
        let sub = match sub {
            "*" => Subtype::Any,
            s if s.starts_with("*+") && token(&s[2..]) => Subtype::Suffix(s[1..].to_string()),
            s if token(s) && top.is_some() => Subtype::Exact(s.to_string()),
            _ => return None,
        };
        Some(TypePattern { top, sub })
    }

    /// Whether a `Content-Type` value's media type matches (parameters
    /// ignored, case-insensitive).
    pub(crate) fn matches(&self, content_type: &str) -> bool {
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        let Some((top, sub)) = essence.split_once('/') else {
            return false;
        };
        if let Some(t) = &self.top
            && !t.eq_ignore_ascii_case(top)
        {
            return false;
        }
        match &self.sub {
            Subtype::Any => true,
            Subtype::Exact(s) => s.eq_ignore_ascii_case(sub),
            Subtype::Suffix(suffix) => {
                sub.len() > suffix.len()
                    && sub
                        .get(sub.len() - suffix.len()..)
                        .is_some_and(|end| end.eq_ignore_ascii_case(suffix))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_patterns_match_by_type_subtype_and_suffix() {
        let p = |s| TypePattern::parse(s).expect(s);
        assert!(p("text/*").matches("text/html; charset=utf-8"));
        assert!(p("text/*").matches("TEXT/CSS"));
        assert!(!p("text/*").matches("application/json"));
        assert!(p("application/json").matches("application/json;charset=utf-8"));
        assert!(!p("application/json").matches("application/jsonx"));
        assert!(p("*/*+json").matches("application/problem+json"));
        assert!(!p("*/*+json").matches("application/json"));
        assert!(!p("*/*+json").matches("+json"));
        assert!(p("application/*+xml").matches("application/atom+xml"));
        assert!(!p("application/*+xml").matches("image/svg+xml"));
        for bad in ["text", "*/json", "text/", "te xt/html", "/html", "text/*+"] {
            assert!(TypePattern::parse(bad).is_none(), "{bad}");
        }
    }
}
