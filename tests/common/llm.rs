//! LLM route helpers: mock providers on port 0 and a weir config that
//! routes to them.

#![allow(dead_code, unused_imports)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use hyper::body::Incoming;
use serde_json::Value;

use super::Weir;

pub use weir::testing::demo::llm::{
    AGENT_ARGUMENT_PIECES, AGENT_TOOL, Api, MockLlm, Reply, Seen, Step, agent, error,
    stream_events, success,
};

/// A mock provider answering with `script`.
pub async fn mock(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> MockLlm {
    weir::testing::demo::llm::spawn(([127, 0, 0, 1], 0).into(), script)
        .await
        .expect("mock LLM")
}

/// A mock that always serves `words`, streaming without pauses.
pub async fn serving(words: &'static [&'static str]) -> MockLlm {
    mock(move |seen| success(seen, words, std::time::Duration::ZERO)).await
}

/// A mock streaming eight words 200 ms apart: a stream long enough for a
/// client to hold, or to leave in the middle of.
pub async fn trickling() -> MockLlm {
    mock(|seen| {
        success(
            seen,
            &["a", "b", "c", "d", "e", "f", "g", "h"],
            Duration::from_millis(200),
        )
    })
    .await
}

/// weir with one LLM route of `kind` over the one upstream `up`, plus
/// `extra` route keys.
pub async fn weir_over(kind: &str, up: &MockLlm, extra: &str) -> Weir {
    Weir::start(&llm_config(kind, &[("up", up.url())], extra)).await
}

/// weir with one LLM route of `kind` over `bad` then `good`.
pub async fn failover_pair(kind: &str, bad: &MockLlm, good: &MockLlm) -> Weir {
    Weir::start(&llm_config(
        kind,
        &[("bad", bad.url()), ("good", good.url())],
        "",
    ))
    .await
}

/// A weir config with one LLM route `llm` of `kind` at `path` over the
/// named upstreams (`name = url`), every model served by all of them in
/// order, plus `extra` route keys (and sub-tables after them).
pub fn llm_config(kind: &str, upstreams: &[(&str, String)], extra: &str) -> String {
    let upstreams: Vec<(&str, String, String)> = upstreams
        .iter()
        .map(|(name, url)| (*name, url.clone(), String::new()))
        .collect();
    llm_config_with(kind, &upstreams, extra)
}

/// [`llm_config`] with keys of each upstream's own: `(name, url, keys)`.
pub fn llm_config_with(kind: &str, upstreams: &[(&str, String, String)], extra: &str) -> String {
    let mut text = format!(
        "[log]\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"{kind}\"\n{extra}\n"
    );
    for (name, url, keys) in upstreams {
        text.push_str(&format!(
            "[[route.upstreams]]\nname = \"{name}\"\nurl = \"{url}\"\n{keys}\n"
        ));
    }
    text
}

/// A fresh directory for [`Weir::start_in`] holding the client token file
/// `text`, and the route key that names it.
pub fn client_tokens(text: &str) -> (tempfile::TempDir, &'static str) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tokens"), text).expect("tokens");
    (dir, "client_tokens_file = \"{dir}/tokens\"\n")
}

/// A URL nothing listens on.
pub async fn refusing() -> String {
    let addr: SocketAddr = super::closed_port().await;
    format!("http://{addr}")
}

/// A Messages stream whole: `message_start` first, `message_stop`
/// last, text or tool deltas between.
pub fn assert_whole_messages_stream(body: &str) {
    let types: Vec<String> = events(body).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        types.first().map(String::as_str),
        Some("message_start"),
        "{types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("message_stop"),
        "{types:?}"
    );
    assert!(
        types.iter().any(|t| t == "content_block_delta"),
        "{types:?}"
    );
}

/// An Anthropic Messages request body.
pub fn messages_body(model: &str, stream: bool) -> String {
    serde_json::json!({
        "model": model,
        "max_tokens": 64,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string()
}

/// An OpenAI Responses request body.
pub fn responses_body(model: &str, stream: bool) -> String {
    serde_json::json!({"model": model, "input": "hi", "stream": stream}).to_string()
}

/// A POST of `body` (JSON text) to `path` on weir's `web` listener with
/// `headers`, the whole answer read.
pub async fn post(
    weir: &Weir,
    path: &str,
    body: impl ToString,
    headers: &[(&str, &str)],
) -> (http::StatusCode, http::HeaderMap, String) {
    super::post_json(&weir.url("web", path), body.to_string(), headers).await
}

/// [`post`], the answer's head only: a stream the test holds open, reads
/// a little of, or leaves.
pub async fn open_stream(
    weir: &Weir,
    path: &str,
    body: impl ToString,
    headers: &[(&str, &str)],
) -> Response<Incoming> {
    super::post_open(&weir.url("web", path), body.to_string(), headers).await
}

/// A streamed POST of `body` to `path` that the client leaves after the
/// first piece of the answer: the connection is closed under weir.
pub async fn leave_after_first_event(weir: &Weir, path: &str, body: impl ToString) {
    use http_body_util::BodyExt;
    let mut answer = open_stream(weir, path, body, &[]).await.into_body();
    answer.frame().await.expect("first event").expect("ok");
}

/// An event stream of `body` with status 200, as the mock sends it.
pub fn sse_reply(body: Vec<Step>) -> Reply {
    Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        delay: Duration::ZERO,
        body,
    }
}

/// A JSON answer `body` with `status`.
pub fn json_reply(status: u16, body: &'static [u8]) -> Reply {
    Reply {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        delay: Duration::ZERO,
        body: vec![Step::Send(Bytes::from_static(body))],
    }
}

/// The first four events of `api`'s stream (the preamble and the first
/// piece of content), then the connection cut.
pub fn cut_after_content(api: Api, words: &[&str]) -> Reply {
    let events = stream_events(api, "m", words);
    sse_reply(
        events[..4]
            .iter()
            .cloned()
            .map(Step::Send)
            .chain([Step::Cut])
            .collect(),
    )
}

/// The `event:` names of an SSE body, in order.
pub fn event_names(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|e| {
            e.lines()
                .find_map(|l| l.strip_prefix("event: "))
                .map(str::to_string)
        })
        .collect()
}

/// Every event of an SSE body: its `event:` name ("" without one) and its
/// `data:` as JSON. Panics on an event without data or with data that is
/// not whole JSON: a broken event reached the client.
pub fn events(body: &str) -> Vec<(String, Value)> {
    body.trim_end()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: "));
            let data = e
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_else(|| panic!("an event without data: {e:?} in\n{body}"));
            let data = serde_json::from_str(data)
                .unwrap_or_else(|err| panic!("a broken event ({err}): {e:?} in\n{body}"));
            (name.unwrap_or("").to_string(), data)
        })
        .collect()
}
