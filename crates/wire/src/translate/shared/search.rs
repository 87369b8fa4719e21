//! Web search between the APIs: Anthropic's `web_search` server tool and
//! OpenAI Responses' `web_search` tool, the searches their models make,
//! and the citations on the text a search supports.
//!
//! Sources: Anthropic's web search tool (docs.claude.com/en/docs/
//! agents-and-tools/tool-use/web-search-tool: the tool's `max_uses`,
//! `allowed_domains`, `blocked_domains`, `user_location`; the
//! `server_tool_use` + `web_search_tool_result` blocks; text `citations`
//! of type `web_search_result_location` whose `cited_text` is at most 150
//! characters; `citations_delta` in streams; "the encrypted_content must
//! be passed back" on later turns). OpenAI's web search guide
//! (developers.openai.com/api/docs/guides/tools-web-search:
//! `filters.allowed_domains`, `user_location`, `search_context_size`;
//! `web_search_call` items with an `action`; `url_citation` annotations
//! with `start_index`/`end_index`; `include:
//! ["web_search_call.action.sources"]`). openai/codex `codex-rs`
//! (`ToolSpec::WebSearch`: Codex offers `{type: "web_search",
//! external_web_access, filters, user_location, search_context_size,
//! search_content_types}` on every request; `ResponseItem::WebSearchCall`
//! is replayed without its id, and `output_text` without annotations).
//!
//! What cannot be carried: an OpenAI search has no `encrypted_content`
//! for its results, nor an `encrypted_index` for its citations, so the
//! blocks weir makes of it carry [`anthropic::WEIR_SEARCH_MARK`] there,
//! and never go to Anthropic; the other way, Anthropic's encrypted
//! results have no place in a `web_search_call` (Codex keeps only the
//! query), so a later turn sends Anthropic the answer's text without the
//! search it was made from.

use serde_json::{Map, Value, json};

use crate::anthropic::{self, block};
use crate::responses::{self, item, status};
use crate::translate::TranslateError;
use crate::type_of;

/// Anthropic's `cited_text` is at most this many characters.
const CITED_CHARS: usize = 150;

/// An approximate user location, the same fields in both APIs.
fn location(loc: &Value) -> Option<Value> {
    let fields = loc.as_object()?;
    let mut out = Map::new();
    out.insert("type".into(), "approximate".into());
    for key in ["city", "region", "country", "timezone"] {
        if let Some(v) = fields.get(key).filter(|v| v.is_string()) {
            out.insert(key.into(), v.clone());
        }
    }
    Some(Value::Object(out))
}

/// Anthropic's web search tool → the Responses `web_search` tool, and its
/// `max_uses` (the request's `max_tool_calls`, which bounds the calls of
/// built-in tools: this is the only one weir sends). A tool that excludes
/// domains cannot go: OpenAI's search has only an allow-list, and
/// searching where the client forbade it is not an approximation.
pub(in crate::translate) fn to_responses_tool(
    tool: &Value,
) -> Result<(Value, Option<u64>), TranslateError> {
    if tool["blocked_domains"]
        .as_array()
        .is_some_and(|d| !d.is_empty())
    {
        return Err(TranslateError::Unserved(
            "this upstream's web search (OpenAI Responses) cannot exclude domains \
             (`blocked_domains`); use `allowed_domains`, or an Anthropic upstream"
                .into(),
        ));
    }
    let mut out = json!({"type": responses::tool::WEB_SEARCH});
    if let Some(domains) = tool["allowed_domains"].as_array().filter(|d| !d.is_empty()) {
        out["filters"] = json!({"allowed_domains": domains});
    }
    if let Some(loc) = location(&tool["user_location"]) {
        out["user_location"] = loc;
    }
    Ok((out, tool["max_uses"].as_u64()))
}

/// The Responses `web_search` tool (Codex's) → Anthropic's. Its
/// `search_context_size`, `external_web_access` (cached or live pages)
/// and `search_content_types` have no equivalent: Anthropic searches live.
pub(in crate::translate) fn to_anthropic_tool(tool: &Value, max_calls: Option<u64>) -> Value {
    let mut out = json!({"type": anthropic::WEB_SEARCH_TOOL, "name": anthropic::WEB_SEARCH_NAME});
    if let Some(domains) = tool["filters"]["allowed_domains"]
        .as_array()
        .filter(|d| !d.is_empty())
    {
        out["allowed_domains"] = Value::Array(domains.clone());
    }
    if let Some(loc) = location(&tool["user_location"]) {
        out["user_location"] = loc;
    }
    if let Some(n) = max_calls.filter(|n| *n > 0) {
        out["max_uses"] = n.into();
    }
    out
}

/// What a `web_search_call`'s action looked for: its query, or the page
/// it opened.
fn query_of(action: &Value) -> &str {
    action["query"]
        .as_str()
        .or(action["url"].as_str())
        .unwrap_or_default()
}

/// A Responses `web_search_call` → Anthropic's `server_tool_use` and
/// `web_search_tool_result` blocks (the results are the call's
/// `action.sources`, when the request asked for them; a failed call is
/// Anthropic's `unavailable` error).
pub(in crate::translate) fn blocks_of_call(item: &Value) -> [Value; 2] {
    let id = format!(
        "{}{}",
        anthropic::WEIR_SEARCH_ID_PREFIX,
        item["id"].as_str().unwrap_or_default()
    );
    let action = &item["action"];
    let content = if item["status"] == status::FAILED {
        json!({"type": block::WEB_SEARCH_TOOL_RESULT_ERROR, "error_code": "unavailable"})
    } else {
        let results: Vec<Value> = action["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let url = s["url"].as_str()?;
                Some(json!({
                    "type": block::WEB_SEARCH_RESULT, "url": url,
                    "title": s["title"].as_str().unwrap_or(url),
                    "encrypted_content": anthropic::WEIR_SEARCH_MARK, "page_age": null,
                }))
            })
            .collect();
        Value::Array(results)
    };
    [
        json!({"type": block::SERVER_TOOL_USE, "id": id, "name": anthropic::WEB_SEARCH_NAME,
            "input": {"query": query_of(action)}}),
        json!({"type": block::WEB_SEARCH_TOOL_RESULT, "tool_use_id": id, "content": content}),
    ]
}

/// An Anthropic `server_tool_use` block of the web search → a
/// `web_search_call` item, as Codex replays one (no id: the item is not
/// stored upstream); `None` for another server tool.
pub(in crate::translate) fn call_of_block(block: &Value) -> Option<Value> {
    (block["name"] == anthropic::WEB_SEARCH_NAME).then(|| {
        json!({"type": item::WEB_SEARCH_CALL, "status": status::COMPLETED,
            "action": {"type": responses::SEARCH_ACTION, "query": block["input"]["query"].as_str().unwrap_or_default()}})
    })
}

/// One `url_citation` annotation → an Anthropic citation, citing `cited`.
pub(in crate::translate) fn citation(annotation: &Value, cited: &str) -> Option<Value> {
    if type_of(annotation) != Some(responses::URL_CITATION) {
        return None;
    }
    let url = annotation["url"].as_str()?;
    Some(json!({
        "type": anthropic::CITATION_OF_SEARCH, "url": url,
        "title": annotation["title"].as_str().unwrap_or(url),
        "cited_text": cited, "encrypted_index": anthropic::WEIR_SEARCH_MARK,
    }))
}

/// The `url_citation` annotations of an `output_text` part → Anthropic
/// citations, each citing the span it marks (at most 150 characters).
pub(in crate::translate) fn citations(text: &str, annotations: &Value) -> Vec<Value> {
    let Some(annotations) = annotations.as_array().filter(|a| !a.is_empty()) else {
        return Vec::new();
    };
    // Character offsets → byte offsets, once for the part.
    let mut bytes: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
    bytes.push(text.len());
    let at = |i: &Value| {
        let i = usize::try_from(i.as_u64().unwrap_or(0)).unwrap_or(usize::MAX);
        bytes.get(i).or(bytes.last()).copied().unwrap_or(0)
    };
    annotations
        .iter()
        .filter_map(|a| {
            let start = at(&a["start_index"]);
            let end = at(&a["end_index"]).max(start);
            let cited: String = text
                .get(start..end)
                .unwrap_or_default()
                .chars()
                .take(CITED_CHARS)
                .collect();
            citation(a, &cited)
        })
        .collect()
}

/// An Anthropic citation of a search result → a `url_citation` spanning
/// the `chars` characters of the text block it is on (Anthropic cites a
/// whole block); `None` for other citation kinds.
pub(in crate::translate) fn annotation(citation: &Value, chars: usize) -> Option<Value> {
    if type_of(citation) != Some(anthropic::CITATION_OF_SEARCH) {
        return None;
    }
    let url = citation["url"].as_str()?;
    Some(json!({
        "type": responses::URL_CITATION, "start_index": 0, "end_index": chars,
        "url": url, "title": citation["title"].as_str().unwrap_or(url),
    }))
}

/// The annotations of a text block's citations.
pub(in crate::translate) fn annotations(citations: &Value, text: &str) -> Vec<Value> {
    let chars = text.chars().count();
    citations
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| annotation(c, chars))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_map_both_ways() {
        let claude = json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3,
            "allowed_domains": ["docs.rs"],
            "user_location": {"type": "approximate", "city": "Paris", "country": "FR", "timezone": "Europe/Paris"}});
        let (openai, max) = to_responses_tool(&claude).expect("mapped");
        assert_eq!(
            openai,
            json!({"type": "web_search", "filters": {"allowed_domains": ["docs.rs"]},
                "user_location": {"type": "approximate", "city": "Paris", "country": "FR", "timezone": "Europe/Paris"}})
        );
        assert_eq!(max, Some(3));
        let codex = json!({"type": "web_search", "external_web_access": true,
            "search_content_types": ["text", "image"], "filters": {"allowed_domains": ["docs.rs"]}});
        assert_eq!(
            to_anthropic_tool(&codex, Some(2)),
            json!({"type": "web_search_20250305", "name": "web_search",
                "allowed_domains": ["docs.rs"], "max_uses": 2})
        );
    }

    #[test]
    fn blocked_domains_cannot_go_to_openai() {
        let claude = json!({"type": "web_search_20250305", "name": "web_search",
            "blocked_domains": ["example.com"]});
        assert!(matches!(
            to_responses_tool(&claude),
            Err(TranslateError::Unserved(_))
        ));
    }

    #[test]
    fn a_call_becomes_blocks_marked_as_weirs() {
        let item = json!({"id": "ws_1", "type": "web_search_call", "status": "completed",
            "action": {"type": "search", "query": "weir proxy",
                "sources": [{"type": "url", "url": "https://example.org/weir"}]}});
        let [used, result] = blocks_of_call(&item);
        assert_eq!(
            used,
            json!({"type": "server_tool_use", "id": "srvtoolu_weir_ws_1", "name": "web_search", "input": {"query": "weir proxy"}})
        );
        assert_eq!(result["tool_use_id"], "srvtoolu_weir_ws_1");
        assert_eq!(result["content"][0]["url"], "https://example.org/weir");
        assert_eq!(result["content"][0]["encrypted_content"], "weir.w1");
        assert_eq!(
            call_of_block(&used),
            Some(
                json!({"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "weir proxy"}})
            )
        );
    }

    /// Indexes count characters, past the end is the end, and a span the
    /// wrong way round cites nothing.
    #[test]
    fn citations_cite_their_span() {
        let text = "Été: weir keeps serving.";
        let a = json!([
            {"type": "url_citation", "start_index": 5, "end_index": 9, "url": "https://u", "title": "T"},
            {"type": "url_citation", "start_index": 9, "end_index": 2, "url": "https://v"},
            {"type": "url_citation", "start_index": 20, "end_index": 99999999999u64, "url": "https://w"},
            {"type": "file_citation", "file_id": "f"},
        ]);
        let c = citations(text, &a);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0]["cited_text"], "weir");
        assert_eq!(c[0]["title"], "T");
        assert_eq!(c[1]["cited_text"], "");
        assert_eq!(c[1]["title"], "https://v");
        assert_eq!(c[2]["cited_text"], "ing.");
        let back = annotations(&json!(c), text);
        assert_eq!(back[0]["end_index"], 24);
        assert_eq!(back[0]["url"], "https://u");
    }
}
