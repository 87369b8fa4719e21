//! Property tests of what parses bytes from clients, upstreams and config
//! files — the same functions `fuzz/` fuzzes with coverage guidance on
//! nightly, here on stable so every `cargo test` runs them: the SSE
//! framer, the model extraction and splice, every translation pair
//! (request, whole answer, error body, stream events), each API's stream
//! watcher, local token counting, the config loader and the PROXY
//! protocol header reader's framing and parsing. Inputs are JSON
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
