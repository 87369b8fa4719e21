//! The pairs between the two OpenAI APIs, composed through Messages as
//! the hub: Chat → Messages → Responses and Responses → Messages → Chat,
//! answers back the same way, streams event by event through both
//! translators. One mapping per API and direction, not one per pair: what
//! each API's translator learns (a new block type, a tolerance for an
//! upstream's quirk) reaches every pair that goes through it.
//!
//! The hub is Anthropic's, so a field Messages cannot hold would be lost
//! on the way, or come out bent to Anthropic's rules (thinking forbids a
//! temperature, takes a budget above 1,024, needs a `max_tokens`). Those
//! fields are set again here from the client's request, straight from one
//! OpenAI API into the other.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::translate::{
    ToolNames, TranslateError, chat_messages, messages_chat, messages_responses, responses_messages,
};
use crate::{anthropic, chat, responses, sse, type_of};

/// Chat Completions → Responses.
pub(in crate::translate) fn chat_to_responses(
    v: &Value,
    model: &str,
) -> Result<(Value, ToolNames), TranslateError> {
    let hub = chat_messages::request(v, model)?;
    let names = ToolNames::of_messages_request(&hub);
    let mut out = messages_responses::request(&hub, model, &names)?;
    restore_sampling(v, &mut out);
    match chat::max_tokens(v) {
        Some(n) => out["max_output_tokens"] = n.max(responses::MIN_MAX_OUTPUT_TOKENS).into(),
        None => remove(&mut out, "max_output_tokens"),
    }
    if let Some(effort) = v["reasoning_effort"].as_str() {
        out["reasoning"] = json!({"effort": effort, "summary": "auto"});
    }
    let format = &v["response_format"];
    match type_of(format) {
        Some(chat::format::JSON_SCHEMA) => {
            let s = &format["json_schema"];
            let mut f = json!({"type": responses::format::JSON_SCHEMA, "name": s["name"], "schema": s["schema"]});
            if let Some(strict) = s.get("strict").filter(|x| x.is_boolean()) {
                f["strict"] = strict.clone();
            }
            out["text"] = json!({"format": f});
        }
        Some(chat::format::JSON_OBJECT) => {
            out["text"] = json!({"format": {"type": responses::format::JSON_OBJECT}})
        }
        _ => {}
    }
    Ok((out, names))
}

/// Responses → Chat Completions.
pub(in crate::translate) fn responses_to_chat(
    v: &Value,
    model: &str,
) -> Result<(Value, ToolNames), TranslateError> {
    let (mut hub, codex) = responses_messages::request(v, model)?;
    // Long names are shortened for the Chat server; Codex's freeform
    // tools and limit still decide what its answer looks like.
    let mut names = ToolNames::of_messages_request(&hub);
    names.custom = codex.custom;
    names.client_limit = codex.client_limit;
    without_search(&mut hub);
    let mut out = messages_chat::request(&hub, model, &names)?;
    restore_sampling(v, &mut out);
    match v["max_output_tokens"].as_u64() {
        Some(n) => out["max_completion_tokens"] = n.into(),
        None => remove(&mut out, "max_completion_tokens"),
    }
    match v["reasoning"]["effort"].as_str() {
        Some(effort) => out["reasoning_effort"] = effort.into(),
        None => remove(&mut out, "reasoning_effort"),
    }
    let format = &v["text"]["format"];
    match type_of(format) {
        Some(responses::format::JSON_SCHEMA) => {
            let mut s = json!({"name": format["name"], "schema": format["schema"]});
            if let Some(strict) = format.get("strict").filter(|x| x.is_boolean()) {
                s["strict"] = strict.clone();
            }
            out["response_format"] = json!({"type": chat::format::JSON_SCHEMA, "json_schema": s});
        }
        Some(responses::format::JSON_OBJECT) => {
            out["response_format"] = json!({"type": chat::format::JSON_OBJECT})
        }
        _ => {}
    }
    Ok((out, names))
}

/// Codex offers its `web_search` tool on every request, asked for or
/// not, and a Chat Completions server cannot search: the tool is left
/// out rather than the request refused, so Codex still works there
/// (without search). Claude Code offers Anthropic's search only when it
/// means to search, and is refused instead (`messages_chat`).
fn without_search(hub: &mut Value) {
    let Some(fields) = hub.as_object_mut() else {
        return;
    };
    if let Some(tools) = fields.get_mut("tools").and_then(Value::as_array_mut) {
        tools.retain(|t| !anthropic::is_web_search_tool(t));
        if tools.is_empty() {
            fields.remove("tools");
            fields.remove("tool_choice");
        }
    }
}

/// Sampling as the client asked: the hub clamps the temperature to
/// Anthropic's range and drops both when thinking is on.
fn restore_sampling(client: &Value, out: &mut Value) {
    for k in ["temperature", "top_p"] {
        match client.get(k).filter(|x| x.is_number()) {
            Some(x) => out[k] = x.clone(),
            None => remove(out, k),
        }
    }
}

fn remove(out: &mut Value, key: &str) {
    if let Some(o) = out.as_object_mut() {
        o.remove(key);
    }
}

/// Feed the events one translator wrote (whole SSE events) to the next.
pub(in crate::translate) fn chain(
    first: Vec<Bytes>,
    mut next: impl FnMut(Option<&str>, &str, &mut Vec<Bytes>),
    out: &mut Vec<Bytes>,
) {
    for event in first {
        let (name, data) = sse::fields(&event);
        next(name, &data, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_to_responses_keeps_what_the_hub_would_bend() {
        let req = json!({
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
            ],
            "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
            "tool_choice": "required",
            "temperature": 1.7,
            "reasoning_effort": "minimal",
            "max_tokens": 4,
            "stop": ["x"],
            "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}, "strict": true}},
            "stream": true,
            "user": "someone",
        });
        let (out, names) = chat_to_responses(&req, "gpt-5").expect("translated");
        assert_eq!(names, ToolNames::default());
        assert_eq!(
            out,
            json!({
                "model": "gpt-5",
                "instructions": "Be brief.",
                "input": [
                    {"type": "message", "role": "user", "content": [
                        {"type": "input_text", "text": "Weather?"},
                        {"type": "input_image", "image_url": "https://x/y.png"},
                    ]},
                    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
                ],
                "tools": [{"type": "function", "name": "weather", "description": "", "parameters": {"type": "object"}, "strict": false}],
                "tool_choice": "required",
                "max_output_tokens": 16,
                "temperature": 1.7,
                "stream": true,
                "user": "someone",
                "reasoning": {"effort": "minimal", "summary": "auto"},
                "store": false,
                "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": true}},
            })
        );
        let (out, _) = chat_to_responses(&json!({"messages": []}), "gpt-5").expect("ok");
        assert!(out.get("max_output_tokens").is_none(), "{out}");
    }

    #[test]
    fn responses_to_chat_keeps_what_the_hub_would_bend() {
        let req = json!({
            "model": "gpt-5-codex",
            "instructions": "You are Codex.",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files"}, {"type": "input_image", "image_url": "data:image/png;base64,QUJD"}]},
                {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            ],
            "tools": [{"type": "function", "name": "shell", "description": "Run", "parameters": {"type": "object"}, "strict": false}],
            "tool_choice": "auto",
            "parallel_tool_calls": false,
            "reasoning": {"effort": "minimal"},
            "max_output_tokens": 300,
            "temperature": 0.3,
            "text": {"format": {"type": "json_object"}},
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "k",
        });
        let (out, _) = responses_to_chat(&req, "llama").expect("translated");
        assert_eq!(
            out,
            json!({
                "model": "llama",
                "messages": [
                    {"role": "system", "content": "You are Codex."},
                    {"role": "user", "content": [
                        {"type": "text", "text": "List files"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                    ]},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":[\"ls\"]}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
                ],
                "tools": [{"type": "function", "function": {"name": "shell", "description": "Run", "parameters": {"type": "object"}}}],
                "tool_choice": "auto",
                "parallel_tool_calls": false,
                "max_completion_tokens": 300,
                "temperature": 0.3,
                "stream": true,
                "stream_options": {"include_usage": true},
                "reasoning_effort": "minimal",
                "response_format": {"type": "json_object"},
            })
        );
        let (out, _) = responses_to_chat(
            &json!({"input": "hi", "reasoning": {"effort": "high"}}),
            "llama",
        )
        .expect("ok");
        assert!(out.get("max_completion_tokens").is_none(), "{out}");
        assert_eq!(out["reasoning_effort"], "high");
    }
}
