use super::*;

#[test]
fn a_chat_request_becomes_a_messages_request() {
    let req = json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "text", "text": ""},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg", "detail": "high"}},
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"at\":1}"}},
                {"id": "call_2", "type": "function", "function": {"name": "look", "arguments": "not json"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "a dog"}]},
            {"role": "assistant", "content": "A cat and a dog."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [{"type": "function", "function": {"name": "look", "description": "Look", "parameters": {"type": "object", "properties": {"at": {"type": "integer"}}}, "strict": true}}],
        "tool_choice": {"type": "function", "function": {"name": "look"}},
        "parallel_tool_calls": false,
        "max_completion_tokens": 500,
        "max_tokens": 99,
        "stop": "END",
        "temperature": 1.5,
        "top_p": 0.9,
        "stream": true,
        "stream_options": {"include_usage": true},
        "user": "u-1",
        "response_format": {"type": "json_object"},
        "seed": 7,
        "logprobs": true,
    });
    let out = request(&req, "claude-sonnet-4").expect("translated");
    assert_eq!(
        out,
        json!({
            "model": "claude-sonnet-4",
            "system": "You are terse.\n\nUse tools.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in these?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "look", "input": {"at": 1}},
                    {"type": "tool_use", "id": "call_2", "name": "look", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "a cat"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "a dog"}]},
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "A cat and a dog."}]},
                {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
            ],
            "tools": [{"name": "look", "description": "Look", "input_schema": {"type": "object", "properties": {"at": {"type": "integer"}}}}],
            "tool_choice": {"type": "tool", "name": "look", "disable_parallel_tool_use": true},
            "temperature": 1.0,
            "top_p": 0.9,
            "max_tokens": 500,
            "stop_sequences": ["END"],
            "stream": true,
            "metadata": {"user_id": "u-1"},
        })
    );
}

#[test]
fn reasoning_effort_is_thinking_and_defaults_fill_in() {
    let req = json!({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "high", "temperature": 0.2, "tool_choice": "required"});
    let out = request(&req, "claude").expect("translated");
    assert_eq!(
        out["thinking"],
        json!({"type": "enabled", "budget_tokens": 24576})
    );
    assert_eq!(out["max_tokens"], 24576 + 1024);
    assert!(out.get("temperature").is_none(), "{out}");
    assert!(out.get("tool_choice").is_none(), "no tools, no choice");
    let mut forced = req.clone();
    forced["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
    let out = request(&forced, "claude").expect("translated");
    assert_eq!(out["tool_choice"], json!({"type": "any"}));
    assert!(
        out.get("thinking").is_none(),
        "thinking takes no forced tool: {out}"
    );
    let mut req = req;
    req["messages"] = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "done"},
    ]);
    let out = request(&req, "claude").expect("translated");
    assert!(
        out.get("thinking").is_none(),
        "a tool-use continuation has no signed thinking to send back: {out}"
    );
    assert_eq!(out["temperature"], 0.2);
    let out = request(&json!({"messages": []}), "claude").expect("translated");
    assert_eq!(out["max_tokens"], DEFAULT_MAX_TOKENS);
    assert!(request(&json!({"messages": [], "n": 2}), "c").is_err());
    assert!(request(&json!({"messages": "hi"}), "c").is_err());
}

#[test]
fn a_whole_message_becomes_a_completion() {
    let m = json!({"id": "msg_9", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "s"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"at": 1}},
    ], "stop_reason": "tool_use", "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5, "output_tokens": 7}});
    let c = whole(&m, "gpt-4o").expect("completion");
    assert_eq!(c["id"], "chatcmpl-msg_9");
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["model"], "gpt-4o");
    assert_eq!(
        c["choices"][0]["message"],
        json!({"role": "assistant", "content": "Let me look.", "refusal": null, "reasoning_content": "hmm",
            "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "look", "arguments": "{\"at\":1}"}}]})
    );
    assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        c["usage"],
        json!({"prompt_tokens": 105, "completion_tokens": 7, "total_tokens": 112,
            "prompt_tokens_details": {"cached_tokens": 90}, "completion_tokens_details": {"reasoning_tokens": 0}})
    );
    let cut = json!({"id": "m", "content": [{"type": "text", "text": "a"}], "stop_reason": "max_tokens", "usage": {}});
    assert_eq!(
        whole(&cut, "g").expect("c")["choices"][0]["finish_reason"],
        "length"
    );
    assert!(whole(&json!({"error": {}}), "g").is_none());
}

fn ev(kind: &'static str, mut data: Value) -> (&'static str, Value) {
    data["type"] = kind.into();
    (kind, data)
}

/// A thinking block, text, and a tool call in two pieces.
fn anthropic_events() -> Vec<(&'static str, Value)> {
    let delta =
        |index: u64, d: Value| ev("content_block_delta", json!({"index": index, "delta": d}));
    let start = |index: u64, b: Value| {
        ev(
            "content_block_start",
            json!({"index": index, "content_block": b}),
        )
    };
    let stop = |index: u64| ev("content_block_stop", json!({"index": index}));
    vec![
        ev(
            "message_start",
            json!({"message": {"id": "msg_1", "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
        ),
        ev("ping", json!({})),
        start(0, json!({"type": "thinking", "thinking": ""})),
        delta(0, json!({"type": "thinking_delta", "thinking": "Hmm"})),
        stop(0),
        start(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "Hi"})),
        stop(1),
        start(
            2,
            json!({"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}),
        ),
        delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "{\"cmd\":"}),
        ),
        delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "\"ls\"}"}),
        ),
        stop(2),
        ev(
            "message_delta",
            json!({"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
        ),
        ev("message_stop", json!({})),
    ]
}

fn run(events: &[(&str, Value)], include_usage: bool) -> Vec<String> {
    let mut s = Stream::new("gpt-4o");
    s.include_usage(include_usage);
    let mut out = Vec::new();
    for (name, data) in events {
        s.event(Some(name), &data.to_string(), &mut out);
    }
    out.iter()
        .map(|b| {
            let text = std::str::from_utf8(b).expect("utf8");
            assert!(text.ends_with("\n\n"), "{text}");
            text.strip_prefix("data: ")
                .expect("data")
                .trim()
                .to_string()
        })
        .collect()
}

fn json_of(chunk: &str) -> Value {
    serde_json::from_str(chunk).expect("json")
}

#[test]
fn an_anthropic_stream_becomes_chunks() {
    let out = run(&anthropic_events(), true);
    let deltas: Vec<Value> = out[..out.len() - 2]
        .iter()
        .map(|c| json_of(c)["choices"][0]["delta"].clone())
        .collect();
    assert_eq!(
        deltas,
        [
            json!({"role": "assistant", "content": ""}),
            json!({"reasoning_content": "Hmm"}),
            json!({"content": "Hi"}),
            json!({"tool_calls": [{"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "shell", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"cmd\":"}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"ls\"}"}}]}),
            json!({}),
        ]
    );
    let first = json_of(&out[0]);
    assert_eq!(first["id"], "chatcmpl-msg_1");
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["model"], "gpt-4o");
    let finish = json_of(&out[out.len() - 3]);
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    assert!(finish.get("usage").is_none());
    let usage = json_of(&out[out.len() - 2]);
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 15, "completion_tokens": 30, "total_tokens": 45,
            "prompt_tokens_details": {"cached_tokens": 5}, "completion_tokens_details": {"reasoning_tokens": 0}})
    );
    assert_eq!(out[out.len() - 1], "[DONE]");

    let out = run(&anthropic_events(), false);
    assert!(
        out.iter()
            .all(|c| c == "[DONE]" || json_of(c)["choices"][0].is_object()),
        "no chunk without a choice unless asked for: {out:?}"
    );
    assert_eq!(
        json_of(&out[out.len() - 2])["usage"]["completion_tokens"],
        30
    );
}

#[test]
fn a_json_schema_response_format_becomes_output_config_format() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false});
    let req = json!({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": true}}});
    let out = request(&req, "claude-sonnet-4-5").unwrap();
    assert_eq!(
        out["output_config"],
        json!({"format": {"type": "json_schema", "schema": schema}})
    );
}

#[test]
fn errors_in_the_stream_become_error_chunks() {
    let mut events = anthropic_events();
    events.truncate(1);
    events.push((
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let out = run(&events, false);
    assert_eq!(
        json_of(out.last().expect("chunk")),
        json!({"error": {"message": "Overloaded", "type": "server_error", "param": null, "code": "overloaded"}})
    );
    events.pop();
    events.push((
        "error",
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
    ));
    let out = run(&events, false);
    assert_eq!(
        json_of(out.last().expect("chunk"))["error"]["code"],
        "context_length_exceeded"
    );
}
