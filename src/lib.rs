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
//! - [`upstream`] — what both route kinds send through: groups and
//!   balancing, dialing, pools, clients, health checks, DNS, request bodies
//! - [`cluster`] — with `[cluster]`: a fleet's shared limits in Redis
//! - [`respond`] — generated errors, how failures are answered, access log
//!   and metrics at body end
//!
//! with [`weir_wire`] (the pure crate: what each LLM API means on the
//! wire, the translation pairs, the body skim), [`config`] (data and
//! validation), [`pki`] (certificates and keys),
//! [`sync`] (lock recovery, decided once), [`worker`] (per-core runtimes
//! and per-worker values), [`acme`], [`admin`], [`telemetry`], [`systemd`],
//! [`server`] (assembly and applying a config), [`cli`] and [`demo`]
//! alongside.
//!
//! Everything here is `pub(crate)`: the crate's face is [`cli::main`], which
//! the binary calls, and [`testing`], the seams the integration tests,
//! examples and fuzz targets use. Nothing else is an API.

#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod access;
mod acme;
mod admin;
mod admit;
mod calendar;
pub mod cli;
mod cluster;
mod compress;
mod config;
mod conn;
mod demo;
mod idp;
mod keys;
mod lifecycle;
mod listen;
mod llm;
mod pki;
mod proxy;
mod respond;
mod route;
mod rules;
mod server;
mod snapshot;
mod statics;
mod store;
mod sync;
mod systemd;
mod telemetry;
pub mod testing;
mod upstream;
mod worker;
