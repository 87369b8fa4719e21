//! LLM upstreams as groups: several keys and endpoints of one provider
//! balanced as members of one group, a member's retry hint or refusal
//! taking it out, failover to another member before the next upstream,
//! and conversations kept on one endpoint. Real mock providers on port 0.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::llm::*;
use common::*;

const WORDS: &[&str] = &["Hello", "."];

/// A directory holding the key files `key-1` … `key-n` (each file holding
/// its own name), and the `keys = [...]` line naming them.
fn key_files(n: usize) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut names = Vec::new();
    for i in 1..=n {
        std::fs::write(dir.path().join(format!("key-{i}")), format!("key-{i}")).expect("key");
        names.push(format!("\"file:{{dir}}/key-{i}\""));
    }
    (dir, format!("keys = [{}]\n", names.join(", ")))
}

/// The key a provider saw.
fn key_of(seen: &Seen) -> String {
    seen.headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

async fn ask(
    weir: &Weir,
    headers: &[(&str, &str)],
    body: String,
) -> (u16, http::HeaderMap, String) {
    let mut all = vec![("anthropic-version", "2023-06-01")];
    all.extend_from_slice(headers);
    let (s, h, b) = post(weir, "/v1/messages", body, &all).await;
    (s.as_u16(), h, b)
}

fn count_keys(seen: &[Seen]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for s in seen {
        *counts.entry(key_of(s)).or_insert(0) += 1;
    }
    counts
}

#[tokio::test]
async fn keys_share_the_load_and_a_rate_limited_key_is_held_while_another_serves() {
    let limit_key_2 = Arc::new(AtomicBool::new(false));
    let flag = limit_key_2.clone();
    let up = mock(move |seen| {
        if flag.load(Ordering::SeqCst) && key_of(seen) == "key-2" {
            error(seen, 429, "rate_limit_error", "key-2 is over its limit")
                .with_header("retry-after", "30")
        } else {
            success(seen, WORDS, Duration::ZERO)
        }
    })
    .await;
    let (dir, keys) = key_files(3);
    let weir = Weir::start_in(
        dir,
        &llm_config_with("anthropic", &[("up", up.url(), keys)], ""),
    )
    .await;

    for _ in 0..90 {
        let (s, _, body) = ask(&weir, &[], messages_body("m", false)).await;
        assert_eq!(s, 200, "{body}");
    }
    let counts = count_keys(&up.seen());
    assert_eq!(counts.len(), 3, "every key used: {counts:?}");
    for (key, n) in &counts {
        // One at a time, least-in-flight ties at random: 30 each on
        // average, and never one key taking most of them.
        assert!((12..=50).contains(n), "{key}: {n} of 90 ({counts:?})");
    }

    limit_key_2.store(true, Ordering::SeqCst);
    let before = up.seen().len();
    for _ in 0..30 {
        let (s, _, body) = ask(&weir, &[], messages_body("m", false)).await;
        assert_eq!(s, 200, "another key of the same upstream serves: {body}");
    }
    let after = count_keys(&up.seen()[before..]);
    assert_eq!(
        after.get("key-2"),
        Some(&1),
        "key-2 asked once, then held for its 30 s: {after:?}"
    );
    assert_eq!(after.values().sum::<usize>(), 31, "30 answers and one 429");

    let m = metrics(&weir).await;
    let member = "server=\"up file:";
    assert!(
        m.lines().any(|l| l.starts_with("weir_upstream_server_up{")
            && l.contains(member)
            && l.contains("key-2\"")
            && l.ends_with(" 0")),
        "{m}"
    );
    assert!(
        m.lines()
            .any(|l| l.starts_with("weir_upstream_server_ejections_total{")
                && l.contains("key-2\"")
                && l.contains("reason=\"rate_limited\"")
                && l.ends_with(" 1")),
        "{m}"
    );
}

#[tokio::test]
async fn every_key_cooling_is_answered_at_once_with_the_soonest_recovery() {
    let up = mock(|seen| {
        let wait = if key_of(seen) == "key-1" { "40" } else { "7" };
        error(seen, 429, "rate_limit_error", "over the limit").with_header("retry-after", wait)
    })
    .await;
    let (dir, keys) = key_files(2);
    let weir = Weir::start_in(
        dir,
        &llm_config_with("anthropic", &[("up", up.url(), keys)], ""),
    )
    .await;
    let (s, _, _) = ask(&weir, &[], messages_body("m", false)).await;
    assert_eq!(s, 429, "the provider's own 429, relayed");
    assert_eq!(up.seen().len(), 2, "both keys tried for the one request");

    let (s, h, body) = ask(&weir, &[], messages_body("m", false)).await;
    assert_eq!(s, 429, "{body}");
    assert!(body.contains("rate_limit_error"), "{body}");
    let after: u64 = h["retry-after"].to_str().expect("v").parse().expect("secs");
    assert!((6..=7).contains(&after), "the soonest key back: {after}");
    assert_eq!(up.seen().len(), 2, "answered without asking the provider");
}

#[tokio::test]
async fn a_refused_endpoint_is_skipped_and_readmitted_after_its_back_off() {
    let good = serving(WORDS).await;
    let gone = closed_port().await;
    let weir = Weir::start(
        &llm_config_with(
            "anthropic",
            &[(
                "up",
                String::new(),
                format!(
                    "servers = [\"http://{gone}\", \"{}\"]\nbalance = \"round_robin\"\n",
                    good.url()
                ),
            )],
            "",
        )
        .replace("url = \"\"\n", ""),
    )
    .await;
    for _ in 0..6 {
        let (s, _, body) = ask(&weir, &[], messages_body("m", false)).await;
        assert_eq!(s, 200, "the refusing endpoint is passed over: {body}");
    }
    assert_eq!(good.seen().len(), 6);
    let m = metrics(&weir).await;
    assert!(
        m.lines()
            .any(|l| l.starts_with("weir_upstream_server_ejections_total{")
                && l.contains(&format!("{gone}"))
                && l.contains("reason=\"unreachable\"")),
        "{m}"
    );

    // It comes back: after its back-off (1 s) it is asked again.
    let back = weir::testing::demo::llm::spawn(gone, |seen| success(seen, WORDS, Duration::ZERO))
        .await
        .expect("the endpoint back on its port");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while back.seen().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never re-admitted");
        let (s, _, _) = ask(&weir, &[], messages_body("m", false)).await;
        assert_eq!(s, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A body of conversation `i`: half name it in Claude Code's session
/// header, half in `metadata.user_id`.
fn conversation(i: usize) -> (Vec<(&'static str, String)>, String) {
    let mut body: serde_json::Value =
        serde_json::from_str(&messages_body("m", false)).expect("json");
    if i.is_multiple_of(2) {
        (
            vec![("x-claude-code-session-id", format!("session-{i}"))],
            body.to_string(),
        )
    } else {
        body["metadata"] = serde_json::json!({ "user_id": format!("user_a_session_{i}") });
        (Vec::new(), body.to_string())
    }
}

#[tokio::test]
async fn a_conversation_stays_on_one_endpoint_and_only_an_outs_conversations_move() {
    let overloaded = Arc::new(AtomicBool::new(false));
    let mut endpoints = Vec::new();
    for n in 0..4 {
        let flag = overloaded.clone();
        endpoints.push(
            mock(move |seen| {
                if n == 2 && flag.load(Ordering::SeqCst) {
                    error(seen, 529, "overloaded_error", "busy").with_header("retry-after", "60")
                } else {
                    success(seen, WORDS, Duration::ZERO)
                }
            })
            .await,
        );
    }
    let list: Vec<String> = endpoints
        .iter()
        .map(|e| format!("\"{}\"", e.url()))
        .collect();
    let weir = Weir::start(
        &llm_config_with(
            "anthropic",
            &[(
                "vllm",
                String::new(),
                format!(
                    "servers = [{}]\nbalance = \"hash\"\nhash_key = \"conversation\"\n",
                    list.join(", ")
                ),
            )],
            "",
        )
        .replace("url = \"\"\n", ""),
    )
    .await;

    // The endpoints each conversation's requests reached since `from`,
    // leaving out `skip`.
    let place = |endpoints: &[MockLlm], from: &[usize], skip: Option<usize>| {
        let mut at: HashMap<String, HashSet<usize>> = HashMap::new();
        for (n, e) in endpoints.iter().enumerate() {
            if skip == Some(n) {
                continue;
            }
            for s in &e.seen()[from[n]..] {
                let id = s
                    .headers
                    .get("x-claude-code-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
                    .unwrap_or_else(|| s.json()["metadata"]["user_id"].to_string());
                at.entry(id).or_default().insert(n);
            }
        }
        at
    };
    let conversations = 80;
    for round in 0..3 {
        for i in 0..conversations {
            let (headers, body) = conversation(i);
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (s, _, b) = ask(&weir, &h, body).await;
            assert_eq!(s, 200, "round {round}: {b}");
        }
    }
    let before = place(&endpoints, &[0; 4], None);
    assert_eq!(before.len(), conversations);
    assert!(
        before.values().all(|at| at.len() == 1),
        "each conversation on one endpoint: {before:?}"
    );
    let on: Vec<usize> = (0..4)
        .map(|n| before.values().filter(|at| at.contains(&n)).count())
        .collect();
    assert!(on.iter().all(|&c| c >= 5), "spread over the four: {on:?}");

    // Endpoint 2 says it is overloaded: its conversations move, no other.
    overloaded.store(true, Ordering::SeqCst);
    let from: Vec<usize> = endpoints.iter().map(|e| e.seen().len()).collect();
    for i in 0..conversations {
        let (headers, body) = conversation(i);
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (s, _, b) = ask(&weir, &h, body).await;
        assert_eq!(s, 200, "{b}");
    }
    // Endpoint 2 served none of these (it answered one 529).
    let after = place(&endpoints, &from, Some(2));
    let mut moved = 0;
    for (id, was) in &before {
        let now = after.get(id).expect("asked again");
        if was.contains(&2) {
            assert_eq!(now.len(), 1, "{id} moved to one other endpoint");
            moved += 1;
        } else {
            assert_eq!(now, was, "{id} stays where it was");
        }
    }
    assert_eq!(
        moved, on[2],
        "only the overloaded endpoint's conversations moved"
    );
    assert_eq!(
        endpoints[2].seen().len() - from[2],
        1,
        "asked once, then out for its 60 s"
    );
}

#[tokio::test]
async fn when_every_member_is_out_failover_goes_on_to_the_next_upstream() {
    let limited = mock(|seen| {
        error(seen, 429, "rate_limit_error", "over the limit").with_header("retry-after", "30")
    })
    .await;
    let backup = serving(WORDS).await;
    let (dir, keys) = key_files(2);
    let weir = Weir::start_in(
        dir,
        &llm_config_with(
            "anthropic",
            &[
                ("primary", limited.url(), keys),
                ("backup", backup.url(), String::new()),
            ],
            "",
        ),
    )
    .await;
    let (s, _, body) = ask(&weir, &[], messages_body("m", false)).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(limited.seen().len(), 2, "both keys of the primary first");
    assert_eq!(backup.seen().len(), 1);
    let (s, _, _) = ask(&weir, &[], messages_body("m", false)).await;
    assert_eq!(s, 200);
    assert_eq!(limited.seen().len(), 2, "the primary, all out, is skipped");
    assert_eq!(backup.seen().len(), 2);
}
