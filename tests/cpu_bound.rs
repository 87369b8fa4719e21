//! No client body holds a serving thread: the real binary with one worker
//! (serving, admin and control on one thread) counts the tokens of a large
//! conversation locally while `/health` keeps answering within
//! milliseconds, because the work runs off the serving thread
//! (`llm::offload`).

mod common;

use std::time::{Duration, Instant};

use common::llm::serving;
use common::process::*;
use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_large_local_count_tokens_does_not_stall_health() {
    let up = serving(&["never", "asked"]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[server]\nworkers = 1\n[log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
         [[route.upstreams]]\nname = \"chat\"\nurl = \"{}\"\nprotocol = \"openai_chat\"\n",
        up.url()
    );
    let path = write_config(&dir, &config);
    let mut weir = Proc::run(&path);
    let web = weir.listening("web");
    let admin = weir.admin();

    // 24 MiB of conversation: parsing and reading it takes the debug
    // build far longer than a health check may wait.
    let turn = "the quick brown fox jumps over the lazy dog ".repeat(2_000);
    let messages: Vec<serde_json::Value> = (0..280)
        .map(|i| serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": turn}))
        .collect();
    let conversation = serde_json::json!({"model": "m", "messages": messages}).to_string();
    assert!(conversation.len() > 24_000_000, "{}", conversation.len());

    let count = tokio::spawn(async move {
        let started = Instant::now();
        let resp = send(
            http::Method::POST,
            &format!("http://{web}/v1/messages/count_tokens"),
            &[("content-type", "application/json")],
            conversation,
        )
        .await;
        let (status, _, text) = split(resp).await;
        (status, text, started.elapsed())
    });

    let client = h1_client();
    let mut probes = Vec::new();
    while !count.is_finished() {
        let started = Instant::now();
        let (status, _, _) = get(&client, &format!("http://{admin}/health")).await;
        assert_eq!(status, 200);
        probes.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, text, took) = count.await.expect("join");
    assert_eq!(status, 200, "{text}");
    let n = serde_json::from_str::<serde_json::Value>(&text).expect("json")["input_tokens"]
        .as_u64()
        .expect("a count");
    assert!(n > 1_000_000, "{n}");
    let worst = probes.iter().max().copied().unwrap_or_default();
    eprintln!(
        "count_tokens of {n} tokens took {took:?}; /health answered {} times meanwhile, the slowest in {worst:?}",
        probes.len()
    );
    assert!(
        probes.len() >= 3 && worst < Duration::from_millis(150),
        "count_tokens took {took:?}; /health answered {} times during it, the slowest in {worst:?}",
        probes.len()
    );
    drop(up);
}
