//! weir: a memory-safe edge reverse proxy and LLM API gateway that keeps
//! serving under overload.
//!
//! A request travels through the modules in this order (see
//! [`lifecycle`] for the phases):
//!
//! - [`listen`] — sockets and accept loops
//! - [`conn`] — per-connection state and the cap, TLS, HTTP/1.1 and HTTP/2,
//!   deadlines
//! - [`lifecycle`] — the request's phases, run against one [`snapshot`]
//! - [`admit`] — the request gates: shed, never queue
//! - [`route`] — host and path → route, and the route kinds
//! - [`proxy`] — forward upstream and stream back
//! - [`llm`] — LLM API routes: model routing, failover, streaming relay
//! - [`cluster`] — with `[cluster]`: a fleet's shared limits in Redis
//! - [`respond`] — generated errors, how failures are answered, access log
//!   and metrics at body end
//!
//! with [`wire`] (what each LLM API means on the wire, one module per
//! API), [`fields`] (header fields parsed one way), [`config`] (data and
//! validation), [`pki`] (certificates and keys),
//! [`sync`] (lock recovery, decided once), [`worker`] (per-core runtimes and per-worker values), [`admin`],
//! [`telemetry`], [`systemd`], [`server`] (assembly and applying a config),
//! [`cli`] and [`demo`] alongside.

#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod acme;
pub mod admin;
pub mod admit;
pub mod balance;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod conn;
pub mod demo;
pub mod lifecycle;
pub mod listen;
pub mod llm;
pub mod pki;
pub mod proxy;
pub mod respond;
pub mod route;
pub mod server;
pub mod snapshot;
pub mod sync;
pub mod systemd;
pub mod telemetry;
pub mod worker;
