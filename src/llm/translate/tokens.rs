//! `count_tokens` answered locally for routes whose upstreams cannot
//! (Claude Code calls it often, and breaks its context accounting on a
//! 404). An estimate with OpenAI's o200k_base encoding over everything the
//! model reads: system, messages (text, tool calls and results), and tool
//! definitions.

use std::sync::OnceLock;

use serde_json::Value;

/// Tokens a chat template adds per message (role markers).
const PER_MESSAGE: usize = 4;

fn encoder() -> Option<&'static tiktoken_rs::CoreBPE> {
    static BPE: OnceLock<Option<tiktoken_rs::CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

/// The input tokens of a Messages request body (`None` if it is not JSON).
pub fn count(body: &[u8]) -> Option<u64> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let bpe = encoder()?;
    let mut text = String::new();
    let mut messages = 0usize;
    collect(&v["system"], &mut text);
    for m in v["messages"].as_array().into_iter().flatten() {
        messages += 1;
        collect(&m["content"], &mut text);
    }
    for t in v["tools"].as_array().into_iter().flatten() {
        text.push_str(t["name"].as_str().unwrap_or(""));
        text.push('\n');
        text.push_str(t["description"].as_str().unwrap_or(""));
        text.push('\n');
        text.push_str(&t["input_schema"].to_string());
        text.push('\n');
    }
    let tokens = bpe.encode_ordinary(&text).len() + messages * PER_MESSAGE;
    Some(tokens as u64)
}

/// The text a model reads from a content value.
fn collect(v: &Value, text: &mut String) {
    match v {
        Value::String(s) => {
            text.push_str(s);
            text.push('\n');
        }
        Value::Array(blocks) => {
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => collect(&b["text"], text),
                    Some("thinking") => collect(&b["thinking"], text),
                    Some("tool_use") => {
                        text.push_str(b["name"].as_str().unwrap_or(""));
                        text.push_str(&b["input"].to_string());
                        text.push('\n');
                    }
                    Some("tool_result") => collect(&b["content"], text),
                    // Images are priced by size, not text; a fixed estimate
                    // (Anthropic's for a ~750 px image).
                    Some("image") => text.push_str(&"image ".repeat(750)),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_grow_with_every_part_of_the_request() {
        let base = br#"{"model":"m","messages":[{"role":"user","content":"Hello, world"}]}"#;
        let n = count(base).expect("count");
        assert!((3..=10).contains(&n), "{n}");
        let more = br#"{"model":"m","system":"You are a careful assistant.","messages":[{"role":"user","content":"Hello, world"}],"tools":[{"name":"read_file","description":"Read a file from disk","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]}"#;
        assert!(count(more).expect("count") > n + 15);
        assert!(count(b"not json").is_none());
    }
}
