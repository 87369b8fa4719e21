//! One pass over a JSON object's top level, at memchr speed: where each
//! top-level field's value sits, without parsing what weir does not need.
//!
//! An LLM request is mostly strings (a conversation, tool schemas, a
//! system prompt — 50 KiB for a Claude Code turn, megabytes for a long
//! one); weir needs a handful of top-level fields. A full parse (even
//! serde's skipping one) reads every byte of every string through the
//! tokenizer; here a string is crossed by `memchr2` for its closing quote
//! or an escape, and only the structure between strings is walked byte by
//! byte.
//!
//! What is checked: a top-level object of `"key": value` pairs, strings
//! closed, brackets balanced and of matching kinds, nesting no deeper than
//! serde_json allows (128), nothing after the object. What is left to the
//! upstream: the spelling of numbers and literals and the escapes inside
//! strings of values weir does not read — the upstream parses the body in
//! full anyway and refuses it in its own words. A value weir does read is
//! parsed properly by its caller.

use std::ops::Range;

/// Levels of nesting (the top-level object counts as one) past which a
/// body is refused, as serde_json refuses a 128th.
const MAX_LEVELS: usize = 127;

/// The body is not a JSON object weir can read.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAnObject;

/// A top-level field: its key (as written, between the quotes) and its
/// value's span in the body.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Field {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// What one pass found.
#[derive(Debug, Default)]
pub struct Skimmed {
    pub fields: Vec<Field>,
    /// Whether any string (key or value, at any depth) starts with one of
    /// the prefixes asked for.
    pub marked: bool,
}

/// Skim `body`: its top-level fields in order, and whether any string in
/// it starts with one of `marks`.
pub fn skim(body: &[u8], marks: &[&[u8]]) -> Result<Skimmed, NotAnObject> {
    let mut s = Skimmer {
        body,
        at: 0,
        marks,
        marked: false,
    };
    let mut fields = Vec::with_capacity(16);
    s.ws();
    s.expect(b'{')?;
    s.ws();
    if s.peek() == Some(b'}') {
        s.at += 1;
    } else {
        loop {
            s.ws();
            let key_start = s.at;
            s.expect(b'"')?;
            s.string()?;
            let key = key_start + 1..s.at - 1;
            s.ws();
            s.expect(b':')?;
            s.ws();
            let value_start = s.at;
            s.value()?;
            fields.push(Field {
                key,
                value: value_start..s.at,
            });
            s.ws();
            match s.next() {
                Some(b',') => continue,
                Some(b'}') => break,
                _ => return Err(NotAnObject),
            }
        }
    }
    s.ws();
    if s.at != body.len() {
        return Err(NotAnObject);
    }
    Ok(Skimmed {
        fields,
        marked: s.marked,
    })
}

struct Skimmer<'a> {
    body: &'a [u8],
    at: usize,
    marks: &'a [&'a [u8]],
    marked: bool,
}

impl Skimmer<'_> {
    fn peek(&self) -> Option<u8> {
        self.body.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn expect(&mut self, want: u8) -> Result<(), NotAnObject> {
        match self.next() {
            Some(b) if b == want => Ok(()),
            _ => Err(NotAnObject),
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Cross a string whose opening quote was just read; `at` ends past
    /// its closing quote.
    fn string(&mut self) -> Result<(), NotAnObject> {
        let rest = &self.body[self.at..];
        if !self.marked {
            self.marked = self
                .marks
                .iter()
                .any(|m| rest.first() == m.first() && rest.starts_with(m));
        }
        loop {
            let rest = &self.body[self.at..];
            let i = quote_or_escape(rest).ok_or(NotAnObject)?;
            if rest[i] == b'"' {
                self.at += i + 1;
                return Ok(());
            }
            // An escape: the byte after the backslash is never the end.
            self.at += i + 2;
            if self.at > self.body.len() {
                return Err(NotAnObject);
            }
        }
    }

    /// Cross one value of any kind.
    fn value(&mut self) -> Result<(), NotAnObject> {
        match self.peek() {
            Some(b'"') => {
                self.at += 1;
                self.string()
            }
            Some(b'{' | b'[') => self.nested(),
            Some(_) => {
                // A number or a literal: up to the next delimiter.
                let start = self.at;
                while let Some(b) = self.peek() {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    if matches!(b, b'"' | b'{' | b'[' | b':') {
                        return Err(NotAnObject);
                    }
                    self.at += 1;
                }
                if self.at == start {
                    return Err(NotAnObject);
                }
                Ok(())
            }
            None => Err(NotAnObject),
        }
    }

    /// Cross an object or array, whatever it holds, checking only that its
    /// brackets balance and match.
    fn nested(&mut self) -> Result<(), NotAnObject> {
        let mut open = [0u8; MAX_LEVELS];
        let mut depth = 0usize;
        while let Some(b) = self.next() {
            match b {
                b'"' => self.string()?,
                b'{' | b'[' => {
                    // The top-level object is one level already.
                    if depth + 2 > MAX_LEVELS {
                        return Err(NotAnObject);
                    }
                    open[depth] = if b == b'{' { b'}' } else { b']' };
                    depth += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1).ok_or(NotAnObject)?;
                    if open[depth] != b {
                        return Err(NotAnObject);
                    }
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err(NotAnObject)
    }
}

/// Where the first `"` or `\\` in `s` is. Most strings in a request are
/// short (keys, types, roles, ids): their first 32 bytes are looked at
/// eight at a time in a register, which beats setting up a vector search;
/// a longer string is crossed by `memchr2`.
fn quote_or_escape(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let head = s.len().min(32);
    let mut chunks = s[..head].chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_le_bytes(bytes);
        // A flagged byte can only be wrong above a true match, so the
        // lowest flag is the first match.
        let found =
            zero_byte(w ^ (ONES * u64::from(b'"'))) | zero_byte(w ^ (ONES * u64::from(b'\\')));
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    if let Some(i) = chunks
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\')
    {
        return Some(at + i);
    }
    memchr::memchr2(b'"', b'\\', &s[head..]).map(|i| head + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(body: &str) -> Result<Vec<(String, String)>, NotAnObject> {
        let s = skim(body.as_bytes(), &[])?;
        Ok(s.fields
            .into_iter()
            .map(|f| (body[f.key].to_string(), body[f.value].to_string()))
            .collect())
    }

    #[test]
    fn top_level_fields_and_their_values_are_found() {
        let got = keys(
            r#" { "a" : 1 , "b":"x\"}y", "c": {"d": [1, {"e": "]"}]}, "f": [ ], "g":true }  "#,
        )
        .expect("object");
        let want = [
            ("a", "1"),
            ("b", r#""x\"}y""#),
            ("c", r#"{"d": [1, {"e": "]"}]}"#),
            ("f", "[ ]"),
            ("g", "true"),
        ];
        assert_eq!(
            got,
            want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec()
        );
        assert_eq!(keys("{}").expect("empty"), vec![]);
    }

    #[test]
    fn what_is_not_an_object_is_refused() {
        for bad in [
            "",
            "[]",
            r#""s""#,
            "{",
            r#"{"a":1"#,
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":}"#,
            r#"{"a":"open}"#,
            r#"{"a":[1}]}"#,
            r#"{"a":{"b":1]}"#,
            r#"{"a":1} x"#,
            r#"{"a":1}}"#,
            r#"{"a":"\"}"#,
            r#"{a:1}"#,
            r#"{"a":1"b":2}"#,
        ] {
            assert!(keys(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn nesting_is_bounded_as_serde_bounds_it() {
        let deep = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n));
        assert!(keys(&deep(126)).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&deep(126)).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&deep(127)).is_err());
        assert!(keys(&deep(127)).is_err());
    }

    #[test]
    fn the_first_quote_or_escape_is_found_at_every_offset() {
        for len in 0..80 {
            for at in 0..len {
                for hit in [b'"', b'\\'] {
                    let mut s = vec![b'a'; len];
                    s[at] = hit;
                    // A later hit of the other kind, and bytes that differ
                    // from a hit by one bit, never win.
                    if at + 1 < len {
                        s[at + 1] = if hit == b'"' { b'\\' } else { b'"' };
                    }
                    if at > 0 {
                        s[at - 1] = b'"' ^ 1;
                    }
                    assert_eq!(quote_or_escape(&s), Some(at), "len {len} at {at}");
                }
            }
            assert_eq!(quote_or_escape(&vec![0x21; len]), None);
        }
    }

    #[test]
    fn marks_are_found_at_the_start_of_any_string() {
        let marked = |body: &str| {
            skim(body.as_bytes(), &[b"weir.", b"srvtoolu_weir_"])
                .expect("object")
                .marked
        };
        assert!(marked(r#"{"m":[{"sig":"weir.t1.abc"}]}"#));
        assert!(marked(r#"{"id":"srvtoolu_weir_01"}"#));
        assert!(!marked(r#"{"text":"see weir.t1 here","id":"srvtoolu_01"}"#));
    }
}
