//! Claude Code's Messages request → a Responses request.

use serde_json::{Map, Value, json};

use crate::anthropic::{self, block};
use crate::responses::{item, part};
use crate::translate::shared::blocks::{
    OpenAiApi, blocks, copy, media_part, reasoning_item, thinking_effort, tool_result_media,
    tool_result_text, tools_and_choice,
};
use crate::translate::shared::search;
use crate::translate::{ToolNames, TranslateError};
use crate::{openai, responses, type_of};

/// Messages → Responses.
pub(in crate::translate) fn request(
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
        message_items(m, names, &mut input);
    }
    out.insert("input".into(), input.into());
    tools_and_choice(v, &mut out, OpenAiApi::Responses, names)?;
    options(v, &mut out);
    Ok(Value::Object(out))
}

/// One message → its input items: a message of its text and media, cut
/// where a call, a call's output or a reasoning item comes between.
fn message_items(m: &Value, names: &ToolNames, input: &mut Vec<Value>) {
    let role = m["role"].as_str().unwrap_or(anthropic::role::USER);
    let mut parts = Vec::new();
    let flush = |parts: &mut Vec<Value>, input: &mut Vec<Value>| {
        if !parts.is_empty() {
            input.push(
                json!({"type": item::MESSAGE, "role": role, "content": std::mem::take(parts)}),
            );
        }
    };
    for b in blocks(m) {
        match type_of(&b) {
            Some(block::TEXT) => {
                let kind = if role == anthropic::role::ASSISTANT {
                    part::OUTPUT_TEXT
                } else {
                    part::INPUT_TEXT
                };
                parts.push(json!({"type": kind, "text": b["text"]}));
            }
            Some(block::IMAGE | block::DOCUMENT) => match media_part(&b, OpenAiApi::Responses) {
                Some(p) => parts.push(p),
                None => tracing::debug!("image or document without an equivalent dropped"),
            },
            Some(block::TOOL_USE) => {
                flush(&mut parts, input);
                input.push(json!({
                    "type": item::FUNCTION_CALL,
                    "call_id": b["id"],
                    "name": names.short(&b["name"]),
                    "arguments": b["input"].to_string(),
                }));
            }
            // The search the model made (its results and the text's
            // citations carry Anthropic's encryption, which OpenAI
            // cannot read: they stay behind).
            Some(block::SERVER_TOOL_USE) => {
                if let Some(call) = search::call_of_block(&b) {
                    flush(&mut parts, input);
                    input.push(call);
                }
            }
            Some(block::TOOL_RESULT) => {
                flush(&mut parts, input);
                let text = tool_result_text(&b);
                let media = tool_result_media(&b, OpenAiApi::Responses);
                let output = if media.is_empty() {
                    Value::String(text)
                } else {
                    let mut o = vec![json!({"type": part::INPUT_TEXT, "text": text})];
                    o.extend(media);
                    Value::Array(o)
                };
                input.push(json!({
                    "type": item::FUNCTION_CALL_OUTPUT,
                    "call_id": b["tool_use_id"],
                    "output": output,
                }));
            }
            // Reasoning an OpenAI upstream gave goes back where it was
            // (before the calls it led to); other thinking carries
            // signatures no other API can check; the rest has no
            // equivalent.
            Some(block::THINKING) if role == anthropic::role::ASSISTANT => {
                if let Some(item) = reasoning_item(&b) {
                    flush(&mut parts, input);
                    input.push(item);
                }
            }
            other => tracing::debug!(block = ?other, "content block dropped in translation"),
        }
    }
    flush(&mut parts, input);
}

/// The limit, sampling, user, reasoning, what to include and the output
/// format.
fn options(v: &Value, out: &mut Map<String, Value>) {
    if let Some(n) = v["max_tokens"].as_u64() {
        out.insert(
            "max_output_tokens".into(),
            n.max(responses::MIN_MAX_OUTPUT_TOKENS).into(),
        );
    }
    copy(v, "temperature", out, "temperature");
    copy(v, "top_p", out, "top_p");
    copy(v, "stream", out, "stream");
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
}
