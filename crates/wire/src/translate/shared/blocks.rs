//! The content-block helpers the pairs share: an Anthropic Messages
//! request's blocks, tools and thinking as either OpenAI API takes them
//! (Claude Code's two pairs), and OpenAI content as Anthropic blocks in a
//! history whose turns alternate (the pairs into Messages).

use serde_json::{Map, Value, json};

use super::search;
use crate::anthropic::{self, block, source};
use crate::translate::{ToolNames, TranslateError};
use crate::{chat, openai, responses, type_of};

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
pub(in crate::translate) fn thinking_effort(v: &Value) -> Option<&'static str> {
    match type_of(&v["thinking"]) {
        Some(anthropic::thinking::ENABLED) => {
            Some(effort(v["thinking"]["budget_tokens"].as_u64().unwrap_or(0)))
        }
        Some(anthropic::thinking::ADAPTIVE) => Some(match v["output_config"]["effort"].as_str() {
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
pub(in crate::translate) fn reasoning_item(block: &Value) -> Option<Value> {
    let (id, encrypted) = responses::reasoning_of_signature(block["signature"].as_str()?)?;
    let summary = match block["thinking"].as_str().filter(|t| !t.is_empty()) {
        Some(text) => json!([{"type": responses::part::SUMMARY_TEXT, "text": text}]),
        None => json!([]),
    };
    Some(
        json!({"type": responses::item::REASONING, "id": id, "summary": summary, "encrypted_content": encrypted}),
    )
}

/// A data URL (or the URL) of an Anthropic image block's source.
fn image_url(block: &Value) -> Option<String> {
    let src = &block["source"];
    match type_of(src)? {
        source::BASE64 => Some(format!(
            "data:{};base64,{}",
            src["media_type"].as_str()?,
            src["data"].as_str()?
        )),
        source::URL => src["url"].as_str().map(str::to_string),
        _ => None,
    }
}

/// The text of a tool result (blocks or a string), marked when it is an
/// error (neither OpenAI API has an error flag on tool output).
pub(in crate::translate) fn tool_result_text(block: &Value) -> String {
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
pub(in crate::translate) fn media_part(block: &Value, api: OpenAiApi) -> Option<Value> {
    match type_of(block)? {
        block::IMAGE => {
            let url = image_url(block)?;
            Some(match api {
                OpenAiApi::Responses => {
                    json!({"type": responses::part::INPUT_IMAGE, "image_url": url})
                }
                OpenAiApi::Chat => {
                    json!({"type": chat::part::IMAGE_URL, "image_url": {"url": url}})
                }
            })
        }
        block::DOCUMENT => {
            let src = &block["source"];
            let text_kind = match api {
                OpenAiApi::Responses => responses::part::INPUT_TEXT,
                OpenAiApi::Chat => chat::part::TEXT,
            };
            match type_of(src)? {
                source::TEXT => Some(json!({"type": text_kind, "text": src["data"].as_str()?})),
                source::CONTENT => {
                    let text = text_of(&src["content"]);
                    Some(json!({"type": text_kind, "text": text}))
                }
                source::BASE64 => {
                    let data = format!(
                        "data:{};base64,{}",
                        src["media_type"].as_str()?,
                        src["data"].as_str()?
                    );
                    let filename = block["title"].as_str().unwrap_or("document.pdf");
                    Some(match api {
                        OpenAiApi::Responses => {
                            json!({"type": responses::part::INPUT_FILE, "filename": filename, "file_data": data})
                        }
                        OpenAiApi::Chat => {
                            json!({"type": chat::part::FILE, "file": {"filename": filename, "file_data": data}})
                        }
                    })
                }
                source::URL if api == OpenAiApi::Responses => Some(
                    json!({"type": responses::part::INPUT_FILE, "file_url": src["url"].as_str()?}),
                ),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The images and documents of a tool result, as `api`'s parts.
pub(in crate::translate) fn tool_result_media(block: &Value, api: OpenAiApi) -> Vec<Value> {
    block["content"]
        .as_array()
        .map(|parts| parts.iter().filter_map(|p| media_part(p, api)).collect())
        .unwrap_or_default()
}

/// Content blocks of a message, whether given as a string or a list.
pub(in crate::translate) fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(s) => vec![json!({"type": block::TEXT, "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// Which OpenAI API a request is built for: they name a function the
/// same way but nest it differently.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::translate) enum OpenAiApi {
    Responses,
    Chat,
}

/// `tools` (`input_schema` → function `parameters`; Anthropic's web
/// search → Responses' `web_search`, its `max_uses` → `max_tool_calls`)
/// and `tool_choice` (auto / any / tool / none;
/// `disable_parallel_tool_use`). A Chat Completions server cannot search:
/// a request that offers the search is not for it.
pub(in crate::translate) fn tools_and_choice(
    v: &Value,
    out: &mut Map<String, Value>,
    api: OpenAiApi,
    names: &ToolNames,
) -> Result<(), TranslateError> {
    let function = |name: &Value, mut fields: Map<String, Value>| {
        fields.insert("name".into(), name.clone());
        match api {
            OpenAiApi::Responses => {
                fields.insert("type".into(), responses::tool::FUNCTION.into());
                Value::Object(fields)
            }
            OpenAiApi::Chat => json!({"type": chat::FUNCTION, "function": fields}),
        }
    };
    let mut tools: Vec<Value> = Vec::new();
    for t in v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| anthropic::is_web_search_tool(t))
    {
        if api == OpenAiApi::Chat {
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
            if api == OpenAiApi::Responses {
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
        let mapped = match type_of(choice) {
            Some(anthropic::tool_choice::ANY) => json!(openai::tool_choice::REQUIRED),
            Some(anthropic::tool_choice::NONE) => json!(openai::tool_choice::NONE),
            Some(anthropic::tool_choice::TOOL) => {
                function(&names.short(&choice["name"]), Map::new())
            }
            _ => json!(openai::tool_choice::AUTO),
        };
        out.insert("tool_choice".into(), mapped);
        if choice["disable_parallel_tool_use"] == true {
            out.insert("parallel_tool_calls".into(), false.into());
        }
    }
    Ok(())
}

pub(in crate::translate) fn copy(
    from: &Value,
    key: &str,
    to: &mut Map<String, Value>,
    as_key: &str,
) {
    if let Some(x) = from.get(key).filter(|x| !x.is_null()) {
        to.insert(as_key.into(), x.clone());
    }
}

// OpenAI content → Anthropic blocks, and the Messages history rules
// every pair into Messages keeps.

/// What Anthropic requires and a Chat Completions request may leave out
/// (a Chat client on Anthropic).
pub(in crate::translate) const DEFAULT_MAX_TOKENS: u64 = 8192;

/// A reasoning effort → a thinking budget.
pub(in crate::translate) fn budget(effort: &str) -> Option<u64> {
    match effort {
        "minimal" | "none" => None,
        "low" => Some(2048),
        "medium" => Some(8192),
        _ => Some(24576),
    }
}

/// Anthropic wants user and assistant turns to alternate: consecutive
/// items of the same role are merged into one message.
pub(in crate::translate) fn push(messages: &mut Vec<Value>, role: &str, block: Value) {
    if let Some(last) = messages.last_mut()
        && last["role"] == role
        && let Some(content) = last["content"].as_array_mut()
    {
        content.push(block);
        return;
    }
    messages.push(json!({"role": role, "content": [block]}));
}

pub(in crate::translate) fn image_block(url: &str) -> Value {
    match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((media_type, data)) => {
            json!({"type": block::IMAGE, "source": {"type": source::BASE64, "media_type": media_type, "data": data}})
        }
        None => json!({"type": block::IMAGE, "source": {"type": source::URL, "url": url}}),
    }
}

/// An OpenAI file input → an Anthropic `document` block: a PDF's data
/// URL → a base64 PDF, a plain-text one → its text, a URL → a URL
/// document (Anthropic fetches PDFs by URL), each titled by its
/// filename. `None` for what Anthropic cannot take as a document (an
/// uploaded file's id means nothing there; other media types).
pub(in crate::translate) fn document_block(
    file_data: Option<&str>,
    filename: Option<&str>,
    file_url: Option<&str>,
) -> Option<Value> {
    let src = match (file_data, file_url) {
        (Some(data), _) => {
            let (media_type, data) = data.strip_prefix("data:")?.split_once(";base64,")?;
            match media_type {
                "application/pdf" => {
                    json!({"type": source::BASE64, "media_type": "application/pdf", "data": data})
                }
                "text/plain" => {
                    use base64::Engine as _;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .ok()?;
                    json!({"type": source::TEXT, "media_type": "text/plain",
                        "data": String::from_utf8(bytes).ok()?})
                }
                _ => return None,
            }
        }
        (None, Some(url)) => json!({"type": source::URL, "url": url}),
        (None, None) => return None,
    };
    let mut document = json!({"type": block::DOCUMENT, "source": src});
    if let Some(name) = filename.filter(|n| !n.is_empty()) {
        document["title"] = name.into();
    }
    Some(document)
}

/// Whether a tool-use continuation (the last turn gives tool results)
/// follows an assistant turn that starts with thinking, as Anthropic
/// requires with thinking on.
pub(in crate::translate) fn starts_with_thinking_where_needed(messages: &[Value]) -> bool {
    let continues = messages.last().is_some_and(|m| {
        m["role"] == anthropic::role::USER
            && m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| type_of(b) == Some(block::TOOL_RESULT)))
    });
    let Some(last) = messages
        .iter()
        .rev()
        .find(|m| m["role"] == anthropic::role::ASSISTANT)
    else {
        return true;
    };
    if !continues {
        return true;
    }
    let blocks = last["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let calls = blocks.iter().any(|b| type_of(b) == Some(block::TOOL_USE));
    !calls || blocks.first().is_some_and(anthropic::is_thinking)
}

/// The text of a string-or-blocks field (Anthropic `system`, tool result
/// `content`, Responses message `content`): text parts joined.
pub(in crate::translate) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
