//! An LLM request body's top-level fields, found without parsing it: the
//! `model` (and where its string sits, so it can be replaced in place),
//! the conversation, whether it streams, its output limit, and whether it
//! carries weir's own state from an earlier turn.

use std::borrow::Cow;
use std::ops::Range;

use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::skim::skim;

/// The `model` a request names, and where its JSON string sits in the body.
#[derive(Debug, PartialEq, Eq)]
pub struct Model {
    pub name: String,
    pub span: Range<usize>,
    /// The conversation the body names, if any: Codex's
    /// `prompt_cache_key`, else Anthropic's `metadata.user_id` (which
    /// Claude Code makes per session).
    pub conversation: Option<String>,
    /// Whether the client asks for a stream.
    pub stream: bool,
    /// The most output the request allows, in whichever field its API
    /// names it (`max_tokens`, `max_output_tokens`,
    /// `max_completion_tokens`; the largest when several are set).
    pub max_output: Option<u64>,
    /// Whether the body may carry state weir made for another vendor on
    /// an earlier turn (a string starting with one of weir's marks).
    pub weir_state: bool,
}

#[derive(Deserialize)]
struct MetadataProbe<'a> {
    #[serde(borrow, default)]
    user_id: Option<&'a RawValue>,
}

/// Why a body is refused before it is routed.
#[derive(Debug, PartialEq, Eq)]
pub enum ModelError {
    NotJson,
    Missing,
    /// A top-level key given twice: which one would the upstream take?
    DuplicateKey,
    /// A top-level key that Unicode simple case folding makes a field weir
    /// reads without being it (`"MODEL"`, `"max_to\u212aens"`): an
    /// upstream whose decoder matches keys case-insensitively (Go's
    /// `encoding/json`) would read it as that field.
    FoldedKey(&'static str),
    /// An output limit that is not a whole number (a fraction, a negative,
    /// a string): weir would reserve the default while a lax upstream
    /// (pydantic coerces `"64000"`) allows what it says.
    BadLimit(&'static str),
}

/// Bodies up to this size are scanned for [`model`] on the serving thread
/// (`examples/model_scan.rs`: ~6 GB/s, so ≤ ~45 µs); larger ones on the
/// blocking pool.
pub const SCAN_INLINE_MAX: usize = 256 * 1024;

/// The top-level fields weir reads from an LLM request.
const WANTED: [&str; 7] = [
    "model",
    "prompt_cache_key",
    "metadata",
    "stream",
    "max_tokens",
    "max_output_tokens",
    "max_completion_tokens",
];

/// The shortest and longest of [`WANTED`], in bytes.
const WANTED_LEN: std::ops::RangeInclusive<usize> = 5..=21;

/// What every piece of state weir makes for another vendor starts with,
/// inside its JSON string: found in the same pass, so a native request
/// that carries none is sent on without a second look.
const WEIR_MARKS: [&[u8]; 2] = [
    crate::WEIR_STATE_MARK.as_bytes(),
    crate::anthropic::WEIR_SEARCH_ID_PREFIX.as_bytes(),
];

/// Up to this many top-level keys are checked for duplicates pair by pair
/// without allocating; more are sorted.
const PAIRWISE_KEYS: usize = 32;

/// Find the top-level `model` and the few fields beside it weir uses, in
/// one pass that crosses everything else at memchr speed ([`skim`]): a
/// 50 KiB conversation is not parsed to find one string. The structure is
/// checked; the values weir does not read are the upstream's to judge. A
/// body an upstream could read differently from weir is refused: a
/// top-level key given twice (decoders differ on which wins), one that
/// case-folds to a field weir reads, an output limit that is not a whole
/// number.
pub fn model(body: &[u8]) -> Result<Model, ModelError> {
    let skimmed = skim(body, &WEIR_MARKS).map_err(|_| ModelError::NotJson)?;
    // Keys without an escape (nearly every body's) compare as written:
    // decoding is paid only by a body that escapes a key.
    let escaped = skimmed
        .fields
        .iter()
        .any(|f| body[f.key.clone()].contains(&b'\\'));
    let keys = |i: usize| match escaped {
        true => key_text(body, &skimmed.fields[i].key),
        false => Ok(Cow::Borrowed(&body[skimmed.fields[i].key.clone()])),
    };
    no_duplicates(skimmed.fields.len(), keys)?;
    let mut found: [Option<(&str, Range<usize>)>; WANTED.len()] = Default::default();
    for (i, field) in skimmed.fields.iter().enumerate() {
        let key = keys(i)?;
        let Some(i) = wanted(&key)? else {
            continue;
        };
        let value =
            std::str::from_utf8(&body[field.value.clone()]).map_err(|_| ModelError::NotJson)?;
        found[i] = Some((value, field.value.clone()));
    }
    let [
        model,
        prompt_cache_key,
        metadata,
        stream,
        max_tokens,
        max_output,
        max_completion,
    ] = found;
    let (raw, span) = model.ok_or(ModelError::Missing)?;
    let name: String = serde_json::from_str(raw).map_err(|_| ModelError::Missing)?;
    // Only the small `metadata` value is read again, and a field of
    // another shape is no conversation (never an error: an upstream judges
    // the body).
    let text = |raw: &str| serde_json::from_str::<String>(raw).ok();
    let conversation = prompt_cache_key
        .and_then(|(raw, _)| text(raw))
        .or_else(|| {
            let meta: MetadataProbe<'_> = serde_json::from_str(metadata?.0).ok()?;
            meta.user_id.and_then(|raw| text(raw.get()))
        })
        .filter(|c| !c.is_empty());
    let limits = [
        (WANTED[4], max_tokens),
        (WANTED[5], max_output),
        (WANTED[6], max_completion),
    ];
    let mut max_output = None;
    for (name, field) in limits {
        if let Some((raw, _)) = field {
            max_output = max_output.max(limit(raw).map_err(|()| ModelError::BadLimit(name))?);
        }
    }
    Ok(Model {
        name,
        span,
        conversation,
        stream: stream.is_some_and(|(s, _)| s == "true"),
        max_output,
        weir_state: skimmed.marked,
    })
}

/// An output limit as an upstream reads it: a JSON number that is a whole
/// number, however spelled (`64000`, `64000.0`, `6.4e4`; past `u64`, the
/// most), or `null` (unset). Anything else is refused.
fn limit(raw: &str) -> Result<Option<u64>, ()> {
    if raw == "null" {
        return Ok(None);
    }
    if let Ok(n) = raw.parse::<u64>() {
        return Ok(Some(n));
    }
    // Only a JSON number reaches the float reading (Rust's parser also
    // takes `inf`, `NaN`, `+1`).
    if !raw.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(());
    }
    let n: f64 = serde_json::from_str(raw).map_err(|_| ())?;
    if !n.is_finite() || n.fract() != 0.0 {
        return Err(());
    }
    // Whole and non-negative: `as` saturates past u64::MAX.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(Some(n as u64))
}

/// A top-level key as a decoder reads it: as written, or decoded when it
/// holds an escape.
fn key_text<'a>(body: &'a [u8], key: &Range<usize>) -> Result<Cow<'a, [u8]>, ModelError> {
    let plain = &body[key.clone()];
    if !plain.contains(&b'\\') {
        return Ok(Cow::Borrowed(plain));
    }
    let quoted = &body[key.start - 1..key.end + 1];
    let decoded: String = serde_json::from_slice(quoted).map_err(|_| ModelError::NotJson)?;
    Ok(Cow::Owned(decoded.into_bytes()))
}

/// Refuse a body whose top-level keys (as decoded) repeat: pair by pair
/// for the usual handful, sorted past [`PAIRWISE_KEYS`].
fn no_duplicates<'a>(
    n: usize,
    key: impl Fn(usize) -> Result<Cow<'a, [u8]>, ModelError>,
) -> Result<(), ModelError> {
    if n <= PAIRWISE_KEYS {
        for i in 0..n {
            let a = key(i)?;
            for j in i + 1..n {
                if a == key(j)? {
                    return Err(ModelError::DuplicateKey);
                }
            }
        }
        return Ok(());
    }
    let mut all = (0..n).map(key).collect::<Result<Vec<_>, _>>()?;
    all.sort_unstable();
    if all.windows(2).any(|w| w[0] == w[1]) {
        return Err(ModelError::DuplicateKey);
    }
    Ok(())
}

/// Which wanted field a decoded key names exactly; a key that only
/// case-folds to one is refused.
fn wanted(key: &[u8]) -> Result<Option<usize>, ModelError> {
    if let Some(i) = WANTED.iter().position(|w| w.as_bytes() == key) {
        return Ok(Some(i));
    }
    match folded(key) {
        Some(i) => Err(ModelError::FoldedKey(WANTED[i])),
        None => Ok(None),
    }
}

/// Which wanted field `key` matches under Unicode simple case folding.
/// Every wanted field is lower-case ASCII, and the only characters outside
/// ASCII whose simple folding is an ASCII letter are U+212A KELVIN SIGN
/// (`k`) and U+017F LATIN SMALL LETTER LONG S (`s`), so folding is a
/// table of two; a key whose length cannot be a wanted field's (each of
/// those is at most 3 bytes for 1) is passed without a look.
fn folded(key: &[u8]) -> Option<usize> {
    if key.len() < *WANTED_LEN.start() || key.len() > WANTED_LEN.end() * 3 {
        return None;
    }
    if key.is_ascii() {
        return WANTED
            .iter()
            .position(|w| w.as_bytes().eq_ignore_ascii_case(key));
    }
    let mut buf = [0u8; 21];
    let mut len = 0;
    for c in std::str::from_utf8(key).ok()?.chars() {
        let f = match c {
            '\u{212a}' => b'k',
            '\u{17f}' => b's',
            c if c.is_ascii() => (c as u8).to_ascii_lowercase(),
            _ => return None,
        };
        *buf.get_mut(len)? = f;
        len += 1;
    }
    let folded = &buf[..len];
    WANTED.iter().position(|w| w.as_bytes() == folded)
}

/// `body` with the model at `span` replaced by `name`; every other byte
/// unchanged.
pub fn splice(body: &Bytes, span: &Range<usize>, name: &str) -> Bytes {
    let quoted = serde_json::Value::String(name.to_string()).to_string();
    let mut out = BytesMut::with_capacity(body.len() + quoted.len());
    out.extend_from_slice(&body[..span.start]);
    out.extend_from_slice(quoted.as_bytes());
    out.extend_from_slice(&body[span.end..]);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_found_and_replaced_in_place() {
        let body = Bytes::from_static(
            br#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],  "model" : "claude-x","max_tokens":5}"#,
        );
        let m = model(&body).expect("model");
        assert_eq!(m.name, "claude-x");
        assert_eq!(&body[m.span.clone()], br#""claude-x""#);
        let out = splice(&body, &m.span, "upstream-id");
        let expected = String::from_utf8_lossy(&body).replace("\"claude-x\"", "\"upstream-id\"");
        assert_eq!(out, Bytes::from(expected), "only the model changed");
    }

    #[test]
    fn the_output_limit_and_stream_are_found_in_the_same_pass() {
        let of = |body: &str| {
            let m = model(body.as_bytes()).expect("model");
            (m.max_output, m.stream)
        };
        assert_eq!(
            of(r#"{"model":"m","max_tokens":64,"stream":true}"#),
            (Some(64), true)
        );
        assert_eq!(
            of(r#"{"model":"m","max_output_tokens":7}"#),
            (Some(7), false)
        );
        assert_eq!(
            of(r#"{"model":"m","max_tokens":5,"max_completion_tokens":9,"stream":false}"#),
            (Some(9), false)
        );
        assert_eq!(
            model(br#"{"model":"m","max_tokens":"many"}"#),
            Err(ModelError::BadLimit("max_tokens"))
        );
    }

    #[test]
    fn the_conversation_is_found_in_the_same_pass() {
        let of = |body: &str| model(body.as_bytes()).expect("model").conversation;
        assert_eq!(
            of(r#"{"model":"m","prompt_cache_key":"conv-1","metadata":{"user_id":"u"}}"#),
            Some("conv-1".into())
        );
        assert_eq!(
            of(r#"{"model":"m","metadata":{"user_id":"user_x_session_y"}}"#),
            Some("user_x_session_y".into())
        );
        for none in [
            r#"{"model":"m"}"#,
            r#"{"model":"m","metadata":null,"prompt_cache_key":7}"#,
            r#"{"model":"m","metadata":{"user_id":""}}"#,
            r#"{"model":"m","metadata":[1]}"#,
        ] {
            assert_eq!(of(none), None, "{none}");
        }
    }

    #[test]
    fn nested_models_do_not_count_and_bad_json_is_refused() {
        assert_eq!(
            model(br#"{"metadata":{"model":"x"}}"#),
            Err(ModelError::Missing)
        );
        assert_eq!(model(b"{\"model\": \"x\""), Err(ModelError::NotJson));
        assert_eq!(model(br#"{"model": 5}"#), Err(ModelError::Missing));
    }

    #[test]
    fn a_field_weir_reads_given_twice_is_refused_and_escaped_keys_count() {
        assert_eq!(
            model(br#"{"model":"a","messages":[],"model":"b"}"#),
            Err(ModelError::DuplicateKey),
            "routed by one model, billed by the other"
        );
        assert_eq!(
            model(br#"{"model":"a","stream":true,"stream":false}"#),
            Err(ModelError::DuplicateKey)
        );
        let m = model(br#"{"mod\u0065l":"a","x":1}"#).expect("model");
        assert_eq!(m.name, "a", "an escaped key is the key it spells");
        assert_eq!(
            model(br#"{"model":"a","mod\u0065l":"b"}"#),
            Err(ModelError::DuplicateKey)
        );
    }

    #[test]
    fn any_top_level_key_given_twice_is_refused() {
        for body in [
            r#"{"model":"a","x":1,"x":2}"#,
            r#"{"model":"a","x":1,"\u0078":2}"#,
            r#"{"model":"a","":1,"":2}"#,
        ] {
            assert_eq!(
                model(body.as_bytes()),
                Err(ModelError::DuplicateKey),
                "{body}"
            );
        }
        // Past the pairwise bound, sorted.
        let many = |dup: bool| {
            let mut keys: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
            if dup {
                keys.push("\"k\\u0037\":1".into());
            }
            format!("{{\"model\":\"m\",{}}}", keys.join(","))
        };
        assert!(model(many(false).as_bytes()).is_ok());
        assert_eq!(model(many(true).as_bytes()), Err(ModelError::DuplicateKey));
        // Nested keys are the upstream's business.
        assert!(model(br#"{"model":"a","m":{"x":1,"x":2}}"#).is_ok());
    }

    #[test]
    fn a_key_that_case_folds_to_a_field_weir_reads_is_refused() {
        for (body, field) in [
            (r#"{"model":"m","MODEL":"other"}"#, "model"),
            (r#"{"Model":"other"}"#, "model"),
            (r#"{"model":"m","max_to\u212aens":64000}"#, "max_tokens"),
            (
                "{\"model\":\"m\",\"max_to\u{212a}ens\":64000}",
                "max_tokens",
            ),
            (r#"{"model":"m","\u017ftream":true}"#, "stream"),
            (
                r#"{"model":"m","MAX_COMPLETION_TOKENS":1}"#,
                "max_completion_tokens",
            ),
            (
                r#"{"model":"m","Prompt_Cache_Key":"c"}"#,
                "prompt_cache_key",
            ),
        ] {
            assert_eq!(
                model(body.as_bytes()),
                Err(ModelError::FoldedKey(field)),
                "{body}"
            );
        }
        // Keys that only look alike, and fields weir does not read, pass.
        for body in [
            r#"{"model":"m","models":1,"Messages":[],"max_tokens_":1,"mödel":1}"#,
            r#"{"model":"m","MODEL_":1,"STREAMS":1,"\u212a":1}"#,
        ] {
            assert!(model(body.as_bytes()).is_ok(), "{body}");
        }
    }

    #[test]
    fn a_whole_number_output_limit_is_read_however_it_is_spelled() {
        let max = |v: &str| model(format!(r#"{{"model":"m","max_tokens":{v}}}"#).as_bytes());
        for (v, want) in [
            ("64000", 64000),
            ("64000.0", 64000),
            ("1e5", 100_000),
            ("1E5", 100_000),
            ("6.4e4", 64000),
            ("100000e-1", 10000),
            ("0", 0),
            ("1e300", u64::MAX),
            ("99999999999999999999999", u64::MAX),
        ] {
            assert_eq!(max(v).map(|m| m.max_output), Ok(Some(want)), "{v}");
        }
        assert_eq!(max("null").map(|m| m.max_output), Ok(None));
        for bad in [
            "64000.5",
            "-1",
            "-0",
            "-1e3",
            "\"64000\"",
            "true",
            "[1]",
            "{}",
            "NaN",
        ] {
            assert_eq!(
                max(bad).err(),
                Some(ModelError::BadLimit("max_tokens")),
                "{bad}"
            );
        }
    }

    proptest::proptest! {
        /// On any JSON object, the scan finds what a full parse finds.
        #[test]
        fn the_scan_agrees_with_a_full_parse(
            fields in proptest::collection::vec((key(), value()), 0..8),
            pretty in proptest::bool::ANY,
        ) {
            let mut object = serde_json::Map::new();
            for (k, v) in fields {
                object.insert(k, v);
            }
            let value = serde_json::Value::Object(object);
            let text = if pretty {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string(&value)
            }
            .expect("json");
            let want = value.get("model").and_then(|m| m.as_str());
            match model(text.as_bytes()) {
                Ok(m) => {
                    proptest::prop_assert_eq!(Some(m.name.as_str()), want);
                    proptest::prop_assert_eq!(
                        m.stream,
                        value.get("stream") == Some(&serde_json::Value::Bool(true))
                    );
                    let max = ["max_tokens", "max_output_tokens", "max_completion_tokens"]
                        .iter()
                        .filter_map(|k| value.get(*k).and_then(serde_json::Value::as_u64))
                        .max();
                    proptest::prop_assert_eq!(m.max_output, max);
                }
                Err(ModelError::BadLimit(field)) => {
                    let v = &value[field];
                    proptest::prop_assert!(!v.is_u64() && !v.is_null(), "{v}");
                }
                Err(e) => {
                    proptest::prop_assert_eq!(e, ModelError::Missing);
                    proptest::prop_assert!(want.is_none());
                }
            }
        }
    }

    fn key() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("model".to_string()),
            Just("stream".to_string()),
            Just("max_tokens".to_string()),
            Just("max_completion_tokens".to_string()),
            Just("metadata".to_string()),
            "[a-z\\\\\"]{0,6}",
        ]
    }

    fn value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u32>().prop_map(|n| Value::from(u64::from(n))),
            any::<i64>().prop_map(Value::from),
            "\\PC{0,12}".prop_map(Value::String),
            "[\"\\\\{}\\[\\]:,]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(("[a-z\"]{0,4}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }
}
