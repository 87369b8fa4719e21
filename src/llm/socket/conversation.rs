//! The conversation one WebSocket connection keeps, so that a
//! `previous_response_id` with `store: false` can be sent to a stateless
//! upstream as a complete request: the input of the last response and
//! the output items it produced, under that response's id. Bounded in
//! bytes (the route's `max_request_body`: a request past it could not be
//! sent anyway) and held in the route's byte budget; past either, nothing
//! is kept, and the next continuation is answered
//! `previous_response_not_found`, which makes Codex send the whole input.

use serde_json::Value;

use crate::llm::body::Reservation;

/// The last response's id and the items that continue it.
#[derive(Default)]
pub(super) struct Kept {
    last: Option<Last>,
}

struct Last {
    id: String,
    items: Vec<Value>,
    /// Their size as they were sent and received.
    bytes: u64,
    /// Held in the byte budget while kept.
    _held: Reservation,
}

/// Why a continuation cannot be expanded.
pub(super) struct NotFound;

/// What a continuation was expanded from: the response it continued, how
/// many of the items are that response's conversation, their size. Kept
/// again when the new response does not complete, so that the client's
/// retry of it continues the same response.
pub(super) struct Previous {
    pub(super) id: String,
    pub(super) count: usize,
    pub(super) bytes: u64,
}

impl Kept {
    /// The complete input for a request continuing `previous` (if any)
    /// with `input`, and what it continued; the kept state is taken
    /// either way (a response in flight replaces it).
    pub(super) fn expand(
        &mut self,
        previous: Option<&str>,
        input: Vec<Value>,
    ) -> Result<(Vec<Value>, Option<Previous>), NotFound> {
        let last = self.last.take();
        let Some(previous) = previous else {
            return Ok((input, None));
        };
        match last {
            Some(last) if last.id == previous => {
                let mut items = last.items;
                let continued = Previous {
                    id: last.id,
                    count: items.len(),
                    bytes: last.bytes,
                };
                items.extend(input);
                Ok((items, Some(continued)))
            }
            _ => Err(NotFound),
        }
    }

    /// Keep `items` (the input sent and the output received, `bytes` in
    /// all) under `id`, held by `held`.
    pub(super) fn keep(&mut self, id: String, items: Vec<Value>, bytes: u64, held: Reservation) {
        self.last = Some(Last {
            id,
            items,
            bytes,
            _held: held,
        });
    }
}

/// A request's `input` as a list of items: a string is one user message.
pub(super) fn items(input: Option<Value>) -> Vec<Value> {
    match input {
        Some(Value::Array(items)) => items,
        Some(Value::String(text)) => {
            vec![serde_json::json!({"role": "user", "content": text})]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::body::{BodyClient, ByteBudget, reserve};
    use serde_json::json;

    fn held() -> Reservation {
        let client = BodyClient::address([192, 0, 2, 1].into());
        match reserve(10, &ByteBudget::new(0), client) {
            Ok(r) => r,
            Err(e) => panic!("reserve: {e:?}"),
        }
    }

    #[test]
    fn a_continuation_of_the_last_response_gets_the_whole_conversation() {
        let mut kept = Kept::default();
        kept.keep("resp_1".into(), vec![json!(1), json!(2)], 7, held());
        let Ok((all, Some(previous))) = kept.expand(Some("resp_1"), vec![json!(3)]) else {
            panic!("the last response is kept");
        };
        assert_eq!(all, vec![json!(1), json!(2), json!(3)]);
        assert_eq!(
            (previous.id.as_str(), previous.count, previous.bytes),
            ("resp_1", 2, 7)
        );
        assert!(kept.expand(Some("resp_1"), vec![]).is_err(), "taken once");
    }

    #[test]
    fn another_id_is_not_found_and_a_fresh_request_stands_alone() {
        let mut kept = Kept::default();
        kept.keep("resp_1".into(), vec![json!(1)], 1, held());
        assert!(kept.expand(Some("resp_0"), vec![]).is_err());
        kept.keep("resp_1".into(), vec![json!(1)], 1, held());
        let Ok((alone, None)) = kept.expand(None, vec![json!(9)]) else {
            panic!("a fresh request");
        };
        assert_eq!(alone, vec![json!(9)]);
        assert_eq!(items(Some(json!("hi"))).len(), 1);
    }
}
