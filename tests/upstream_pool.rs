//! weir's own HTTP/1.1 upstream pool, seen from the upstream's sockets:
//! what it keeps, what it closes, and what it never reuses. (Reuse and
//! the idle timeout are pinned in proxy_http1.rs.)

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// A byte-exact upstream: every request head it reads on a connection is
/// answered with `answer`; after the first answer it closes the
/// connection when `close_after_first`. Counts connections accepted and
/// connections the peer (weir) closed.
struct Raw {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    peer_closed: Arc<AtomicUsize>,
}

async fn raw_upstream(answer: &'static [u8], close_after_first: bool) -> Raw {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let peer_closed = Arc::new(AtomicUsize::new(0));
    let (a, c) = (accepted.clone(), peer_closed.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            let c = c.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            c.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                    // GETs only: a request ends with its head.
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        if s.write_all(answer).await.is_err() {
                            return;
                        }
                        if close_after_first {
                            let _ = s.shutdown().await;
                            return;
                        }
                    }
                }
            });
        }
    });
    Raw {
        addr,
        accepted,
        peer_closed,
    }
}

const KEEP_ALIVE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

#[tokio::test]
async fn a_connection_the_upstream_closed_while_idle_is_not_used() {
    // The upstream closes each connection right after its answer, keep-alive
    // notwithstanding (a server whose keep-alive timeout is shorter than
    // the pool's): the next request must go out on a new connection.
    let up = raw_upstream(KEEP_ALIVE, true).await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let client = h1_client();
    for n in 1..=3 {
        let (status, _, body) = get(&client, &weir.url("web", "/")).await;
        assert_eq!((status.as_u16(), body.as_str()), (200, "ok"), "request {n}");
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn an_answer_with_connection_close_is_not_pooled() {
    // The upstream says `Connection: close` but leaves the socket open:
    // weir must close it, and not send the next request on it.
    let up = raw_upstream(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        false,
    )
    .await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let client = h1_client();
    for _ in 0..2 {
        let (status, _, body) = get(&client, &weir.url("web", "/")).await;
        assert_eq!((status.as_u16(), body.as_str()), (200, "ok"));
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2, "no reuse");
    assert!(
        eventually(Duration::from_secs(5), || up
            .peer_closed
            .load(Ordering::SeqCst)
            == 2)
        .await,
        "weir closed both connections"
    );
}

#[tokio::test]
async fn idle_connections_over_the_cap_are_closed_and_the_rest_reused() {
    // Four requests held at the upstream together open four connections;
    // with a cap of two idle, two are closed when they end, two are kept
    // and serve what follows.
    let gate = Arc::new(Semaphore::new(0));
    let arrived = Arc::new(AtomicUsize::new(0));
    let up = {
        let (gate, arrived) = (gate.clone(), arrived.clone());
        upstream(move |_req| {
            let (gate, arrived) = (gate.clone(), arrived.clone());
            async move {
                arrived.fetch_add(1, Ordering::SeqCst);
                if let Ok(p) = gate.acquire().await {
                    p.forget();
                }
                text(200, "ok")
            }
        })
        .await
    };
    // One worker: the clients' connections would otherwise land on two
    // workers, each with pools of its own.
    let weir = Weir::start(&format!(
        "[server]\nworkers = 1\n[upstream]\npool_max_idle_per_host = 2\n{}",
        simple_config(up.addr, "")
    ))
    .await;
    let url = weir.url("web", "/");
    let held: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { get(&h1_client(), &url).await.0 })
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(5), || arrived.load(Ordering::SeqCst)
            == 4)
        .await,
        "the four requests reached the upstream"
    );
    gate.add_permits(1000);
    for h in held {
        assert_eq!(h.await.expect("request task"), 200);
    }
    assert_eq!(up.connections(), 4);
    assert!(
        eventually(Duration::from_secs(5), || up.closed() == 2).await,
        "the two over the cap were closed: {} closed",
        up.closed()
    );
    let client = h1_client();
    for _ in 0..3 {
        get(&client, &url).await;
    }
    assert_eq!(up.connections(), 4, "the two kept serve what follows");
    assert_eq!(up.closed(), 2);
}
