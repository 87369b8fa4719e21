//! A Messages stream → the Responses event sequence Codex needs.

use bytes::Bytes;
use serde_json::{Value, json};

use super::CUSTOM_INPUT;
use crate::anthropic::{self, block, delta};
use crate::responses::{self, item, part, status};
use crate::translate::ToolNames;
use crate::translate::shared::{errors, search};
use crate::{Usage, sse, type_of};

/// An output item being built from one Anthropic content block.
struct Item {
    output_index: usize,
    id: String,
    kind: ItemKind,
    text: String,
}

enum ItemKind {
    /// Text, with the citations of the search results it rests on.
    Message {
        citations: Vec<Value>,
    },
    /// Anthropic's web search (a `server_tool_use` block): its text is the
    /// JSON of the block's input until the block ends.
    Search,
    Function {
        call_id: Value,
        name: Value,
    },
    /// A call of a freeform tool: its text is the JSON of the Anthropic
    /// input (`{"input": …}`) until the block ends.
    Custom {
        call_id: Value,
        name: Value,
    },
    /// Thinking, with what carries it to the next turn: the signature
    /// (filled by `signature_delta`) or a redacted block's data.
    Reasoning {
        signature: String,
        redacted: Option<Value>,
    },
}

impl Item {
    fn value(&self, state: &str) -> Value {
        match &self.kind {
            ItemKind::Message { citations } => json!({
                "id": self.id, "type": item::MESSAGE, "status": state, "role": responses::role::ASSISTANT,
                "content": if state == status::COMPLETED {
                    json!([{"type": part::OUTPUT_TEXT, "text": self.text,
                        "annotations": search::annotations(&Value::Array(citations.clone()), &self.text)}])
                } else { json!([]) },
            }),
            ItemKind::Search => {
                let mut call = search::call_of_block(&json!({
                    "name": anthropic::WEB_SEARCH_NAME,
                    "input": serde_json::from_str::<Value>(&self.text).unwrap_or_default(),
                }))
                .unwrap_or_default();
                call["id"] = self.id.clone().into();
                call["status"] = state.into();
                if state != status::COMPLETED {
                    call.as_object_mut().map(|m| m.remove("action"));
                }
                call
            }
            ItemKind::Function { call_id, name } => json!({
                "id": self.id, "type": item::FUNCTION_CALL, "status": state,
                "call_id": call_id, "name": name, "arguments": self.text,
            }),
            ItemKind::Custom { call_id, name } => json!({
                "id": self.id, "type": item::CUSTOM_TOOL_CALL, "status": state,
                "call_id": call_id, "name": name, "input": custom_input(&self.text),
            }),
            ItemKind::Reasoning {
                signature,
                redacted,
            } => {
                let mut reasoning = json!({
                    "id": self.id, "type": item::REASONING,
                    "summary": if state == status::COMPLETED && redacted.is_none() {
                        json!([{"type": part::SUMMARY_TEXT, "text": self.text}])
                    } else { json!([]) },
                });
                if state == status::COMPLETED {
                    let thinking = match redacted {
                        Some(data) => json!({"type": block::REDACTED_THINKING, "data": data}),
                        None => {
                            json!({"type": block::THINKING, "thinking": self.text, "signature": signature})
                        }
                    };
                    reasoning["encrypted_content"] = responses::block_content(&thinking).into();
                }
                reasoning
            }
        }
    }
}

/// What a delta adds to the kept answer: its text, or (a citation, or
/// anything else) its whole event.
fn kept(delta: &Value, event_len: usize) -> usize {
    ["text", "partial_json", "signature", "thinking"]
        .iter()
        .find_map(|k| delta[*k].as_str())
        .map_or(event_len, str::len)
}

/// The text of a freeform tool call from the JSON of its Anthropic input.
fn custom_input(json: &str) -> String {
    serde_json::from_str::<Value>(json)
        .ok()
        .and_then(|v| v[CUSTOM_INPUT].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The most of an answer a translated Responses stream keeps for its final
/// events (`response.completed` carries the whole output): 16 times a
/// 128k-token answer's text. Past it the stream is ended with an error
/// ([`Stream::over_bound`]), so a never-ending upstream cannot grow it
/// without limit.
pub(super) const MAX_RETAINED: usize = 8 << 20;

pub struct Stream {
    /// Bytes of the answer kept so far (block starts, and the text of
    /// every delta), toward [`MAX_RETAINED`].
    retained: usize,
    model: String,
    id: String,
    created_at: u64,
    sequence: u64,
    /// The item of the open Anthropic block.
    current: Option<Item>,
    done: Vec<Value>,
    stop_reason: Option<String>,
    usage: Usage,
    finished: bool,
    /// The request's freeform tools and whether Codex set a limit.
    names: ToolNames,
}

impl Stream {
    pub fn new(model: &str, names: ToolNames) -> Self {
        Stream {
            retained: 0,
            names,
            model: model.to_string(),
            id: "resp_translated".into(),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            sequence: 0,
            current: None,
            done: Vec::new(),
            stop_reason: None,
            usage: Usage::default(),
            finished: false,
        }
    }

    fn emit(&mut self, kind: &str, mut data: Value, out: &mut Vec<Bytes>) {
        data["type"] = kind.into();
        data["sequence_number"] = self.sequence.into();
        self.sequence += 1;
        out.push(sse::event(kind, &data));
    }

    fn response(&self, state: &str) -> Value {
        json!({
            "id": self.id, "object": "response", "created_at": self.created_at,
            "status": state, "model": self.model, "output": self.done,
            "usage": if state == status::IN_PROGRESS { Value::Null } else { responses::usage_value(self.usage) },
            "error": null, "incomplete_details": null,
        })
    }

    fn item_ref(&self, item: &Item) -> Value {
        json!({"item_id": item.id, "output_index": item.output_index})
    }

    /// One event of the Messages stream, handed to what it is about: the
    /// message's start, a content block's start, deltas and end, the
    /// message's last word (stop reason, usage), its end, or an error. The
    /// state they share is the stream's.
    pub fn event(&mut self, name: Option<&str>, data: &str, out: &mut Vec<Bytes>) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let kind = name.or(type_of(&v)).unwrap_or("");
        match kind {
            anthropic::event::MESSAGE_START => self.message_start(&v, out),
            anthropic::event::CONTENT_BLOCK_START => {
                self.retained = self.retained.saturating_add(data.len());
                self.block_start(&v["content_block"], out);
            }
            anthropic::event::CONTENT_BLOCK_DELTA => {
                self.retained = self.retained.saturating_add(kept(&v["delta"], data.len()));
                self.block_delta(&v["delta"], out);
            }
            anthropic::event::CONTENT_BLOCK_STOP => self.block_stop(out),
            anthropic::event::MESSAGE_DELTA => {
                if let Some(r) = v["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(r.to_string());
                }
                anthropic::update_usage(&mut self.usage, &v["usage"]);
            }
            anthropic::event::MESSAGE_STOP => self.finish(out),
            anthropic::event::ERROR => {
                let (code, message) = errors::responses_failure(&v);
                let mut r = self.response(status::FAILED);
                r["error"] = json!({"code": code, "message": message});
                self.emit(responses::event::FAILED, json!({"response": r}), out);
                self.finished = true;
            }
            _ => {}
        }
    }

    /// Whether the answer kept for the final events is past
    /// [`MAX_RETAINED`]: the caller ends the stream with an error.
    pub fn over_bound(&self) -> bool {
        self.retained > MAX_RETAINED
    }

    /// The message starts: the response is created and in progress, under
    /// the message's id and with the usage it starts with.
    fn message_start(&mut self, v: &Value, out: &mut Vec<Bytes>) {
        let (id, usage) = anthropic::message_started(v);
        if let Some(id) = id {
            self.id = format!("resp_{id}");
        }
        self.usage = usage;
        let r = self.response(status::IN_PROGRESS);
        self.emit(responses::event::CREATED, json!({"response": r}), out);
        let r = self.response(status::IN_PROGRESS);
        self.emit(responses::event::IN_PROGRESS, json!({"response": r}), out);
    }

    /// The output item a content block becomes, with the prefix of its id;
    /// none for a block Codex has no item for.
    fn item_kind(&self, b: &Value) -> Option<(&'static str, ItemKind)> {
        Some(match type_of(b) {
            Some(block::TEXT) => (
                "msg",
                ItemKind::Message {
                    citations: b["citations"].as_array().cloned().unwrap_or_default(),
                },
            ),
            Some(block::SERVER_TOOL_USE) if b["name"] == anthropic::WEB_SEARCH_NAME => {
                ("ws", ItemKind::Search)
            }
            Some(block::TOOL_USE) if self.names.is_custom(&b["name"]) => (
                "ctc",
                ItemKind::Custom {
                    call_id: b["id"].clone(),
                    name: b["name"].clone(),
                },
            ),
            Some(block::TOOL_USE) => (
                "fc",
                ItemKind::Function {
                    call_id: b["id"].clone(),
                    name: b["name"].clone(),
                },
            ),
            Some(block::THINKING) => (
                "rs",
                ItemKind::Reasoning {
                    signature: b["signature"].as_str().unwrap_or_default().into(),
                    redacted: None,
                },
            ),
            Some(block::REDACTED_THINKING) => (
                "rs",
                ItemKind::Reasoning {
                    signature: String::new(),
                    redacted: Some(b["data"].clone()),
                },
            ),
            _ => return None,
        })
    }

    /// A content block starts: its output item is added, with the part
    /// its text goes into (a message's, a reasoning summary's), and it is
    /// the item the block's deltas build.
    fn block_start(&mut self, block: &Value, out: &mut Vec<Bytes>) {
        let Some((prefix, kind)) = self.item_kind(block) else {
            return;
        };
        let output_index = self.done.len();
        let mut item = Item {
            output_index,
            id: format!("{prefix}_{}_{output_index}", self.id),
            kind,
            text: String::new(),
        };
        if matches!(item.kind, ItemKind::Search)
            && block["input"].as_object().is_some_and(|i| !i.is_empty())
        {
            // An input that came whole with the block's start.
            item.text = block["input"].to_string();
        }
        let added = json!({"output_index": output_index, "item": item.value(status::IN_PROGRESS)});
        self.emit(responses::event::OUTPUT_ITEM_ADDED, added, out);
        let r = self.item_ref(&item);
        match item.kind {
            ItemKind::Message { .. } => {
                let mut e = r;
                e["content_index"] = 0.into();
                e["part"] = json!({"type": part::OUTPUT_TEXT, "text": "", "annotations": []});
                self.emit(responses::event::CONTENT_PART_ADDED, e, out);
            }
            ItemKind::Search => self.emit(responses::event::WEB_SEARCH_CALL_IN_PROGRESS, r, out),
            ItemKind::Reasoning { redacted: None, .. } => {
                let mut e = r;
                e["summary_index"] = 0.into();
                e["part"] = json!({"type": part::SUMMARY_TEXT, "text": ""});
                self.emit(responses::event::REASONING_SUMMARY_PART_ADDED, e, out);
            }
            _ => {}
        }
        self.current = Some(item);
    }

    /// A piece of the open block: text and thinking go out as they come,
    /// function arguments too; what is sent whole at the block's end (a
    /// search's or a freeform call's input, citations, a signature) is
    /// kept.
    fn block_delta(&mut self, d: &Value, out: &mut Vec<Bytes>) {
        let Some(mut item) = self.current.take() else {
            return;
        };
        let mut e = self.item_ref(&item);
        let piece = match (type_of(d), &mut item.kind) {
            (Some(delta::TEXT), ItemKind::Message { .. }) => {
                e["content_index"] = 0.into();
                e["logprobs"] = json!([]);
                Some((responses::event::OUTPUT_TEXT_DELTA, d["text"].as_str()))
            }
            // Its annotations are sent when the text is whole: an
            // Anthropic citation spans its block.
            (Some(delta::CITATIONS), ItemKind::Message { citations }) => {
                citations.push(d["citation"].clone());
                None
            }
            (Some(delta::INPUT_JSON), ItemKind::Search) => {
                item.text
                    .push_str(d["partial_json"].as_str().unwrap_or_default());
                None
            }
            (Some(delta::INPUT_JSON), ItemKind::Function { .. }) => Some((
                responses::event::FUNCTION_CALL_ARGUMENTS_DELTA,
                d["partial_json"].as_str(),
            )),
            (Some(delta::INPUT_JSON), ItemKind::Custom { .. }) => {
                // Its text is sent whole when the block ends.
                item.text
                    .push_str(d["partial_json"].as_str().unwrap_or_default());
                None
            }
            (Some(delta::SIGNATURE), ItemKind::Reasoning { signature, .. }) => {
                signature.push_str(d["signature"].as_str().unwrap_or_default());
                None
            }
            (Some(delta::THINKING), ItemKind::Reasoning { .. }) => {
                e["summary_index"] = 0.into();
                Some((
                    responses::event::REASONING_SUMMARY_TEXT_DELTA,
                    d["thinking"].as_str(),
                ))
            }
            _ => None,
        };
        if let Some((kind, Some(text))) = piece {
            item.text.push_str(text);
            e["delta"] = text.into();
            self.emit(kind, e, out);
        }
        self.current = Some(item);
    }

    /// The open block ends: what its item sends when whole, then the item
    /// itself, done, into the response's output.
    fn block_stop(&mut self, out: &mut Vec<Bytes>) {
        let Some(item) = self.current.take() else {
            return;
        };
        let r = self.item_ref(&item);
        match &item.kind {
            ItemKind::Message { citations } => self.text_done(&item, citations, r, out),
            ItemKind::Search => {
                self.emit(responses::event::WEB_SEARCH_CALL_SEARCHING, r.clone(), out);
                self.emit(responses::event::WEB_SEARCH_CALL_COMPLETED, r, out);
            }
            ItemKind::Function { .. } => {
                let mut e = r;
                e["arguments"] = item.text.clone().into();
                self.emit(responses::event::FUNCTION_CALL_ARGUMENTS_DONE, e, out);
            }
            ItemKind::Custom { .. } => {
                let input = custom_input(&item.text);
                let mut e = r.clone();
                e["delta"] = input.clone().into();
                self.emit(responses::event::CUSTOM_TOOL_CALL_INPUT_DELTA, e, out);
                let mut e = r;
                e["input"] = input.into();
                self.emit(responses::event::CUSTOM_TOOL_CALL_INPUT_DONE, e, out);
            }
            ItemKind::Reasoning {
                redacted: Some(_), ..
            } => {}
            ItemKind::Reasoning { .. } => {
                let mut e = r.clone();
                e["summary_index"] = 0.into();
                e["text"] = item.text.clone().into();
                self.emit(responses::event::REASONING_SUMMARY_TEXT_DONE, e, out);
                let mut e = r;
                e["summary_index"] = 0.into();
                e["part"] = json!({"type": part::SUMMARY_TEXT, "text": item.text});
                self.emit(responses::event::REASONING_SUMMARY_PART_DONE, e, out);
            }
        }
        let value = item.value(status::COMPLETED);
        let done = json!({"output_index": item.output_index, "item": value.clone()});
        self.emit(responses::event::OUTPUT_ITEM_DONE, done, out);
        self.done.push(value);
    }

    /// A text block's end: its annotations (only now whole: an Anthropic
    /// citation spans its block), then its text and its part, done.
    fn text_done(&mut self, item: &Item, citations: &[Value], r: Value, out: &mut Vec<Bytes>) {
        let annotations = search::annotations(&Value::Array(citations.to_vec()), &item.text);
        for (n, a) in annotations.iter().enumerate() {
            let mut e = r.clone();
            e["content_index"] = 0.into();
            e["annotation_index"] = n.into();
            e["annotation"] = a.clone();
            self.emit(responses::event::OUTPUT_TEXT_ANNOTATION_ADDED, e, out);
        }
        let mut e = r.clone();
        e["content_index"] = 0.into();
        e["text"] = item.text.clone().into();
        e["logprobs"] = json!([]);
        self.emit(responses::event::OUTPUT_TEXT_DONE, e, out);
        let mut e = r;
        e["content_index"] = 0.into();
        e["part"] =
            json!({"type": part::OUTPUT_TEXT, "text": item.text, "annotations": annotations});
        self.emit(responses::event::CONTENT_PART_DONE, e, out);
    }

    fn finish(&mut self, out: &mut Vec<Bytes>) {
        if self.finished {
            return;
        }
        self.finished = true;
        // Cut at a limit Codex did not set, the answer is whole as far as
        // Codex knows: an incomplete turn it would retry.
        if self.stop_reason.as_deref() == Some(anthropic::stop::MAX_TOKENS)
            && self.names.client_limit
        {
            let mut r = self.response(status::INCOMPLETE);
            r["incomplete_details"] = json!({"reason": responses::incomplete::MAX_OUTPUT_TOKENS});
            self.emit(responses::event::INCOMPLETE, json!({"response": r}), out);
        } else {
            let r = self.response(status::COMPLETED);
            self.emit(responses::event::COMPLETED, json!({"response": r}), out);
        }
    }
}
