//! OpenAI Chat Completions, as api.openai.com enforces it.
//!
//! Sources: the Chat Completions API reference (platform.openai.com/docs/
//! api-reference/chat/create: the documented body fields, `user`,
//! `stream_options` "Only set this when you set `stream: true`", the chunk
//! object and the final usage chunk whose `choices` is empty), the
//! function name rule of openai-node `FunctionDefinition.name`, the
//! reasoning guide (reasoning models take only the default `temperature`
//! and `top_p`), and the wording of real refusals of tool messages that
//! answer no `tool_calls` (LLM-PROTOCOLS §6).

use serde_json::{Value, json};

use super::script::{Plan, ShellTool, View, words};
use super::{
    Answer, Options, Rejection, Shape, id, now, openai_common, openai_tool_name, pieces, sse,
    text_of, unsupported,
};

const KNOWN: &[&str] = &[
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "messages",
    "metadata",
    "modalities",
    "model",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

pub(crate) fn validate(body: &Value, options: &Options) -> Result<(), Rejection> {
    openai_common(body, KNOWN)?;
    if !body["stream_options"].is_null() && body["stream"] != true {
        return Err(Rejection::bad(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        )
        .param("stream_options")
        .code("invalid_value"));
    }
    if options.reasoning_model {
        for p in ["temperature", "top_p"] {
            if let Some(v) = body[p].as_f64().filter(|v| *v != 1.0) {
                return Err(Rejection::bad(format!(
                    "Unsupported value: '{p}' does not support {v} with this model. Only the default (1) value is supported."
                ))
                .param(p)
                .code("unsupported_value"));
            }
        }
    } else if !body["reasoning_effort"].is_null() {
        return Err(unsupported("reasoning_effort"));
    }
    if let Some(tools) = body["tools"].as_array() {
        for (i, t) in tools.iter().enumerate() {
            match t["type"].as_str() {
                Some("function") => {
                    openai_tool_name(&format!("tools[{i}].function.name"), &t["function"]["name"])?
                }
                Some("custom") => {}
                // Chat Completions has no web search tool: a search model
                // takes `web_search_options` instead (web search guide).
                other => {
                    return Err(Rejection::bad(format!(
                        "Invalid value: '{}'. Supported values are: 'function' and 'custom'.",
                        other.unwrap_or("")
                    ))
                    .param(format!("tools[{i}].type"))
                    .code("invalid_value"));
                }
            }
        }
    }
    if options.shape.chat_reasoning_required {
        reasoning_sent_back(&body["messages"])?;
    }
    messages(&body["messages"])
}

/// DeepSeek's thinking mode with tools: the reasoning of every assistant
/// turn that called tools comes back with it.
fn reasoning_sent_back(messages: &Value) -> Result<(), Rejection> {
    for (i, m) in messages.as_array().into_iter().flatten().enumerate() {
        let called = m["tool_calls"].as_array().is_some_and(|c| !c.is_empty());
        if m["role"] == "assistant" && called && !m["reasoning_content"].is_string() {
            return Err(Rejection::bad(format!(
                "Missing `reasoning_content` field in the assistant message at message index {i}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
            ))
            .code("invalid_request_error"));
        }
    }
    Ok(())
}

fn messages(messages: &Value) -> Result<(), Rejection> {
    let Some(messages) = messages.as_array() else {
        return Err(Rejection::bad("Missing required parameter: 'messages'.")
            .param("messages")
            .code("missing_required_parameter"));
    };
    if messages.is_empty() {
        return Err(Rejection::bad(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
        )
        .param("messages")
        .code("empty_array"));
    }
    // The ids of the latest assistant message's tool_calls not yet
    // answered, and where that message was.
    let mut pending: Vec<String> = Vec::new();
    let mut asked_at = 0;
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if ![
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
            "function",
        ]
        .contains(&role)
        {
            return Err(Rejection::bad(format!(
                "Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
            ))
            .param(format!("messages[{i}].role"))
            .code("invalid_value"));
        }
        content_parts(&m["content"], role, i)?;
        if role == "tool" {
            let answers = m["tool_call_id"].as_str().unwrap_or("");
            match pending.iter().position(|p| p == answers) {
                Some(at) => {
                    pending.remove(at);
                }
                None => {
                    return Err(Rejection::bad(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                    )
                    .param(format!("messages.[{i}].role")));
                }
            }
            continue;
        }
        unanswered(&pending, asked_at)?;
        pending.clear();
        if role == "assistant" {
            for (n, call) in m["tool_calls"].as_array().into_iter().flatten().enumerate() {
                openai_tool_name(
                    &format!("messages[{i}].tool_calls[{n}].function.name"),
                    &call["function"]["name"],
                )?;
                pending.push(call["id"].as_str().unwrap_or("").to_string());
            }
            asked_at = i;
        }
    }
    unanswered(&pending, asked_at)
}

/// A message's content parts (Chat Completions API reference, the
/// message types): a user's `text`, `image_url` (`image_url.url`),
/// `input_audio` and `file` (`file.file_data` with `file.filename`, or
/// `file.file_id`); the assistant's `text` and `refusal`; the system's,
/// developer's and tool's `text` only. A string is text.
fn content_parts(content: &Value, role: &str, i: usize) -> Result<(), Rejection> {
    let Some(parts) = content.as_array() else {
        return Ok(());
    };
    let allowed: &[&str] = match role {
        "user" => &["text", "image_url", "input_audio", "file"],
        "assistant" => &["text", "refusal"],
        _ => &["text"],
    };
    for (j, p) in parts.iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        let kind = p["type"].as_str().unwrap_or("");
        if !allowed.contains(&kind) {
            let listed: Vec<String> = allowed.iter().map(|k| format!("'{k}'")).collect();
            return Err(Rejection::bad(format!(
                "Invalid value: '{kind}'. Supported values are: {}.",
                listed.join(", ")
            ))
            .param(format!("{at}.type"))
            .code("invalid_value"));
        }
        let missing = |what: &str| {
            Rejection::bad(format!("Missing required parameter: '{at}.{what}'."))
                .param(format!("{at}.{what}"))
                .code("missing_required_parameter")
        };
        match kind {
            "text" if !p["text"].is_string() => return Err(missing("text")),
            "image_url" if !p["image_url"]["url"].is_string() => {
                return Err(missing("image_url.url"));
            }
            "file" => {
                let f = &p["file"];
                match (f["file_data"].is_string(), f["file_id"].is_string()) {
                    (true, false) if !f["filename"].is_string() => {
                        return Err(missing("file.filename"));
                    }
                    (true, false) | (false, true) => {}
                    _ => {
                        return Err(Rejection::bad(format!(
                            "Invalid '{at}.file': exactly one of 'file_data' or 'file_id' must be provided."
                        ))
                        .param(format!("{at}.file"))
                        .code("invalid_value"));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn unanswered(pending: &[String], at: usize) -> Result<(), Rejection> {
    if pending.is_empty() {
        return Ok(());
    }
    Err(Rejection::bad(format!(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
        pending.join(", ")
    ))
    .param(format!("messages.[{at}].role")))
}

/// The conversation turn: 1 + the assistant messages in the history.
pub(crate) fn turn(body: &Value) -> usize {
    1 + body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
        .unwrap_or(0)
}

pub(crate) fn view(body: &Value, options: &Options) -> View {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let shell = tools
        .iter()
        .filter(|t| t["type"] == "function")
        .find_map(|t| {
            ShellTool::recognise(
                t["function"]["name"].as_str()?,
                &t["function"]["parameters"],
            )
        });
    let result = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .filter(|m| m["role"] == "tool")
        .map(|m| text_of(&m["content"]));
    View {
        shell,
        result,
        // Only servers that show their reasoning (the shape option) say
        // anything of it.
        thinking: options.shape.chat_reasoning_content,
        max_tokens: body["max_completion_tokens"]
            .as_u64()
            .or(body["max_tokens"].as_u64()),
        ..View::of(body, &tools)
    }
}

pub(crate) fn answer(plan: &Plan, view: &View, body: &Value, shape: &Shape) -> Answer {
    let mut message = json!({"role": "assistant", "content": plan.text, "refusal": null});
    let mut reasoning_tokens = 0;
    if let Some(thinking) = &plan.thinking {
        reasoning_tokens = words(thinking);
        message["reasoning_content"] = json!(thinking);
    }
    let mut completion = reasoning_tokens + plan.text.as_deref().map(words).unwrap_or(0);
    let mut finish = "stop";
    if let Some((name, args)) = &plan.call {
        completion += words(&args.to_string());
        finish = "tool_calls";
        message["tool_calls"] = json!([{
            "id": id("call_"),
            "type": "function",
            "function": {"name": name, "arguments": args.to_string()},
        }]);
    }
    let usage = json!({
        "prompt_tokens": view.input_tokens,
        "completion_tokens": completion,
        "total_tokens": view.input_tokens + completion,
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    });
    let cid = id("chatcmpl-");
    if !view.stream {
        return Answer::Json(json!({
            "id": cid,
            "object": "chat.completion",
            "created": now(),
            "model": view.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
            "usage": usage,
        }));
    }
    let include_usage = body["stream_options"]["include_usage"] == true;
    let chunk = |delta: Value, finish: Value| {
        let mut c = json!({
            "id": cid,
            "object": "chat.completion.chunk",
            "created": now(),
            "model": view.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        c
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    if let Some(thinking) = &plan.thinking {
        for p in pieces(thinking, 12) {
            chunks.push(chunk(json!({"reasoning_content": p}), Value::Null));
        }
    }
    if let Some(text) = &plan.text {
        for p in pieces(text, 8) {
            chunks.push(chunk(json!({"content": p}), Value::Null));
        }
    }
    if let Some(call) = message["tool_calls"][0].as_object() {
        let call_id = &call["id"];
        let name = &call["function"]["name"];
        let args = pieces(call["function"]["arguments"].as_str().unwrap_or(""), 10);
        if shape.chat_late_tool_id {
            for (n, p) in args.iter().enumerate() {
                let piece = match n {
                    0 => {
                        json!({"index": 0, "type": "function", "function": {"name": name, "arguments": p}})
                    }
                    1 => json!({"index": 0, "id": call_id, "function": {"arguments": p}}),
                    _ => json!({"index": 0, "function": {"arguments": p}}),
                };
                chunks.push(chunk(json!({"tool_calls": [piece]}), Value::Null));
            }
        } else {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for p in args {
                chunks.push(chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                    Value::Null,
                ));
            }
        }
    }
    let mut last = chunk(json!({}), json!(finish));
    if shape.chat_usage_on_finish {
        last["usage"] = usage.clone();
    }
    chunks.push(last);
    if include_usage && !shape.chat_usage_on_finish {
        let mut alone = chunk(json!({}), Value::Null);
        alone["choices"] = json!([]);
        alone["usage"] = usage;
        chunks.push(alone);
    }
    let mut events: Vec<String> = chunks.iter().map(|c| sse(None, c)).collect();
    events.push("data: [DONE]\n\n".to_string());
    Answer::Events(events)
}
