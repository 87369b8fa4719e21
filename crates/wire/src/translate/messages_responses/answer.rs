//! An OpenAI Responses answer → an Anthropic Messages answer, streamed
//! event by event or whole.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::anthropic::{self, block, stop};
use crate::responses::{item, part};
use crate::translate::ToolNames;
use crate::translate::shared::blocks::text_of;
use crate::translate::shared::{errors, search};
use crate::{responses, type_of};

/// Anthropic's usage from a Responses `usage`.
fn usage(u: &Value) -> Value {
    anthropic::usage_value(responses::usage(u).unwrap_or_default())
}

fn stop_reason(response: &Value, used_tools: bool) -> &'static str {
    match response["incomplete_details"]["reason"].as_str() {
        Some(responses::incomplete::MAX_OUTPUT_TOKENS) => stop::MAX_TOKENS,
        Some(responses::incomplete::CONTENT_FILTER) => stop::REFUSAL,
        _ if used_tools => stop::TOOL_USE,
        _ => stop::END_TURN,
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
                json!({"type": block::THINKING, "thinking": "", "signature": ""}),
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

    /// One event of the Responses stream, handed to what it is about: the
    /// response as a whole, a text part, an output item, a reasoning
    /// summary, or a failure. The state they share is the stream's.
    pub fn event(&mut self, name: Option<&str>, data: &str, out: &mut Vec<Bytes>) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let kind = name.or(type_of(&v)).unwrap_or("");
        match kind {
            responses::event::CREATED | responses::event::IN_PROGRESS => {
                self.start(&v["response"], out)
            }
            responses::event::CONTENT_PART_ADDED
            | responses::event::OUTPUT_TEXT_DELTA
            | responses::event::REFUSAL_DELTA
            | responses::event::OUTPUT_TEXT_ANNOTATION_ADDED
            | responses::event::CONTENT_PART_DONE => self.text(kind, &v, out),
            responses::event::OUTPUT_ITEM_ADDED => self.item_added(&v, out),
            responses::event::FUNCTION_CALL_ARGUMENTS_DELTA => {
                let key = (at(&v, "output_index"), u64::MAX);
                self.delta(
                    key,
                    json!({"type": anthropic::delta::INPUT_JSON, "partial_json": v["delta"]}),
                    out,
                );
            }
            responses::event::REASONING_SUMMARY_PART_ADDED
            | responses::event::REASONING_SUMMARY_TEXT_DELTA => self.summary(kind, &v, out),
            responses::event::OUTPUT_ITEM_DONE => self.item_done(&v, out),
            responses::event::COMPLETED | responses::event::INCOMPLETE => {
                self.finish(&v["response"], out)
            }
            responses::event::FAILED => self.failed(
                &v["response"]["error"],
                "the upstream failed the response",
                out,
            ),
            responses::event::ERROR => self.failed(&v, "the upstream reported an error", out),
            _ => {}
        }
    }

    /// The events of a text part (a refusal's too): its start, its pieces,
    /// the citations on it, its end.
    fn text(&mut self, kind: &str, v: &Value, out: &mut Vec<Bytes>) {
        let key = (at(v, "output_index"), at(v, "content_index"));
        match kind {
            responses::event::CONTENT_PART_ADDED => {
                self.start(&Value::Null, out);
                if matches!(type_of(&v["part"]), Some(part::OUTPUT_TEXT | part::REFUSAL)) {
                    self.open(
                        key,
                        Kind::Text,
                        json!({"type": block::TEXT, "text": ""}),
                        out,
                    );
                }
            }
            responses::event::OUTPUT_TEXT_DELTA | responses::event::REFUSAL_DELTA => {
                // Servers that are not OpenAI's may send no
                // `content_part.added`: the first delta opens the block.
                if !self.open.contains_key(&key) {
                    self.start(&Value::Null, out);
                    self.open(
                        key,
                        Kind::Text,
                        json!({"type": block::TEXT, "text": ""}),
                        out,
                    );
                }
                self.delta(
                    key,
                    json!({"type": anthropic::delta::TEXT, "text": v["delta"]}),
                    out,
                );
            }
            // A citation on the text being written (OpenAI sends its
            // annotations as the text arrives, with no cited text).
            responses::event::OUTPUT_TEXT_ANNOTATION_ADDED => {
                if self.open.contains_key(&key)
                    && let Some(citation) = search::citation(&v["annotation"], "")
                {
                    let delta = json!({"type": anthropic::delta::CITATIONS, "citation": citation});
                    self.delta(key, delta, out);
                }
            }
            responses::event::CONTENT_PART_DONE => self.close(key, out),
            _ => {}
        }
    }

    /// An output item begins. A function call opens its tool block; a
    /// reasoning item its thinking block. (A message's parts open with
    /// their own events; a search comes whole when it is done.)
    ///
    /// One thinking block per reasoning item, its summary parts joined,
    /// closed when the item is done: only then does the encrypted
    /// reasoning its signature carries arrive. A reasoning item with
    /// nothing to show or carry still gives one (empty, signed `weir.s1`):
    /// sent back, it marks the turn as another vendor's, which is what lets
    /// a later native request to Anthropic be rewritten (thinking off)
    /// rather than refused.
    fn item_added(&mut self, v: &Value, out: &mut Vec<Bytes>) {
        let output_index = at(v, "output_index");
        match type_of(&v["item"]) {
            Some(item::FUNCTION_CALL) => self.open_call(output_index, &v["item"], out),
            Some(item::REASONING) => {
                self.thinking(output_index, out);
            }
            _ => {}
        }
    }

    /// The tool block of function call `item`.
    fn open_call(&mut self, output_index: u64, item: &Value, out: &mut Vec<Bytes>) {
        self.start(&Value::Null, out);
        self.used_tools = true;
        self.open(
            (output_index, u64::MAX),
            Kind::Tool,
            json!({"type": block::TOOL_USE, "id": item["call_id"], "name": self.names.original(&item["name"]), "input": {}}),
            out,
        );
    }

    /// A piece of a reasoning item's summary: a new part (joined to the
    /// one before by a blank line) or text of one, in its thinking block.
    fn summary(&mut self, kind: &str, v: &Value, out: &mut Vec<Bytes>) {
        let key = self.thinking(at(v, "output_index"), out);
        if kind == responses::event::REASONING_SUMMARY_TEXT_DELTA {
            self.delta(
                key,
                json!({"type": anthropic::delta::THINKING, "thinking": v["delta"]}),
                out,
            );
        } else if at(v, "summary_index") > 0 {
            self.delta(
                key,
                json!({"type": anthropic::delta::THINKING, "thinking": "\n\n"}),
                out,
            );
        }
    }

    /// An output item ends: what it carries whole (a call's arguments, a
    /// reasoning item's signature, a search) is sent, and its blocks closed.
    fn item_done(&mut self, v: &Value, out: &mut Vec<Bytes>) {
        let output_index = at(v, "output_index");
        let done = &v["item"];
        match type_of(done) {
            Some(item::FUNCTION_CALL) => self.call_done(output_index, done, out),
            Some(item::REASONING) => self.reasoning_done(output_index, done, out),
            Some(item::WEB_SEARCH_CALL) => self.search_done(output_index, done, out),
            Some(item::MESSAGE) => self.message_done(output_index, out),
            _ => {}
        }
    }

    /// A function call is done: its arguments, if none came in deltas.
    fn call_done(&mut self, output_index: u64, item: &Value, out: &mut Vec<Bytes>) {
        let key = (output_index, u64::MAX);
        if !self.open.contains_key(&key) {
            // No `output_item.added` came: the call arrives whole.
            self.open_call(output_index, item, out);
        }
        if let Some(b) = self.open.get(&key)
            && b.kind == Kind::Tool
            && !b.streamed
            && let Some(args) = item["arguments"].as_str()
            && !args.is_empty()
        {
            self.delta(
                key,
                json!({"type": anthropic::delta::INPUT_JSON, "partial_json": args}),
                out,
            );
        }
        self.close(key, out);
    }

    /// A reasoning item is done: its summary, if none came in deltas, and
    /// the signature that carries it to the next turn.
    fn reasoning_done(&mut self, output_index: u64, item: &Value, out: &mut Vec<Bytes>) {
        let key = (output_index, REASONING);
        let summary = text_of(&item["summary"]);
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
                json!({"type": anthropic::delta::THINKING, "thinking": summary}),
                out,
            );
        }
        self.delta(
            key,
            json!({"type": anthropic::delta::SIGNATURE, "signature": signature}),
            out,
        );
        self.close(key, out);
    }

    /// The search comes whole when its item is done: the call (its query
    /// as the input), then its results.
    fn search_done(&mut self, output_index: u64, item: &Value, out: &mut Vec<Bytes>) {
        self.start(&Value::Null, out);
        let key = (output_index, u64::MAX);
        for block in search::blocks_of_call(item) {
            let mut start = block.clone();
            let input = start.get_mut("input").map(Value::take);
            if input.is_some() {
                start["input"] = json!({});
            }
            self.open(key, Kind::Tool, start, out);
            if let Some(input) = input {
                let delta = json!({"type": anthropic::delta::INPUT_JSON, "partial_json": input.to_string()});
                self.delta(key, delta, out);
            }
            self.close(key, out);
        }
    }

    /// A message is done: the parts a server left open (no
    /// `content_part.done`) close, in the order they opened.
    fn message_done(&mut self, output_index: u64, out: &mut Vec<Bytes>) {
        let mut left: Vec<(u64, u64)> = self
            .open
            .keys()
            .filter(|k| k.0 == output_index)
            .copied()
            .collect();
        left.sort_by_key(|k| self.open[k].index);
        for k in left {
            self.close(k, out);
        }
    }

    /// The upstream failed the response: Anthropic's error event, and the
    /// stream is over.
    fn failed(&mut self, error: &Value, otherwise: &str, out: &mut Vec<Bytes>) {
        out.push(errors::anthropic_event(
            error["code"].as_str(),
            error["message"].as_str().unwrap_or(otherwise),
        ));
        self.finished = true;
    }
}

/// An index an event names (output, content, summary): 0 when it names
/// none.
fn at(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

/// A whole Responses object → a Messages object.
pub(in crate::translate) fn whole(v: &Value, model: &str, names: &ToolNames) -> Option<Value> {
    let output = v["output"].as_array()?;
    let mut content = Vec::new();
    let mut used_tools = false;
    for o in output {
        match type_of(o) {
            Some(item::MESSAGE) => {
                for p in o["content"].as_array().into_iter().flatten() {
                    let text = p["text"].as_str().or(p["refusal"].as_str());
                    if let Some(text) = text {
                        let citations = search::citations(text, &p["annotations"]);
                        let mut b = json!({"type": block::TEXT, "text": text});
                        if !citations.is_empty() {
                            b["citations"] = citations.into();
                        }
                        content.push(b);
                    }
                }
            }
            Some(item::FUNCTION_CALL) => {
                used_tools = true;
                let input: Value = o["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or_else(|| json!({}));
                content.push(json!({"type": block::TOOL_USE, "id": o["call_id"], "name": names.original(&o["name"]), "input": input}));
            }
            Some(item::WEB_SEARCH_CALL) => content.extend(search::blocks_of_call(o)),
            Some(item::REASONING) => {
                let text = text_of(&o["summary"]);
                let signature = reasoning_signature(o);
                // Even empty: the mark of another vendor's turn (see the stream).
                content.push(
                    json!({"type": block::THINKING, "thinking": text, "signature": signature}),
                );
            }
            _ => {}
        }
    }
    Some(json!({
        "id": message_id(v),
        "type": anthropic::MESSAGE,
        "role": anthropic::role::ASSISTANT,
        "model": model,
        "content": content,
        "stop_reason": stop_reason(v, used_tools),
        "stop_sequence": null,
        "usage": usage(&v["usage"]),
    }))
}

#[cfg(test)]
mod tests;
