//! Scripts: what the mock answers to a request — a success, an error in the
//! request's envelope, or an agent turn that calls a tool and then reads
//! its result.

use std::time::Duration;

use bytes::Bytes;

use super::fixtures::{Api, json_answer, sse_event, stream_events};
use super::{Reply, Seen, Step};

/// A successful answer to `seen`: `words` streamed with `gap` between
/// events when it asked for a stream, else the JSON answer.
pub fn success(seen: &Seen, words: &[&str], gap: Duration) -> Reply {
    let Some(api) = Api::of(seen) else {
        return error(seen, 404, "not_found_error", "no such endpoint");
    };
    let model = seen.model();
    let model = if model.is_empty() { "mock" } else { &model };
    if seen.streaming() && api != Api::CountTokens {
        let mut body = Vec::new();
        for (i, e) in stream_events(api, model, words).into_iter().enumerate() {
            if i > 0 && !gap.is_zero() {
                body.push(Step::Wait(gap));
            }
            body.push(Step::Send(e));
        }
        Reply {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("request-id".into(), "req_mock_stream".into()),
            ],
            delay: Duration::ZERO,
            body,
        }
    } else {
        Reply {
            status: 200,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("request-id".into(), "req_mock_json".into()),
            ],
            delay: Duration::ZERO,
            body: vec![Step::Send(Bytes::from(
                json_answer(api, model, &words.concat()).to_string(),
            ))],
        }
    }
}

/// An HTTP error in the request's protocol's envelope.
pub fn error(seen: &Seen, status: u16, kind: &str, message: &str) -> Reply {
    let anthropic = matches!(Api::of(seen), Some(Api::Messages | Api::CountTokens))
        || seen.headers.contains_key("anthropic-version");
    let body = if anthropic {
        serde_json::json!({"type":"error","error":{"type":kind,"message":message},"request_id":"req_mock_error"})
    } else {
        serde_json::json!({"error":{"message":message,"type":kind,"param":null,"code":null}})
    };
    Reply {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        delay: Duration::ZERO,
        body: vec![Step::Send(Bytes::from(body.to_string()))],
    }
}

/// The tool the [`agent`] mock calls, and the arguments it sends, split
/// where a parser would least like it (inside a key, inside a value).
pub const AGENT_TOOL: &str = "read_file";
pub const AGENT_ARGUMENT_PIECES: &[&str] = &["{\"pa", "th\": \"no", "tes.txt\"}"];

/// The text of the tool result a request carries back, in any API.
fn tool_result(seen: &Seen) -> Option<String> {
    let v = seen.json();
    let text = |c: &serde_json::Value| match c {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    for m in v["messages"].as_array().into_iter().flatten() {
        if m["role"] == "tool" {
            return Some(text(&m["content"]));
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                return Some(text(&b["content"]));
            }
        }
    }
    for item in v["input"].as_array().into_iter().flatten() {
        if item["type"] == "function_call_output" {
            return Some(text(&item["output"]));
        }
    }
    None
}

/// A mock agent turn, in the request's API: without a tool result in the
/// request it calls [`AGENT_TOOL`] (streamed with its arguments in
/// [`AGENT_ARGUMENT_PIECES`]); with one, it answers `The file says: …`.
pub fn agent(seen: &Seen) -> Reply {
    use serde_json::json;
    let Some(api) = Api::of(seen) else {
        return error(seen, 404, "not_found_error", "no such endpoint");
    };
    if let Some(result) = tool_result(seen) {
        let answer = format!("The file says: {result}");
        return success(seen, &[answer.as_str()], Duration::ZERO);
    }
    if api == Api::CountTokens || api == Api::Models {
        return success(seen, &["-"], Duration::ZERO);
    }
    let model = seen.model();
    let args: String = AGENT_ARGUMENT_PIECES.concat();
    let json_reply = |body: serde_json::Value| Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        delay: Duration::ZERO,
        body: vec![Step::Send(Bytes::from(body.to_string()))],
    };
    if !seen.streaming() {
        return json_reply(match api {
            Api::Responses => {
                json!({"id":"resp_agent","object":"response","created_at":0,"status":"completed","model":model,
                "output":[{"id":"fc_agent","type":"function_call","status":"completed","call_id":"call_agent","name":AGENT_TOOL,"arguments":args}],
                "usage":{"input_tokens":20,"output_tokens":8,"total_tokens":28}})
            }
            Api::Chat => {
                json!({"id":"chatcmpl-agent","object":"chat.completion","created":0,"model":model,
                "choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_agent","type":"function","function":{"name":AGENT_TOOL,"arguments":args}}]},"finish_reason":"tool_calls"}],
                "usage":{"prompt_tokens":20,"completion_tokens":8,"total_tokens":28}})
            }
            _ => json!({"id":"msg_agent","type":"message","role":"assistant","model":model,
                "content":[{"type":"tool_use","id":"toolu_agent","name":AGENT_TOOL,"input":{"path":"notes.txt"}}],
                "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":8}}),
        });
    }
    let mut events = Vec::new();
    match api {
        Api::Responses => {
            let mut seq = 0u64;
            let mut push = |name: &str, mut data: serde_json::Value| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(seq);
                seq += 1;
                events.push(sse_event(Some(name), &data));
            };
            let response = |status: &str, output: serde_json::Value| json!({"id":"resp_agent","object":"response","created_at":0,"status":status,"model":model,"output":output,"usage":null});
            push(
                "response.created",
                json!({"response": response("in_progress", json!([]))}),
            );
            push(
                "response.output_item.added",
                json!({"output_index":0,"item":{"id":"fc_agent","type":"function_call","status":"in_progress","call_id":"call_agent","name":AGENT_TOOL,"arguments":""}}),
            );
            for piece in AGENT_ARGUMENT_PIECES {
                push(
                    "response.function_call_arguments.delta",
                    json!({"item_id":"fc_agent","output_index":0,"delta":piece}),
                );
            }
            push(
                "response.function_call_arguments.done",
                json!({"item_id":"fc_agent","output_index":0,"arguments":args}),
            );
            let item = json!({"id":"fc_agent","type":"function_call","status":"completed","call_id":"call_agent","name":AGENT_TOOL,"arguments":args});
            push(
                "response.output_item.done",
                json!({"output_index":0,"item":item}),
            );
            let mut done = response("completed", json!([item]));
            done["usage"] = json!({"input_tokens":20,"input_tokens_details":{"cached_tokens":0},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":28});
            push("response.completed", json!({"response": done}));
        }
        Api::Chat => {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| json!({"id":"chatcmpl-agent","object":"chat.completion.chunk","created":0,"model":model,"choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
            events.push(sse_event(
                None,
                &chunk(json!({"role":"assistant","content":null}), json!(null)),
            ));
            events.push(sse_event(None, &chunk(json!({"tool_calls":[{"index":0,"id":"call_agent","type":"function","function":{"name":AGENT_TOOL,"arguments":""}}]}), json!(null))));
            for piece in AGENT_ARGUMENT_PIECES {
                events.push(sse_event(
                    None,
                    &chunk(
                        json!({"tool_calls":[{"index":0,"function":{"arguments":piece}}]}),
                        json!(null),
                    ),
                ));
            }
            events.push(sse_event(None, &chunk(json!({}), json!("tool_calls"))));
            events.push(sse_event(None, &json!({"id":"chatcmpl-agent","object":"chat.completion.chunk","created":0,"model":model,"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":8,"total_tokens":28}})));
            events.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
        _ => {
            events.push(sse_event(Some("message_start"), &json!({"type":"message_start","message":{"id":"msg_agent","type":"message","role":"assistant","model":model,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}})));
            events.push(sse_event(Some("content_block_start"), &json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_agent","name":AGENT_TOOL,"input":{}}})));
            for piece in AGENT_ARGUMENT_PIECES {
                events.push(sse_event(Some("content_block_delta"), &json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":piece}})));
            }
            events.push(sse_event(
                Some("content_block_stop"),
                &json!({"type":"content_block_stop","index":0}),
            ));
            events.push(sse_event(Some("message_delta"), &json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":8}})));
            events.push(sse_event(
                Some("message_stop"),
                &json!({"type":"message_stop"}),
            ));
        }
    }
    Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        delay: Duration::ZERO,
        body: events.into_iter().map(Step::Send).collect(),
    }
}
