//! Requests that go untranslated to an upstream of the client's own API
//! but carry state weir made for another vendor on an earlier turn (a
//! conversation that failed over between protocols): that state is
//! removed, since the upstream would refuse it as forged. Only a body that
//! holds weir's mark is parsed; every other native request stays verbatim.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::{Endpoint, anthropic, responses};

/// Whether a native request may carry weir's state: its body had a string
/// starting with one of weir's marks (found by the pass that read `model`,
/// `llm::body::model`), on an API weir makes state for.
pub fn carries_weir_state(endpoint: Endpoint, marked: bool) -> bool {
    matches!(endpoint, Endpoint::Messages | Endpoint::Responses) && marked
}

/// The body without the state weir made for another vendor, naming
/// `model` when given; `None` when there was nothing to remove (or the
/// body is not a JSON object: it goes as it came, for the upstream to
/// judge).
pub fn without_weir_state(endpoint: Endpoint, body: &[u8], model: Option<&str>) -> Option<Bytes> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let fields = v.as_object_mut()?;
    let removed = match endpoint {
        Endpoint::Messages => messages(fields),
        Endpoint::Responses => responses(fields),
        _ => false,
    };
    if !removed {
        return None;
    }
    if let Some(m) = model {
        fields.insert("model".into(), m.into());
    }
    Some(Bytes::from(v.to_string()))
}

/// A Messages request for Anthropic: thinking Anthropic did not sign is
/// dropped, and so are the searches weir made of another vendor's (their
/// blocks and the citations of them: Anthropic encrypted none of them);
/// if that leaves a tool-use continuation whose assistant turn does not
/// start with thinking, thinking is turned off for the request (Anthropic
/// would refuse it with thinking on).
fn messages(fields: &mut Map<String, Value>) -> bool {
    let mut removed = false;
    for m in fields
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(content) = m.get_mut("content").and_then(Value::as_array_mut) {
            let before = content.len();
            content.retain(|b| {
                !(anthropic::is_thinking(b) && !anthropic::signed_by_anthropic(b)
                    || anthropic::is_weir_search(b))
            });
            let mut thinned = content.len() != before;
            for b in content.iter_mut() {
                thinned |= anthropic::strip_weir_citations(b);
            }
            removed |= thinned;
        }
    }
    if removed {
        let messages = fields
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if !super::shared::blocks::starts_with_thinking_where_needed(messages) {
            anthropic::thinking_off(fields);
        }
    }
    removed
}

/// A Responses request for OpenAI: reasoning items carrying Anthropic's
/// thinking (which OpenAI cannot verify) are dropped.
fn responses(fields: &mut Map<String, Value>) -> bool {
    let Some(input) = fields.get_mut("input").and_then(Value::as_array_mut) else {
        return false;
    };
    let before = input.len();
    input.retain(|item| {
        crate::type_of(item) != Some(responses::item::REASONING)
            || item["encrypted_content"]
                .as_str()
                .and_then(responses::block_of_content)
                .is_none()
    });
    input.len() != before
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn marked(body: &str) -> bool {
        crate::body::model(body.as_bytes())
            .expect("model")
            .weir_state
    }

    /// Claude Code's history from a Responses upstream, now going to
    /// Anthropic: weir's thinking is dropped, and with it thinking for the
    /// continuation; Anthropic's own stays.
    #[test]
    fn weirs_thinking_never_reaches_anthropic() {
        let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 32000,
            "thinking": {"type": "enabled", "budget_tokens": 31999},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "messages": [
                {"role": "user", "content": "run it"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "", "signature": "weir.s1"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
            ]})
        .to_string();
        assert!(carries_weir_state(Endpoint::Messages, marked(&body)));
        let out = without_weir_state(Endpoint::Messages, body.as_bytes(), Some("claude-opus-4-1"))
            .expect("rewritten");
        let out: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(out["model"], "claude-opus-4-1");
        assert_eq!(
            out["messages"][1]["content"],
            json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}])
        );
        assert!(out.get("thinking").is_none(), "{out}");
        assert!(out.get("context_management").is_none(), "{out}");

        let signed = json!({"model": "m", "thinking": {"type": "enabled", "budget_tokens": 2000}, "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "a", "signature": "EqQBCkYI"},
                {"type": "thinking", "thinking": "b", "signature": "weir.c1"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ]})
        .to_string();
        let out =
            without_weir_state(Endpoint::Messages, signed.as_bytes(), None).expect("rewritten");
        let out: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(out["messages"][1]["content"][0]["signature"], "EqQBCkYI");
        assert_eq!(
            out["messages"][1]["content"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(out["thinking"]["type"], "enabled");

        let plain =
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).to_string();
        assert!(!carries_weir_state(Endpoint::Messages, marked(&plain)));
    }

    /// Codex's history from an Anthropic upstream, now going to OpenAI:
    /// the reasoning items carrying Anthropic's thinking are dropped,
    /// OpenAI's own stay.
    #[test]
    fn anthropics_thinking_never_reaches_openai() {
        let carried = responses::block_content(
            &json!({"type": "thinking", "thinking": "t", "signature": "s"}),
        );
        let body = json!({"model": "gpt-5-codex", "input": [
            {"type": "message", "role": "user", "content": "run it"},
            {"type": "reasoning", "id": "rs_a", "summary": [], "encrypted_content": carried},
            {"type": "reasoning", "id": "rs_o", "summary": [], "encrypted_content": "gAAAAB"},
            {"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"},
        ]})
        .to_string();
        assert!(carries_weir_state(Endpoint::Responses, marked(&body)));
        let out =
            without_weir_state(Endpoint::Responses, body.as_bytes(), None).expect("rewritten");
        let out: Value = serde_json::from_slice(&out).expect("json");
        let ids: Vec<&Value> = out["input"]
            .as_array()
            .expect("input")
            .iter()
            .map(|i| &i["id"])
            .collect();
        assert_eq!(ids, [&Value::Null, &json!("rs_o"), &Value::Null]);
        assert!(!carries_weir_state(
            Endpoint::ChatCompletions,
            marked(&body)
        ));
    }
}
