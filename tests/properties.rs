//! Property tests of what parses bytes from clients, upstreams and config
//! files — the same functions `fuzz/` fuzzes with coverage guidance on
//! nightly, here on stable so every `cargo test` runs them: the SSE
//! framer, the model extraction and splice, every translation pair
//! (request, whole answer, error body, stream events), each API's stream
//! watcher, local token counting, the config loader and the PROXY
//! protocol header reader's framing and parsing, and the host and path
//! normalisation before routing (against a reference reading of RFC 3986
//! written here). Inputs are JSON
//! built from the fields the APIs use, with values of every type (a number
//! where an object belongs found the panic of issue 23).

use bytes::Bytes;
use http::StatusCode;
use proptest::prelude::*;
use serde_json::{Map, Value};
use weir::testing::listen::{Framing, V2_SIGNATURE, frame, parse};
use weir_wire::Api;
use weir_wire::body::{model, splice};
use weir_wire::sse::{Framer, fields};
use weir_wire::translate::{Pair, tokens};

/// Field names the three APIs and their events use.
const KEYS: &[&str] = &[
    "type",
    "model",
    "messages",
    "content",
    "role",
    "text",
    "usage",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "message",
    "delta",
    "index",
    "content_block",
    "stop_reason",
    "error",
    "code",
    "id",
    "name",
    "input",
    "arguments",
    "call_id",
    "response",
    "output",
    "item",
    "output_index",
    "content_index",
    "sequence_number",
    "choices",
    "finish_reason",
    "tool_calls",
    "function",
    "prompt_tokens",
    "completion_tokens",
    "input_tokens_details",
    "cached_tokens",
    "reasoning",
    "effort",
    "tools",
    "tool_choice",
    "system",
    "instructions",
    "max_output_tokens",
    "max_tokens",
    "thinking",
    "budget_tokens",
    "stream",
    "user",
    "metadata",
    "source",
    "image_url",
    "partial_json",
    "summary_index",
    "incomplete_details",
    "reason",
    "status",
    "part",
];

/// String values with meaning: event types, block types, codes.
const WORDS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "image",
    "document",
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "response.created",
    "response.output_item.added",
    "response.output_text.delta",
    "response.function_call_arguments.delta",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "function_call",
    "function_call_output",
    "message",
    "reasoning",
    "user",
    "assistant",
    "system",
    "max_tokens",
    "tool_calls",
    "length",
    "rate_limit_exceeded",
    "context_length_exceeded",
    "overloaded_error",
    "high",
    "prompt is too long: 5 tokens > 4 maximum",
    "[DONE]",
];

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop_oneof![Just(0u64), Just(1), Just(u64::MAX), Just(u64::MAX - 1)].prop_map(Value::from),
        proptest::sample::select(WORDS).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((proptest::sample::select(KEYS), inner), 0..8).prop_map(
                |fields| {
                    Value::Object(
                        fields
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect::<Map<_, _>>(),
                    )
                }
            ),
        ]
    })
}

fn event_name() -> impl Strategy<Value = Option<String>> {
    prop::option::of(proptest::sample::select(WORDS).prop_map(str::to_string))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_framer_loses_and_invents_nothing(a in prop::collection::vec(any::<u8>(), 0..256),
                                            b in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut framer = Framer::default();
        let mut out = Vec::new();
        for part in [&a, &b] {
            framer.push(part);
            while let Some(event) = framer.next_event() {
                prop_assert!(event.ends_with(b"\n\n") || event.ends_with(b"\n\r\n"));
                let _ = fields(&event);
                out.extend_from_slice(&event);
            }
        }
        prop_assert_eq!(out.len() + framer.pending(), a.len() + b.len());
    }

    #[test]
    fn a_spliced_model_reads_back(body in json(), name in ".{0,20}") {
        let bytes = Bytes::from(body.to_string());
        if let Ok(found) = model(&bytes) {
            let out = splice(&bytes, &found.span, &name);
            let again = model(&out).expect("a spliced body names a model");
            prop_assert_eq!(again.name, name);
        }
    }

    #[test]
    fn every_pair_translates_any_json_to_json(body in json(), status in 100u16..600) {
        let raw = body.to_string();
        let status = StatusCode::from_u16(status).expect("status");
        for pair in Pair::ALL {
            if let Ok(out) = pair.request(raw.as_bytes(), "m") {
                prop_assert!(serde_json::from_slice::<Value>(&out.body).is_ok());
            }
            if let Some(out) = pair.response(raw.as_bytes(), "m", &Default::default()) {
                prop_assert!(serde_json::from_slice::<Value>(&out).is_ok());
            }
            prop_assert!(serde_json::from_slice::<Value>(&pair.error(status, raw.as_bytes())).is_ok());
        }
    }

    #[test]
    fn streams_of_any_events_become_whole_json_events(
        events in prop::collection::vec((event_name(), json()), 0..12)
    ) {
        for (pair, api) in Pair::ALL.into_iter().zip(Api::ALL) {
            let mut stream = pair.stream("m", Default::default());
            let mut watch = api.watch();
            let mut out = Vec::new();
            for (name, data) in &events {
                let data = data.to_string();
                stream.event(name.as_deref(), &data, &mut out);
                let _ = watch.observe(name.as_deref(), &data);
            }
            out.push(watch.in_band_error("cut"));
            let mut framer = Framer::default();
            for bytes in &out {
                framer.push(bytes);
                while let Some(event) = framer.next_event() {
                    let (_, data) = fields(&event);
                    prop_assert!(serde_json::from_str::<Value>(&data).is_ok(), "{}", data);
                }
                prop_assert_eq!(framer.pending(), 0);
            }
        }
    }

    #[test]
    fn token_counting_takes_any_body(body in json()) {
        let _ = tokens::count(body.to_string().as_bytes());
    }

    /// A PROXY header split anywhere: each prefix asks for more (within
    /// what it names) or decides what the whole does; a header never
    /// reaches past what arrived, and its fields parse without a panic.
    #[test]
    fn proxy_headers_decide_the_same_whole_or_in_pieces(
        start in prop_oneof![
            Just(&b"PROXY "[..]),
            Just(&b"PROXY TCP4 192.0.2.1 "[..]),
            Just(&b"PROXY TCP6 "[..]),
            Just(&V2_SIGNATURE[..]),
            Just(&b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c"[..]),
            Just(&b""[..]),
        ],
        // CR and LF often, so v1 lines end (and end badly) early.
        rest in prop::collection::vec(
            prop_oneof![4 => any::<u8>(), 1 => Just(b'\r'), 1 => Just(b'\n')],
            0..300,
        ),
    ) {
        let input = [start, &rest].concat();
        let whole = frame(&input);
        if let Framing::Header(len) = whole {
            prop_assert!(len <= input.len());
            let _ = parse(&input[..len]);
        }
        for k in 0..input.len() {
            match frame(&input[..k]) {
                Framing::NeedMore(most) => prop_assert!(most > k),
                decided => prop_assert_eq!(decided, whole),
            }
        }
    }

    #[test]
    fn the_config_loader_reports_and_never_panics(text in "(\\[[a-z.]{1,12}\\]\n|[a-z_]{1,16} = (\"[^\"]{0,12}\"|[0-9]{1,25}|true|\\[\\])\n){0,12}") {
        let _ = weir::testing::config::Config::parse(std::path::Path::new("p.toml"), &text);
    }
}

// Hosts and paths before routing: the path normalisation against a plain
// reading of RFC 3986 — §2.3's unreserved escapes decoded, empty segments
// merged, then §5.2.4's five rules exactly as written, one buffer to the
// other.

/// §5.2.4, rule by rule.
fn rfc_remove_dot_segments(path: &str) -> String {
    let mut input = path.to_string();
    let mut output = String::new();
    let pop_last = |output: &mut String| {
        let cut = output.rfind('/').unwrap_or(0);
        output.truncate(cut);
    };
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix("../") {
            input = rest.to_string();
        } else if let Some(rest) = input.strip_prefix("./") {
            input = rest.to_string();
        } else if let Some(rest) = input.strip_prefix("/./") {
            input = format!("/{rest}");
        } else if input == "/." {
            input = "/".to_string();
        } else if let Some(rest) = input.strip_prefix("/../") {
            input = format!("/{rest}");
            pop_last(&mut output);
        } else if input == "/.." {
            input = "/".to_string();
            pop_last(&mut output);
        } else if input == "." || input == ".." {
            input.clear();
        } else {
            let start = usize::from(input.starts_with('/'));
            let end = input[start..].find('/').map_or(input.len(), |i| i + start);
            output.push_str(&input[..end]);
            input = input[end..].to_string();
        }
    }
    output
}

/// §2.3 and §6.2.2.1: unreserved escapes decoded, the others' hex in
/// upper case; a `%` without two hex digits escaped itself (`%25`), so
/// what follows cannot make an escape of it the second time.
fn rfc_decode_unreserved(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let hex = after
            .get(..2)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(b) => {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    out.push(char::from(b));
                } else {
                    out.push_str(&format!("%{b:02X}"));
                }
                rest = &after[2..];
            }
            _ => {
                out.push_str("%25");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn rfc_normalise(path: &str) -> String {
    if !path.starts_with('/') {
        return path.to_string();
    }
    let mut merged = rfc_decode_unreserved(path);
    while merged.contains("//") {
        merged = merged.replace("//", "/");
    }
    rfc_remove_dot_segments(&merged)
}

/// What a route that normalises must refuse: an encoded `/`, `\` or NUL,
/// a raw `\`, a broken escape.
fn rfc_refused(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let broken = path.match_indices('%').any(|(at, _)| {
        path.get(at + 1..at + 3)
            .is_none_or(|h| !h.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    ["%2f", "%5c", "%00", "\\"]
        .iter()
        .any(|s| lower.contains(s))
        || broken
}

/// Paths from the pieces that matter: separators, dots plain and
/// escaped, escapes of every kind, broken ones, other characters.
fn paths() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => Just("/".to_string()),
        3 => Just(".".to_string()),
        2 => Just("..".to_string()),
        2 => prop_oneof![Just("%2e"), Just("%2E"), Just("%2f"), Just("%2F"), Just("%5c"), Just("%00"), Just("%41"), Just("%7e"), Just("%25"), Just("%c3%a9"), Just("%"), Just("%2"), Just("%zz"), Just("\\")].prop_map(String::from),
        3 => "[a-zA-Z0-9~_-]{1,3}",
        1 => "[%0-9a-fA-F]{1,3}",
        1 => Just("é".to_string()),
    ];
    (any::<bool>(), prop::collection::vec(piece, 0..24)).prop_map(|(rooted, pieces)| {
        format!("{}{}", if rooted { "/" } else { "" }, pieces.concat())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Differential: weir's one-pass normalisation is the RFC's algorithm.
    #[test]
    fn paths_normalise_as_rfc_3986_reads_them(raw in paths()) {
        let got = weir::testing::route::path(&raw);
        let want = rfc_normalise(&raw);
        prop_assert_eq!(got.path.as_ref(), want.as_str(), "{:?}", raw);
        prop_assert_eq!(got.refused.is_some(), raw.starts_with('/') && rfc_refused(&raw), "{:?}", raw);
        // Idempotent, and a path that needs no change is borrowed. (A
        // refusal is the client's path's: `/%/..` is refused, and
        // normalises to a clean `/`.)
        let again = weir::testing::route::path(&got.path);
        prop_assert_eq!(again.path.as_ref(), got.path.as_ref());
        prop_assert!(matches!(again.path, std::borrow::Cow::Borrowed(_)));
    }

    /// A host that passes is a name or literal with a port, and passes
    /// again as itself.
    #[test]
    fn hosts_that_pass_are_names_and_pass_again(raw in "[a-zA-Z0-9._:@/\\[\\]\\\\%,-]{0,24}") {
        if let Some(host) = weir::testing::route::host(&raw) {
            let again = weir::testing::route::host(host.authority());
            prop_assert_eq!(again.as_ref(), Some(&host), "{:?}", raw);
            prop_assert!(!host.authority().contains(['@', '/', '\\', '%', ',']));
            prop_assert_eq!(host.authority(), host.authority().to_ascii_lowercase());
            prop_assert!(host.authority().starts_with(host.name()));
        }
    }
}
