//! One Responses turn after another, over Codex's WebSocket transport or
//! over HTTP with SSE, through weir (driven by bench/turns.sh).
//!
//! `turns ws|sse ADDR N` opens one connection to weir at ADDR (a keep-alive
//! HTTP/1.1 one for `sse`, one WebSocket on `/v1/responses` for `ws`) and
//! sends N `response.create` turns one after the other, each timed from
//! writing it to reading its terminal event (`response.completed`). Prints
//! one JSON line: turns, errors, and the p50/p90/p99 in µs. The first 10
//! turns warm up and are not counted.
//!
//! The client is thin on purpose: the SSE answer is read until its bytes
//! hold `response.completed` and the body's end, the WebSocket one frame
//! by frame until the terminal event's frame; nothing else is parsed.

use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const WARM_UP: usize = 10;

/// A turn as Codex sends it: the same request, as a `response.create`
/// frame over the WebSocket, as a POST body over HTTP.
fn turn_body(frame: bool) -> String {
    let mut v = serde_json::json!({
        "model": "gpt-5-codex",
        "instructions": "Be brief.",
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": "Say hello"}]}],
        "store": false,
        "stream": true,
    });
    if frame {
        v["type"] = "response.create".into();
    }
    v.to_string()
}

fn percentile(v: &mut [u32], p: f64) -> u32 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Turns over one WebSocket; the elapsed µs of each, or the error count.
async fn over_websocket(addr: &str, n: usize) -> Result<(Vec<u32>, u64), String> {
    let mut req = format!("ws://{addr}/v1/responses")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    req.headers_mut().insert(
        "openai-beta",
        "responses_websockets=2026-02-06"
            .parse()
            .map_err(|_| "header")?,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| e.to_string())?;
    let frame = turn_body(true);
    let (mut times, mut errors) = (Vec::with_capacity(n), 0);
    for i in 0..n + WARM_UP {
        let start = Instant::now();
        ws.send(Message::text(frame.clone()))
            .await
            .map_err(|e| e.to_string())?;
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) if t.contains("\"response.completed\"") => break,
                Some(Ok(Message::Text(t))) if t.contains("\"type\":\"error\"") => {
                    errors += 1;
                    break;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.to_string()),
                None => return Err("closed".into()),
            }
        }
        if i >= WARM_UP {
            times.push(start.elapsed().as_micros() as u32);
        }
    }
    Ok((times, errors))
}

/// Turns as POSTs with `stream: true` on one keep-alive connection.
async fn over_sse(addr: &str, n: usize) -> Result<(Vec<u32>, u64), String> {
    let mut conn = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    conn.set_nodelay(true).map_err(|e| e.to_string())?;
    let body = turn_body(false);
    let request = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (mut times, mut errors) = (Vec::with_capacity(n), 0);
    let mut buf = vec![0u8; 64 * 1024];
    for i in 0..n + WARM_UP {
        let start = Instant::now();
        conn.write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut seen = Vec::new();
        loop {
            let got = conn.read(&mut buf).await.map_err(|e| e.to_string())?;
            if got == 0 {
                return Err("closed".into());
            }
            seen.extend_from_slice(&buf[..got]);
            if answer_ended(&seen) {
                break;
            }
        }
        let text = String::from_utf8_lossy(&seen);
        if !text.starts_with("HTTP/1.1 200") || !text.contains("response.completed") {
            errors += 1;
        }
        if i >= WARM_UP {
            times.push(start.elapsed().as_micros() as u32);
        }
    }
    Ok((times, errors))
}

/// Whether `seen` holds a whole answer: its head, then `Content-Length`
/// bytes, or chunks up to the last one.
fn answer_ended(seen: &[u8]) -> bool {
    let Some(head_end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    match length {
        Some(n) => seen.len() >= head_end + 4 + n,
        None => seen.ends_with(b"\r\n0\r\n\r\n"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(addr), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: turns ws|sse ADDR N");
        std::process::exit(2);
    };
    let n: usize = n.parse().unwrap_or(1000);
    let run = match mode.as_str() {
        "ws" => over_websocket(addr, n).await,
        "sse" => over_sse(addr, n).await,
        _ => Err("mode is ws or sse".into()),
    };
    match run {
        Ok((mut times, errors)) => println!(
            "{{\"mode\":\"{mode}\",\"turns\":{},\"errors\":{errors},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{}}}",
            times.len(),
            percentile(&mut times, 0.5),
            percentile(&mut times, 0.9),
            percentile(&mut times, 0.99)
        ),
        Err(e) => {
            eprintln!("turns: {e}");
            std::process::exit(1);
        }
    }
}
