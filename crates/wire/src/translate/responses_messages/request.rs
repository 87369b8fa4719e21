//! Codex's Responses request → a Messages request.

use serde_json::{Map, Value, json};

use super::CUSTOM_INPUT;
use crate::anthropic::{self, block, tool_choice};
use crate::responses::{self, item, part, role};
use crate::translate::shared::blocks::{
    budget, document_block, image_block, push, starts_with_thinking_where_needed, text_of,
};
use crate::translate::shared::search;
use crate::translate::{ToolNames, TranslateError};
use crate::{openai, type_of};

/// The room for the answer itself when Codex sets no `max_output_tokens`
/// (Anthropic requires `max_tokens`): the thinking budget comes on top,
/// and the model's own maximum caps the sum.
const DEFAULT_ANSWER_TOKENS: u64 = 16_384;

/// A thinking block restored into the assistant turn: after the turn's
/// other thinking, before its text and calls (a tool-use continuation
/// must start with thinking).
fn push_thinking(messages: &mut Vec<Value>, block: Value) {
    if let Some(last) = messages.last_mut()
        && last["role"] == anthropic::role::ASSISTANT
        && let Some(content) = last["content"].as_array_mut()
    {
        let at = content
            .iter()
            .position(|b| !anthropic::is_thinking(b))
            .unwrap_or(content.len());
        content.insert(at, block);
        return;
    }
    messages.push(json!({"role": anthropic::role::ASSISTANT, "content": [block]}));
}

/// A freeform tool (`{type: "custom", name, description, format}`, Codex's
/// `apply_patch`) as an Anthropic tool taking one string, the format's
/// grammar in its description.
fn custom_tool(t: &Value) -> Value {
    let mut about = String::from("The tool's whole input, as free text.");
    if let Some(grammar) = t["format"]["definition"].as_str() {
        let syntax = t["format"]["syntax"].as_str().unwrap_or("grammar");
        about.push_str(&format!(" It must match this {syntax} grammar:\n{grammar}"));
    }
    json!({
        "name": t["name"],
        "description": t["description"].as_str().unwrap_or(""),
        "input_schema": {
            "type": "object",
            "properties": {CUSTOM_INPUT: {"type": "string", "description": about}},
            "required": [CUSTOM_INPUT],
        },
    })
}

/// A tool call's output → a `tool_result` block.
fn tool_result(item: &Value) -> Value {
    let content = match &item["output"] {
        Value::String(s) => json!(s),
        other => Value::Array(content_blocks(other)),
    };
    json!({"type": block::TOOL_RESULT, "tool_use_id": item["call_id"], "content": content})
}

/// A reasoning effort and the client's limit → (`max_tokens`, thinking
/// budget): the budget at least Anthropic's minimum and below
/// `max_tokens`, the sum within what the model takes; no thinking when
/// the model's limit leaves no room for it.
pub(super) fn limits(
    model: &str,
    client_limit: Option<u64>,
    effort: Option<u64>,
) -> (u64, Option<u64>) {
    let cap = anthropic::max_output_tokens(model);
    let min = anthropic::MIN_THINKING_BUDGET;
    let wanted = match (client_limit, effort) {
        (Some(n), Some(b)) => n.max(b.saturating_add(min)),
        (Some(n), None) => n,
        (None, b) => DEFAULT_ANSWER_TOKENS.saturating_add(b.unwrap_or(0)),
    };
    let max_tokens = wanted.clamp(1, cap);
    let budget = effort
        .map(|b| b.min(max_tokens.saturating_sub(min)))
        .filter(|b| *b >= min);
    (max_tokens, budget)
}

/// Content parts of a Responses message → Anthropic blocks.
fn content_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) => vec![json!({"type": block::TEXT, "text": s})],
        Value::Array(parts) => parts
            .iter()
            // `text` is not Responses' own, but Chat's, which servers and
            // clients mix in.
            .filter_map(|p| match type_of(p) {
                Some(part::INPUT_TEXT | part::OUTPUT_TEXT | crate::chat::part::TEXT) => {
                    Some(json!({"type": block::TEXT, "text": p["text"]}))
                }
                Some(part::INPUT_IMAGE) => p["image_url"].as_str().map(image_block),
                Some(part::INPUT_FILE) => document_block(
                    p["file_data"].as_str(),
                    p["filename"].as_str(),
                    p["file_url"].as_str(),
                ),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Responses → Messages, and what the answer's translation needs to know.
pub(in crate::translate) fn request(
    v: &Value,
    model: &str,
) -> Result<(Value, ToolNames), TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), model.into());
    let (system, messages) = system_and_messages(v)?;
    if !system.is_empty() {
        out.insert("system".into(), system.join("\n\n").into());
    }
    let continuation_ok = starts_with_thinking_where_needed(&messages);
    out.insert("messages".into(), messages.into());
    let mut names = ToolNames::default();
    if let Some(tools) = tools(v, &mut names) {
        out.insert("tools".into(), tools.into());
    }
    if out.contains_key("tools")
        && let Some(c) = tool_choice(v)
    {
        out.insert("tool_choice".into(), c);
    }
    names.client_limit = limits_and_sampling(v, model, continuation_ok, &mut out);
    if v["stream"] == true {
        out.insert("stream".into(), true.into());
    }
    if let Some(user) = v["user"].as_str() {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    // Codex keys its prompt for OpenAI's automatic cache; Anthropic caches
    // only up to marked breakpoints, so without them Codex's long, stable
    // prefix would be paid in full every turn.
    if v["prompt_cache_key"].is_string() {
        cache_breakpoints(&mut out);
    }
    // `codex exec --output-schema`.
    if let Some(schema) = responses::output_schema(v) {
        out.insert(
            "output_config".into(),
            json!({"format": anthropic::output_format(schema)}),
        );
    }
    Ok((Value::Object(out), names))
}

/// `instructions` and the input's system and developer messages (the
/// system prompt's parts), and the other input items as alternating
/// Messages turns.
fn system_and_messages(v: &Value) -> Result<(Vec<String>, Vec<Value>), TranslateError> {
    let mut system: Vec<String> = v["instructions"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    let mut messages: Vec<Value> = Vec::new();
    let items = match &v["input"] {
        Value::String(s) => vec![json!({"type": item::MESSAGE, "role": role::USER, "content": s})],
        Value::Array(a) => a.clone(),
        Value::Null => Vec::new(),
        _ => {
            return Err(TranslateError::Invalid(
                "`input` must be a string or a list of items".into(),
            ));
        }
    };
    for item in &items {
        input_item(item, &mut system, &mut messages);
    }
    Ok((system, messages))
}

/// One input item → its place in the system prompt or the history.
fn input_item(i: &Value, system: &mut Vec<String>, messages: &mut Vec<Value>) {
    let kind = type_of(i).unwrap_or(item::MESSAGE);
    match kind {
        item::MESSAGE => {
            let role = i["role"].as_str().unwrap_or(role::USER);
            if matches!(role, role::SYSTEM | role::DEVELOPER) {
                let text = text_of(&i["content"]);
                if !text.is_empty() {
                    system.push(text);
                }
                return;
            }
            let role = if role == role::ASSISTANT {
                anthropic::role::ASSISTANT
            } else {
                anthropic::role::USER
            };
            for b in content_blocks(&i["content"]) {
                push(messages, role, b);
            }
        }
        item::FUNCTION_CALL => {
            let input = openai::arguments_object(&i["arguments"]);
            push(
                messages,
                anthropic::role::ASSISTANT,
                json!({"type": block::TOOL_USE, "id": i["call_id"], "name": i["name"], "input": input}),
            );
        }
        item::CUSTOM_TOOL_CALL => push(
            messages,
            anthropic::role::ASSISTANT,
            json!({"type": block::TOOL_USE, "id": i["call_id"], "name": i["name"],
                "input": {CUSTOM_INPUT: i["input"].as_str().unwrap_or_default()}}),
        ),
        item::FUNCTION_CALL_OUTPUT | item::CUSTOM_TOOL_CALL_OUTPUT => {
            push(messages, anthropic::role::USER, tool_result(i));
        }
        // Thinking weir gave Codex goes back exactly as Anthropic signed
        // it; OpenAI's own encrypted reasoning means nothing here.
        item::REASONING => match i["encrypted_content"]
            .as_str()
            .and_then(responses::block_of_content)
        {
            Some(block) => push_thinking(messages, block),
            None => tracing::debug!("foreign reasoning item dropped in translation"),
        },
        // Other item kinds have no equivalent.
        other => tracing::debug!(item = other, "input item dropped in translation"),
    }
}

/// The request's tools as Anthropic's (`None` when none maps); Codex's
/// freeform tools noted in `names`.
fn tools(v: &Value, names: &mut ToolNames) -> Option<Vec<Value>> {
    let tools: Vec<Value> = v["tools"]
        .as_array()?
        .iter()
        .filter_map(|t| match type_of(t) {
            _ if responses::is_web_search_tool(t) => Some(search::to_anthropic_tool(
                t,
                v["max_tool_calls"].as_u64(),
            )),
            Some(responses::tool::FUNCTION) => Some(json!({
                "name": t["name"],
                "description": t["description"].as_str().unwrap_or(""),
                "input_schema": if t["parameters"].is_object() { t["parameters"].clone() } else { json!({"type": "object", "properties": {}}) },
            })),
            Some(responses::tool::CUSTOM) => {
                names.custom.extend(t["name"].as_str().map(str::to_string));
                Some(custom_tool(t))
            }
            _ => None,
        })
        .collect();
    (!tools.is_empty()).then_some(tools)
}

/// `tool_choice` and `parallel_tool_calls` → Anthropic's `tool_choice`
/// (sent only with tools).
fn tool_choice(v: &Value) -> Option<Value> {
    let mut choice = match &v["tool_choice"] {
        Value::String(s) if s == openai::tool_choice::REQUIRED => {
            Some(json!({"type": tool_choice::ANY}))
        }
        Value::String(s) if s == openai::tool_choice::NONE => {
            Some(json!({"type": tool_choice::NONE}))
        }
        Value::String(s) if s == openai::tool_choice::AUTO => {
            Some(json!({"type": tool_choice::AUTO}))
        }
        Value::Object(o)
            if matches!(
                o.get("type").and_then(Value::as_str),
                Some(responses::tool::FUNCTION | responses::tool::CUSTOM)
            ) =>
        {
            Some(
                json!({"type": tool_choice::TOOL, "name": o.get("name").cloned().unwrap_or(Value::Null)}),
            )
        }
        _ => None,
    };
    if v["parallel_tool_calls"] == false {
        let c = choice.get_or_insert_with(|| json!({"type": tool_choice::AUTO}));
        c["disable_parallel_tool_use"] = true.into();
    }
    choice
}

/// `max_tokens`, and thinking or the sampling parameters (thinking takes
/// none); whether the client set its own limit.
fn limits_and_sampling(
    v: &Value,
    model: &str,
    continuation_ok: bool,
    out: &mut Map<String, Value>,
) -> bool {
    let client_limit = v["max_output_tokens"].as_u64();
    let (max_tokens, thinking) = limits(
        model,
        client_limit,
        v["reasoning"]["effort"].as_str().and_then(budget),
    );
    // With thinking on, Anthropic refuses a tool-use continuation whose
    // assistant turn does not start with thinking (Codex's history from
    // another vendor, or from a turn without reasoning): thinking is
    // turned off for that request instead.
    let thinking = thinking.filter(|_| continuation_ok);
    if let Some(b) = thinking {
        // Thinking takes no sampling parameters.
        out.insert(
            "thinking".into(),
            json!({"type": anthropic::thinking::ENABLED, "budget_tokens": b}),
        );
    } else {
        for k in ["temperature", "top_p"] {
            if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
                out.insert(k.into(), x.clone());
            }
        }
    }
    out.insert("max_tokens".into(), max_tokens.into());
    client_limit.is_some()
}

/// Three cache breakpoints (of Anthropic's 4): the end of the system
/// prompt, of the tool definitions, and of the history before the newest
/// turn — the prefix that stays the same from one turn to the next.
fn cache_breakpoints(out: &mut Map<String, Value>) {
    if let Some(Value::String(text)) = out.get("system") {
        let mut system = json!({"type": block::TEXT, "text": text});
        anthropic::mark_cache_breakpoint(&mut system);
        out.insert("system".into(), json!([system]));
    }
    if let Some(last) = out
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.last_mut())
    {
        anthropic::mark_cache_breakpoint(last);
    }
    let Some(messages) = out.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    let Some(before) = messages.len().checked_sub(2) else {
        return;
    };
    let Some(m) = messages.get_mut(before) else {
        return;
    };
    if let Value::String(text) = &m["content"] {
        m["content"] = json!([{"type": block::TEXT, "text": text}]);
    }
    // A thinking block takes no cache_control: the last other block does.
    if let Some(last) = m["content"]
        .as_array_mut()
        .and_then(|c| c.iter_mut().rev().find(|b| !anthropic::is_thinking(b)))
    {
        anthropic::mark_cache_breakpoint(last);
    }
}
