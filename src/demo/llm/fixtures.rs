//! Answers in each API's exact wire format: the events of a streamed
//! answer and the whole JSON answer.

use bytes::Bytes;

use super::Seen;
use weir_wire::sse;

/// Which API a request is for, by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Messages,
    CountTokens,
    Responses,
    Chat,
    Models,
}

impl Api {
    pub fn of(seen: &Seen) -> Option<Api> {
        let path = seen.path.split('?').next().unwrap_or("");
        Some(match path.trim_end_matches('/') {
            p if p.ends_with("/v1/messages/count_tokens") => Api::CountTokens,
            p if p.ends_with("/v1/messages") => Api::Messages,
            p if p.ends_with("/v1/responses") => Api::Responses,
            p if p.ends_with("/v1/chat/completions") => Api::Chat,
            p if p.ends_with("/v1/models") => Api::Models,
            _ => return None,
        })
    }
}

pub(super) fn sse_event(name: Option<&str>, data: &serde_json::Value) -> Bytes {
    match name {
        Some(n) => sse::event(n, data),
        None => sse::data(data),
    }
}

/// The events of a streamed answer `words` (one delta each), in the API's
/// exact format.
pub fn stream_events(api: Api, model: &str, words: &[&str]) -> Vec<Bytes> {
    use serde_json::json;
    let mut out = Vec::new();
    match api {
        Api::Messages | Api::CountTokens | Api::Models => {
            out.push(sse_event(
                Some("message_start"),
                &json!({"type":"message_start","message":{"id":"msg_mock","type":"message","role":"assistant","model":model,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}),
            ));
            out.push(sse_event(
                Some("content_block_start"),
                &json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ));
            out.push(sse_event(Some("ping"), &json!({"type":"ping"})));
            for w in words {
                out.push(sse_event(
                    Some("content_block_delta"),
                    &json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":w}}),
                ));
            }
            out.push(sse_event(
                Some("content_block_stop"),
                &json!({"type":"content_block_stop","index":0}),
            ));
            out.push(sse_event(
                Some("message_delta"),
                &json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":words.len()}}),
            ));
            out.push(sse_event(
                Some("message_stop"),
                &json!({"type":"message_stop"}),
            ));
        }
        Api::Responses => {
            let text: String = words.concat();
            let response = |status: &str, output: serde_json::Value| json!({"id":"resp_mock","object":"response","created_at":0,"status":status,"model":model,"output":output,"usage":null});
            let item = json!({"id":"msg_mock","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":text,"annotations":[]}]});
            let mut seq = 0u64;
            let mut push = |name: &str, mut data: serde_json::Value| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(seq);
                seq += 1;
                out.push(sse_event(Some(name), &data));
            };
            push(
                "response.created",
                json!({"response": response("in_progress", json!([]))}),
            );
            push(
                "response.in_progress",
                json!({"response": response("in_progress", json!([]))}),
            );
            push(
                "response.output_item.added",
                json!({"output_index":0,"item":{"id":"msg_mock","type":"message","status":"in_progress","role":"assistant","content":[]}}),
            );
            push(
                "response.content_part.added",
                json!({"item_id":"msg_mock","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}),
            );
            for w in words {
                push(
                    "response.output_text.delta",
                    json!({"item_id":"msg_mock","output_index":0,"content_index":0,"delta":w,"logprobs":[]}),
                );
            }
            push(
                "response.output_text.done",
                json!({"item_id":"msg_mock","output_index":0,"content_index":0,"text":text,"logprobs":[]}),
            );
            push(
                "response.content_part.done",
                json!({"item_id":"msg_mock","output_index":0,"content_index":0,"part":{"type":"output_text","text":text,"annotations":[]}}),
            );
            push(
                "response.output_item.done",
                json!({"output_index":0,"item":item}),
            );
            let mut done = response("completed", json!([item]));
            done["usage"] = json!({"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":words.len(),"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12 + words.len()});
            push("response.completed", json!({"response": done}));
        }
        Api::Chat => {
            let chunk = |delta: serde_json::Value, finish: serde_json::Value| json!({"id":"chatcmpl-mock","object":"chat.completion.chunk","created":0,"model":model,"choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
            out.push(sse_event(
                None,
                &chunk(json!({"role":"assistant","content":""}), json!(null)),
            ));
            for w in words {
                out.push(sse_event(None, &chunk(json!({"content":w}), json!(null))));
            }
            out.push(sse_event(None, &chunk(json!({}), json!("stop"))));
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
    }
    out
}

/// The non-streamed answer `text` in the API's format.
pub fn json_answer(api: Api, model: &str, text: &str) -> serde_json::Value {
    use serde_json::json;
    match api {
        Api::Messages => {
            json!({"id":"msg_mock","type":"message","role":"assistant","model":model,"content":[{"type":"text","text":text}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":3}})
        }
        Api::CountTokens => json!({"input_tokens": 12}),
        Api::Responses => {
            json!({"id":"resp_mock","object":"response","created_at":0,"status":"completed","model":model,"output":[{"id":"msg_mock","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":text,"annotations":[]}]}],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}})
        }
        Api::Chat => {
            json!({"id":"chatcmpl-mock","object":"chat.completion","created":0,"model":model,"choices":[{"index":0,"message":{"role":"assistant","content":text},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}})
        }
        Api::Models => {
            json!({"data":[{"id":model,"type":"model","object":"model","display_name":model,"created_at":"2025-01-01T00:00:00Z"}],"object":"list","has_more":false,"first_id":model,"last_id":model})
        }
    }
}
