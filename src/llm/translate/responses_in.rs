//! An OpenAI Responses answer → an Anthropic Messages answer, streamed
//! event by event or whole.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::{Value, json};

use super::{ToolNames, errors, search};
use crate::wire::{anthropic, responses};

/// Anthropic's usage from a Responses `usage`.
fn usage(u: &Value) -> Value {
    anthropic::usage_value(responses::usage(u).unwrap_or_default())
}

fn stop_reason(response: &Value, used_tools: bool) -> &'static str {
    match response["incomplete_details"]["reason"].as_str() {
        Some("max_output_tokens") => "max_tokens",
        Some("content_filter") => "refusal",
        _ if used_tools => "tool_use",
        _ => "end_turn",
    }
}

fn message_id(response: &Value) -> String {
    format!("msg_{}", response["id"].as_str().unwrap_or("translated"))
}

/// The second half of the key of a reasoning item's thinking block (a
/// tool call's is `u64::MAX`, a text part's its content index).
const REASONING: u64 = u64::MAX - 1;

/// The signature of the thinking block made from a reasoning item: its
/// encrypted content, carried to the next turn, or weir's mark.
fn reasoning_signature(item: &Value) -> String {
    match item["encrypted_content"].as_str().filter(|e| !e.is_empty()) {
        Some(e) => responses::reasoning_signature(item["id"].as_str().unwrap_or_default(), e),
        None => responses::SUMMARY_SIGNATURE.to_string(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
    Thinking,
}

struct Block {
    index: usize,
    kind: Kind,
    /// A tool call whose arguments came in deltas (else they come whole
    /// with the item's end).
    streamed: bool,
}

pub struct Stream {
    model: String,
    started: bool,
    next_index: usize,
    /// Open blocks by (output_index, content or summary index).
    open: HashMap<(u64, u64), Block>,
    used_tools: bool,
    finished: bool,
    /// Tool names shortened in the request, restored here.
    names: ToolNames,
}

impl Stream {
    pub fn new(model: &str, names: ToolNames) -> Self {
        Stream {
            names,
            model: model.to_string(),
            started: false,
            next_index: 0,
            open: HashMap::new(),
            used_tools: false,
            finished: false,
        }
    }

    fn start(&mut self, response: &Value, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        anthropic::opening(
            response["id"].as_str().unwrap_or("translated"),
            &self.model,
            out,
        );
    }

    fn open(&mut self, key: (u64, u64), kind: Kind, block: Value, out: &mut Vec<Bytes>) {
        // A reasoning item a server never finished (no `output_item.done`)
        // ends where the next block starts: Anthropic's blocks never
        // interleave.
        let thinking: Vec<(u64, u64)> = self
            .open
            .iter()
            .filter(|(_, b)| b.kind == Kind::Thinking)
            .map(|(k, _)| *k)
            .collect();
        for k in thinking {
            self.close(k, out);
        }
        let index = self.next_index;
        self.next_index += 1;
        out.push(anthropic::block_start(index, &block));
        self.open.insert(
            key,
            Block {
                index,
                kind,
                streamed: false,
            },
        );
    }

    fn delta(&mut self, key: (u64, u64), delta: Value, out: &mut Vec<Bytes>) {
        if let Some(b) = self.open.get_mut(&key) {
            b.streamed = true;
            out.push(anthropic::block_delta(b.index, &delta));
        }
    }

    fn close(&mut self, key: (u64, u64), out: &mut Vec<Bytes>) {
        if let Some(b) = self.open.remove(&key) {
            out.push(anthropic::block_stop(b.index));
        }
    }

    /// The thinking block of reasoning item `output_index`, opened if it
    /// is not.
    fn thinking(&mut self, output_index: u64, out: &mut Vec<Bytes>) -> (u64, u64) {
        let key = (output_index, REASONING);
        if !self.open.contains_key(&key) {
            self.start(&Value::Null, out);
            self.open(
                key,
                Kind::Thinking,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                out,
            );
        }
        key
    }

    fn finish(&mut self, response: &Value, out: &mut Vec<Bytes>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.start(response, out);
        let mut left: Vec<(u64, u64)> = self.open.keys().copied().collect();
        left.sort_by_key(|k| self.open[k].index);
        for k in left {
            self.close(k, out);
        }
        let stop = stop_reason(response, self.used_tools);
        anthropic::closing(stop, usage(&response["usage"]), out);
    }

    pub fn event(&mut self, name: Option<&str>, data: &str, out: &mut Vec<Bytes>) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let kind = name.or(v["type"].as_str()).unwrap_or("");
        let at = |k: &str| v[k].as_u64().unwrap_or(0);
        match kind {
            "response.created" | "response.in_progress" => self.start(&v["response"], out),
            "response.content_part.added" => {
                self.start(&Value::Null, out);
                if matches!(v["part"]["type"].as_str(), Some("output_text" | "refusal")) {
                    let key = (at("output_index"), at("content_index"));
                    self.open(key, Kind::Text, json!({"type": "text", "text": ""}), out);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                // Servers that are not OpenAI's may send no
                // `content_part.added`: the first delta opens the block.
                let key = (at("output_index"), at("content_index"));
                if !self.open.contains_key(&key) {
                    self.start(&Value::Null, out);
                    self.open(key, Kind::Text, json!({"type": "text", "text": ""}), out);
                }
                self.delta(key, json!({"type": "text_delta", "text": v["delta"]}), out);
            }
            "response.content_part.done" => {
                self.close((at("output_index"), at("content_index")), out)
            }
            "response.output_item.added" if v["item"]["type"] == "function_call" => {
                self.start(&Value::Null, out);
                self.used_tools = true;
                let item = &v["item"];
                self.open(
                    (at("output_index"), u64::MAX),
                    Kind::Tool,
                    json!({"type": "tool_use", "id": item["call_id"], "name": self.names.original(&item["name"]), "input": {}}),
                    out,
                );
            }
            "response.function_call_arguments.delta" => {
                let key = (at("output_index"), u64::MAX);
                self.delta(
                    key,
                    json!({"type": "input_json_delta", "partial_json": v["delta"]}),
                    out,
                );
            }
            "response.output_item.done" if v["item"]["type"] == "function_call" => {
                let key = (at("output_index"), u64::MAX);
                if !self.open.contains_key(&key) {
                    // No `output_item.added` came: the call arrives whole.
                    self.start(&Value::Null, out);
                    self.used_tools = true;
                    let item = &v["item"];
                    self.open(
                        key,
                        Kind::Tool,
                        json!({"type": "tool_use", "id": item["call_id"], "name": self.names.original(&item["name"]), "input": {}}),
                        out,
                    );
                }
                if let Some(b) = self.open.get(&key)
                    && b.kind == Kind::Tool
                    && !b.streamed
                    && let Some(args) = v["item"]["arguments"].as_str()
                    && !args.is_empty()
                {
                    self.delta(
                        key,
                        json!({"type": "input_json_delta", "partial_json": args}),
                        out,
                    );
                }
                self.close(key, out);
            }
            // One thinking block per reasoning item, its summary parts
            // joined, closed when the item is done: only then does the
            // encrypted reasoning its signature carries arrive. A reasoning
            // item with nothing to show or carry still gives one (empty,
            // signed `weir.s1`): sent back, it marks the turn as another
            // vendor's, which is what lets a later native request to
            // Anthropic be rewritten (thinking off) rather than refused.
            "response.output_item.added" if v["item"]["type"] == "reasoning" => {
                self.thinking(at("output_index"), out);
            }
            "response.reasoning_summary_part.added" => {
                let key = self.thinking(at("output_index"), out);
                if at("summary_index") > 0 {
                    self.delta(
                        key,
                        json!({"type": "thinking_delta", "thinking": "\n\n"}),
                        out,
                    );
                }
            }
            "response.reasoning_summary_text.delta" => {
                let key = self.thinking(at("output_index"), out);
                self.delta(
                    key,
                    json!({"type": "thinking_delta", "thinking": v["delta"]}),
                    out,
                );
            }
            "response.output_item.done" if v["item"]["type"] == "reasoning" => {
                let item = &v["item"];
                let key = (at("output_index"), REASONING);
                let summary = super::text_of(&item["summary"]);
                let signature = reasoning_signature(item);
                if !self.open.contains_key(&key) {
                    if summary.is_empty() && signature == responses::SUMMARY_SIGNATURE {
                        return;
                    }
                    self.thinking(key.0, out);
                }
                if self.open.get(&key).is_some_and(|b| !b.streamed) && !summary.is_empty() {
                    self.delta(
                        key,
                        json!({"type": "thinking_delta", "thinking": summary}),
                        out,
                    );
                }
                self.delta(
                    key,
                    json!({"type": "signature_delta", "signature": signature}),
                    out,
                );
                self.close(key, out);
            }
            // The search comes whole when its item is done: the call
            // (its query as the input), then its results.
            "response.output_item.done" if v["item"]["type"] == "web_search_call" => {
                self.start(&Value::Null, out);
                let key = (at("output_index"), u64::MAX);
                for block in search::blocks_of_call(&v["item"]) {
                    let mut start = block.clone();
                    let input = start.get_mut("input").map(Value::take);
                    if input.is_some() {
                        start["input"] = json!({});
                    }
                    self.open(key, Kind::Tool, start, out);
                    if let Some(input) = input {
                        let delta =
                            json!({"type": "input_json_delta", "partial_json": input.to_string()});
                        self.delta(key, delta, out);
                    }
                    self.close(key, out);
                }
            }
            // A citation on the text being written (OpenAI sends its
            // annotations as the text arrives, with no cited text).
            "response.output_text.annotation.added" => {
                let key = (at("output_index"), at("content_index"));
                if self.open.contains_key(&key)
                    && let Some(citation) = search::citation(&v["annotation"], "")
                {
                    let delta = json!({"type": "citations_delta", "citation": citation});
                    self.delta(key, delta, out);
                }
            }
            "response.output_item.done" if v["item"]["type"] == "message" => {
                // Parts a server left open (no `content_part.done`).
                let item = at("output_index");
                let mut left: Vec<(u64, u64)> =
                    self.open.keys().filter(|k| k.0 == item).copied().collect();
                left.sort_by_key(|k| self.open[k].index);
                for k in left {
                    self.close(k, out);
                }
            }
            "response.completed" | "response.incomplete" => self.finish(&v["response"], out),
            "response.failed" => {
                let e = &v["response"]["error"];
                out.push(errors::anthropic_event(
                    e["code"].as_str(),
                    e["message"]
                        .as_str()
                        .unwrap_or("the upstream failed the response"),
                ));
                self.finished = true;
            }
            "error" => {
                out.push(errors::anthropic_event(
                    v["code"].as_str(),
                    v["message"]
                        .as_str()
                        .unwrap_or("the upstream reported an error"),
                ));
                self.finished = true;
            }
            _ => {}
        }
    }
}

/// A whole Responses object → a Messages object.
pub fn whole(v: &Value, model: &str, names: &ToolNames) -> Option<Value> {
    let output = v["output"].as_array()?;
    let mut content = Vec::new();
    let mut used_tools = false;
    for item in output {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    let text = part["text"].as_str().or(part["refusal"].as_str());
                    if let Some(text) = text {
                        let citations = search::citations(text, &part["annotations"]);
                        let mut block = json!({"type": "text", "text": text});
                        if !citations.is_empty() {
                            block["citations"] = citations.into();
                        }
                        content.push(block);
                    }
                }
            }
            Some("function_call") => {
                used_tools = true;
                let input: Value = item["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or_else(|| json!({}));
                content.push(json!({"type": "tool_use", "id": item["call_id"], "name": names.original(&item["name"]), "input": input}));
            }
            Some("web_search_call") => content.extend(search::blocks_of_call(item)),
            Some("reasoning") => {
                let text = super::text_of(&item["summary"]);
                let signature = reasoning_signature(item);
                // Even empty: the mark of another vendor's turn (see the stream).
                content.push(json!({"type": "thinking", "thinking": text, "signature": signature}));
            }
            _ => {}
        }
    }
    Some(json!({
        "id": message_id(v),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(v, used_tools),
        "stop_sequence": null,
        "usage": usage(&v["usage"]),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `(event, data)` pairs; the client's events as (name, data).
    fn run(events: &[(&str, Value)]) -> Vec<(String, Value)> {
        let mut s = Stream::new("claude-sonnet-4", ToolNames::default());
        let mut out = Vec::new();
        for (name, data) in events {
            s.event(Some(name), &data.to_string(), &mut out);
        }
        out.iter()
            .map(|b| {
                let text = std::str::from_utf8(b).expect("utf8");
                let name = text.lines().next().expect("line")["event: ".len()..].to_string();
                let data = text.lines().nth(1).expect("data")["data: ".len()..].to_string();
                (name, serde_json::from_str(&data).expect("json"))
            })
            .collect()
    }

    fn names(events: &[(String, Value)]) -> Vec<&str> {
        events.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn text_then_a_tool_call_with_split_arguments() {
        let out = run(&[
            (
                "response.created",
                json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}, "sequence_number": 0}),
            ),
            (
                "response.in_progress",
                json!({"type": "response.in_progress", "response": {"id": "resp_1"}, "sequence_number": 1}),
            ),
            (
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m1", "role": "assistant", "content": []}}),
            ),
            (
                "response.content_part.added",
                json!({"type": "response.content_part.added", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
            ),
            (
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hel"}),
            ),
            (
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "lo"}),
            ),
            (
                "response.output_text.done",
                json!({"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": "Hello"}),
            ),
            (
                "response.content_part.done",
                json!({"type": "response.content_part.done", "output_index": 0, "content_index": 0}),
            ),
            (
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message"}}),
            ),
            (
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "read", "arguments": ""}}),
            ),
            (
                "response.function_call_arguments.delta",
                json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"pa"}),
            ),
            (
                "response.function_call_arguments.delta",
                json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "th\": \"a\"}"}),
            ),
            (
                "response.function_call_arguments.done",
                json!({"type": "response.function_call_arguments.done", "output_index": 1, "arguments": "{\"path\": \"a\"}"}),
            ),
            (
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "call_id": "call_9", "name": "read", "arguments": "{\"path\": \"a\"}"}}),
            ),
            (
                "response.completed",
                json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 20}}}),
            ),
        ]);
        assert_eq!(
            names(&out),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(out[0].1["message"]["id"], "msg_resp_1");
        assert_eq!(out[0].1["message"]["model"], "claude-sonnet-4");
        assert_eq!(
            out[3].1["delta"],
            json!({"type": "text_delta", "text": "Hel"})
        );
        assert_eq!(
            out[6].1["content_block"],
            json!({"type": "tool_use", "id": "call_9", "name": "read", "input": {}})
        );
        assert_eq!(out[6].1["index"], 1);
        assert_eq!(
            out[8].1["delta"],
            json!({"type": "input_json_delta", "partial_json": "th\": \"a\"}"})
        );
        assert_eq!(
            out[10].1,
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"input_tokens": 40, "output_tokens": 20, "cache_read_input_tokens": 60, "cache_creation_input_tokens": 0}})
        );
    }

    #[test]
    fn reasoning_summary_becomes_a_thinking_block_and_max_tokens_stops() {
        let out = run(&[
            ("response.created", json!({"response": {"id": "r"}})),
            (
                "response.output_item.added",
                json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs"}}),
            ),
            (
                "response.reasoning_summary_part.added",
                json!({"output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
            ),
            (
                "response.reasoning_summary_text.delta",
                json!({"output_index": 0, "summary_index": 0, "delta": "Think"}),
            ),
            (
                "response.reasoning_summary_part.done",
                json!({"output_index": 0, "summary_index": 0}),
            ),
            (
                "response.content_part.added",
                json!({"output_index": 1, "content_index": 0, "part": {"type": "output_text"}}),
            ),
            (
                "response.output_text.delta",
                json!({"output_index": 1, "content_index": 0, "delta": "Partial"}),
            ),
            (
                "response.incomplete",
                json!({"response": {"id": "r", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": {"input_tokens": 5, "output_tokens": 7}}}),
            ),
        ]);
        assert_eq!(
            out[2].1["content_block"],
            json!({"type": "thinking", "thinking": "", "signature": ""})
        );
        assert_eq!(
            out[3].1["delta"],
            json!({"type": "thinking_delta", "thinking": "Think"})
        );
        assert_eq!(names(&out)[4], "content_block_stop");
        // The open text block is closed before the end.
        assert_eq!(
            names(&out)[5..],
            [
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(out[8].1["delta"]["stop_reason"], "max_tokens");
    }

    #[test]
    fn failures_become_anthropic_error_events() {
        let out = run(&[
            ("response.created", json!({"response": {"id": "r"}})),
            (
                "response.failed",
                json!({"response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}}),
            ),
        ]);
        assert_eq!(
            out.last().expect("event").1,
            json!({"type": "error", "error": {"type": "api_error", "message": "boom"}})
        );
        let out = run(&[(
            "error",
            json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "sequence_number": 2}),
        )]);
        assert_eq!(out[0].1["error"]["type"], "rate_limit_error");
        // A context overflow reported inside the stream: Claude Code's words.
        let out = run(&[
            ("response.created", json!({"response": {"id": "r"}})),
            (
                "response.failed",
                json!({"response": {"status": "failed", "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}),
            ),
        ]);
        let e = &out.last().expect("event").1["error"];
        assert_eq!(e["type"], "invalid_request_error");
        assert!(
            e["message"]
                .as_str()
                .expect("message")
                .starts_with("prompt is too long: "),
            "{e}"
        );
        // With numbers, the same words as an overflow answered with a 400.
        let message = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.";
        let out = run(&[(
            "error",
            json!({"type": "error", "code": "context_length_exceeded", "message": message}),
        )]);
        let streamed = out[0].1["error"]["message"].clone();
        let body = super::super::errors::to_anthropic(
            http::StatusCode::BAD_REQUEST,
            json!({"error": {"code": "context_length_exceeded", "message": message}})
                .to_string()
                .as_bytes(),
        );
        let body: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(
            streamed,
            "prompt is too long: 130512 tokens > 128000 maximum"
        );
        assert_eq!(streamed, body["error"]["message"]);
    }

    #[test]
    fn arguments_that_arrive_only_with_the_item_are_sent_once() {
        let out = run(&[
            (
                "response.output_item.added",
                json!({"output_index": 0, "item": {"type": "function_call", "call_id": "c", "name": "ls"}}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": {"type": "function_call", "call_id": "c", "name": "ls", "arguments": "{}"}}),
            ),
        ]);
        assert_eq!(
            names(&out),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop"
            ]
        );
    }

    #[test]
    fn a_whole_response_is_assembled() {
        let v = json!({"id": "resp_2", "status": "completed", "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{\"d\":1}"},
        ], "usage": {"input_tokens": 3, "output_tokens": 4}});
        assert_eq!(
            whole(&v, "claude", &ToolNames::default()).expect("message"),
            json!({"id": "msg_resp_2", "type": "message", "role": "assistant", "model": "claude",
                "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "weir.s1"},
                    {"type": "text", "text": "Hi"},
                    {"type": "tool_use", "id": "c1", "name": "ls", "input": {"d": 1}},
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}})
        );
    }

    /// A reasoning item's summary and encrypted content become one thinking
    /// block whose signature carries the item to the next turn.
    #[test]
    fn encrypted_reasoning_rides_in_the_signature() {
        let out = run(&[
            ("response.created", json!({"response": {"id": "r"}})),
            (
                "response.output_item.added",
                json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
            ),
            (
                "response.reasoning_summary_part.added",
                json!({"output_index": 0, "summary_index": 0}),
            ),
            (
                "response.reasoning_summary_text.delta",
                json!({"output_index": 0, "summary_index": 0, "delta": "One."}),
            ),
            (
                "response.reasoning_summary_part.done",
                json!({"output_index": 0, "summary_index": 0}),
            ),
            (
                "response.reasoning_summary_part.added",
                json!({"output_index": 0, "summary_index": 1}),
            ),
            (
                "response.reasoning_summary_text.delta",
                json!({"output_index": 0, "summary_index": 1, "delta": "Two."}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA=="}}),
            ),
            (
                "response.completed",
                json!({"response": {"id": "r", "usage": {"input_tokens": 1, "output_tokens": 1}}}),
            ),
        ]);
        assert_eq!(
            names(&out),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let thinking: String = out[3..6]
            .iter()
            .filter_map(|(_, e)| e["delta"]["thinking"].as_str())
            .collect();
        assert_eq!(thinking, "One.\n\nTwo.");
        let signature = out[6].1["delta"]["signature"].as_str().expect("signature");
        assert_eq!(
            responses::reasoning_of_signature(signature),
            Some(("rs_1".to_string(), "gAAA=="))
        );

        let v = json!({"id": "r", "output": [
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "enc"},
            {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
        ]});
        let m = whole(&v, "claude", &ToolNames::default()).expect("message");
        let bare =
            json!({"id": "r", "output": [{"type": "reasoning", "id": "rs_3", "summary": []}]});
        let bare = whole(&bare, "claude", &ToolNames::default()).expect("message");
        assert_eq!(
            bare["content"],
            json!([{"type": "thinking", "thinking": "", "signature": "weir.s1"}]),
            "the mark of another vendor's turn"
        );
        assert_eq!(m["content"][0]["thinking"], "");
        let signature = m["content"][0]["signature"].as_str().expect("signature");
        assert_eq!(
            responses::reasoning_of_signature(signature),
            Some(("rs_2".to_string(), "enc"))
        );
    }

    /// Servers that are not OpenAI's skip `content_part.added` and
    /// `output_item.added`: the Messages stream is still whole.
    #[test]
    fn a_stream_without_the_added_events_is_still_valid() {
        let out = run(&[
            ("response.created", json!({"response": {"id": "r"}})),
            (
                "response.output_text.delta",
                json!({"output_index": 0, "content_index": 0, "delta": "Hi"}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": {"type": "message", "content": []}}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 1, "item": {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}}),
            ),
            ("response.completed", json!({"response": {"id": "r"}})),
        ]);
        assert_eq!(
            names(&out),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(out[2].1["content_block"]["type"], "text");
        assert_eq!(out[5].1["content_block"]["id"], "c1");
        assert_eq!(out[6].1["delta"]["partial_json"], "{}");
        assert_eq!(out[8].1["delta"]["stop_reason"], "tool_use");
    }

    /// OpenAI's search reaches Claude Code as Anthropic's two blocks
    /// (weir's id and mark; the query as the input) and its annotation as
    /// a citation on the open text block.
    #[test]
    fn a_web_search_call_becomes_search_blocks_and_citations() {
        let out = run(&[
            (
                "response.created",
                json!({"response": {"id": "r1", "status": "in_progress"}}),
            ),
            (
                "response.output_item.added",
                json!({"output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "status": "completed",
                    "action": {"type": "search", "query": "is it", "sources": [{"type": "url", "url": "https://u.example"}]}}}),
            ),
            (
                "response.content_part.added",
                json!({"output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
            ),
            (
                "response.output_text.delta",
                json!({"output_index": 1, "content_index": 0, "delta": "Yes."}),
            ),
            (
                "response.output_text.annotation.added",
                json!({"output_index": 1, "content_index": 0, "annotation_index": 0,
                    "annotation": {"type": "url_citation", "start_index": 0, "end_index": 4, "url": "https://u.example", "title": "U"}}),
            ),
            (
                "response.content_part.done",
                json!({"output_index": 1, "content_index": 0}),
            ),
            (
                "response.completed",
                json!({"response": {"id": "r1", "usage": {"input_tokens": 5, "output_tokens": 3}}}),
            ),
        ]);
        assert_eq!(
            names(&out),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        let used = &out[2].1["content_block"];
        assert_eq!(
            used,
            &json!({"type": "server_tool_use", "id": "srvtoolu_weir_ws_1", "name": "web_search", "input": {}})
        );
        assert_eq!(
            out[3].1["delta"],
            json!({"type": "input_json_delta", "partial_json": "{\"query\":\"is it\"}"})
        );
        let result = &out[5].1["content_block"];
        assert_eq!(result["tool_use_id"], "srvtoolu_weir_ws_1");
        assert_eq!(result["content"][0]["url"], "https://u.example");
        assert_eq!(result["content"][0]["encrypted_content"], "weir.w1");
        let citation = &out[9].1["delta"];
        assert_eq!(citation["type"], "citations_delta");
        assert_eq!(citation["citation"]["url"], "https://u.example");
        assert_eq!(citation["citation"]["encrypted_index"], "weir.w1");
        assert_eq!(out[11].1["delta"]["stop_reason"], "end_turn");

        // Whole, the same blocks, the citation citing its span.
        let response = json!({"id": "r1", "usage": {}, "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "is it"}},
            {"type": "message", "content": [{"type": "output_text", "text": "So: yes.",
                "annotations": [{"type": "url_citation", "start_index": 4, "end_index": 8, "url": "https://u.example", "title": "U"}]}]},
        ]});
        let message = whole(&response, "claude", &ToolNames::default()).expect("whole");
        let content = message["content"].as_array().expect("content");
        assert_eq!(content[0]["type"], "server_tool_use");
        assert_eq!(content[1]["type"], "web_search_tool_result");
        assert_eq!(content[2]["citations"][0]["cited_text"], "yes.");
        assert_eq!(message["stop_reason"], "end_turn");
    }
}
