use super::*;

/// Feed `(event, data)` pairs; the client's events as (name, data).
fn run(events: &[(&str, Value)]) -> Vec<(String, Value)> {
    let mut s = Stream::new("claude-sonnet-4", ToolNames::default());
    let mut out = Vec::new();
    for (name, data) in events {
        s.event(Some(name), &data.to_string(), &mut out);
    }
    out.iter()
        .map(|b| {
            let text = std::str::from_utf8(b).expect("utf8");
            let name = text.lines().next().expect("line")["event: ".len()..].to_string();
            let data = text.lines().nth(1).expect("data")["data: ".len()..].to_string();
            (name, serde_json::from_str(&data).expect("json"))
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn text_then_a_tool_call_with_split_arguments() {
    let out = run(&[
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}, "sequence_number": 0}),
        ),
        (
            "response.in_progress",
            json!({"type": "response.in_progress", "response": {"id": "resp_1"}, "sequence_number": 1}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m1", "role": "assistant", "content": []}}),
        ),
        (
            "response.content_part.added",
            json!({"type": "response.content_part.added", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hel"}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "lo"}),
        ),
        (
            "response.output_text.done",
            json!({"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": "Hello"}),
        ),
        (
            "response.content_part.done",
            json!({"type": "response.content_part.done", "output_index": 0, "content_index": 0}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message"}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "read", "arguments": ""}}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"pa"}),
        ),
        (
            "response.function_call_arguments.delta",
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "th\": \"a\"}"}),
        ),
        (
            "response.function_call_arguments.done",
            json!({"type": "response.function_call_arguments.done", "output_index": 1, "arguments": "{\"path\": \"a\"}"}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "call_id": "call_9", "name": "read", "arguments": "{\"path\": \"a\"}"}}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 20}}}),
        ),
    ]);
    assert_eq!(
        names(&out),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(out[0].1["message"]["id"], "msg_resp_1");
    assert_eq!(out[0].1["message"]["model"], "claude-sonnet-4");
    assert_eq!(
        out[3].1["delta"],
        json!({"type": "text_delta", "text": "Hel"})
    );
    assert_eq!(
        out[6].1["content_block"],
        json!({"type": "tool_use", "id": "call_9", "name": "read", "input": {}})
    );
    assert_eq!(out[6].1["index"], 1);
    assert_eq!(
        out[8].1["delta"],
        json!({"type": "input_json_delta", "partial_json": "th\": \"a\"}"})
    );
    assert_eq!(
        out[10].1,
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"input_tokens": 40, "output_tokens": 20, "cache_read_input_tokens": 60, "cache_creation_input_tokens": 0}})
    );
}

#[test]
fn reasoning_summary_becomes_a_thinking_block_and_max_tokens_stops() {
    let out = run(&[
        ("response.created", json!({"response": {"id": "r"}})),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs"}}),
        ),
        (
            "response.reasoning_summary_part.added",
            json!({"output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "summary_index": 0, "delta": "Think"}),
        ),
        (
            "response.reasoning_summary_part.done",
            json!({"output_index": 0, "summary_index": 0}),
        ),
        (
            "response.content_part.added",
            json!({"output_index": 1, "content_index": 0, "part": {"type": "output_text"}}),
        ),
        (
            "response.output_text.delta",
            json!({"output_index": 1, "content_index": 0, "delta": "Partial"}),
        ),
        (
            "response.incomplete",
            json!({"response": {"id": "r", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": {"input_tokens": 5, "output_tokens": 7}}}),
        ),
    ]);
    assert_eq!(
        out[2].1["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(
        out[3].1["delta"],
        json!({"type": "thinking_delta", "thinking": "Think"})
    );
    assert_eq!(names(&out)[4], "content_block_stop");
    // The open text block is closed before the end.
    assert_eq!(
        names(&out)[5..],
        [
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(out[8].1["delta"]["stop_reason"], "max_tokens");
}

#[test]
fn failures_become_anthropic_error_events() {
    let out = run(&[
        ("response.created", json!({"response": {"id": "r"}})),
        (
            "response.failed",
            json!({"response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}}),
        ),
    ]);
    assert_eq!(
        out.last().expect("event").1,
        json!({"type": "error", "error": {"type": "api_error", "message": "boom"}})
    );
    let out = run(&[(
        "error",
        json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "sequence_number": 2}),
    )]);
    assert_eq!(out[0].1["error"]["type"], "rate_limit_error");
    // A context overflow reported inside the stream: Claude Code's words.
    let out = run(&[
        ("response.created", json!({"response": {"id": "r"}})),
        (
            "response.failed",
            json!({"response": {"status": "failed", "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}),
        ),
    ]);
    let e = &out.last().expect("event").1["error"];
    assert_eq!(e["type"], "invalid_request_error");
    assert!(
        e["message"]
            .as_str()
            .expect("message")
            .starts_with("prompt is too long: "),
        "{e}"
    );
    // With numbers, the same words as an overflow answered with a 400.
    let message = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.";
    let out = run(&[(
        "error",
        json!({"type": "error", "code": "context_length_exceeded", "message": message}),
    )]);
    let streamed = out[0].1["error"]["message"].clone();
    let body = crate::translate::shared::errors::to_anthropic(
        http::StatusCode::BAD_REQUEST,
        json!({"error": {"code": "context_length_exceeded", "message": message}})
            .to_string()
            .as_bytes(),
    );
    let body: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(
        streamed,
        "prompt is too long: 130512 tokens > 128000 maximum"
    );
    assert_eq!(streamed, body["error"]["message"]);
}

#[test]
fn arguments_that_arrive_only_with_the_item_are_sent_once() {
    let out = run(&[
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "function_call", "call_id": "c", "name": "ls"}}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": {"type": "function_call", "call_id": "c", "name": "ls", "arguments": "{}"}}),
        ),
    ]);
    assert_eq!(
        names(&out),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop"
        ]
    );
}

#[test]
fn a_whole_response_is_assembled() {
    let v = json!({"id": "resp_2", "status": "completed", "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{\"d\":1}"},
    ], "usage": {"input_tokens": 3, "output_tokens": 4}});
    assert_eq!(
        whole(&v, "claude", &ToolNames::default()).expect("message"),
        json!({"id": "msg_resp_2", "type": "message", "role": "assistant", "model": "claude",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "weir.s1"},
                {"type": "text", "text": "Hi"},
                {"type": "tool_use", "id": "c1", "name": "ls", "input": {"d": 1}},
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}})
    );
}

/// A reasoning item's summary and encrypted content become one thinking
/// block whose signature carries the item to the next turn.
#[test]
fn encrypted_reasoning_rides_in_the_signature() {
    let out = run(&[
        ("response.created", json!({"response": {"id": "r"}})),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        ),
        (
            "response.reasoning_summary_part.added",
            json!({"output_index": 0, "summary_index": 0}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "summary_index": 0, "delta": "One."}),
        ),
        (
            "response.reasoning_summary_part.done",
            json!({"output_index": 0, "summary_index": 0}),
        ),
        (
            "response.reasoning_summary_part.added",
            json!({"output_index": 0, "summary_index": 1}),
        ),
        (
            "response.reasoning_summary_text.delta",
            json!({"output_index": 0, "summary_index": 1, "delta": "Two."}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA=="}}),
        ),
        (
            "response.completed",
            json!({"response": {"id": "r", "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
    ]);
    assert_eq!(
        names(&out),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let thinking: String = out[3..6]
        .iter()
        .filter_map(|(_, e)| e["delta"]["thinking"].as_str())
        .collect();
    assert_eq!(thinking, "One.\n\nTwo.");
    let signature = out[6].1["delta"]["signature"].as_str().expect("signature");
    assert_eq!(
        responses::reasoning_of_signature(signature),
        Some(("rs_1".to_string(), "gAAA=="))
    );

    let v = json!({"id": "r", "output": [
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "enc"},
        {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
    ]});
    let m = whole(&v, "claude", &ToolNames::default()).expect("message");
    let bare = json!({"id": "r", "output": [{"type": "reasoning", "id": "rs_3", "summary": []}]});
    let bare = whole(&bare, "claude", &ToolNames::default()).expect("message");
    assert_eq!(
        bare["content"],
        json!([{"type": "thinking", "thinking": "", "signature": "weir.s1"}]),
        "the mark of another vendor's turn"
    );
    assert_eq!(m["content"][0]["thinking"], "");
    let signature = m["content"][0]["signature"].as_str().expect("signature");
    assert_eq!(
        responses::reasoning_of_signature(signature),
        Some(("rs_2".to_string(), "enc"))
    );
}

/// Servers that are not OpenAI's skip `content_part.added` and
/// `output_item.added`: the Messages stream is still whole.
#[test]
fn a_stream_without_the_added_events_is_still_valid() {
    let out = run(&[
        ("response.created", json!({"response": {"id": "r"}})),
        (
            "response.output_text.delta",
            json!({"output_index": 0, "content_index": 0, "delta": "Hi"}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": {"type": "message", "content": []}}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 1, "item": {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}}),
        ),
        ("response.completed", json!({"response": {"id": "r"}})),
    ]);
    assert_eq!(
        names(&out),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(out[2].1["content_block"]["type"], "text");
    assert_eq!(out[5].1["content_block"]["id"], "c1");
    assert_eq!(out[6].1["delta"]["partial_json"], "{}");
    assert_eq!(out[8].1["delta"]["stop_reason"], "tool_use");
}

/// OpenAI's search reaches Claude Code as Anthropic's two blocks
/// (weir's id and mark; the query as the input) and its annotation as
/// a citation on the open text block.
#[test]
fn a_web_search_call_becomes_search_blocks_and_citations() {
    let out = run(&[
        (
            "response.created",
            json!({"response": {"id": "r1", "status": "in_progress"}}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}}),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "status": "completed",
                "action": {"type": "search", "query": "is it", "sources": [{"type": "url", "url": "https://u.example"}]}}}),
        ),
        (
            "response.content_part.added",
            json!({"output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
        ),
        (
            "response.output_text.delta",
            json!({"output_index": 1, "content_index": 0, "delta": "Yes."}),
        ),
        (
            "response.output_text.annotation.added",
            json!({"output_index": 1, "content_index": 0, "annotation_index": 0,
                "annotation": {"type": "url_citation", "start_index": 0, "end_index": 4, "url": "https://u.example", "title": "U"}}),
        ),
        (
            "response.content_part.done",
            json!({"output_index": 1, "content_index": 0}),
        ),
        (
            "response.completed",
            json!({"response": {"id": "r1", "usage": {"input_tokens": 5, "output_tokens": 3}}}),
        ),
    ]);
    assert_eq!(
        names(&out),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let used = &out[2].1["content_block"];
    assert_eq!(
        used,
        &json!({"type": "server_tool_use", "id": "srvtoolu_weir_ws_1", "name": "web_search", "input": {}})
    );
    assert_eq!(
        out[3].1["delta"],
        json!({"type": "input_json_delta", "partial_json": "{\"query\":\"is it\"}"})
    );
    let result = &out[5].1["content_block"];
    assert_eq!(result["tool_use_id"], "srvtoolu_weir_ws_1");
    assert_eq!(result["content"][0]["url"], "https://u.example");
    assert_eq!(result["content"][0]["encrypted_content"], "weir.w1");
    let citation = &out[9].1["delta"];
    assert_eq!(citation["type"], "citations_delta");
    assert_eq!(citation["citation"]["url"], "https://u.example");
    assert_eq!(citation["citation"]["encrypted_index"], "weir.w1");
    assert_eq!(out[11].1["delta"]["stop_reason"], "end_turn");

    // Whole, the same blocks, the citation citing its span.
    let response = json!({"id": "r1", "usage": {}, "output": [
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "is it"}},
        {"type": "message", "content": [{"type": "output_text", "text": "So: yes.",
            "annotations": [{"type": "url_citation", "start_index": 4, "end_index": 8, "url": "https://u.example", "title": "U"}]}]},
    ]});
    let message = whole(&response, "claude", &ToolNames::default()).expect("whole");
    let content = message["content"].as_array().expect("content");
    assert_eq!(content[0]["type"], "server_tool_use");
    assert_eq!(content[1]["type"], "web_search_tool_result");
    assert_eq!(content[2]["citations"][0]["cited_text"], "yes.");
    assert_eq!(message["stop_reason"], "end_turn");
}
