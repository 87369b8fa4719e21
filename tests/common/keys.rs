//! Runtime keys through the admin API, for the tests of keys kept in
//! SQLite (tests/runtime_keys.rs, weir in-process) and in PostgreSQL
//! (tests/postgres.rs, real processes): an LLM route taking keys over the
//! strict Anthropic stand-in, keys created, and requests made with them.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;

use super::Weir;
use super::llm::{llm_config_with, messages_body};
use super::provider::Provider;

pub const ADMIN: &str = "admin-s3cret";

/// A weir a test talks to: in-process, or a process.
pub trait Instance {
    /// `http://<admin address>`.
    fn admin_base(&self) -> String;
    /// `http://<listener web>`.
    fn web_base(&self) -> String;
}

impl Instance for Weir {
    fn admin_base(&self) -> String {
        self.admin_url("")
    }
    fn web_base(&self) -> String {
        self.url("web", "")
    }
}

/// A weir process's two addresses.
pub struct Addresses {
    pub web: SocketAddr,
    pub admin: SocketAddr,
}

impl Instance for Addresses {
    fn admin_base(&self) -> String {
        format!("http://{}", self.admin)
    }
    fn web_base(&self) -> String {
        format!("http://{}", self.web)
    }
}

/// A route `llm` taking runtime keys, over `up`, with `[database] url =
/// "{database}"`, an admin token (`{dir}/admin-token`) and `extra` in the
/// route.
pub fn config(up: &Provider, extra: &str, database: &str) -> String {
    let base = llm_config_with(
        "anthropic",
        &[(
            "up",
            up.base_url(),
            "api_key_file = \"{dir}/provider-key\"".to_string(),
        )],
        &format!(
            "runtime_keys = true\ndefault_upstreams = [\"up\"]\n{extra}\n\
             [[route.prices]]\nmodel = \"*\"\ninput = 1\noutput = 2\n"
        ),
    );
    base.replace(
        "[admin]\naddress = \"127.0.0.1:0\"\n",
        &format!(
            "[admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{{dir}}/admin-token\"\n\
             [database]\nurl = \"{database}\"\n"
        ),
    )
}

/// A directory with the admin token and the provider key [`config`] names.
pub fn dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("admin-token"), ADMIN).expect("token");
    std::fs::write(dir.path().join("provider-key"), "sk-ant-weirs-own").expect("key");
    dir
}

/// An admin API call with the admin token: the status and the JSON answer.
pub async fn admin(
    weir: &impl Instance,
    method: http::Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let auth = format!("Bearer {ADMIN}");
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let resp = super::send(
        method,
        &format!("{}{path}", weir.admin_base()),
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
        ],
        body,
    )
    .await;
    let status = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v)
}

/// Create a key: its id and secret.
pub async fn create(weir: &impl Instance, spec: Value) -> (String, String) {
    let (status, v) = admin(weir, http::Method::POST, "/admin/keys", spec).await;
    assert_eq!(status, 201, "{v}");
    (
        v["id"].as_str().expect("id").to_string(),
        v["key"].as_str().expect("secret").to_string(),
    )
}

/// A Messages request with `secret`: the status and the body.
pub async fn ask(weir: &impl Instance, secret: &str, model: &str) -> (u16, String) {
    ask_with(weir, secret, model, &[]).await
}

/// [`ask`] with more headers (a coding agent's session hints).
pub async fn ask_with(
    weir: &impl Instance,
    secret: &str,
    model: &str,
    more: &[(&str, &str)],
) -> (u16, String) {
    let mut headers = vec![("anthropic-version", "2023-06-01"), ("x-api-key", secret)];
    headers.extend_from_slice(more);
    let (status, _, body) = super::post_json(
        &format!("{}/v1/messages", weir.web_base()),
        messages_body(model, false),
        &headers,
    )
    .await;
    (status.as_u16(), body)
}

/// Ask until `want` is answered, for at most `within`: the last status.
pub async fn until(weir: &impl Instance, secret: &str, want: u16, within: Duration) -> u16 {
    let start = Instant::now();
    loop {
        let (status, _) = ask(weir, secret, "claude-sonnet").await;
        if status == want || start.elapsed() > within {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The usage report's lines for `query` (`group_by=…`), once their
/// requests add up to `want` (or after 10 s, as they are then).
pub async fn usage_lines(weir: &impl Instance, query: &str, want: u64) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let (status, v) = admin(
            weir,
            http::Method::GET,
            &format!("/admin/usage?{query}"),
            Value::Null,
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let lines = v["usage"].as_array().cloned().unwrap_or_default();
        let requests: u64 = lines.iter().filter_map(|l| l["requests"].as_u64()).sum();
        if requests == want || start.elapsed() > Duration::from_secs(10) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
