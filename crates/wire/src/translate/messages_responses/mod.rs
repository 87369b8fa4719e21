//! Claude Code on an OpenAI Responses upstream: the Messages request → a
//! Responses request (`request`), and the Responses answer, streamed or
//! whole, and its errors → Anthropic's (`answer`).

mod answer;
mod request;

pub(super) use answer::{Stream, whole};
pub(super) use request::request;
