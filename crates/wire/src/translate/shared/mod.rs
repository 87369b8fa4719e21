//! What the pairs share, so no pair reaches into another's internals:
//! the content-block helpers (`blocks`), the web search's tools, calls
//! and citations (`search`), the error envelopes (`errors`), and the two
//! OpenAI ↔ OpenAI pairs composed from the pairs through Messages
//! (`compose`).

pub(super) mod blocks;
pub(super) mod compose;
pub(super) mod errors;
pub(super) mod search;
