//! Claude Code on a Chat Completions upstream: the Messages request → a
//! Chat Completions request (`request`), and the chat completion, streamed
//! or whole, and its errors → Anthropic's (`answer`).

mod answer;
mod request;

pub(super) use answer::{Stream, whole};
pub(super) use request::request;
