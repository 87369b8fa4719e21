//! The upstream side, which proxy routes and LLM routes both use: the
//! servers of a group and how they are balanced ([`balance`]), dialed
//! (`dial`), pooled (`pool`: weir's own HTTP/1.1 pools; hyper-util's client
//! for HTTP/2) and sent to (`client`), checked (`check`) and re-resolved
//! (`resolve`); the request body on its way up, with its size limit and
//! minimum rate (`body`); the header rules every hop applies ([`headers`]);
//! and a route's upstream assembled from them (`group`).
//!
//! It imports nothing above it on the data path: `config`, `telemetry`,
//! `sync` and `worker` only (`tests/imports.rs` checks it).

pub(crate) mod balance;
mod body;
mod check;
pub(crate) mod client;
mod dial;
mod error;
mod group;
pub(crate) mod headers;
mod pool;
mod resolve;
mod server;

pub(crate) use body::{
    Attempt, BodyRate, BodyTooLarge, BodyTooSlow, BodyUnreadable, Reclaim, RequestBody,
};
pub(crate) use dial::connector;
pub(crate) use error::{BoxError, SendError};
pub(crate) use group::Upstream;
pub(crate) use server::{Server, h1_pool, pooled_client};
