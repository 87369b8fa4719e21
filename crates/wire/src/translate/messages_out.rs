//! An Anthropic Messages request → an OpenAI Responses or Chat
//! Completions request.

use serde_json::{Map, Value, json};

use super::{ToolNames, TranslateError, search, text_of};
use crate::{anthropic, chat, openai, responses};

/// `thinking.budget_tokens` → a reasoning effort.
fn effort(budget: u64) -> &'static str {
    match budget {
        0..4096 => "low",
        4096..16384 => "medium",
        _ => "high",
    }
}

/// The reasoning effort of a request's thinking: from the budget of
/// `enabled` thinking, or `output_config.effort` for `adaptive` thinking
/// (Anthropic's default effort is high; its `max` is OpenAI's `high`).
fn thinking_effort(v: &Value) -> Option<&'static str> {
    match v["thinking"]["type"].as_str() {
        Some("enabled") => Some(effort(v["thinking"]["budget_tokens"].as_u64().unwrap_or(0))),
        Some("adaptive") => Some(match v["output_config"]["effort"].as_str() {
            Some("low") => "low",
            Some("medium") => "medium",
            _ => "high",
        }),
        _ => None,
    }
}

/// The Responses `reasoning` item a thinking block carries (one weir made
/// from an earlier answer's encrypted reasoning); `None` for any other
/// block, whose signature means nothing to OpenAI.
fn reasoning_item(block: &Value) -> Option<Value> {
    let (id, encrypted) = responses::reasoning_of_signature(block["signature"].as_str()?)?;
    let summary = match block["thinking"].as_str().filter(|t| !t.is_empty()) {
        Some(text) => json!([{"type": "summary_text", "text": text}]),
        None => json!([]),
    };
    Some(json!({"type": "reasoning", "id": id, "summary": summary, "encrypted_content": encrypted}))
}

/// A data URL (or the URL) of an Anthropic image block's source.
fn image_url(block: &Value) -> Option<String> {
    let src = &block["source"];
    match src["type"].as_str()? {
        "base64" => Some(format!(
            "data:{};base64,{}",
            src["media_type"].as_str()?,
            src["data"].as_str()?
        )),
        "url" => src["url"].as_str().map(str::to_string),
        _ => None,
    }
}

/// The text of a tool result (blocks or a string), marked when it is an
/// error (neither OpenAI API has an error flag on tool output).
fn tool_result_text(block: &Value) -> String {
    let text = text_of(&block["content"]);
    if block["is_error"] == true {
        format!("Error: {text}")
    } else {
        text
    }
}

/// The OpenAI part for an Anthropic `image` or `document` block, or None
/// when it has none (a URL document on Chat, which takes files inline
/// only; an unknown source). A plain-text document is its text; a PDF is
/// a file part with a data URL and a filename (OpenAI's file inputs:
/// platform.openai.com/docs/guides/pdf-files — `input_file` with
/// `file_data`+`filename` or `file_url` on Responses, a `file` part with
/// `file.file_data`+`file.filename` on Chat).
fn media_part(block: &Value, api: Api) -> Option<Value> {
    match block["type"].as_str()? {
        "image" => {
            let url = image_url(block)?;
            Some(match api {
                Api::Responses => json!({"type": "input_image", "image_url": url}),
                Api::Chat => json!({"type": "image_url", "image_url": {"url": url}}),
            })
        }
        "document" => {
            let src = &block["source"];
            let text_kind = match api {
                Api::Responses => "input_text",
                Api::Chat => "text",
            };
            match src["type"].as_str()? {
                "text" => Some(json!({"type": text_kind, "text": src["data"].as_str()?})),
                "content" => {
                    let text = text_of(&src["content"]);
                    Some(json!({"type": text_kind, "text": text}))
                }
                "base64" => {
                    let data = format!(
                        "data:{};base64,{}",
                        src["media_type"].as_str()?,
                        src["data"].as_str()?
                    );
                    let filename = block["title"].as_str().unwrap_or("document.pdf");
                    Some(match api {
                        Api::Responses => {
                            json!({"type": "input_file", "filename": filename, "file_data": data})
                        }
                        Api::Chat => {
                            json!({"type": "file", "file": {"filename": filename, "file_data": data}})
                        }
                    })
                }
                "url" if api == Api::Responses => {
                    Some(json!({"type": "input_file", "file_url": src["url"].as_str()?}))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The images and documents of a tool result, as `api`'s parts.
fn tool_result_media(block: &Value, api: Api) -> Vec<Value> {
    block["content"]
        .as_array()
        .map(|parts| parts.iter().filter_map(|p| media_part(p, api)).collect())
        .unwrap_or_default()
}

/// Content blocks of a message, whether given as a string or a list.
fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// Which OpenAI API a request is built for: they name a function the
/// same way but nest it differently.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    Responses,
    Chat,
}

/// `tools` (`input_schema` → function `parameters`; Anthropic's web
/// search → Responses' `web_search`, its `max_uses` → `max_tool_calls`)
/// and `tool_choice` (auto / any / tool / none;
/// `disable_parallel_tool_use`). A Chat Completions server cannot search:
/// a request that offers the search is not for it.
fn tools_and_choice(
    v: &Value,
    out: &mut Map<String, Value>,
    api: Api,
    names: &ToolNames,
) -> Result<(), TranslateError> {
    let function = |name: &Value, mut fields: Map<String, Value>| {
        fields.insert("name".into(), name.clone());
        match api {
            Api::Responses => {
                fields.insert("type".into(), "function".into());
                Value::Object(fields)
            }
            Api::Chat => json!({"type": "function", "function": fields}),
        }
    };
    let mut tools: Vec<Value> = Vec::new();
    for t in v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| anthropic::is_web_search_tool(t))
    {
        if api == Api::Chat {
            return Err(TranslateError::Unserved(
                "this upstream (OpenAI Chat Completions) cannot search the web: \
                 the request's `web_search` tool needs an Anthropic or OpenAI Responses upstream"
                    .into(),
            ));
        }
        let (tool, max_uses) = search::to_responses_tool(t)?;
        tools.push(tool);
        if let Some(n) = max_uses {
            out.insert("max_tool_calls".into(), n.into());
        }
    }
    let functions = v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t.get("input_schema").is_some())
        .map(|t| {
            let mut fields = Map::new();
            fields.insert(
                "description".into(),
                t["description"].as_str().unwrap_or("").into(),
            );
            fields.insert("parameters".into(), t["input_schema"].clone());
            if api == Api::Responses {
                // Responses makes function tools strict by default, which
                // turns optional properties into required ones; an
                // Anthropic schema is not written for that.
                fields.insert("strict".into(), false.into());
            }
            function(&names.short(&t["name"]), fields)
        });
    tools.extend(functions);
    if !tools.is_empty() {
        out.insert("tools".into(), tools.into());
    }
    if let Some(choice) = v.get("tool_choice").filter(|c| c.is_object()) {
        let mapped = match choice["type"].as_str() {
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => function(&names.short(&choice["name"]), Map::new()),
            _ => json!("auto"),
        };
        out.insert("tool_choice".into(), mapped);
        if choice["disable_parallel_tool_use"] == true {
            out.insert("parallel_tool_calls".into(), false.into());
        }
    }
    Ok(())
}

fn copy(from: &Value, key: &str, to: &mut Map<String, Value>, as_key: &str) {
    if let Some(x) = from.get(key).filter(|x| !x.is_null()) {
        to.insert(as_key.into(), x.clone());
    }
}

/// Messages → Responses.
pub(super) fn to_responses(
    v: &Value,
    model: &str,
    names: &ToolNames,
) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let system = anthropic::system_text(&v["system"]);
    if !system.is_empty() {
        out.insert("instructions".into(), system.into());
    }
    let mut input = Vec::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        let mut parts = Vec::new();
        let flush = |parts: &mut Vec<Value>, input: &mut Vec<Value>| {
            if !parts.is_empty() {
                input.push(
                    json!({"type": "message", "role": role, "content": std::mem::take(parts)}),
                );
            }
        };
        for b in blocks(m) {
            match b["type"].as_str() {
                Some("text") => {
                    let kind = if role == "assistant" {
                        "output_text"
                    } else {
                        "input_text"
                    };
                    parts.push(json!({"type": kind, "text": b["text"]}));
                }
                Some("image" | "document") => match media_part(&b, Api::Responses) {
                    Some(p) => parts.push(p),
                    None => tracing::debug!("image or document without an equivalent dropped"),
                },
                Some("tool_use") => {
                    flush(&mut parts, &mut input);
                    input.push(json!({
                        "type": "function_call",
                        "call_id": b["id"],
                        "name": names.short(&b["name"]),
                        "arguments": b["input"].to_string(),
                    }));
                }
                // The search the model made (its results and the text's
                // citations carry Anthropic's encryption, which OpenAI
                // cannot read: they stay behind).
                Some("server_tool_use") => {
                    if let Some(call) = search::call_of_block(&b) {
                        flush(&mut parts, &mut input);
                        input.push(call);
                    }
                }
                Some("tool_result") => {
                    flush(&mut parts, &mut input);
                    let text = tool_result_text(&b);
                    let media = tool_result_media(&b, Api::Responses);
                    let output = if media.is_empty() {
                        Value::String(text)
                    } else {
                        let mut o = vec![json!({"type": "input_text", "text": text})];
                        o.extend(media);
                        Value::Array(o)
                    };
                    input.push(json!({
                        "type": "function_call_output",
                        "call_id": b["tool_use_id"],
                        "output": output,
                    }));
                }
                // Reasoning an OpenAI upstream gave goes back where it was
                // (before the calls it led to); other thinking carries
                // signatures no other API can check; the rest has no
                // equivalent.
                Some("thinking") if role == "assistant" => {
                    if let Some(item) = reasoning_item(&b) {
                        flush(&mut parts, &mut input);
                        input.push(item);
                    }
                }
                other => tracing::debug!(block = ?other, "content block dropped in translation"),
            }
        }
        flush(&mut parts, &mut input);
    }
    out.insert("input".into(), input.into());
    tools_and_choice(v, &mut out, Api::Responses, names)?;
    if let Some(n) = v["max_tokens"].as_u64() {
        out.insert(
            "max_output_tokens".into(),
            n.max(responses::MIN_MAX_OUTPUT_TOKENS).into(),
        );
    }
    copy(v, "temperature", &mut out, "temperature");
    copy(v, "top_p", &mut out, "top_p");
    copy(v, "stream", &mut out, "stream");
    if v.get("stop_sequences").is_some() {
        tracing::debug!("stop_sequences dropped: the Responses API has none");
    }
    if let Some(user) = v["metadata"]["user_id"].as_str() {
        out.insert("user".into(), openai::user(user).into());
    }
    let mut include = Vec::new();
    if let Some(e) = thinking_effort(v) {
        out.insert("reasoning".into(), json!({"effort": e, "summary": "auto"}));
        // The reasoning comes back encrypted, carried in the thinking
        // block's signature to the next turn.
        include.push(responses::INCLUDE_ENCRYPTED_REASONING);
    }
    let searches = v["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(anthropic::is_web_search_tool));
    if searches {
        // The pages found, which the client gets as the search's results.
        include.push(responses::INCLUDE_SEARCH_SOURCES);
    }
    if !include.is_empty() {
        out.insert("include".into(), json!(include));
    }
    if let Some(schema) = anthropic::output_schema(v) {
        out.insert("text".into(), responses::text_format(schema));
    }
    // Stateless, as an Anthropic client expects: nothing kept upstream.
    out.insert("store".into(), false.into());
    Ok(Value::Object(out))
}

/// Messages → Chat Completions.
pub(super) fn to_chat(v: &Value, model: &str, names: &ToolNames) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let mut messages = Vec::new();
    let system = anthropic::system_text(&v["system"]);
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in v["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        let mut parts: Vec<Value> = Vec::new();
        let mut tool_calls = Vec::new();
        // Tool results become `tool` messages, which must directly follow
        // the assistant message that called the tools.
        let mut tool_messages = Vec::new();
        let mut tool_images = Vec::new();
        let mut reasoning = Vec::new();
        for b in blocks(m) {
            match b["type"].as_str() {
                Some("text") => parts.push(json!({"type": "text", "text": b["text"]})),
                // What a Chat server reasoned goes back to it; no other
                // thinking means anything to it.
                Some("thinking") if b["signature"] == chat::REASONING_SIGNATURE => {
                    if let Some(t) = b["thinking"].as_str() {
                        reasoning.push(t.to_string());
                    }
                }
                Some("image" | "document") => match media_part(&b, Api::Chat) {
                    Some(p) => parts.push(p),
                    None => tracing::debug!("image or document without an equivalent dropped"),
                },
                Some("tool_use") => tool_calls.push(json!({
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": names.short(&b["name"]), "arguments": b["input"].to_string()},
                })),
                Some("tool_result") => {
                    tool_messages.push(json!({
                        "role": "tool",
                        "tool_call_id": b["tool_use_id"],
                        "content": tool_result_text(&b),
                    }));
                    tool_images.extend(tool_result_media(&b, Api::Chat));
                }
                other => tracing::debug!(block = ?other, "content block dropped in translation"),
            }
        }
        messages.extend(tool_messages);
        if !tool_images.is_empty() {
            // A tool message holds text only: its images and files follow
            // as the user's.
            messages.push(json!({"role": "user", "content": tool_images}));
        }
        if role == "assistant" {
            let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { text.join("").into() }});
            if !tool_calls.is_empty() {
                msg["tool_calls"] = tool_calls.into();
            }
            if !reasoning.is_empty() {
                msg["reasoning_content"] = reasoning.concat().into();
            }
            if !msg["content"].is_null() || msg.get("tool_calls").is_some() {
                messages.push(msg);
            }
        } else if !parts.is_empty() {
            let all_text = parts.iter().all(|p| p["type"] == "text");
            let content = if all_text {
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("")
                    .into()
            } else {
                Value::Array(parts)
            };
            // Claude Code's per-turn instructions (a `system` turn, under
            // its beta) stay instructions, not words of the user's.
            let role = if role == "system" { "system" } else { "user" };
            messages.push(json!({"role": role, "content": content}));
        }
    }
    out.insert("messages".into(), messages.into());
    tools_and_choice(v, &mut out, Api::Chat, names)?;
    copy(v, "max_tokens", &mut out, "max_completion_tokens");
    copy(v, "temperature", &mut out, "temperature");
    copy(v, "top_p", &mut out, "top_p");
    copy(v, "stop_sequences", &mut out, "stop");
    if v["stream"] == true {
        out.insert("stream".into(), true.into());
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(user) = v["metadata"]["user_id"].as_str() {
        out.insert("user".into(), openai::user(user).into());
    }
    if let Some(e) = thinking_effort(v) {
        out.insert("reasoning_effort".into(), e.into());
    }
    if let Some(schema) = anthropic::output_schema(v) {
        out.insert("response_format".into(), chat::response_format(schema));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests;
