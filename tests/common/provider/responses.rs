//! OpenAI Responses, as api.openai.com enforces it.
//!
//! Sources: the Responses API reference (platform.openai.com/docs/
//! api-reference/responses/create: the documented body fields, `user`,
//! `include` values, the streaming events and their `sequence_number`),
//! the function-calling guide (developers.openai.com/api/docs/guides/
//! function-calling, "Strict mode": strict function schemas need every
//! property in `required` and `additionalProperties: false`, and the
//! Responses API makes function tools strict unless `strict: false` is
//! sent), the reasoning guide (`include: ["reasoning.encrypted_content"]`
//! with `store: false`, the reasoning items sent back), and the wording of
//! real refusals in LLM-PROTOCOLS §6 (maximhq/bifrost#1000 for `user`,
//! AnswerDotAI/fastllm#45 for `call_id`, vectorize-io/hindsight#58 for
//! `max_output_tokens`, BoundaryML/baml#2708 for reasoning/temperature).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::script::{CITED, Plan, SEARCH_TITLE, SEARCH_URL, ShellTool, View, words};
use super::{
    Answer, Options, Rejection, Shape, id, max_length, now, openai_common, openai_known,
    openai_tool_name, pieces, seal, sse, text_of, unseal, unsupported,
};

/// Every documented body field, and `client_metadata`, which Codex sends
/// and the service accepts.
const KNOWN: &[&str] = &[
    "background",
    "client_metadata",
    "conversation",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

const INCLUDABLE: &[&str] = &[
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
    "web_search_call.action.sources",
];

/// `encrypted_content` is sealed as "reasoning": an Anthropic signature
/// (sealed as "thinking") is not one.
const REASONING: &str = "reasoning";

pub(crate) fn validate(body: &Value, options: &Options) -> Result<(), Rejection> {
    openai_common(body, KNOWN)?;
    if let Some(n) = body["max_output_tokens"].as_i64().filter(|n| *n < 16) {
        return Err(Rejection::bad(format!(
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got {n} instead."
        ))
        .param("max_output_tokens")
        .code("integer_below_min_value"));
    }
    if let Some(include) = body["include"].as_array() {
        for (i, v) in include.iter().enumerate() {
            if !v.as_str().is_some_and(|s| INCLUDABLE.contains(&s)) {
                return Err(Rejection::bad(format!(
                    "Invalid value: '{}'. Supported values are: {}.",
                    v.as_str().unwrap_or(""),
                    INCLUDABLE
                        .iter()
                        .map(|s| format!("'{s}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .param(format!("include[{i}]"))
                .code("invalid_value"));
            }
        }
    }
    if options.reasoning_model {
        for p in ["temperature", "top_p"] {
            if body[p].as_f64().is_some_and(|v| v != 1.0) {
                return Err(unsupported(p));
            }
        }
    } else if body["reasoning"].is_object() {
        let param = if body["reasoning"]["effort"].is_null() {
            "reasoning.summary"
        } else {
            "reasoning.effort"
        };
        return Err(unsupported(param));
    }
    tools(&body["tools"])?;
    text_format(&body["text"]["format"])?;
    input(&body["input"])
}

/// Structured output's `text.format`: a `json_schema` needs a `name`, and
/// its schema the strict subset unless `strict: false` (structured-outputs
/// guide, as for functions).
fn text_format(f: &Value) -> Result<(), Rejection> {
    if f["type"] != "json_schema" {
        return Ok(());
    }
    if !f["name"].is_string() {
        return Err(
            Rejection::bad("Missing required parameter: 'text.format.name'.")
                .param("text.format.name")
                .code("missing_required_parameter"),
        );
    }
    if f["strict"] != false
        && let Err(detail) = strict_schema(&f["schema"], &mut Vec::new())
    {
        return Err(Rejection::bad(format!(
            "Invalid schema for response_format '{}': {detail}",
            f["name"].as_str().unwrap_or("")
        ))
        .param("text.format.schema")
        .code("invalid_json_schema"));
    }
    Ok(())
}

fn tools(tools: &Value) -> Result<(), Rejection> {
    let Some(tools) = tools.as_array() else {
        return Ok(());
    };
    for (i, t) in tools.iter().enumerate() {
        match t["type"].as_str() {
            Some("function") => {
                openai_tool_name(&format!("tools[{i}].name"), &t["name"])?;
                // Strict unless `strict: false` (function-calling guide).
                if t["strict"] != false {
                    let empty = json!({"type": "object", "properties": {}});
                    let schema = if t["parameters"].is_null() {
                        &empty
                    } else {
                        &t["parameters"]
                    };
                    if let Err(detail) = strict_schema(schema, &mut Vec::new()) {
                        return Err(Rejection::bad(format!(
                            "Invalid schema for function '{}': {detail}",
                            t["name"].as_str().unwrap_or("")
                        ))
                        .param(format!("tools[{i}].parameters"))
                        .code("invalid_function_parameters"));
                    }
                }
            }
            Some("custom") => openai_tool_name(&format!("tools[{i}].name"), &t["name"])?,
            Some("web_search" | "web_search_2025_08_26" | "web_search_preview") => {
                web_search_tool(i, t)?
            }
            Some(_) => {}
            None => {
                return Err(Rejection::bad(format!(
                    "Missing required parameter: 'tools[{i}].type'."
                ))
                .param(format!("tools[{i}].type"))
                .code("missing_required_parameter"));
            }
        }
    }
    Ok(())
}

/// An unknown field of a nested object: `unknown_parameter` with its path.
fn nested_known(value: &Value, known: &[&str], at: &str) -> Result<(), Rejection> {
    openai_known(value, known).map_err(|r| {
        let param = format!("{at}.{}", r.param.unwrap_or_default());
        Rejection::bad(format!("Unknown parameter: '{param}'."))
            .param(param)
            .code("unknown_parameter")
    })
}

/// The web search tool's fields (web search guide; openai/codex
/// `ToolSpec::WebSearch`, which adds `external_web_access` and
/// `search_content_types`): `filters.allowed_domains` only (there is no
/// block list), an approximate `user_location`, `search_context_size`
/// low / medium / high.
fn web_search_tool(i: usize, t: &Value) -> Result<(), Rejection> {
    let at = format!("tools[{i}]");
    nested_known(
        t,
        &[
            "type",
            "filters",
            "user_location",
            "search_context_size",
            "external_web_access",
            "search_content_types",
        ],
        &at,
    )?;
    if !t["filters"].is_null() {
        nested_known(
            &t["filters"],
            &["allowed_domains"],
            &format!("{at}.filters"),
        )?;
    }
    if !t["user_location"].is_null() {
        let loc = &t["user_location"];
        nested_known(
            loc,
            &["type", "city", "region", "country", "timezone"],
            &format!("{at}.user_location"),
        )?;
        if !loc["type"].is_null() && loc["type"] != "approximate" {
            return Err(Rejection::bad(format!(
                "Invalid value: '{}'. Supported values are: 'approximate'.",
                loc["type"].as_str().unwrap_or("")
            ))
            .param(format!("{at}.user_location.type"))
            .code("invalid_value"));
        }
    }
    let size = &t["search_context_size"];
    if !size.is_null() && !matches!(size.as_str(), Some("low" | "medium" | "high")) {
        return Err(Rejection::bad(format!(
            "Invalid value: '{}'. Supported values are: 'low', 'medium', and 'high'.",
            size.as_str().unwrap_or("")
        ))
        .param(format!("{at}.search_context_size"))
        .code("invalid_value"));
    }
    Ok(())
}

/// A message's content parts (the Responses API reference, "Input item
/// list"): the model's own turns are `output_text` / `refusal`; the
/// others `input_text`, `input_image` (an `image_url` or a `file_id`) and
/// `input_file` with exactly one source — `file_data` (with its
/// `filename`), `file_id` or `file_url` (file inputs guide,
/// platform.openai.com/docs/guides/pdf-files). A string is text.
fn content_parts(content: &Value, assistant: bool, at: &str) -> Result<(), Rejection> {
    let Some(parts) = content.as_array() else {
        return Ok(());
    };
    let invalid =
        |param: String, message: String| Rejection::bad(message).param(param).code("invalid_value");
    for (j, p) in parts.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let kind = p["type"].as_str().unwrap_or("");
        let allowed: &[&str] = if assistant {
            &["output_text", "refusal"]
        } else {
            &["input_text", "input_image", "input_file"]
        };
        if !allowed.contains(&kind) {
            let supported = if assistant {
                "'output_text' and 'refusal'"
            } else {
                "'input_text', 'input_image', and 'input_file'"
            };
            return Err(invalid(
                format!("{at}.type"),
                format!("Invalid value: '{kind}'. Supported values are: {supported}."),
            ));
        }
        match kind {
            "input_text" | "output_text" if !p["text"].is_string() => {
                return Err(
                    Rejection::bad(format!("Missing required parameter: '{at}.text'."))
                        .param(format!("{at}.text"))
                        .code("missing_required_parameter"),
                );
            }
            "input_image" if !p["image_url"].is_string() && !p["file_id"].is_string() => {
                return Err(invalid(
                    at.clone(),
                    "Invalid input image: one of 'image_url' or 'file_id' is required.".into(),
                ));
            }
            "input_file" => {
                let sources = ["file_data", "file_id", "file_url"]
                    .iter()
                    .filter(|k| p[**k].is_string())
                    .count();
                if sources != 1 {
                    return Err(invalid(
                        at.clone(),
                        "Invalid input file: exactly one of 'file_data', 'file_id' or 'file_url' must be provided.".into(),
                    ));
                }
                if p["file_data"].is_string() && !p["filename"].is_string() {
                    return Err(Rejection::bad(format!(
                        "Missing required parameter: '{at}.filename'."
                    ))
                    .param(format!("{at}.filename"))
                    .code("missing_required_parameter"));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A `web_search_call` sent back as input: its `status` and an `action`
/// of a known kind (`search`, `open_page`, `find_in_page`); no other
/// fields. Codex sends it without its `id`, which the service takes.
fn web_search_call(i: usize, item: &Value) -> Result<(), Rejection> {
    let at = format!("input[{i}]");
    nested_known(item, &["type", "id", "status", "action"], &at)?;
    if !matches!(
        item["status"].as_str(),
        Some("in_progress" | "searching" | "completed" | "failed")
    ) {
        return Err(
            Rejection::bad(format!("Missing required parameter: '{at}.status'."))
                .param(format!("{at}.status"))
                .code("missing_required_parameter"),
        );
    }
    let action = &item["action"];
    let fields: &[&str] = match action["type"].as_str() {
        Some("search") => &["type", "query", "queries", "sources"],
        Some("open_page") => &["type", "url"],
        Some("find_in_page") => &["type", "url", "pattern"],
        _ => {
            return Err(Rejection::bad(format!(
                "Invalid value: '{}'. Supported values are: 'search', 'open_page', and 'find_in_page'.",
                action["type"].as_str().unwrap_or("")
            ))
            .param(format!("{at}.action.type"))
            .code("invalid_value"));
        }
    };
    nested_known(action, fields, &format!("{at}.action"))
}

/// Structured Outputs' subset: every object closes with
/// `additionalProperties: false` and lists every property in `required`;
/// the error names the schema path as the service does.
fn strict_schema(schema: &Value, at: &mut Vec<String>) -> Result<(), String> {
    let context = || {
        let parts: Vec<String> = at.iter().map(|p| format!("'{p}'")).collect();
        match parts.len() {
            1 => format!("({},)", parts[0]),
            _ => format!("({})", parts.join(", ")),
        }
    };
    let object = schema["type"] == "object" || schema["properties"].is_object();
    if object {
        if schema["additionalProperties"] != false {
            return Err(format!(
                "In context={}, 'additionalProperties' is required to be supplied and to be false.",
                context()
            ));
        }
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = schema["properties"].as_object() {
            for key in props.keys() {
                if !required.contains(&key.as_str()) {
                    return Err(format!(
                        "In context={}, 'required' is required to be supplied and to be an array including every key in properties. Missing '{key}'.",
                        context()
                    ));
                }
            }
            for (key, sub) in props {
                at.extend(["properties".to_string(), key.clone()]);
                strict_schema(sub, at)?;
                at.truncate(at.len() - 2);
            }
        }
    }
    if schema["items"].is_object() {
        at.push("items".into());
        strict_schema(&schema["items"], at)?;
        at.pop();
    }
    for key in ["anyOf", "oneOf"] {
        for (n, sub) in schema[key].as_array().into_iter().flatten().enumerate() {
            at.extend([key.to_string(), n.to_string()]);
            strict_schema(sub, at)?;
            at.truncate(at.len() - 2);
        }
    }
    Ok(())
}

fn input(input: &Value) -> Result<(), Rejection> {
    let items = match input {
        Value::Null | Value::String(_) => return Ok(()),
        Value::Array(items) => items,
        _ => {
            return Err(Rejection::bad(
                "Invalid type for 'input': expected one of a string or an array of input items.",
            )
            .param("input")
            .code("invalid_type"));
        }
    };
    let mut calls: HashSet<&str> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item["type"].as_str().unwrap_or("message");
        match kind {
            "message" => {
                let role = item["role"].as_str().unwrap_or("");
                if !["user", "assistant", "system", "developer"].contains(&role) {
                    return Err(Rejection::bad(format!(
                        "Invalid value: '{role}'. Supported values are: 'assistant', 'system', 'developer', and 'user'."
                    ))
                    .param(format!("input[{i}].role"))
                    .code("invalid_value"));
                }
                content_parts(
                    &item["content"],
                    role == "assistant",
                    &format!("input[{i}].content"),
                )?;
            }
            "function_call" | "custom_tool_call" => {
                max_length(&format!("input[{i}].call_id"), &item["call_id"], 64)?;
                openai_tool_name(&format!("input[{i}].name"), &item["name"])?;
                if let Some(call) = item["call_id"].as_str() {
                    calls.insert(call);
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                max_length(&format!("input[{i}].call_id"), &item["call_id"], 64)?;
                content_parts(&item["output"], false, &format!("input[{i}].output"))?;
                let call = item["call_id"].as_str().unwrap_or("");
                if !calls.contains(call) {
                    let what = if kind == "function_call_output" {
                        "function call output"
                    } else {
                        "custom tool call output"
                    };
                    return Err(Rejection::bad(format!(
                        "No tool call found for {what} with call_id {call}."
                    ))
                    .param("input"));
                }
            }
            "reasoning" => reasoning_item(item)?,
            "web_search_call" => web_search_call(i, item)?,
            _ => {}
        }
    }
    Ok(())
}

/// A reasoning item sent back must carry `encrypted_content` this service
/// issued: nothing is stored here (as with `store: false`), so an item
/// with only an id is not found.
fn reasoning_item(item: &Value) -> Result<(), Rejection> {
    let rid = item["id"].as_str().unwrap_or("");
    match item["encrypted_content"].as_str() {
        Some(sealed) => match unseal(REASONING, sealed) {
            Some(_) => Ok(()),
            None => Err(Rejection::bad(format!(
                "The encrypted content for item {rid} could not be verified."
            ))
            .code("invalid_encrypted_content")),
        },
        None => Err(Rejection::new(
            404,
            format!(
                "Item with id '{rid}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
            ),
        )
        .param("input")),
    }
}

fn is_output_item(item: &Value) -> bool {
    matches!(
        item["type"].as_str(),
        Some(
            "function_call"
                | "custom_tool_call"
                | "reasoning"
                | "local_shell_call"
                | "web_search_call"
        )
    ) || (item["role"] == "assistant")
}

/// The conversation turn: 1 + the runs of model output in the input.
pub(crate) fn turn(body: &Value) -> usize {
    let Some(items) = body["input"].as_array() else {
        return 1;
    };
    let mut turns = 1;
    let mut previous = false;
    for item in items {
        let output = is_output_item(item);
        if output && !previous {
            turns += 1;
        }
        previous = output;
    }
    turns
}

pub(crate) fn view(body: &Value, options: &Options) -> View {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let shell = tools
        .iter()
        .filter(|t| t["type"] == "function")
        .find_map(|t| ShellTool::recognise(t["name"].as_str()?, &t["parameters"]));
    let result = body["input"]
        .as_array()
        .and_then(|items| items.last())
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            )
        })
        .map(|i| text_of(&i["output"]));
    View {
        shell,
        result,
        search: tools.iter().any(|t| {
            t["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("web_search"))
        }),
        later: turn(body) > 1,
        // A reasoning model always reasons; the summary and the encrypted
        // state come only when asked for.
        thinking: options.reasoning_model,
        max_tokens: body["max_output_tokens"].as_u64(),
        ..View::of(body, &tools)
    }
}

pub(crate) fn answer(plan: &Plan, view: &View, body: &Value, shape: &Shape) -> Answer {
    let mut output = Vec::new();
    let mut reasoning_tokens = 0;
    if let Some(thinking) = &plan.thinking {
        reasoning_tokens = words(thinking);
        let summary = if body["reasoning"]["summary"].is_string() {
            json!([{"type": "summary_text", "text": thinking}])
        } else {
            json!([])
        };
        let mut item = json!({"id": id("rs_"), "type": "reasoning", "summary": summary});
        let asked = body["include"]
            .as_array()
            .is_some_and(|i| i.iter().any(|v| v == "reasoning.encrypted_content"));
        if asked {
            item["encrypted_content"] = json!(seal(REASONING, thinking));
        }
        output.push(item);
    }
    let mut output_tokens = reasoning_tokens;
    let mut annotations = json!([]);
    if let Some(query) = &plan.search {
        let mut action = json!({"type": "search", "query": query});
        let sources = body["include"]
            .as_array()
            .is_some_and(|i| i.iter().any(|v| v == "web_search_call.action.sources"));
        if sources {
            action["sources"] = json!([{"type": "url", "url": SEARCH_URL}]);
        }
        output.push(json!({"id": id("ws_"), "type": "web_search_call", "status": "completed", "action": action}));
        annotations = json!([{"type": "url_citation", "start_index": 0,
            "end_index": CITED.chars().count(), "url": SEARCH_URL, "title": SEARCH_TITLE}]);
    }
    if let Some(text) = &plan.text {
        output_tokens += words(text);
        output.push(json!({
            "id": id("msg_"),
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}],
        }));
    }
    if let Some((name, args)) = &plan.call {
        output_tokens += words(&args.to_string());
        output.push(json!({
            "id": id("fc_"),
            "type": "function_call",
            "status": "completed",
            "call_id": id("call_"),
            "name": name,
            "arguments": args.to_string(),
        }));
    }
    let response = json!({
        "id": id("resp_"),
        "object": "response",
        "created_at": now(),
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "instructions": body["instructions"],
        "max_output_tokens": body["max_output_tokens"],
        "model": view.model,
        "output": output,
        "parallel_tool_calls": body["parallel_tool_calls"].as_bool().unwrap_or(true),
        "previous_response_id": null,
        "reasoning": body["reasoning"],
        "store": body["store"].as_bool().unwrap_or(true),
        "temperature": body["temperature"].as_f64().unwrap_or(1.0),
        "tool_choice": body["tool_choice"].as_str().unwrap_or("auto"),
        "tools": body["tools"].as_array().cloned().unwrap_or_default(),
        "top_p": body["top_p"].as_f64().unwrap_or(1.0),
        "truncation": body["truncation"].as_str().unwrap_or("disabled"),
        "usage": {
            "input_tokens": view.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": view.input_tokens + output_tokens,
        },
        "user": body["user"],
        "metadata": body["metadata"].as_object().cloned().unwrap_or_default(),
    });
    if !view.stream {
        return Answer::Json(response);
    }
    let events = stream(response)
        .into_iter()
        .filter(|(name, _)| {
            !(shape.responses_no_added
                && (name == "response.output_item.added" || name == "response.content_part.added"))
        })
        .enumerate()
        .map(|(n, (name, mut data))| {
            data["type"] = json!(name);
            data["sequence_number"] = json!(n);
            sse(Some(&name), &data)
        })
        .collect();
    Answer::Events(events)
}

/// The response as the API streams it, each event without its
/// `sequence_number` (numbered once the shape has dropped what it drops).
fn stream(response: Value) -> Vec<(String, Value)> {
    let mut started = response.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started["usage"] = Value::Null;
    let mut events = vec![
        ("response.created".to_string(), json!({"response": started})),
        (
            "response.in_progress".to_string(),
            json!({"response": started}),
        ),
    ];
    let mut push = |name: &str, data: Value| events.push((name.to_string(), data));
    let items = response["output"].as_array().cloned().unwrap_or_default();
    for (o, item) in items.iter().enumerate() {
        let item_id = item["id"].clone();
        let mut empty = item.clone();
        match item["type"].as_str().unwrap_or("") {
            "reasoning" => {
                empty["summary"] = json!([]);
                empty.as_object_mut().map(|m| m.remove("encrypted_content"));
                push(
                    "response.output_item.added",
                    json!({"output_index": o, "item": empty}),
                );
                for (s, part) in item["summary"].as_array().into_iter().flatten().enumerate() {
                    let text = part["text"].as_str().unwrap_or("");
                    let at = json!({"item_id": item_id, "output_index": o, "summary_index": s});
                    let with = |extra: Value| merged(&at, extra);
                    push(
                        "response.reasoning_summary_part.added",
                        with(json!({"part": {"type": "summary_text", "text": ""}})),
                    );
                    for piece in pieces(text, 12) {
                        push(
                            "response.reasoning_summary_text.delta",
                            with(json!({"delta": piece})),
                        );
                    }
                    push(
                        "response.reasoning_summary_text.done",
                        with(json!({"text": text})),
                    );
                    push(
                        "response.reasoning_summary_part.done",
                        with(json!({"part": {"type": "summary_text", "text": text}})),
                    );
                }
            }
            "message" => {
                empty["status"] = json!("in_progress");
                empty["content"] = json!([]);
                push(
                    "response.output_item.added",
                    json!({"output_index": o, "item": empty}),
                );
                let part = &item["content"][0];
                let text = part["text"].as_str().unwrap_or("");
                let at = json!({"item_id": item_id, "output_index": o, "content_index": 0});
                let with = |extra: Value| merged(&at, extra);
                push(
                    "response.content_part.added",
                    with(
                        json!({"part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
                    ),
                );
                for piece in pieces(text, 8) {
                    push(
                        "response.output_text.delta",
                        with(json!({"delta": piece, "logprobs": []})),
                    );
                }
                for (n, a) in part["annotations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    push(
                        "response.output_text.annotation.added",
                        with(json!({"annotation_index": n, "annotation": a})),
                    );
                }
                push(
                    "response.output_text.done",
                    with(json!({"text": text, "logprobs": []})),
                );
                push("response.content_part.done", with(json!({"part": part})));
            }
            "web_search_call" => {
                empty["status"] = json!("in_progress");
                empty.as_object_mut().map(|m| m.remove("action"));
                push(
                    "response.output_item.added",
                    json!({"output_index": o, "item": empty}),
                );
                for phase in ["in_progress", "searching", "completed"] {
                    push(
                        &format!("response.web_search_call.{phase}"),
                        json!({"item_id": item_id, "output_index": o}),
                    );
                }
            }
            _ => {
                empty["status"] = json!("in_progress");
                empty["arguments"] = json!("");
                push(
                    "response.output_item.added",
                    json!({"output_index": o, "item": empty}),
                );
                let args = item["arguments"].as_str().unwrap_or("");
                for piece in pieces(args, 10) {
                    push(
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": o, "delta": piece}),
                    );
                }
                push(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": o, "arguments": args}),
                );
            }
        }
        push(
            "response.output_item.done",
            json!({"output_index": o, "item": item}),
        );
    }
    push("response.completed", json!({"response": response}));
    events
}

/// `at`'s fields and `extra`'s: an event's position plus its payload.
fn merged(at: &Value, extra: Value) -> Value {
    let mut v = at.clone();
    if let (Some(m), Value::Object(extra)) = (v.as_object_mut(), extra) {
        m.extend(extra);
    }
    v
}
