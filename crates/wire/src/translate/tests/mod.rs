use super::*;

mod messages_requests;

/// Tool names over 64 characters (Claude Code's MCP tools) are refused
/// by OpenAI: sent short, and the client gets its own names back in
/// whole answers and streams.
#[test]
fn long_tool_names_go_short_and_come_back() {
    let long = format!(
        "mcp__{}__search_issues",
        "github_enterprise_server".repeat(3)
    );
    assert!(long.len() > 64);
    let request = serde_json::json!({
        "model": "m", "max_tokens": 100,
        "tools": [{"name": long, "description": "", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": long},
        "messages": [
            {"role": "user", "content": "find it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": long, "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "none"}]},
        ],
    });
    let t = Pair::MessagesToResponses
        .request(request.to_string().as_bytes(), "gpt")
        .expect("translated");
    let sent: Value = serde_json::from_slice(&t.body).expect("json");
    let short = sent["tools"][0]["name"].as_str().expect("name").to_string();
    assert!(short.len() <= 64, "{short}");
    assert_eq!(sent["tool_choice"]["name"], short.as_str());
    assert_eq!(sent["input"][1]["name"], short.as_str(), "{sent}");

    let answer = serde_json::json!({"id": "r", "output": [{"type": "function_call", "call_id": "c", "name": short, "arguments": "{}"}]});
    let back = Pair::MessagesToResponses
        .response(answer.to_string().as_bytes(), "claude", &t.names)
        .expect("answer");
    let back: Value = serde_json::from_slice(&back).expect("json");
    assert_eq!(back["content"][0]["name"], long.as_str());

    let chat = Pair::MessagesToChat
        .request(request.to_string().as_bytes(), "llama")
        .expect("translated");
    let mut stream = Pair::MessagesToChat.stream("claude", chat.names);
    let mut out = Vec::new();
    let chunk = serde_json::json!({"id": "c", "choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": short, "arguments": ""}}]}}]});
    stream.event(None, &chunk.to_string(), &mut out);
    let text: String = out
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert!(text.contains(&format!("\"name\":\"{long}\"")), "{text}");
}

#[test]
fn which_pairs_translate() {
    use UpstreamApi::*;
    assert_eq!(Pair::between(Endpoint::Messages, Anthropic), Ok(None));
    assert_eq!(
        Pair::between(Endpoint::Messages, OpenAiChat),
        Ok(Some(Pair::MessagesToChat))
    );
    assert_eq!(
        Pair::between(Endpoint::Responses, Anthropic),
        Ok(Some(Pair::ResponsesToMessages))
    );
    assert_eq!(
        Pair::between(Endpoint::ChatCompletions, Anthropic),
        Ok(Some(Pair::ChatToMessages))
    );
    assert_eq!(
        Pair::between(Endpoint::ChatCompletions, OpenAiResponses),
        Ok(Some(Pair::ChatToResponses))
    );
    // Azure OpenAI takes the OpenAI pairs, wire for wire.
    assert_eq!(
        Pair::between(Endpoint::Messages, AzureResponses),
        Ok(Some(Pair::MessagesToResponses))
    );
    assert_eq!(
        Pair::between(Endpoint::Messages, AzureChat),
        Ok(Some(Pair::MessagesToChat))
    );
    assert_eq!(Pair::between(Endpoint::Responses, Azure), Ok(None));
    assert_eq!(
        Pair::between(Endpoint::ChatCompletions, AzureResponses),
        Ok(Some(Pair::ChatToResponses))
    );
    assert_eq!(
        Pair::between(Endpoint::Responses, OpenAiChat),
        Ok(Some(Pair::ResponsesToChat))
    );
    assert_eq!(Pair::between(Endpoint::ChatCompletions, OpenAi), Ok(None));
    assert_eq!(
        Pair::between(Endpoint::CountTokens, Anthropic),
        Ok(None),
        "count_tokens stays Anthropic's own"
    );
    assert_eq!(
        Pair::between(Endpoint::Messages, OpenAi),
        Ok(Some(Pair::MessagesToResponses)),
        "OpenAI itself: translated to its preferred API"
    );
    assert_eq!(
        Pair::between(Endpoint::CountTokens, OpenAiChat),
        Err(Untranslatable)
    );
    assert_eq!(Pair::between(Endpoint::Models, OpenAiChat), Ok(None));
    for (_, to, pair) in PAIRS {
        assert_eq!(pair.upstream_api(), to);
    }
}

fn events(out: &[Bytes]) -> Vec<(Option<String>, Value)> {
    out.iter()
        .map(|b| {
            let (name, data) = crate::sse::fields(b);
            let data = if data == "[DONE]" {
                Value::String(data)
            } else {
                serde_json::from_str(&data).expect("json")
            };
            (name.map(str::to_string), data)
        })
        .collect()
}

/// A Responses stream reaches a Chat client through Messages: text, a
/// tool call with its arguments in pieces, the finish reason, usage
/// with cached tokens, `[DONE]`.
#[test]
fn a_responses_stream_reaches_a_chat_client() {
    let t = Pair::ChatToResponses
        .request(br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#, "gpt-5")
        .expect("translated");
    assert!(t.include_usage);
    let mut s = Pair::ChatToResponses.stream("client-model", t.names);
    s.include_usage(t.include_usage);
    let upstream = [
        (
            "response.created",
            serde_json::json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        ),
        (
            "response.output_item.added",
            serde_json::json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m1"}}),
        ),
        (
            "response.content_part.added",
            serde_json::json!({"type": "response.content_part.added", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
        ),
        (
            "response.output_text.delta",
            serde_json::json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hel"}),
        ),
        (
            "response.output_text.delta",
            serde_json::json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "lo"}),
        ),
        (
            "response.output_item.done",
            serde_json::json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "id": "m1"}}),
        ),
        (
            "response.output_item.added",
            serde_json::json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc1", "call_id": "call_9", "name": "ls", "arguments": ""}}),
        ),
        (
            "response.function_call_arguments.delta",
            serde_json::json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"p\":"}),
        ),
        (
            "response.function_call_arguments.delta",
            serde_json::json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "1}"}),
        ),
        (
            "response.output_item.done",
            serde_json::json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "id": "fc1", "call_id": "call_9", "name": "ls", "arguments": "{\"p\":1}"}}),
        ),
        (
            "response.completed",
            serde_json::json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 12}}}),
        ),
    ];
    let mut out = Vec::new();
    for (name, data) in upstream {
        s.event(Some(name), &data.to_string(), &mut out);
    }
    let got = events(&out);
    assert!(got.iter().all(|(n, _)| n.is_none()), "chunks are unnamed");
    let deltas: Vec<&Value> = got.iter().map(|(_, d)| &d["choices"][0]["delta"]).collect();
    let text: String = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(text, "Hello");
    let args: String = deltas
        .iter()
        .filter_map(|d| d["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(args, "{\"p\":1}");
    assert!(deltas.iter().any(|d| d["tool_calls"][0]["id"] == "call_9"));
    let n = got.len();
    assert_eq!(got[n - 3].1["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(got[n - 3].1["model"], "client-model");
    assert_eq!(
        got[n - 2].1["usage"],
        serde_json::json!({"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112,
            "prompt_tokens_details": {"cached_tokens": 60}, "completion_tokens_details": {"reasoning_tokens": 0}})
    );
    assert_eq!(got[n - 1].1, "[DONE]");

    // An in-band failure reaches the Chat client as an error chunk.
    let mut s = Pair::ChatToResponses.stream("m", ToolNames::default());
    let mut out = Vec::new();
    s.event(Some("response.failed"), &serde_json::json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}}).to_string(), &mut out);
    let got = events(&out);
    let last = &got.last().expect("error chunk").1;
    assert_eq!(last["error"]["message"], "slow down");
    assert_eq!(last["error"]["code"], "rate_limit_exceeded");
}

/// A Chat upstream's chunks reach Codex through Messages as the
/// Responses event sequence, ending in `response.completed` with
/// usage.
#[test]
fn a_chat_stream_reaches_a_responses_client() {
    let mut s = Pair::ResponsesToChat.stream("gpt-5-codex", ToolNames::default());
    let mut out = Vec::new();
    for c in [
        r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
        r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#,
        r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}"#,
        r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"shell","arguments":"{\"c\":1}"}}]}}]}"#,
        r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":10}}}"#,
        "[DONE]",
    ] {
        s.event(None, c, &mut out);
    }
    let got = events(&out);
    let names: Vec<&str> = got.iter().filter_map(|(n, _)| n.as_deref()).collect();
    assert_eq!(names.first(), Some(&"response.created"));
    assert!(
        names.contains(&"response.reasoning_summary_text.delta"),
        "{names:?}"
    );
    assert!(names.contains(&"response.output_text.delta"));
    assert!(
        names.contains(&"response.function_call_arguments.delta"),
        "{names:?}"
    );
    assert_eq!(names.last(), Some(&"response.completed"));
    let done = &got.last().expect("terminal").1["response"];
    assert_eq!(done["output"][2]["call_id"], "call_a");
    assert_eq!(done["output"][2]["arguments"], "{\"c\":1}");
    assert_eq!(done["usage"]["input_tokens"], 50);
    assert_eq!(done["usage"]["input_tokens_details"]["cached_tokens"], 10);
    for (i, (_, d)) in got.iter().enumerate() {
        assert_eq!(d["sequence_number"], i as u64);
    }
    let mut s = Pair::ResponsesToChat.stream("m", ToolNames::default());
    let mut out = Vec::new();
    s.event(
        None,
        r#"{"error":{"message":"too long","code":"context_length_exceeded"}}"#,
        &mut out,
    );
    let got = events(&out);
    let last = &got.last().expect("terminal");
    assert_eq!(last.0.as_deref(), Some("response.failed"));
    assert_eq!(
        last.1["response"]["error"]["code"],
        "context_length_exceeded"
    );
}

#[test]
fn whole_answers_and_errors_of_the_composed_pairs() {
    let r = serde_json::json!({"id": "resp_1", "status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{\"a\":1}"},
    ], "usage": {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}});
    let out = Pair::ChatToResponses
        .response(r.to_string().as_bytes(), "gpt-4o", &ToolNames::default())
        .expect("answer");
    let c: Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["choices"][0]["message"]["content"], "Hi");
    assert_eq!(
        c["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"a\":1}"
    );
    assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(c["usage"]["prompt_tokens"], 9);
    assert_eq!(c["usage"]["prompt_tokens_details"]["cached_tokens"], 4);

    let chat = br#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","tool_calls":[{"id":"t","type":"function","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#;
    // Cut at the limit Codex set: incomplete (at none of Codex's, it
    // would be reported complete).
    let limited = ToolNames {
        client_limit: true,
        ..ToolNames::default()
    };
    let out = Pair::ResponsesToChat
        .response(chat, "gpt-5-codex", &limited)
        .expect("answer");
    let r: Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "incomplete");
    assert_eq!(r["output"][1]["call_id"], "t");
    assert_eq!(r["usage"]["total_tokens"], 9);

    let vllm = br#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}"#;
    let e: Value =
        serde_json::from_slice(&Pair::ResponsesToChat.error(StatusCode::BAD_REQUEST, vllm))
            .expect("json");
    assert_eq!(e["error"]["code"], "context_length_exceeded");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    let e: Value = serde_json::from_slice(&Pair::ChatToResponses.error(
        StatusCode::TOO_MANY_REQUESTS,
        br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
    )).expect("json");
    assert_eq!(e["error"]["message"], "Rate limit reached");
    assert_eq!(e["error"]["code"], "rate_limit_exceeded");
    let e: Value = serde_json::from_slice(&Pair::ChatToMessages.error(
        StatusCode::from_u16(529).expect("529"),
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ))
    .expect("json");
    assert_eq!(e["error"]["message"], "Overloaded");
    assert_eq!(e["error"]["code"], "overloaded");
}
