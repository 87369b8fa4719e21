//! Anthropic Messages, as api.anthropic.com enforces it.
//!
//! Sources: the Messages API reference (docs.claude.com/en/api/messages:
//! the documented body fields; "Consecutive user or assistant turns in
//! your request will be combined into a single turn"), the errors page
//! (docs.claude.com/en/api/errors: the envelope and the status → type
//! table), the extended-thinking guide (docs.claude.com/en/docs/
//! build-with-claude/extended-thinking: `budget_tokens` ≥ 1024 and below
//! `max_tokens`, signatures, thinking blocks before tool use, temperature
//! only 1 with thinking), the tool-use guide (names `^[a-zA-Z0-9_-]{1,64}$`,
//! every `tool_result` answers a `tool_use` of the previous message and
//! every `tool_use` is answered in the next), and the wording of real
//! refusals reported in anomalyco/opencode#3077 and
//! router-for-me/CLIProxyAPI#1584 (LLM-PROTOCOLS §6).

use http::HeaderMap;
use serde_json::{Value, json};

use super::script::{CITED, Plan, SEARCH_TITLE, SEARCH_URL, ShellTool, View, words};
use super::{Answer, Rejection, id, pieces, seal, sse, text_of, unseal};

/// Every top-level field the Messages API documents, beta ones included
/// (Claude Code 2.1.x sends `context_management`, `output_config`,
/// `metadata`, `thinking.display`; structured outputs add `output_format`).
const KNOWN: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "container",
    "context_management",
    "mcp_servers",
    "metadata",
    "output_config",
    "output_format",
    "service_tier",
    "stop_sequences",
    "stream",
    "system",
    "temperature",
    "thinking",
    "tool_choice",
    "tools",
    "top_k",
    "top_p",
];

/// count_tokens takes the prompt without the generation settings.
const KNOWN_COUNT: &[&str] = &[
    "model",
    "messages",
    "context_management",
    "mcp_servers",
    "output_config",
    "output_format",
    "system",
    "thinking",
    "tool_choice",
    "tools",
];

/// Signatures are sealed as "thinking"; redacted blocks' `data` as
/// "redacted" (this emulator never issues one, so none is valid).
const THINKING: &str = "thinking";
const REDACTED: &str = "redacted";
/// A search result's `encrypted_content` and a citation's
/// `encrypted_index` are sealed over the result's URL.
const SEARCH: &str = "search";
const CITATION: &str = "citation";

pub(crate) fn authenticate(headers: &HeaderMap) -> Result<(), Rejection> {
    let present = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| !v.trim().is_empty())
    };
    // An OAuth token comes as `Authorization: Bearer` (Claude Code with
    // ANTHROPIC_AUTH_TOKEN; LLM-PROTOCOLS §3 item 5), an API key as
    // `x-api-key`.
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer ") && v.len() > 7);
    if !present("x-api-key") && !bearer {
        return Err(Rejection::new(401, "x-api-key header is required"));
    }
    if !present("anthropic-version") {
        return Err(Rejection::bad("anthropic-version: header is required"));
    }
    Ok(())
}

/// `{"type":"error","error":{"type","message"},"request_id"}`.
pub(crate) fn envelope(r: &Rejection) -> Value {
    let kind = match r.status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({
        "type": "error",
        "error": {"type": kind, "message": r.message},
        "request_id": super::id("req_"),
    })
}

fn extra(path: &str) -> Rejection {
    Rejection::bad(format!("{path}: Extra inputs are not permitted"))
}

fn required(path: &str) -> Rejection {
    Rejection::bad(format!("{path}: Field required"))
}

fn only_known(body: &Value, known: &[&str], at: &str) -> Result<(), Rejection> {
    for key in body.as_object().into_iter().flat_map(|o| o.keys()) {
        if !known.contains(&key.as_str()) {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            return Err(extra(&path));
        }
    }
    Ok(())
}

/// The beta under which Claude Code 2.1.x puts `system` messages among
/// the turns (per-turn instructions); without it the API refuses them.
pub(crate) const PER_TURN_SYSTEM_BETA: &str = "per-turn-control-2026-07-01";

/// Whether the request's `anthropic-beta` header allows `system` turns.
pub(crate) fn system_turns(headers: &HeaderMap) -> bool {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|b| b.trim() == PER_TURN_SYSTEM_BETA)
}

pub(crate) fn validate_count(body: &Value, system_turns: bool) -> Result<(), Rejection> {
    only_known(body, KNOWN_COUNT, "")?;
    common(body, None, system_turns)
}

pub(crate) fn validate(body: &Value, system_turns: bool) -> Result<(), Rejection> {
    only_known(body, KNOWN, "")?;
    let max_tokens = match &body["max_tokens"] {
        Value::Null => return Err(required("max_tokens")),
        v => v
            .as_u64()
            .ok_or_else(|| Rejection::bad("max_tokens: Input should be a valid integer"))?,
    };
    if max_tokens < 1 {
        return Err(Rejection::bad(
            "max_tokens: Input should be greater than or equal to 1",
        ));
    }
    common(body, Some(max_tokens), system_turns)
}

/// The rules count_tokens shares with message creation.
fn common(body: &Value, max_tokens: Option<u64>, system_turns: bool) -> Result<(), Rejection> {
    if !body["model"].is_string() {
        return Err(required("model"));
    }
    let thinking = thinking(body, max_tokens)?;
    system(&body["system"])?;
    tools(&body["tools"])?;
    cache_breakpoints(body)?;
    messages(&body["messages"], thinking, system_turns)
}

/// At most 4 `cache_control` breakpoints across system, tools and
/// messages (prompt-caching guide: "You can define up to 4 cache
/// breakpoints"); the API answers a fifth with this message.
fn cache_breakpoints(body: &Value) -> Result<(), Rejection> {
    let blocks = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let mut all = blocks(&body["system"]);
    all.extend(blocks(&body["tools"]));
    for m in blocks(&body["messages"]) {
        all.extend(blocks(&m["content"]));
    }
    let found = all
        .iter()
        .filter(|b| b.get("cache_control").is_some())
        .count();
    if found > 4 {
        return Err(Rejection::bad(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {found}."
        )));
    }
    Ok(())
}

/// The `thinking` setting; whether it is on.
fn thinking(body: &Value, max_tokens: Option<u64>) -> Result<bool, Rejection> {
    let t = &body["thinking"];
    if t.is_null() {
        return Ok(false);
    }
    let on = match t["type"].as_str() {
        Some("disabled") => {
            only_known(t, &["type"], "thinking.disabled")?;
            false
        }
        Some("adaptive") => {
            only_known(t, &["type", "display"], "thinking.adaptive")?;
            true
        }
        Some("enabled") => {
            only_known(t, &["type", "budget_tokens", "display"], "thinking.enabled")?;
            let budget = t["budget_tokens"]
                .as_u64()
                .ok_or_else(|| required("thinking.enabled.budget_tokens"))?;
            if budget < 1024 {
                return Err(Rejection::bad(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
                ));
            }
            if max_tokens.is_some_and(|max| budget >= max) {
                return Err(Rejection::bad(
                    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
                ));
            }
            true
        }
        other => {
            return Err(Rejection::bad(format!(
                "thinking: Input tag '{}' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'",
                other.unwrap_or("")
            )));
        }
    };
    let display = t.get("display").map(Value::as_str);
    if display.is_some_and(|d| !matches!(d, Some("summarized" | "omitted"))) {
        return Err(Rejection::bad(
            "thinking.enabled.display: Input should be 'summarized' or 'omitted'",
        ));
    }
    // Extended-thinking guide: "Thinking isn't compatible with temperature
    // or top_k modifications".
    if on {
        if body["temperature"].as_f64().is_some_and(|t| t != 1.0) {
            return Err(Rejection::bad(
                "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
            ));
        }
        // Extended-thinking guide: with thinking on, only `auto` and
        // `none` tool choices are supported.
        if matches!(body["tool_choice"]["type"].as_str(), Some("any" | "tool")) {
            return Err(Rejection::bad(
                "Thinking may not be enabled when tool_choice forces tool use.",
            ));
        }
        if !body["top_k"].is_null() {
            return Err(Rejection::bad(
                "`top_k` cannot be set when thinking is enabled or in adaptive mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
            ));
        }
    }
    Ok(on)
}

fn system(system: &Value) -> Result<(), Rejection> {
    match system {
        Value::Null | Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (i, b) in blocks.iter().enumerate() {
                if b["type"] != "text" || !b["text"].is_string() {
                    return Err(Rejection::bad(format!(
                        "system.{i}: Input should be a valid text block"
                    )));
                }
                if b["text"].as_str().is_some_and(str::is_empty) {
                    return Err(Rejection::bad(
                        "system: text content blocks must be non-empty",
                    ));
                }
            }
            Ok(())
        }
        _ => Err(Rejection::bad("system: Input should be a valid list")),
    }
}

/// The server and Anthropic-defined tools the API knows, by their
/// versioned `type` (tool-use guide, "Anthropic-defined tools"; the web
/// search, web fetch, code execution, memory and tool search guides).
const SERVER_TOOLS: &[&str] = &[
    "bash_20241022",
    "bash_20250124",
    "code_execution_20250522",
    "code_execution_20250825",
    "computer_20241022",
    "computer_20250124",
    "memory_20250818",
    "text_editor_20241022",
    "text_editor_20250124",
    "text_editor_20250429",
    "text_editor_20250728",
    "tool_search_tool_bm25_20251119",
    "tool_search_tool_regex_20251119",
    "web_fetch_20250910",
    "web_search_20250305",
];

/// The web search tool's fields (web search tool guide): its fixed name,
/// `max_uses` (a positive integer), `allowed_domains` or
/// `blocked_domains` (not both), an approximate `user_location`.
fn web_search_tool(i: usize, t: &Value) -> Result<(), Rejection> {
    let at = format!("tools.{i}.web_search_20250305");
    only_known(
        t,
        &[
            "type",
            "name",
            "max_uses",
            "allowed_domains",
            "blocked_domains",
            "user_location",
            "cache_control",
        ],
        &at,
    )?;
    if t["name"] != "web_search" {
        return Err(Rejection::bad(format!(
            "{at}.name: Input should be 'web_search'"
        )));
    }
    if !t["max_uses"].is_null() && t["max_uses"].as_u64().is_none_or(|n| n < 1) {
        return Err(Rejection::bad(format!(
            "{at}.max_uses: Input should be greater than 0"
        )));
    }
    if !t["allowed_domains"].is_null() && !t["blocked_domains"].is_null() {
        return Err(Rejection::bad(
            "Cannot specify both allowed_domains and blocked_domains",
        ));
    }
    let loc = &t["user_location"];
    if !loc.is_null() {
        only_known(
            loc,
            &["type", "city", "region", "country", "timezone"],
            &format!("{at}.user_location"),
        )?;
        if loc["type"] != "approximate" {
            return Err(Rejection::bad(format!(
                "{at}.user_location.type: Input should be 'approximate'"
            )));
        }
    }
    Ok(())
}

/// Custom tools' names follow `^[a-zA-Z0-9_-]{1,64}$` (tool-use guide);
/// server tools (a versioned `type` such as `web_search_20250305`) have
/// fixed names and their own fields; an unknown `type` is refused.
fn tools(tools: &Value) -> Result<(), Rejection> {
    let Some(tools) = tools.as_array() else {
        return Ok(());
    };
    for (i, t) in tools.iter().enumerate() {
        let custom = matches!(t["type"].as_str(), None | Some("custom"));
        if !custom {
            let kind = t["type"].as_str().unwrap_or("");
            if !SERVER_TOOLS.contains(&kind) {
                return Err(Rejection::bad(format!(
                    "tools.{i}: Input tag '{kind}' found using 'type' does not match any of the expected tags: 'custom', {}",
                    SERVER_TOOLS
                        .iter()
                        .map(|t| format!("'{t}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            if kind == "web_search_20250305" {
                web_search_tool(i, t)?;
            }
            continue;
        }
        let name = t["name"]
            .as_str()
            .ok_or_else(|| required(&format!("tools.{i}.custom.name")))?;
        let ok = (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(Rejection::bad(format!(
                "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )));
        }
        if !t["input_schema"].is_object() {
            return Err(required(&format!("tools.{i}.custom.input_schema")));
        }
    }
    Ok(())
}

/// One block of a merged turn, with where it was in the request.
struct Block<'a> {
    message: usize,
    index: usize,
    block: &'a Value,
}

struct Turn<'a> {
    role: &'a str,
    blocks: Vec<Block<'a>>,
}

/// The messages merged into turns as the API does ("Consecutive user or
/// assistant turns in your request will be combined into a single turn").
fn turns(messages: &[Value], system_turns: bool) -> Result<Vec<Turn<'_>>, Rejection> {
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        let role = match message["role"].as_str() {
            Some(r @ ("user" | "assistant")) => r,
            // Instructions between turns, not a turn.
            Some("system") if system_turns => continue,
            Some("system") => {
                return Err(Rejection::bad(
                    "messages: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role.",
                ));
            }
            _ => {
                return Err(Rejection::bad(format!(
                    "messages.{m}.role: Input should be 'user' or 'assistant'"
                )));
            }
        };
        let last = m + 1 == messages.len();
        let blocks: Vec<Block<'_>> = match &message["content"] {
            Value::String(s) => {
                if s.is_empty() && !(last && role == "assistant") {
                    return Err(Rejection::bad(format!(
                        "messages.{m}: all messages must have non-empty content except for the optional final assistant message"
                    )));
                }
                Vec::new()
            }
            Value::Array(blocks) => {
                if blocks.is_empty() && !(last && role == "assistant") {
                    return Err(Rejection::bad(format!(
                        "messages.{m}: all messages must have non-empty content except for the optional final assistant message"
                    )));
                }
                blocks
                    .iter()
                    .enumerate()
                    .map(|(index, block)| Block {
                        message: m,
                        index,
                        block,
                    })
                    .collect()
            }
            _ => return Err(required(&format!("messages.{m}.content"))),
        };
        match turns.last_mut() {
            Some(turn) if turn.role == role => turn.blocks.extend(blocks),
            _ => turns.push(Turn { role, blocks }),
        }
    }
    Ok(turns)
}

fn messages(messages: &Value, thinking_on: bool, system_turns: bool) -> Result<(), Rejection> {
    let messages = match messages {
        Value::Null => return Err(required("messages")),
        Value::Array(m) => m,
        _ => return Err(Rejection::bad("messages: Input should be a valid list")),
    };
    if messages.is_empty() {
        return Err(Rejection::bad("messages: at least one message is required"));
    }
    let turns = turns(messages, system_turns)?;
    for turn in &turns {
        for b in &turn.blocks {
            block(turn.role, b)?;
        }
        search_results_answer(turn)?;
    }
    for (t, turn) in turns.iter().enumerate().filter(|(_, t)| t.role == "user") {
        tool_results_answer(turn, t.checked_sub(1).map(|p| &turns[p]))?;
    }
    for pair in turns.windows(2).filter(|w| w[0].role == "assistant") {
        tool_uses_answered(&pair[0], &pair[1])?;
    }
    if thinking_on {
        continues_with_thinking(&turns)?;
    }
    Ok(())
}

fn at(b: &Block<'_>) -> String {
    format!("messages.{}.content.{}", b.message, b.index)
}

fn block(role: &str, b: &Block<'_>) -> Result<(), Rejection> {
    let kind = b.block["type"].as_str().unwrap_or("");
    match kind {
        "text" => {
            if b.block["text"].as_str().is_none_or(str::is_empty) {
                return Err(Rejection::bad(
                    "messages: text content blocks must be non-empty",
                ));
            }
            citations(b)?;
        }
        "thinking" if role == "assistant" => {
            let Some(signature) = b.block["signature"].as_str() else {
                return Err(required(&format!("{}.thinking.signature", at(b))));
            };
            let text = b.block["thinking"].as_str().unwrap_or("");
            match unseal(THINKING, signature) {
                // A block whose text was omitted (`display: omitted`) comes
                // back empty; a changed text does not match its signature.
                Some(signed) if text.is_empty() || signed == text => {}
                _ => {
                    return Err(Rejection::bad(format!(
                        "{}: Invalid `signature` in `thinking` block",
                        at(b)
                    )));
                }
            }
        }
        "redacted_thinking" if role == "assistant" => {
            let data = b.block["data"].as_str().unwrap_or("");
            if unseal(REDACTED, data).is_none() {
                return Err(Rejection::bad(format!(
                    "{}: Invalid `data` in `redacted_thinking` block",
                    at(b)
                )));
            }
        }
        "tool_use" if role == "assistant" => {
            for field in ["id", "name"] {
                if !b.block[field].is_string() {
                    return Err(required(&format!("{}.tool_use.{field}", at(b))));
                }
            }
            if !b.block["input"].is_object() {
                return Err(Rejection::bad(format!(
                    "{}.tool_use.input: Input should be a valid dictionary",
                    at(b)
                )));
            }
        }
        "tool_result" if role == "user" => {
            if !b.block["tool_use_id"].is_string() {
                return Err(required(&format!("{}.tool_result.tool_use_id", at(b))));
            }
        }
        "document" if role == "user" => document(b)?,
        "image" | "search_result" if role == "user" => {}
        "server_tool_use" if role == "assistant" => {
            // Ids the API issued (`srvtoolu_…`), for a server tool it has.
            let issued = b.block["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("srvtoolu_") && !id.starts_with("srvtoolu_weir"));
            if !issued {
                return Err(Rejection::bad(format!(
                    "{}.server_tool_use.id: String should match pattern '^srvtoolu_[a-zA-Z0-9_]+$'",
                    at(b)
                )));
            }
            if !matches!(
                b.block["name"].as_str(),
                Some(
                    "web_search"
                        | "web_fetch"
                        | "code_execution"
                        | "bash_code_execution"
                        | "text_editor_code_execution"
                        | "tool_search_tool_regex"
                        | "tool_search_tool_bm25"
                )
            ) {
                return Err(Rejection::bad(format!(
                    "{}.server_tool_use.name: Input should be a server tool's name",
                    at(b)
                )));
            }
        }
        "web_search_tool_result" if role == "assistant" => search_result(b)?,
        "web_fetch_tool_result" | "mcp_tool_use" | "mcp_tool_result" | "container_upload" => {}
        _ => {
            return Err(Rejection::bad(format!(
                "{}: Input tag '{kind}' found using 'type' does not match any of the expected tags for a {role} message",
                at(b)
            )));
        }
    }
    Ok(())
}

/// A document's source (PDF support and citations guides): a base64 PDF,
/// plain text, a URL, custom content blocks, or an uploaded file.
fn document(b: &Block<'_>) -> Result<(), Rejection> {
    let src = &b.block["source"];
    let at = format!("{}.document.source", at(b));
    let ok = match src["type"].as_str() {
        Some("base64") => src["media_type"] == "application/pdf" && src["data"].is_string(),
        Some("text") => src["media_type"] == "text/plain" && src["data"].is_string(),
        Some("url") => src["url"].is_string(),
        Some("content") => src["content"].is_string() || src["content"].is_array(),
        Some("file") => src["file_id"].is_string(),
        other => {
            return Err(Rejection::bad(format!(
                "{at}: Input tag '{}' found using 'type' does not match any of the expected tags: 'base64', 'content', 'file', 'text', 'url'",
                other.unwrap_or("")
            )));
        }
    };
    if ok {
        Ok(())
    } else {
        Err(Rejection::bad(format!(
            "{at}: the source's fields do not match its type"
        )))
    }
}

/// Search results go back as the API gave them: each result's
/// `encrypted_content` is the API's own (web search guide: "the
/// encrypted_content … must be passed back for multi-turn conversations").
fn search_result(b: &Block<'_>) -> Result<(), Rejection> {
    if !b.block["tool_use_id"].is_string() {
        return Err(required(&format!(
            "{}.web_search_tool_result.tool_use_id",
            at(b)
        )));
    }
    let content = &b.block["content"];
    if content["type"] == "web_search_tool_result_error" {
        return Ok(());
    }
    let Some(results) = content.as_array() else {
        return Err(Rejection::bad(format!(
            "{}.web_search_tool_result.content: Input should be a valid list",
            at(b)
        )));
    };
    for (n, r) in results.iter().enumerate() {
        let url = r["url"].as_str().unwrap_or("");
        let sealed = r["encrypted_content"].as_str().unwrap_or("");
        if r["type"] != "web_search_result" || unseal(SEARCH, sealed).as_deref() != Some(url) {
            return Err(Rejection::bad(format!(
                "{}.web_search_tool_result.content.{n}: Invalid `encrypted_content` in web search result",
                at(b)
            )));
        }
    }
    Ok(())
}

/// A text block's citations of search results carry the API's own
/// `encrypted_index`.
fn citations(b: &Block<'_>) -> Result<(), Rejection> {
    for (n, c) in b.block["citations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if c["type"] != "web_search_result_location" {
            continue;
        }
        let url = c["url"].as_str().unwrap_or("");
        let sealed = c["encrypted_index"].as_str().unwrap_or("");
        if unseal(CITATION, sealed).as_deref() != Some(url) {
            return Err(Rejection::bad(format!(
                "{}.text.citations.{n}: Invalid `encrypted_index` in web_search_result_location citation",
                at(b)
            )));
        }
    }
    Ok(())
}

/// Every `web_search_tool_result` answers a `server_tool_use` before it
/// in the same turn.
fn search_results_answer(turn: &Turn<'_>) -> Result<(), Rejection> {
    let mut asked: Vec<&str> = Vec::new();
    for b in &turn.blocks {
        match b.block["type"].as_str() {
            Some("server_tool_use") => asked.extend(b.block["id"].as_str()),
            Some("web_search_tool_result") => {
                let answers = b.block["tool_use_id"].as_str().unwrap_or("");
                if !asked.contains(&answers) {
                    return Err(Rejection::bad(format!(
                        "{}: `web_search_tool_result` block(s) provided without a preceding `server_tool_use` block with id {answers}",
                        at(b)
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn ids<'a>(turn: &'a Turn<'_>, kind: &str, field: &str) -> Vec<&'a str> {
    turn.blocks
        .iter()
        .filter(|b| b.block["type"] == kind)
        .filter_map(|b| b.block[field].as_str())
        .collect()
}

/// "Each `tool_result` block must have a corresponding `tool_use` block in
/// the previous message."
fn tool_results_answer(turn: &Turn<'_>, previous: Option<&Turn<'_>>) -> Result<(), Rejection> {
    let asked = previous
        .map(|p| ids(p, "tool_use", "id"))
        .unwrap_or_default();
    for b in &turn.blocks {
        if b.block["type"] != "tool_result" {
            continue;
        }
        let answers = b.block["tool_use_id"].as_str().unwrap_or("");
        if !asked.contains(&answers) {
            return Err(Rejection::bad(format!(
                "messages.{}.content.{}: unexpected `tool_use_id` found in `tool_result` blocks: {answers}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
                b.message, b.index
            )));
        }
    }
    Ok(())
}

/// "Each `tool_use` block must have a corresponding `tool_result` block in
/// the next message."
fn tool_uses_answered(turn: &Turn<'_>, next: &Turn<'_>) -> Result<(), Rejection> {
    let answered = ids(next, "tool_result", "tool_use_id");
    let missing: Vec<&str> = ids(turn, "tool_use", "id")
        .into_iter()
        .filter(|id| !answered.contains(id))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let message = turn.blocks.first().map(|b| b.message).unwrap_or(0);
    Err(Rejection::bad(format!(
        "messages.{message}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        missing.join(", ")
    )))
}

/// With thinking on, the last assistant turn, when the request continues
/// its tool use (the final user turn carries tool results), must start
/// with a thinking or redacted_thinking block.
fn continues_with_thinking(turns: &[Turn<'_>]) -> Result<(), Rejection> {
    let [.., assistant, user] = turns else {
        return Ok(());
    };
    let continues = assistant.role == "assistant"
        && user.role == "user"
        && user.blocks.iter().any(|b| b.block["type"] == "tool_result")
        && assistant
            .blocks
            .iter()
            .any(|b| b.block["type"] == "tool_use");
    if !continues {
        return Ok(());
    }
    let Some(first) = assistant.blocks.first() else {
        return Ok(());
    };
    let kind = first.block["type"].as_str().unwrap_or("");
    if kind == "thinking" || kind == "redacted_thinking" {
        return Ok(());
    }
    Err(Rejection::bad(format!(
        "messages.{}.content.{}.type: Expected `thinking` or `redacted_thinking`, but found `{kind}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
        first.message, first.index
    )))
}

/// The conversation turn: 1 + the assistant turns in the history.
pub(crate) fn turn(body: &Value) -> usize {
    let Some(messages) = body["messages"].as_array() else {
        return 1;
    };
    let mut turns = 1;
    let mut previous = "";
    for m in messages {
        let role = m["role"].as_str().unwrap_or("");
        if role == "assistant" && previous != "assistant" {
            turns += 1;
        }
        previous = role;
    }
    turns
}

pub(crate) fn view(body: &Value) -> View {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let shell = tools
        .iter()
        .filter(|t| matches!(t["type"].as_str(), None | Some("custom")))
        .find_map(|t| ShellTool::recognise(t["name"].as_str()?, &t["input_schema"]));
    let last = body["messages"].as_array().and_then(|m| m.last());
    let result = last
        .filter(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_array())
        .and_then(|blocks| blocks.iter().rev().find(|b| b["type"] == "tool_result"))
        .map(|b| text_of(&b["content"]));
    View {
        shell,
        result,
        search: tools.iter().any(|t| t["type"] == "web_search_20250305"),
        later: turn(body) > 1,
        thinking: matches!(
            body["thinking"]["type"].as_str(),
            Some("enabled" | "adaptive")
        ),
        max_tokens: body["max_tokens"].as_u64(),
        ..View::of(body, &tools)
    }
}

pub(crate) fn answer(plan: &Plan, view: &View, body: &Value) -> Answer {
    let omitted = body["thinking"]["display"] == "omitted";
    let mut content = Vec::new();
    let mut output = 0;
    if let Some(thinking) = &plan.thinking {
        output += words(thinking);
        let shown = if omitted { "" } else { thinking.as_str() };
        content.push(
            json!({"type": "thinking", "thinking": shown, "signature": seal(THINKING, thinking)}),
        );
    }
    let mut stop = "end_turn";
    let mut searches = 0;
    if let Some(query) = &plan.search {
        searches = 1;
        let tool_id = id("srvtoolu_");
        content.push(json!({"type": "server_tool_use", "id": tool_id, "name": "web_search", "input": {"query": query}}));
        content.push(
            json!({"type": "web_search_tool_result", "tool_use_id": tool_id, "content": [{
                "type": "web_search_result", "url": SEARCH_URL, "title": SEARCH_TITLE,
                "encrypted_content": seal(SEARCH, SEARCH_URL), "page_age": "November 30, 2026",
            }]}),
        );
        content.push(json!({"type": "text", "text": CITED, "citations": [{
            "type": "web_search_result_location", "url": SEARCH_URL, "title": SEARCH_TITLE,
            "cited_text": CITED, "encrypted_index": seal(CITATION, SEARCH_URL),
        }]}));
    }
    if let Some(text) = plan.text.as_ref().filter(|_| plan.search.is_none()) {
        let all: Vec<&str> = text.split_inclusive(' ').collect();
        let limit = view.max_tokens.unwrap_or(u64::MAX) as usize;
        let kept = if all.len() > limit {
            stop = "max_tokens";
            all[..limit].concat()
        } else {
            text.clone()
        };
        output += words(&kept);
        content.push(json!({"type": "text", "text": kept}));
    }
    if let Some((name, input)) = &plan.call {
        output += words(&input.to_string());
        stop = "tool_use";
        content.push(json!({"type": "tool_use", "id": id("toolu_"), "name": name, "input": input}));
    }
    let usage = json!({
        "input_tokens": view.input_tokens,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "server_tool_use": {"web_search_requests": searches},
    });
    let message = json!({
        "id": id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": view.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": usage,
    });
    if !view.stream {
        return Answer::Json(message);
    }
    Answer::Events(stream(message))
}

/// The message as the API streams it: message_start, a ping, each block's
/// start / deltas / stop, message_delta with the stop reason and usage,
/// message_stop.
fn stream(message: Value) -> Vec<String> {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut events = vec![
        sse(
            Some("message_start"),
            &json!({"type": "message_start", "message": start}),
        ),
        sse(Some("ping"), &json!({"type": "ping"})),
    ];
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    for (index, b) in blocks.iter().enumerate() {
        let (empty, deltas) = match b["type"].as_str().unwrap_or("") {
            "thinking" => {
                let mut deltas: Vec<Value> = match b["thinking"].as_str().unwrap_or("") {
                    "" => Vec::new(),
                    t => pieces(t, 12)
                        .into_iter()
                        .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                        .collect(),
                };
                deltas.push(json!({"type": "signature_delta", "signature": b["signature"]}));
                (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    deltas,
                )
            }
            // Citations come first, each in a `citations_delta` (web
            // search guide, "Streaming").
            "text" => (
                json!({"type": "text", "text": ""}),
                b["citations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| json!({"type": "citations_delta", "citation": c}))
                    .chain(
                        pieces(b["text"].as_str().unwrap_or(""), 8)
                            .into_iter()
                            .map(|p| json!({"type": "text_delta", "text": p})),
                    )
                    .collect(),
            ),
            // The results come whole with the block's start.
            "web_search_tool_result" => (b.clone(), Vec::new()),
            _ => {
                let mut empty = b.clone();
                empty["input"] = json!({});
                (
                    empty,
                    pieces(&b["input"].to_string(), 10)
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect(),
                )
            }
        };
        events.push(sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": empty}),
        ));
        for delta in deltas {
            events.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(sse(
        Some("message_delta"),
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        }),
    ));
    events.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    events
}
