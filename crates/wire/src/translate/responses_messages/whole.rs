//! A whole Messages answer → a Responses object.

use serde_json::{Value, json};

use super::CUSTOM_INPUT;
use crate::translate::ToolNames;
use crate::translate::shared::search;
use crate::{anthropic, responses};

/// A whole Messages object → a Responses object.
pub(crate) fn whole(v: &Value, model: &str, names: &ToolNames) -> Option<Value> {
    let content = v["content"].as_array()?;
    let id = format!("resp_{}", v["id"].as_str().unwrap_or("translated"));
    let mut output = Vec::new();
    for (n, b) in content.iter().enumerate() {
        match b["type"].as_str() {
            Some("text") => output.push(json!({
                "id": format!("msg_{id}_{n}"), "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": b["text"],
                    "annotations": search::annotations(&b["citations"], b["text"].as_str().unwrap_or_default())}],
            })),
            Some(anthropic::block::SERVER_TOOL_USE) => {
                if let Some(mut call) = search::call_of_block(b) {
                    call["id"] = format!("ws_{id}_{n}").into();
                    output.push(call);
                }
            }
            Some(anthropic::block::TOOL_USE) if names.is_custom(&b["name"]) => output.push(json!({
                "id": format!("ctc_{id}_{n}"), "type": "custom_tool_call", "status": "completed",
                "call_id": b["id"], "name": b["name"],
                "input": b["input"][CUSTOM_INPUT].as_str().unwrap_or_default(),
            })),
            Some(anthropic::block::TOOL_USE) => output.push(json!({
                "id": format!("fc_{id}_{n}"), "type": "function_call", "status": "completed",
                "call_id": b["id"], "name": b["name"], "arguments": b["input"].to_string(),
            })),
            Some(anthropic::block::THINKING) => output.push(json!({
                "id": format!("rs_{id}_{n}"), "type": "reasoning",
                "summary": [{"type": "summary_text", "text": b["thinking"]}],
                "encrypted_content": responses::block_content(b),
            })),
            Some(anthropic::block::REDACTED_THINKING) => output.push(json!({
                "id": format!("rs_{id}_{n}"), "type": "reasoning", "summary": [],
                "encrypted_content": responses::block_content(b),
            })),
            _ => {}
        }
    }
    let incomplete = v["stop_reason"] == "max_tokens" && names.client_limit;
    Some(json!({
        "id": id,
        "object": "response",
        "created_at": 0,
        "status": if incomplete { "incomplete" } else { "completed" },
        "model": model,
        "output": output,
        "usage": responses::usage_value(anthropic::usage(&v["usage"]).unwrap_or_default()),
        "error": null,
        "incomplete_details": if incomplete { json!({"reason": "max_output_tokens"}) } else { Value::Null },
    }))
}
