//! What finding `model` in an LLM request costs, against the reference
//! points the issue names: a memchr scan of the same bytes (the floor)
//! and a serde_json parse of the whole body (what a gateway that parses
//! its requests pays). `cargo run --release --example model_scan`.
//!
//! Bodies are Claude Code-shaped: a system prompt, tools, and a
//! conversation of code with a newline escape every ~40 bytes, `model`
//! last; 50 KiB and 1 MiB.

use std::hint::black_box;
use std::time::Instant;

fn body(size: usize) -> Vec<u8> {
    let line = "    let total = lines.iter().map(|l| l.len()).sum::<usize>();\n";
    let mut turns = Vec::new();
    let mut len = 0;
    while len < size {
        let text = line.repeat(40);
        len += text.len() + 60;
        turns.push(
            serde_json::json!({"role": if turns.len() % 2 == 0 {"user"} else {"assistant"},
            "content": [{"type": "text", "text": text}]}),
        );
    }
    serde_json::to_vec(&serde_json::json!({
        "max_tokens": 32000, "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
        "messages": turns, "metadata": {"user_id": "user_abc_session_1"},
        "model": "claude-sonnet-4-5"
    }))
    .expect("json")
}

fn time(name: &str, bytes: usize, rounds: u32, mut f: impl FnMut()) {
    let start = Instant::now();
    for _ in 0..rounds {
        f();
    }
    let each = start.elapsed().as_secs_f64() / f64::from(rounds);
    eprintln!(
        "{name:>28}: {:>8.1} µs per body, {:>6.2} GB/s",
        each * 1e6,
        bytes as f64 / each / 1e9
    );
}

fn main() {
    for size in [50 * 1024, 1024 * 1024] {
        let b = body(size);
        let rounds = (200 * 1024 * 1024 / b.len()) as u32;
        eprintln!("{} bytes:", b.len());
        time("weir_wire::body::model", b.len(), rounds, || {
            black_box(weir_wire::body::model(black_box(&b)).expect("model"));
        });
        time("memchr2 scan (floor)", b.len(), rounds, || {
            black_box(memchr::memchr2_iter(b'"', b'\\', black_box(&b)).count());
        });
        time("serde_json::Value parse", b.len(), rounds / 4 + 1, || {
            black_box(serde_json::from_slice::<serde_json::Value>(black_box(&b)).expect("json"));
        });
        time(
            "serde_json ignore (old probe)",
            b.len(),
            rounds / 4 + 1,
            || {
                black_box(
                    serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&b)).expect("json"),
                );
            },
        );
    }
}
