//! `count_tokens` answered locally for routes whose upstreams cannot
//! (Claude Code calls it often, and breaks its context accounting on a
//! 404). An estimate with OpenAI's o200k_base encoding over everything the
//! model reads: system, messages (text, tool calls and results), and tool
//! definitions. Images and documents are counted by a fixed figure per
//! block, as the providers price them, never by expanding text; past
//! [`EXACT_MAX`] bytes of text the count is extrapolated from the encoded
//! part, so the work per request is bounded whatever the body.

use std::sync::OnceLock;

use serde_json::Value;

use crate::anthropic::block;
use crate::type_of;

/// Tokens a chat template adds per message (role markers).
const PER_MESSAGE: u64 = 4;
/// An image: Anthropic's figure for one of about 750 × 750 px.
const PER_IMAGE: u64 = 750;
/// A document (a PDF): the low end of Anthropic's 1,500–3,000 per page,
/// for one page, as the page count is not read.
const PER_DOCUMENT: u64 = 1500;
/// Text encoded exactly; the rest is counted at the same rate.
pub const EXACT_MAX: usize = 1024 * 1024;

fn encoder() -> Option<&'static tiktoken_rs::CoreBPE> {
    static BPE: OnceLock<Option<tiktoken_rs::CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

/// The input tokens of a Messages request body (`None` if it is not JSON).
pub fn count(body: &[u8]) -> Option<u64> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let bpe = encoder()?;
    let mut read = Read::default();
    read.content(&v["system"]);
    for m in v["messages"].as_array().into_iter().flatten() {
        read.fixed = read.fixed.saturating_add(PER_MESSAGE);
        read.content(&m["content"]);
    }
    for t in v["tools"].as_array().into_iter().flatten() {
        read.text(t["name"].as_str().unwrap_or(""));
        read.text(t["description"].as_str().unwrap_or(""));
        read.text(&t["input_schema"].to_string());
    }
    Some(read.fixed.saturating_add(encoded(bpe, &read.text)))
}

/// Tokens of `text`: exact up to [`EXACT_MAX`] bytes, extrapolated past it.
fn encoded(bpe: &tiktoken_rs::CoreBPE, text: &str) -> u64 {
    let mut cut = text.len().min(EXACT_MAX);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let exact = bpe.encode_ordinary(&text[..cut]).len() as u64;
    if cut == text.len() || cut == 0 {
        return exact;
    }
    // Same tokens per byte for the rest (in u128: no overflow).
    let scaled = u128::from(exact) * text.len() as u128 / cut as u128;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// What a request gives the model to read: text to encode, and tokens
/// counted by figure (per message, image, document).
#[derive(Default)]
struct Read {
    text: String,
    fixed: u64,
}

impl Read {
    fn text(&mut self, s: &str) {
        self.text.push_str(s);
        self.text.push('\n');
    }

    fn content(&mut self, v: &Value) {
        match v {
            Value::String(s) => self.text(s),
            Value::Array(blocks) => {
                for b in blocks {
                    match type_of(b) {
                        Some(block::TEXT) => self.content(&b["text"]),
                        Some(block::THINKING) => self.content(&b["thinking"]),
                        Some(block::TOOL_USE) => {
                            self.text.push_str(b["name"].as_str().unwrap_or(""));
                            self.text(&b["input"].to_string());
                        }
                        Some(block::TOOL_RESULT) => self.content(&b["content"]),
                        Some(block::IMAGE) => self.fixed = self.fixed.saturating_add(PER_IMAGE),
                        Some(block::DOCUMENT) => {
                            self.fixed = self.fixed.saturating_add(PER_DOCUMENT)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
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

    #[test]
    fn images_are_counted_by_figure_and_large_text_by_rate() {
        let image =
            r#"{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}"#;
        let images = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":[{}]}}]}}"#,
            vec![image; 1000].join(",")
        );
        let n = count(images.as_bytes()).expect("count");
        assert_eq!(n, 1000 * PER_IMAGE + PER_MESSAGE);

        // Past EXACT_MAX the rest is counted at the rate of the part
        // encoded, not encoded: a dense tail after a sparse head costs its
        // bytes at the head's rate.
        let head = "hello ".repeat(EXACT_MAX / 6 + 1);
        let tail = "7 ".repeat(EXACT_MAX / 2);
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": head + &tail}]});
        let n = count(body.to_string().as_bytes()).expect("count");
        let exact_head = EXACT_MAX as u64 / 6;
        assert!(
            (exact_head * 19 / 10..=exact_head * 21 / 10).contains(&n),
            "extrapolated at the head's rate: {n}"
        );
    }
}
