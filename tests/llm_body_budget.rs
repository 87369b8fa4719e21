//! The LLM body budget end to end: bytes are reserved as they arrive (a
//! client that declares much and sends slowly holds only what it sent),
//! and the whole body's read time is bounded (`body_read_timeout`: 408).

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::llm::*;
use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

const WORDS: &[&str] = &["Hello", " there", "."];

/// A POST to the LLM route from `from` declaring `declared` bytes of body
/// and sending only the first few.
async fn trickle(from: &str, weir: SocketAddr, declared: usize) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    let local: IpAddr = from.parse().expect("ip");
    socket
        .bind((local, 0).into())
        .expect("bind the client side");
    let mut s = socket.connect(weir).await.expect("connect");
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: a\r\ncontent-type: application/json\r\n\
         anthropic-version: 2023-06-01\r\ncontent-length: {declared}\r\n\r\n\
         {{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{{\"role\":\"user\",\"content\":\""
    );
    s.write_all(head.as_bytes()).await.expect("write");
    s
}

#[tokio::test]
async fn a_trickled_body_holds_only_what_it_sent() {
    let up = serving(WORDS).await;
    let weir = Weir::start(&format!(
        "[server]\nmax_buffered_body_bytes = 65536\n[connections]\nmin_body_rate = 0\n{}",
        llm_config("anthropic", &[("up", up.url())], "")
    ))
    .await;
    // Two clients whose bodies declare half the budget each and send 60
    // bytes: before, their declared lengths took all of it.
    let _one = trickle("127.0.0.2", weir.addr("web"), 32768).await;
    let _two = trickle("127.0.0.3", weir.addr("web"), 32768).await;
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 2).await);
    let (s, _, body) = post(
        &weir,
        "/v1/messages",
        messages_body("m", false),
        &[("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(
        s, 200,
        "the budget was not taken by what was only declared: {body}"
    );
}

#[tokio::test]
async fn a_body_slower_than_its_read_time_bound_is_answered_408() {
    let up = serving(WORDS).await;
    let weir = Weir::start(&format!(
        "[server]\nbody_read_timeout = \"500ms\"\n[connections]\nmin_body_rate = 0\n{}",
        llm_config("anthropic", &[("up", up.url())], "")
    ))
    .await;
    let mut s = trickle("127.0.0.1", weir.addr("web"), 100_000).await;
    let (out, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "the connection was closed: {out}");
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 0).await);
    assert_eq!(up.seen().len(), 0, "nothing went upstream");
}

#[tokio::test]
async fn the_client_holding_most_of_the_budget_loses_first() {
    let up = serving(WORDS).await;
    let weir = Weir::start(&format!(
        "[server]\nmax_buffered_body_bytes = 65536\n[connections]\nmin_body_rate = 0\n{}",
        llm_config("anthropic", &[("up", up.url())], "")
    ))
    .await;
    // One client sends most of a body as large as the whole budget, then
    // stalls: growing into the budget's last sixteenth, it is refused.
    let mut heavy = trickle("127.0.0.2", weir.addr("web"), 65536).await;
    heavy
        .write_all(&vec![b'x'; 40 * 1024])
        .await
        .expect("most of the body");
    let (out, _) = read_until_close(&mut heavy, Duration::from_secs(5)).await;
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    assert!(out.contains("retry-after: 1"), "{out}");
    assert_eq!(
        metric(
            &weir,
            "weir_requests_shed_total{reason=\"llm_body_heaviest\",route=\"llm\"}"
        )
        .await,
        Some(1)
    );
    let (s, _, body) = post(
        &weir,
        "/v1/messages",
        messages_body("m", false),
        &[("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(s, 200, "another client's body fits: {body}");
}
