//! weir: a memory-safe edge reverse proxy and LLM API gateway that keeps
//! serving under overload.
//!
//! A request travels through the modules in this order (see
//! [`lifecycle`] for the phases):
//!
//! - [`listen`] — sockets and accept loops
//! - [`conn`] — TLS, HTTP/1.1 and HTTP/2 per connection
//! - [`admit`] — the request gates: shed, never queue
//! - [`route`] — host and path → route
//! - [`proxy`] — forward upstream and stream back
//! - [`respond`] — generated errors, access log and metrics at body end
//!
//! with [`config`], [`admin`], [`telemetry`], [`server`] (assembly) and
//! [`demo`] alongside.

pub mod admin;
pub mod admit;
pub mod cli;
pub mod config;
pub mod conn;
pub mod demo;
pub mod lifecycle;
pub mod listen;
pub mod pki;
pub mod proxy;
pub mod respond;
pub mod route;
pub mod server;
pub mod snapshot;
pub mod telemetry;
