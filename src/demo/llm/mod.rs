//! A mock LLM provider: a real HTTP server that answers the Anthropic
//! Messages and OpenAI Responses / Chat Completions APIs with canned text,
//! in each protocol's exact event format, streaming or not.
//!
//! What it answers is a script — a function from the request it received
//! to a [`Reply`] — so the demo can run a provider that always serves and
//! one that is always overloaded, and tests can make an upstream fail in
//! every way a real one does: a status with retry headers, a slow head,
//! pauses between events, a stall, a cut in the middle of an event, an
//! error event after some content. It records every request it received
//! (headers and body bytes) and how each reply ended (finished, or
//! abandoned by the client, which is how tests see cancellation).

mod fixtures;
mod scripts;
mod server;

pub use fixtures::{Api, json_answer, stream_events};
pub use scripts::{AGENT_ARGUMENT_PIECES, AGENT_TOOL, agent, error, success};
pub use server::{MockBody, MockLlm, Reply, Seen, Step, spawn};
