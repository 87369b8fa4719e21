//! The Codex-on-Anthropic translation against golden fixtures.

use serde_json::{Value, json};

use super::request::limits;
use super::*;
use crate::responses;
use crate::translate::ToolNames;
use crate::translate::shared::blocks::document_block;

/// A PDF and plain text inline, a PDF by URL; an uploaded file's id
/// and other media types have no Anthropic document.
#[test]
fn file_inputs_become_documents() {
    assert_eq!(
        document_block(
            Some("data:application/pdf;base64,JVBE"),
            Some("a.pdf"),
            None
        ),
        Some(json!({"type": "document", "title": "a.pdf",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}))
    );
    assert_eq!(
        document_block(Some("data:text/plain;base64,bm90ZXM="), None, None),
        Some(json!({"type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}))
    );
    assert_eq!(
        document_block(None, None, Some("https://weir.example/a.pdf")),
        Some(
            json!({"type": "document", "source": {"type": "url", "url": "https://weir.example/a.pdf"}})
        )
    );
    assert_eq!(
        document_block(Some("data:image/png;base64,QUJD"), None, None),
        None
    );
    assert_eq!(
        document_block(Some("data:text/plain;base64,%%"), None, None),
        None
    );
    assert_eq!(document_block(None, Some("a.pdf"), None), None);
}

#[test]
fn codex_request_golden() {
    let req = json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be careful."}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "List files"},
                {"type": "input_image", "image_url": "data:image/png;base64,QUJD"},
            ]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xyz"},
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files."}]},
        ],
        "tools": [
            {"type": "function", "name": "shell", "description": "Run a command", "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}, "strict": false},
            {"type": "web_search"},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "stream": true,
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "temperature": 0.5,
    });
    let (out, names) = request(&req, "claude-sonnet-4").expect("translated");
    assert!(!names.client_limit);
    assert_eq!(
        out,
        json!({
            "model": "claude-sonnet-4",
            "system": "You are Codex.\n\nBe careful.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "List files"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "shell", "input": {"command": ["ls"]}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt\nb.txt"},
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
            ],
            "tools": [
                {"name": "shell", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "array"}}}},
                {"type": "web_search_20250305", "name": "web_search"},
            ],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
            "thinking": {"type": "enabled", "budget_tokens": 8192},
            "max_tokens": 24576,
            "stream": true,
        })
    );
}

fn run(events: &[(&str, Value)]) -> Vec<(String, Value)> {
    run_with(ToolNames::default(), events)
}

fn run_with(names: ToolNames, events: &[(&str, Value)]) -> Vec<(String, Value)> {
    let mut s = Stream::new("gpt-5-codex", names);
    let mut out = Vec::new();
    for (name, data) in events {
        s.event(Some(name), &data.to_string(), &mut out);
    }
    out.iter()
        .map(|b| {
            let text = std::str::from_utf8(b).expect("utf8");
            let mut lines = text.lines();
            let name = lines.next().expect("event")["event: ".len()..].to_string();
            let data = &lines.next().expect("data")["data: ".len()..];
            (name, serde_json::from_str(data).expect("json"))
        })
        .collect()
}

#[test]
fn an_anthropic_stream_becomes_the_sequence_codex_needs() {
    let out = run(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"command\":"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "[\"ls\"]}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (i, (_, d)) in out.iter().enumerate() {
        assert_eq!(
            d["sequence_number"], i as u64,
            "sequence_number on every event"
        );
    }
    assert_eq!(out[0].1["response"]["id"], "resp_msg_1");
    assert_eq!(out[8].1["item"]["call_id"], "toolu_1");
    let done = &out[13].1["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][1]["arguments"], "{\"command\":[\"ls\"]}");
    assert_eq!(done["output"][0]["content"][0]["text"], "Hi");
    assert_eq!(
        done["usage"],
        json!({"input_tokens": 15, "input_tokens_details": {"cached_tokens": 5}, "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 45})
    );
}

#[test]
fn max_tokens_is_incomplete_and_an_error_fails_the_response() {
    let limited = ToolNames {
        client_limit: true,
        ..ToolNames::default()
    };
    let out = run_with(
        limited,
        &[
            ("message_start", json!({"message": {"id": "m"}})),
            (
                "message_delta",
                json!({"delta": {"stop_reason": "max_tokens"}}),
            ),
            ("message_stop", json!({})),
        ],
    );
    let last = &out.last().expect("terminal").1;
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
    let out = run(&[
        ("message_start", json!({"message": {"id": "m"}})),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    let last = &out.last().expect("terminal").1;
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["error"]["code"], "server_is_overloaded");
}

#[test]
fn a_whole_message_becomes_a_response() {
    let m = json!({"id": "msg_9", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t", "name": "ls", "input": {"a": 1}}], "stop_reason": "tool_use", "usage": {"input_tokens": 2, "output_tokens": 3}});
    let r = whole(&m, "gpt", &ToolNames::default()).expect("response");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"][1]["arguments"], "{\"a\":1}");
    assert_eq!(r["usage"]["total_tokens"], 5);
}

/// Found by fuzzing (issue 23): a number where usage should be, then a
/// usage object, panicked on serde_json's index into a non-object; and
/// u64::MAX counts overflowed the totals.
#[test]
fn wrong_usage_types_and_huge_counts_neither_panic_nor_wrap() {
    let out = run(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "usage": 5}}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7, "input_tokens": "many"}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let last = &out.last().expect("terminal").1;
    assert_eq!(last["type"], "response.completed");
    assert_eq!(last["response"]["usage"]["output_tokens"], 7);
    assert_eq!(last["response"]["usage"]["input_tokens"], 0);

    let max = u64::MAX;
    let out = run(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": max, "cache_read_input_tokens": max, "cache_creation_input_tokens": max}}}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": max}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let usage = &out.last().expect("terminal").1["response"]["usage"];
    assert_eq!(usage["input_tokens"], max);
    assert_eq!(usage["total_tokens"], max);
}

#[test]
fn an_overflow_inside_the_stream_reaches_codex_as_context_length_exceeded() {
    let out = run(&[
        ("message_start", json!({"message": {"id": "m"}})),
        (
            "error",
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
        ),
    ]);
    let last = &out.last().expect("terminal").1;
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["error"]["code"], "context_length_exceeded");
}

fn ev(kind: &str, mut data: Value) -> (String, Value) {
    data["type"] = kind.into();
    (kind.to_string(), data)
}

/// Thinking Anthropic signed reaches Codex as a reasoning item whose
/// encrypted content carries the block; Codex sends it back, and the
/// block is restored exactly, in front of the call it led to, so the
/// signature check and the tool-use continuation rule pass.
#[test]
fn thinking_goes_to_codex_and_comes_back_signed() {
    let events = [
        ev("message_start", json!({"message": {"id": "m1"}})),
        ev(
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        ev(
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "thinking_delta", "thinking": "List first."}}),
        ),
        ev(
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCkYIBxgC"}}),
        ),
        ev("content_block_stop", json!({"index": 0})),
        ev(
            "content_block_start",
            json!({"index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}}),
        ),
        ev("content_block_stop", json!({"index": 1})),
        ev(
            "content_block_start",
            json!({"index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}}),
        ),
        ev(
            "content_block_delta",
            json!({"index": 2, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ),
        ev("content_block_stop", json!({"index": 2})),
        ev(
            "message_delta",
            json!({"delta": {"stop_reason": "tool_use"}}),
        ),
        ev("message_stop", json!({})),
    ];
    let refs: Vec<(&str, Value)> = events
        .iter()
        .map(|(n, d)| (n.as_str(), d.clone()))
        .collect();
    let out = run(&refs);
    let done = &out.last().expect("terminal").1["response"]["output"];
    assert_eq!(done[0]["type"], "reasoning");
    assert_eq!(done[0]["summary"][0]["text"], "List first.");
    assert!(done[0]["encrypted_content"].is_string(), "{done}");
    assert_eq!(done[1]["summary"], json!([]));

    let mut input = vec![json!({"type": "message", "role": "user", "content": "list"})];
    input.extend(done.as_array().expect("output").iter().cloned());
    input.push(json!({"type": "function_call_output", "call_id": "toolu_1", "output": "a.txt"}));
    let req = json!({"model": "gpt-5", "input": input, "reasoning": {"effort": "low"}});
    let (out, _) = request(&req, "claude-sonnet-4-5").expect("translated");
    assert_eq!(
        out["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "List first.", "signature": "EqQBCkYIBxgC"},
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
            {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}},
        ])
    );
    assert_eq!(out["thinking"]["type"], "enabled");

    let m = json!({"id": "m", "content": [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "redacted_thinking", "data": "d"},
    ], "stop_reason": "end_turn"});
    let r = whole(&m, "gpt", &ToolNames::default()).expect("response");
    for (n, block) in [(0, &m["content"][0]), (1, &m["content"][1])] {
        let enc = r["output"][n]["encrypted_content"]
            .as_str()
            .expect("carried");
        assert_eq!(responses::block_of_content(enc).as_ref(), Some(block));
    }
}

/// A tool-use continuation whose assistant turn has no thinking Anthropic
/// signed (OpenAI's encrypted reasoning, or none) is sent with thinking
/// off rather than refused.
#[test]
fn a_continuation_without_signed_thinking_turns_thinking_off() {
    let req = json!({"model": "gpt-5", "reasoning": {"effort": "high"}, "input": [
        {"type": "message", "role": "user", "content": "list"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-openai"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
    ]});
    let (out, _) = request(&req, "claude-sonnet-4").expect("translated");
    assert!(out.get("thinking").is_none(), "{out}");
    assert_eq!(out["messages"][1]["content"][0]["type"], "tool_use");
    // A new user turn after the answer is no continuation: thinking stays.
    let mut req = req;
    let input = req["input"].as_array_mut().expect("input");
    input.push(json!({"type": "message", "role": "assistant", "content": "One file."}));
    input.push(json!({"type": "message", "role": "user", "content": "now what?"}));
    let (out, _) = request(&req, "claude-sonnet-4").expect("translated");
    assert_eq!(out["thinking"]["type"], "enabled");
}

/// Without Codex's own limit, `max_tokens` is sized for the model and
/// the thinking budget, and an answer cut there is complete as far as
/// Codex knows (it retries an incomplete turn).
#[test]
fn limits_are_sized_for_the_model_and_incomplete_only_at_codexs_own() {
    assert_eq!(
        limits("claude-sonnet-4-5", None, Some(8192)),
        (24_576, Some(8192))
    );
    assert_eq!(limits("claude-sonnet-4", None, None), (16_384, None));
    assert_eq!(
        limits("claude-opus-4-1-20250805", None, Some(24_576)),
        (32_000, Some(24_576))
    );
    assert_eq!(
        limits("claude-3-5-haiku-latest", None, Some(24_576)),
        (8_192, Some(7_168))
    );
    assert_eq!(
        limits("claude-sonnet-4", Some(100), Some(2048)),
        (3_072, Some(2048))
    );
    assert_eq!(limits("claude-sonnet-4", Some(1), None), (1, None));
    for model in ["claude-3-haiku", "claude-opus-4-6", "other"] {
        for limit in [None, Some(0), Some(1), Some(1500), Some(u64::MAX)] {
            for effort in [None, Some(2048), Some(24_576)] {
                let (max, budget) = limits(model, limit, effort);
                assert!(max >= 1 && max <= crate::anthropic::max_output_tokens(model));
                if let Some(b) = budget {
                    assert!(b >= 1024 && b < max, "{model} {limit:?} {effort:?}");
                }
            }
        }
    }
    let cut = [
        ("message_start", json!({"message": {"id": "m"}})),
        (
            "message_delta",
            json!({"delta": {"stop_reason": "max_tokens"}}),
        ),
        ("message_stop", json!({})),
    ];
    let out = run(&cut);
    let last = &out.last().expect("terminal").1;
    assert_eq!(last["type"], "response.completed");
    let m = json!({"id": "m", "content": [], "stop_reason": "max_tokens"});
    let r = whole(&m, "gpt", &ToolNames::default()).expect("response");
    assert_eq!(r["status"], "completed");
}

/// Codex's freeform `apply_patch`: a one-string tool for Claude, its
/// calls back as `custom_tool_call`s (whole and streamed), and the
/// history's custom calls and outputs as tool_use / tool_result.
#[test]
fn an_output_schema_becomes_output_config_format() {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false});
    let req = json!({"model": "gpt-5", "input": "check", "text": {"format": {"type": "json_schema", "name": "codex_output_schema", "schema": schema, "strict": true}}});
    let (out, _) = request(&req, "claude-sonnet-4-5").unwrap();
    assert_eq!(
        out["output_config"],
        json!({"format": {"type": "json_schema", "schema": schema}})
    );
    let plain = json!({"model": "gpt-5", "input": "check", "text": {"format": {"type": "text"}}});
    assert!(
        request(&plain, "claude-sonnet-4-5")
            .unwrap()
            .0
            .get("output_config")
            .is_none()
    );
}

#[test]
fn a_prompt_cache_key_marks_the_stable_prefix_for_anthropic() {
    let req = json!({"model": "gpt-5", "instructions": "Be Codex.", "prompt_cache_key": "conv-1",
    "tools": [
        {"type": "function", "name": "a", "parameters": {"type": "object"}},
        {"type": "function", "name": "b", "parameters": {"type": "object"}},
    ],
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]},
    ]});
    let (out, _) = request(&req, "claude-sonnet-4-5").unwrap();
    let eph = json!({"type": "ephemeral"});
    assert_eq!(
        out["system"],
        json!([{"type": "text", "text": "Be Codex.", "cache_control": eph}])
    );
    assert_eq!(out["tools"][1]["cache_control"], eph);
    assert!(out["tools"][0].get("cache_control").is_none());
    assert_eq!(out["messages"][1]["content"][0]["cache_control"], eph);
    let text = out.to_string();
    assert_eq!(text.matches("cache_control").count(), 3, "{text}");
    let mut plain = req.clone();
    plain.as_object_mut().unwrap().remove("prompt_cache_key");
    let (out, _) = request(&plain, "claude-sonnet-4-5").unwrap();
    assert!(!out.to_string().contains("cache_control"));
}

#[test]
fn freeform_tools_travel_as_one_string() {
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
    let req = json!({"model": "gpt-5-codex", "max_output_tokens": 4000,
    "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files.",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}}],
    "tool_choice": {"type": "custom", "name": "apply_patch"},
    "input": [
        {"type": "message", "role": "user", "content": "add a.txt"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": patch},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
    ]});
    let (out, names) = request(&req, "claude-sonnet-4").expect("translated");
    let tool = &out["tools"][0];
    assert_eq!(tool["name"], "apply_patch");
    assert_eq!(tool["input_schema"]["required"], json!(["input"]));
    assert!(
        tool["input_schema"]["properties"]["input"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("start: begin_patch"))
    );
    assert_eq!(
        out["tool_choice"],
        json!({"type": "tool", "name": "apply_patch"})
    );
    assert_eq!(
        out["messages"][1]["content"][0],
        json!({"type": "tool_use", "id": "c1", "name": "apply_patch", "input": {"input": patch}})
    );
    assert_eq!(
        out["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "c1", "content": "Done"})
    );
    assert!(names.client_limit);

    let arguments = json!({"input": patch}).to_string();
    let (a, b) = arguments.split_at(10);
    let out = run_with(
        names.clone(),
        &[
            ("message_start", json!({"message": {"id": "m"}})),
            (
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "apply_patch", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": a}}),
            ),
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": b}}),
            ),
            ("content_block_stop", json!({"index": 0})),
            (
                "message_delta",
                json!({"delta": {"stop_reason": "tool_use"}}),
            ),
            ("message_stop", json!({})),
        ],
    );
    let kinds: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        kinds[2..6],
        [
            "response.output_item.added",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
        ]
    );
    assert_eq!(out[2].1["item"]["type"], "custom_tool_call");
    assert_eq!(out[3].1["delta"], patch);
    assert_eq!(
        out[5].1["item"],
        json!({"id": "ctc_resp_m_0", "type": "custom_tool_call", "status": "completed", "call_id": "toolu_9", "name": "apply_patch", "input": patch})
    );
    let m = json!({"id": "m", "content": [{"type": "tool_use", "id": "t", "name": "apply_patch", "input": {"input": patch}}], "stop_reason": "tool_use"});
    let r = whole(&m, "gpt", &names).expect("response");
    assert_eq!(r["output"][0]["type"], "custom_tool_call");
    assert_eq!(r["output"][0]["input"], patch);
}

/// Claude's search reaches Codex as a `web_search_call` (its query, its
/// three status events) and its citation as a `url_citation` spanning
/// the cited block, announced before the text is done; the results'
/// block has no item.
#[test]
fn a_search_becomes_a_web_search_call_and_citations_annotations() {
    let citation = json!({"type": "web_search_result_location", "url": "https://u.example",
        "title": "U", "cited_text": "Yes.", "encrypted_index": "enc"});
    let out = run(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 5}}}),
        ),
        (
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"is it\"}"}}),
        ),
        ("content_block_stop", json!({"index": 0})),
        (
            "content_block_start",
            json!({"index": 1, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                "content": [{"type": "web_search_result", "url": "https://u.example", "title": "U", "encrypted_content": "e"}]}}),
        ),
        ("content_block_stop", json!({"index": 1})),
        (
            "content_block_start",
            json!({"index": 2, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"index": 2, "delta": {"type": "citations_delta", "citation": citation}}),
        ),
        (
            "content_block_delta",
            json!({"index": 2, "delta": {"type": "text_delta", "text": "Yes."}}),
        ),
        ("content_block_stop", json!({"index": 2})),
        (
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
        ),
        ("message_stop", json!({})),
    ]);
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.web_search_call.in_progress",
            "response.web_search_call.searching",
            "response.web_search_call.completed",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.annotation.added",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(out[2].1["item"]["type"], "web_search_call");
    assert_eq!(out[2].1["item"]["status"], "in_progress");
    let call = &out[6].1["item"];
    assert_eq!(call["status"], "completed");
    assert_eq!(call["action"], json!({"type": "search", "query": "is it"}));
    let annotation = json!({"type": "url_citation", "start_index": 0, "end_index": 4,
        "url": "https://u.example", "title": "U"});
    assert_eq!(out[10].1["annotation"], annotation);
    assert_eq!(out[10].1["annotation_index"], 0);
    let done = &out[14].1["response"]["output"];
    assert_eq!(done[1]["content"][0]["annotations"], json!([annotation]));

    // Whole, the same items.
    let message = json!({"id": "m1", "stop_reason": "end_turn", "usage": {}, "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "is it"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "Yes.", "citations": [citation]},
    ]});
    let whole = whole(&message, "gpt-5-codex", &ToolNames::default()).expect("whole");
    let output = whole["output"].as_array().expect("output");
    assert_eq!(output.len(), 2, "{whole}");
    assert_eq!(output[0]["type"], "web_search_call");
    assert_eq!(output[0]["action"]["query"], "is it");
    assert_eq!(output[1]["content"][0]["annotations"], json!([annotation]));
}

/// The answer kept for `response.completed` is bounded: a stream of text
/// that never ends passes the bound, and only then.
#[test]
fn what_a_stream_keeps_for_its_final_events_is_bounded() {
    let mut s = Stream::new("gpt-5-codex", ToolNames::default());
    let mut out = Vec::new();
    let start = json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 1, "output_tokens": 1}}});
    s.event(Some("message_start"), &start.to_string(), &mut out);
    let block = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
    s.event(Some("content_block_start"), &block.to_string(), &mut out);
    let piece = "x".repeat(64 * 1024);
    let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
        .to_string();
    let mut sent = 0;
    while !s.over_bound() {
        out.clear();
        s.event(Some("content_block_delta"), &delta, &mut out);
        sent += piece.len();
        assert!(
            sent <= super::stream::MAX_RETAINED + piece.len(),
            "no bound"
        );
    }
    assert!(
        sent > super::stream::MAX_RETAINED - piece.len(),
        "{sent}: early"
    );
}
