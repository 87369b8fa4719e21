//! LLM route helpers: mock providers on port 0 and a weir config that
//! routes to them.

#![allow(dead_code, unused_imports)]

use std::net::SocketAddr;

pub use weir::demo::llm::{
    AGENT_ARGUMENT_PIECES, AGENT_TOOL, Api, MockLlm, Reply, Seen, Step, agent, error,
    stream_events, success,
};

/// A mock provider answering with `script`.
pub async fn mock(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> MockLlm {
    weir::demo::llm::spawn(([127, 0, 0, 1], 0).into(), script)
        .await
        .expect("mock LLM")
}

/// A mock that always serves `words`, streaming without pauses.
pub async fn serving(words: &'static [&'static str]) -> MockLlm {
    mock(move |seen| success(seen, words, std::time::Duration::ZERO)).await
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

/// A URL nothing listens on.
pub async fn refusing() -> String {
    let addr: SocketAddr = super::closed_port().await;
    format!("http://{addr}")
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
