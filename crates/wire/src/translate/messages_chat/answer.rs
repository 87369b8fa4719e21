//! A Chat Completions answer → an Anthropic Messages answer, streamed
//! chunk by chunk or whole.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::anthropic::{self, block, stop};
use crate::chat::{self, finish};
use crate::translate::ToolNames;
use crate::translate::shared::errors;

/// The stop reason: `tool_use` whenever the answer called tools, whatever
/// the server's finish reason says (many say `stop`), unless it was cut
/// short (the calls' arguments are then cut too).
fn stop_reason(finish: Option<&str>, used_tools: bool) -> &'static str {
    match finish {
        Some(finish::LENGTH) => stop::MAX_TOKENS,
        _ if used_tools => stop::TOOL_USE,
        Some(finish::TOOL_CALLS | finish::FUNCTION_CALL) => stop::TOOL_USE,
        Some(finish::CONTENT_FILTER) => stop::REFUSAL,
        _ => stop::END_TURN,
    }
}

/// The most of a tool call's arguments held while its id has not come.
const MAX_HELD_ARGUMENTS: usize = 64 * 1024;

/// A tool call whose id has not arrived yet (some servers send it after
/// the first arguments chunk): held until it does, or the call ends.
struct Pending {
    index: u64,
    name: Value,
    arguments: String,
}

/// Anthropic's usage from a Chat Completions `usage`.
fn usage(u: &Value) -> Value {
    anthropic::usage_value(chat::usage(u).unwrap_or_default())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A tool call, by its index in `delta.tool_calls`.
    Tool(u64),
}

pub struct Stream {
    model: String,
    started: bool,
    next_index: usize,
    /// The block being written and its Anthropic index: chat chunks
    /// interleave nothing, so one block is open at a time.
    open: Option<(Open, usize)>,
    /// The id of the open tool call: a chunk with another id starts a new
    /// one, even at the same index.
    tool_id: Value,
    pending: Option<Pending>,
    used_tools: bool,
    finish: Option<String>,
    usage: Value,
    done: bool,
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
            open: None,
            tool_id: Value::Null,
            pending: None,
            used_tools: false,
            finish: None,
            usage: Value::Null,
            done: false,
        }
    }

    fn start(&mut self, id: &Value, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        anthropic::opening(id.as_str().unwrap_or("translated"), &self.model, out);
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if let Some((Open::Thinking, index)) = self.open {
            // Marked as weir's: never sent to Anthropic as signed by it,
            // sent back to a Chat server as `reasoning_content`.
            Self::delta(
                index,
                json!({"type": anthropic::delta::SIGNATURE, "signature": chat::REASONING_SIGNATURE}),
                out,
            );
        }
        if let Some((_, index)) = self.open.take() {
            out.push(anthropic::block_stop(index));
        }
    }

    /// Make `want` the open block, starting it with `block` if it is not.
    fn ensure(&mut self, want: Open, block: Value, out: &mut Vec<Bytes>) -> usize {
        if let Some((open, index)) = self.open
            && open == want
        {
            return index;
        }
        self.flush_pending(out);
        self.close(out);
        self.begin(want, block, out)
    }

    fn begin(&mut self, want: Open, block: Value, out: &mut Vec<Bytes>) -> usize {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        out.push(anthropic::block_start(index, &block));
        self.open = Some((want, index));
        index
    }

    fn delta(index: usize, delta: Value, out: &mut Vec<Bytes>) {
        out.push(anthropic::block_delta(index, &delta));
    }

    /// Start a tool block for call `index` with `id`, and write its
    /// arguments.
    fn tool(&mut self, index: u64, id: Value, name: &Value, args: &str, out: &mut Vec<Bytes>) {
        self.used_tools = true;
        let block = json!({"type": block::TOOL_USE, "id": id, "name": self.names.original(name), "input": {}});
        self.tool_id = id;
        let i = self.begin(Open::Tool(index), block, out);
        if !args.is_empty() {
            Self::delta(
                i,
                json!({"type": anthropic::delta::INPUT_JSON, "partial_json": args}),
                out,
            );
        }
    }

    /// A held call whose id never came: it gets one of weir's.
    fn flush_pending(&mut self, out: &mut Vec<Bytes>) {
        if let Some(p) = self.pending.take() {
            let id = format!("call_weir_{}_{}", p.index, self.next_index);
            self.tool(p.index, id.into(), &p.name, &p.arguments, out);
        }
    }

    /// One entry of a chunk's `delta.tool_calls`.
    fn tool_call(&mut self, call: &Value, out: &mut Vec<Bytes>) {
        let n = call["index"].as_u64().unwrap_or(0);
        let f = &call["function"];
        let id = call["id"].as_str().filter(|i| !i.is_empty());
        let args = f["arguments"].as_str().unwrap_or_default();
        let continues = matches!(self.open, Some((Open::Tool(k), _)) if k == n)
            && id.is_none_or(|id| self.tool_id == id);
        if continues {
            if let (Some((_, i)), false) = (self.open, args.is_empty()) {
                Self::delta(
                    i,
                    json!({"type": anthropic::delta::INPUT_JSON, "partial_json": args}),
                    out,
                );
            }
            return;
        }
        let held = self.pending.take_if(|p| p.index == n);
        let Some(id) = id else {
            let mut p = held.unwrap_or(Pending {
                index: n,
                name: Value::Null,
                arguments: String::new(),
            });
            if f["name"].as_str().is_some_and(|s| !s.is_empty()) {
                p.name = f["name"].clone();
            }
            p.arguments.push_str(args);
            self.flush_pending(out);
            // An id arrives with the first chunks or not at all: past the
            // bound the call goes on under weir's id, so an upstream that
            // never sends one cannot grow what is held.
            let over = p.arguments.len() > MAX_HELD_ARGUMENTS;
            self.pending = Some(p);
            if over {
                self.flush_pending(out);
            }
            return;
        };
        self.flush_pending(out);
        let (name, mut arguments) = match held {
            Some(p) => (p.name, p.arguments),
            None => (Value::Null, String::new()),
        };
        let name = if f["name"].as_str().is_some_and(|s| !s.is_empty()) {
            f["name"].clone()
        } else {
            name
        };
        arguments.push_str(args);
        self.tool(n, id.into(), &name, &arguments, out);
    }

    fn end(&mut self, out: &mut Vec<Bytes>) {
        if self.done {
            return;
        }
        self.done = true;
        self.start(&Value::Null, out);
        self.flush_pending(out);
        self.close(out);
        let stop = stop_reason(self.finish.as_deref(), self.used_tools);
        anthropic::closing(stop, usage(&self.usage), out);
    }

    pub fn event(&mut self, data: &str, out: &mut Vec<Bytes>) {
        if data.trim() == chat::DONE {
            self.end(out);
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if v["error"].is_object() {
            let e = &v["error"];
            out.push(errors::anthropic_event(
                e["code"].as_str(),
                e["message"]
                    .as_str()
                    .unwrap_or("the upstream reported an error"),
            ));
            self.done = true;
            return;
        }
        self.start(&v["id"], out);
        if v["usage"].is_object() {
            self.usage = v["usage"].clone();
        }
        let Some(choice) = v["choices"].get(0) else {
            return;
        };
        let delta = &choice["delta"];
        let reasoning = delta["reasoning_content"]
            .as_str()
            .or(delta["reasoning"].as_str());
        if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
            let i = self.ensure(
                Open::Thinking,
                json!({"type": block::THINKING, "thinking": "", "signature": ""}),
                out,
            );
            Self::delta(
                i,
                json!({"type": anthropic::delta::THINKING, "thinking": r}),
                out,
            );
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            let i = self.ensure(Open::Text, json!({"type": block::TEXT, "text": ""}), out);
            Self::delta(
                i,
                json!({"type": anthropic::delta::TEXT, "text": text}),
                out,
            );
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            self.tool_call(call, out);
        }
        if let Some(finish) = choice["finish_reason"].as_str() {
            self.finish = Some(finish.to_string());
            self.flush_pending(out);
            self.close(out);
        }
    }
}

/// A whole chat completion → a Messages object.
pub(in crate::translate) fn whole(v: &Value, model: &str, names: &ToolNames) -> Option<Value> {
    let choice = v["choices"].get(0)?;
    let m = &choice["message"];
    let mut content = Vec::new();
    if let Some(r) = m["reasoning_content"].as_str().filter(|r| !r.is_empty()) {
        content.push(
            json!({"type": block::THINKING, "thinking": r, "signature": chat::REASONING_SIGNATURE}),
        );
    }
    if let Some(t) = m["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": block::TEXT, "text": t}));
    }
    for call in m["tool_calls"].as_array().into_iter().flatten() {
        let input: Value = call["function"]["arguments"]
            .as_str()
            .and_then(|a| serde_json::from_str(a).ok())
            .unwrap_or_else(|| json!({}));
        content.push(json!({"type": block::TOOL_USE, "id": call["id"], "name": names.original(&call["function"]["name"]), "input": input}));
    }
    Some(json!({
        "id": format!("msg_{}", v["id"].as_str().unwrap_or("translated")),
        "type": anthropic::MESSAGE,
        "role": anthropic::role::ASSISTANT,
        "model": model,
        "content": content,
        "stop_reason": stop_reason(choice["finish_reason"].as_str(), !m["tool_calls"].as_array().is_none_or(Vec::is_empty)),
        "stop_sequence": null,
        "usage": usage(&v["usage"]),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> Vec<(String, Value)> {
        let mut s = Stream::new("claude-x", ToolNames::default());
        let mut out = Vec::new();
        for c in chunks {
            s.event(c, &mut out);
        }
        out.iter()
            .map(|b| {
                let text = std::str::from_utf8(b).expect("utf8");
                let mut lines = text.lines();
                let name = lines.next().expect("event")["event: ".len()..].to_string();
                let data = &lines.next().expect("data")["data: ".len()..];
                (name, serde_json::from_str(data).expect("json"))
            })
            .collect()
    }

    #[test]
    fn a_tool_call_whose_id_never_comes_is_held_only_up_to_its_bound() {
        let piece = "x".repeat(1024);
        let chunk = format!(
            r#"{{"id":"c1","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"name":"read","arguments":"{piece}"}}}}]}},"finish_reason":null}}]}}"#
        );
        let mut s = Stream::new("claude-x", ToolNames::default());
        let mut out = Vec::new();
        for _ in 0..200 {
            s.event(&chunk, &mut out);
        }
        let held = s.pending.as_ref().map_or(0, |p| p.arguments.len());
        assert_eq!(
            held, 0,
            "nothing is held once the call went on under weir's id"
        );
        let sent: usize = out.iter().map(Bytes::len).sum();
        assert!(sent > 190 * 1024, "the arguments were passed on: {sent}");
        assert!(
            out.iter()
                .any(|b| std::str::from_utf8(b).is_ok_and(|t| t.contains("call_weir_0_"))),
            "the call got weir's id"
        );
    }

    #[test]
    fn text_and_two_tool_calls_with_the_final_usage_chunk() {
        let out = run(&[
            r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Look"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"p\":"}}]},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":10}}}"#,
            "[DONE]",
        ]);
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(
            out[5].1["content_block"],
            json!({"type": "tool_use", "id": "call_a", "name": "read", "input": {}})
        );
        assert_eq!(out[6].1["delta"]["partial_json"], "{\"p\":");
        assert_eq!(out[9].1["index"], 2);
        assert_eq!(
            out[12].1,
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"input_tokens": 40, "output_tokens": 9, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 0}})
        );
    }

    #[test]
    fn reasoning_content_length_stop_and_errors() {
        let out = run(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"A"},"finish_reason":"length"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(out[2].1["content_block"]["type"], "thinking");
        assert_eq!(
            out[3].1["delta"],
            json!({"type": "thinking_delta", "thinking": "hmm"})
        );
        assert_eq!(out[out.len() - 2].1["delta"]["stop_reason"], "max_tokens");
        let out = run(&[r#"{"error":{"message":"quota","code":"rate_limit_exceeded"}}"#]);
        assert_eq!(
            out[0].1,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "quota"}})
        );
    }

    #[test]
    fn a_whole_completion_is_assembled() {
        let v: Value = serde_json::from_str(r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","tool_calls":[{"id":"t","type":"function","function":{"name":"ls","arguments":"{\"a\":2}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#).expect("json");
        let m = whole(&v, "claude", &ToolNames::default()).expect("message");
        assert_eq!(
            m["content"],
            json!([{"type": "text", "text": "Hi"}, {"type": "tool_use", "id": "t", "name": "ls", "input": {"a": 2}}])
        );
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(m["usage"]["input_tokens"], 7);
    }

    /// Chat servers that are not OpenAI's: a call's id after its first
    /// arguments, a second call at the same index with a new id, `stop` as
    /// the finish reason of a tool call, usage in a chunk with no choices.
    #[test]
    fn tolerant_of_servers_that_are_not_the_reference() {
        let out = run(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"read","arguments":"{\"p\""}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":":1}"}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"name":"ls","arguments":"{}"}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#,
            "[DONE]",
        ]);
        let starts: Vec<&Value> = out
            .iter()
            .filter(|(n, _)| n == "content_block_start")
            .map(|(_, e)| &e["content_block"])
            .collect();
        assert_eq!(
            starts,
            [
                &json!({"type": "tool_use", "id": "call_a", "name": "read", "input": {}}),
                &json!({"type": "tool_use", "id": "call_b", "name": "ls", "input": {}}),
            ]
        );
        let args: Vec<&str> = out
            .iter()
            .filter_map(|(_, e)| e["delta"]["partial_json"].as_str())
            .collect();
        assert_eq!(args, ["{\"p\":1}", "{}"]);
        let end = &out[out.len() - 2].1;
        assert_eq!(end["delta"]["stop_reason"], "tool_use");
        assert_eq!(end["usage"]["output_tokens"], 3);

        // A call whose id never comes gets one.
        let out = run(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"ls","arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        let id = out[2].1["content_block"]["id"].as_str().expect("id");
        assert!(!id.is_empty());
    }

    /// Reasoning from a Chat server is marked as weir's, so it is never
    /// sent to Anthropic as signed, and goes back to a Chat server.
    #[test]
    fn chat_reasoning_is_marked_as_weirs() {
        let out = run(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"A"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            out[4].1["delta"],
            json!({"type": "signature_delta", "signature": chat::REASONING_SIGNATURE})
        );
        assert_eq!(out[5].0, "content_block_stop");
        let v = json!({"id": "x", "choices": [{"message": {"reasoning_content": "r", "content": "A"}, "finish_reason": "stop"}]});
        let m = whole(&v, "claude", &ToolNames::default()).expect("message");
        assert_eq!(m["content"][0]["signature"], chat::REASONING_SIGNATURE);
    }
}
