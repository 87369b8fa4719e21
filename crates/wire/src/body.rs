//! An LLM request body's top-level fields, found without parsing it: the
//! `model` (and where its string sits, so it can be replaced in place),
//! the conversation, whether it streams, its output limit, and whether it
//! carries weir's own state from an earlier turn.

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

/// Why a body names no usable model.
#[derive(Debug, PartialEq, Eq)]
pub enum ModelError {
    NotJson,
    Missing,
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

/// What every piece of state weir makes for another vendor starts with,
/// inside its JSON string: found in the same pass, so a native request
/// that carries none is sent on without a second look.
const WEIR_MARKS: [&[u8]; 2] = [
    crate::WEIR_STATE_MARK.as_bytes(),
    crate::anthropic::WEIR_SEARCH_ID_PREFIX.as_bytes(),
];

/// Find the top-level `model` and the few fields beside it weir uses, in
/// one pass that crosses everything else at memchr speed ([`skim`]): a
/// 50 KiB conversation is not parsed to find one string. The structure is
/// checked; the values weir does not read are the upstream's to judge. A
/// field weir reads given twice is refused (which one would the upstream
/// take?).
pub fn model(body: &[u8]) -> Result<Model, ModelError> {
    let skimmed = skim(body, &WEIR_MARKS).map_err(|_| ModelError::NotJson)?;
    let mut found: [Option<(&str, Range<usize>)>; WANTED.len()] = Default::default();
    for field in &skimmed.fields {
        let Some(i) = wanted(&body[field.key.start - 1..field.key.end + 1]) else {
            continue;
        };
        if found[i].is_some() {
            return Err(ModelError::NotJson);
        }
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
    let max_output = [max_tokens, max_output, max_completion]
        .into_iter()
        .flatten()
        .filter_map(|(raw, _)| raw.parse::<u64>().ok())
        .max();
    Ok(Model {
        name,
        span,
        conversation,
        stream: stream.is_some_and(|(s, _)| s == "true"),
        max_output,
        weir_state: skimmed.marked,
    })
}

/// Which wanted field a quoted key names: compared as written, and
/// decoded only when it holds an escape.
fn wanted(quoted: &[u8]) -> Option<usize> {
    let plain = &quoted[1..quoted.len() - 1];
    if !plain.contains(&b'\\') {
        return WANTED.iter().position(|w| w.as_bytes() == plain);
    }
    let key: String = serde_json::from_slice(quoted).ok()?;
    WANTED.iter().position(|w| *w == key)
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
        assert_eq!(of(r#"{"model":"m","max_tokens":"many"}"#), (None, false));
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
            Err(ModelError::NotJson),
            "routed by one model, billed by the other"
        );
        assert_eq!(
            model(br#"{"model":"a","stream":true,"stream":false}"#),
            Err(ModelError::NotJson)
        );
        let m = model(br#"{"mod\u0065l":"a","x":1,"x":2}"#).expect("model");
        assert_eq!(m.name, "a", "an escaped key is the key it spells");
        assert_eq!(
            model(br#"{"model":"a","mod\u0065l":"b"}"#),
            Err(ModelError::NotJson)
        );
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
