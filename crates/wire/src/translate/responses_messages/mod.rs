//! Codex on an Anthropic upstream: a Responses request → a Messages
//! request, and the Messages answer → the Responses event sequence Codex
//! needs (`response.created`, `response.output_item.added` before any
//! delta, the deltas, `response.output_item.done`, and always a terminal
//! `response.completed` / `response.incomplete` / `response.failed`, with
//! `sequence_number` on every event).
//!
//! One file per concern: `request` (the request), `stream` (the event
//! sequence), and `whole` (a whole answer).

mod request;
mod stream;
mod whole;

pub(super) use request::request;
pub(super) use stream::Stream;
pub(super) use whole::whole;

/// The single string property a freeform tool's text travels in.
const CUSTOM_INPUT: &str = "input";

#[cfg(test)]
mod tests;
