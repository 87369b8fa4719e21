//! A whole Messages answer → a Responses object.

use serde_json::{Value, json};

use super::CUSTOM_INPUT;
use crate::anthropic::{self, block};
use crate::responses::{self, item, part, status};
use crate::translate::ToolNames;
use crate::translate::shared::search;
use crate::type_of;

/// A whole Messages object → a Responses object.
pub(crate) fn whole(v: &Value, model: &str, names: &ToolNames) -> Option<Value> {
    let content = v["content"].as_array()?;
    let id = format!("resp_{}", v["id"].as_str().unwrap_or("translated"));
    let mut output = Vec::new();
    for (n, b) in content.iter().enumerate() {
        match type_of(b) {
            Some(block::TEXT) => output.push(json!({
                "id": format!("msg_{id}_{n}"), "type": item::MESSAGE, "status": status::COMPLETED,
                "role": responses::role::ASSISTANT,
                "content": [{"type": part::OUTPUT_TEXT, "text": b["text"],
                    "annotations": search::annotations(&b["citations"], b["text"].as_str().unwrap_or_default())}],
            })),
            Some(block::SERVER_TOOL_USE) => {
                if let Some(mut call) = search::call_of_block(b) {
                    call["id"] = format!("ws_{id}_{n}").into();
                    output.push(call);
                }
            }
            Some(block::TOOL_USE) if names.is_custom(&b["name"]) => output.push(json!({
                "id": format!("ctc_{id}_{n}"), "type": item::CUSTOM_TOOL_CALL, "status": status::COMPLETED,
                "call_id": b["id"], "name": b["name"],
                "input": b["input"][CUSTOM_INPUT].as_str().unwrap_or_default(),
            })),
            Some(block::TOOL_USE) => output.push(json!({
                "id": format!("fc_{id}_{n}"), "type": item::FUNCTION_CALL, "status": status::COMPLETED,
                "call_id": b["id"], "name": b["name"], "arguments": b["input"].to_string(),
            })),
            Some(block::THINKING) => output.push(json!({
                "id": format!("rs_{id}_{n}"), "type": item::REASONING,
                "summary": [{"type": part::SUMMARY_TEXT, "text": b["thinking"]}],
                "encrypted_content": responses::block_content(b),
            })),
            Some(block::REDACTED_THINKING) => output.push(json!({
                "id": format!("rs_{id}_{n}"), "type": item::REASONING, "summary": [],
                "encrypted_content": responses::block_content(b),
            })),
            _ => {}
        }
    }
    let incomplete = v["stop_reason"] == anthropic::stop::MAX_TOKENS && names.client_limit;
    Some(json!({
        "id": id,
        "object": "response",
        "created_at": 0,
        "status": if incomplete { status::INCOMPLETE } else { status::COMPLETED },
        "model": model,
        "output": output,
        "usage": responses::usage_value(anthropic::usage(&v["usage"]).unwrap_or_default()),
        "error": null,
        "incomplete_details": if incomplete { json!({"reason": responses::incomplete::MAX_OUTPUT_TOKENS}) } else { Value::Null },
    }))
}
