//! Tunnels (HTTP/1.1 Upgrade) and the fair gate end to end: one address's
//! idle WebSockets cannot take the gate from another, an idle tunnel of
//! the heaviest client gives its slot to a newcomer, tunnels end after
//! their idle timeout and lifetime, the per-address cap, and only the
//! upgrade protocols a route allows are tunnelled.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::*;
use futures_util::SinkExt;
use http::{HeaderValue, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;

const WS_HANDSHAKE: &[u8] = b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n\
Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

/// A TCP connection to `to` from the loopback address `from`.
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    let local: IpAddr = from.parse().expect("ip");
    socket
        .bind((local, 0).into())
        .expect("bind the client side");
    socket.connect(to).await.expect("connect")
}

/// Send `request` and read the answer's head (up to the blank line).
async fn head(s: &mut TcpStream, request: &[u8]) -> String {
    s.write_all(request).await.expect("write");
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut byte)).await {
            Ok(Ok(1)) => out.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A WebSocket upgrade from `from` that then sends nothing: the socket and
/// the answer's head.
async fn idle_websocket(from: &str, weir: SocketAddr) -> (TcpStream, String) {
    let mut s = connect_from(from, weir).await;
    let h = head(&mut s, WS_HANDSHAKE).await;
    (s, h)
}

async fn status_from(from: &str, weir: SocketAddr, path: &str) -> String {
    let mut s = connect_from(from, weir).await;
    let request = format!("GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    head(&mut s, request.as_bytes()).await
}

#[tokio::test]
async fn idle_websockets_from_one_address_leave_the_gate_to_another() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[server]\nmax_concurrent_requests = 50\n{}",
        simple_config(up, "")
    ))
    .await;
    let addr = weir.addr("web");
    let mut tunnels = Vec::new();
    let mut shed = 0;
    for _ in 0..60 {
        let (s, h) = idle_websocket("127.0.0.2", addr).await;
        if h.starts_with("HTTP/1.1 101") {
            tunnels.push(s);
        } else {
            assert!(h.starts_with("HTTP/1.1 503"), "{h}");
            assert!(h.to_ascii_lowercase().contains("retry-after: 1"), "{h}");
            shed += 1;
        }
    }
    assert!(
        shed >= 10,
        "the heaviest client is shed before the gate is full"
    );
    for _ in 0..3 {
        let h = status_from("127.0.0.1", addr, "/echo").await;
        assert!(
            h.starts_with("HTTP/1.1 200"),
            "another address is served: {h}"
        );
    }
    assert_eq!(
        metric(
            &weir,
            "weir_requests_shed_total{reason=\"global_heaviest\",route=\"-\"}"
        )
        .await,
        Some(shed)
    );
    drop(tunnels);
}

#[tokio::test]
async fn at_a_full_gate_the_heaviest_clients_idle_tunnel_gives_its_slot() {
    let up = demo_upstream().await;
    // A gate of 4 has no headroom: only reclaiming makes room.
    let weir = Weir::start(&format!(
        "[server]\nmax_concurrent_requests = 4\n{}",
        simple_config(up, "")
    ))
    .await;
    let addr = weir.addr("web");
    let mut tunnels = Vec::new();
    for _ in 0..4 {
        let (s, h) = idle_websocket("127.0.0.2", addr).await;
        assert!(h.starts_with("HTTP/1.1 101"), "{h}");
        tunnels.push(s);
    }
    let h = status_from("127.0.0.2", addr, "/echo").await;
    assert!(
        h.starts_with("HTTP/1.1 503"),
        "the heaviest client itself: {h}"
    );
    // Once its tunnels have been idle a moment, a newcomer takes one's slot.
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            status_from("127.0.0.1", addr, "/echo")
                .await
                .starts_with("HTTP/1.1 200")
        })
        .await,
        "a client with nothing in flight was admitted"
    );
    assert!(eventually_metric(&weir, "weir_tunnels_closed_total{reason=\"reclaimed\"}", 1).await);
    let mut closed = 0;
    for s in &mut tunnels {
        if read_until_close(s, Duration::from_millis(200)).await.1 {
            closed += 1;
        }
    }
    assert_eq!(closed, 1, "exactly one tunnel was reclaimed");
}

#[tokio::test]
async fn an_idle_tunnel_closes_after_its_idle_timeout_and_a_busy_one_at_its_lifetime() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[connections]\ntunnel_idle_timeout = \"300ms\"\n{}",
        simple_config(up, "")
    ))
    .await;
    let (mut s, h) = idle_websocket("127.0.0.1", weir.addr("web")).await;
    assert!(h.starts_with("HTTP/1.1 101"), "{h}");
    let (_, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "the idle tunnel was closed");
    assert!(
        eventually_metric(
            &weir,
            "weir_tunnels_closed_total{reason=\"idle_timeout\"}",
            1
        )
        .await
    );
    assert!(eventually_metric(&weir, "weir_requests_in_flight", 0).await);

    let weir = Weir::start(&format!(
        "[connections]\ntunnel_idle_timeout = \"300ms\"\ntunnel_max_lifetime = \"700ms\"\n{}",
        simple_config(up, "")
    ))
    .await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws", weir.addr("web")))
        .await
        .expect("websocket");
    // Busy every 100 ms, well inside the idle timeout: only the lifetime ends it.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if ws.send(Message::text("ping")).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(ended.is_ok(), "the tunnel was closed at its lifetime");
    assert!(
        eventually_metric(
            &weir,
            "weir_tunnels_closed_total{reason=\"max_lifetime\"}",
            1
        )
        .await
    );
}

#[tokio::test]
async fn tunnels_per_address_are_capped() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[connections]\nmax_tunnels_per_ip = 2\n{}",
        simple_config(up, "")
    ))
    .await;
    let addr = weir.addr("web");
    let (_a, h) = idle_websocket("127.0.0.2", addr).await;
    assert!(h.starts_with("HTTP/1.1 101"), "{h}");
    let (_b, h) = idle_websocket("127.0.0.2", addr).await;
    assert!(h.starts_with("HTTP/1.1 101"), "{h}");
    let (_c, h) = idle_websocket("127.0.0.2", addr).await;
    assert!(h.starts_with("HTTP/1.1 503"), "{h}");
    assert!(h.to_ascii_lowercase().contains("retry-after: 1"), "{h}");
    let (_d, h) = idle_websocket("127.0.0.1", addr).await;
    assert!(h.starts_with("HTTP/1.1 101"), "another address: {h}");
    assert_eq!(
        metric(
            &weir,
            "weir_requests_shed_total{reason=\"tunnels_per_ip\",route=\"main\"}"
        )
        .await,
        Some(1)
    );
}

/// An upstream that switches to any protocol it is asked for, and answers
/// a plain request with the Upgrade header it saw.
async fn any_upgrade_upstream() -> Upstream {
    upstream(|mut req: Request<hyper::body::Incoming>| async move {
        let Some(proto) = req.headers().get("upgrade").cloned() else {
            return text(200, "plain");
        };
        let on_upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(up) = on_upgrade.await {
                // Hold the switched connection open a while.
                let _held = up;
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        let mut resp = Response::new(body(""));
        *resp.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
        resp.headers_mut().insert("upgrade", proto);
        resp.headers_mut()
            .insert("connection", HeaderValue::from_static("upgrade"));
        resp
    })
    .await
}

const FOO_UPGRADE: &[u8] =
    b"GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: foo/2\r\n\r\n";

#[tokio::test]
async fn only_websocket_is_tunnelled_unless_the_route_allows_more() {
    let up = any_upgrade_upstream().await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let mut s = connect_from("127.0.0.1", weir.addr("web")).await;
    let h = head(&mut s, FOO_UPGRADE).await;
    assert!(
        h.starts_with("HTTP/1.1 200"),
        "the unknown protocol is ignored, the request served plain: {h}"
    );
    assert!(!h.to_ascii_lowercase().contains("upgrade: foo"), "{h}");
    let mut rest = [0u8; 5];
    s.read_exact(&mut rest).await.expect("body");
    assert_eq!(&rest, b"plain", "the upstream saw no Upgrade");

    let weir = Weir::start(&simple_config(
        up.addr,
        "upgrade_protocols = [\"websocket\", \"foo\"]",
    ))
    .await;
    let mut s = connect_from("127.0.0.1", weir.addr("web")).await;
    let h = head(&mut s, FOO_UPGRADE).await;
    assert!(h.starts_with("HTTP/1.1 101"), "allowed by the route: {h}");
    assert!(h.to_ascii_lowercase().contains("upgrade: foo/2"), "{h}");
}
