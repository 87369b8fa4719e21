//! HTTP/1.1 framing (RFC 9112), byte-exact on raw sockets: requests two
//! parsers could read differently get 400 and the connection closes, so a
//! request pipelined behind them is never answered; an absolute-form target
//! is routed by its own authority.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A request pipelined behind each vector: answering it would mean weir
/// read the vector's framing as complete and trusted the connection.
const FOLLOW_UP: &[u8] = b"GET /echo HTTP/1.1\r\nHost: follow.test\r\n\r\n";

/// Send `vector` and the follow-up; what came back, and whether weir
/// closed the connection.
async fn send(weir: &Weir, vector: &[u8]) -> (String, bool) {
    let mut bytes = vector.to_vec();
    bytes.extend_from_slice(FOLLOW_UP);
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    s.write_all(&bytes).await.expect("write");
    read_until_close(&mut s, Duration::from_secs(5)).await
}

fn responses(out: &str) -> usize {
    out.matches("HTTP/1.1 ").count()
}

#[tokio::test]
async fn ambiguous_framing_gets_400_and_the_connection_closes() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let vectors: [(&str, &[u8]); 5] = [
        (
            "two Host lines",
            b"GET /echo HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
        ),
        (
            "chunked on two lines",
            b"POST /echo HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\
              Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            "chunked, chunked",
            b"POST /echo HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked, chunked\r\n\r\n\
              3\r\nabc\r\n0\r\n\r\n",
        ),
        (
            "a transfer coding that is not chunked",
            b"POST /echo HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip\r\n\r\nxxxx",
        ),
        (
            "an invalid chunk size",
            b"POST /echo HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n\
              zz\r\nabc\r\n0\r\n\r\n",
        ),
    ];
    for (name, vector) in vectors {
        let (out, closed) = send(&weir, vector).await;
        assert!(out.starts_with("HTTP/1.1 400"), "{name}: {out:?}");
        assert!(closed, "{name}: the connection was closed");
        assert_eq!(
            responses(&out),
            1,
            "{name}: the pipelined request is not answered: {out:?}"
        );
    }
}

#[tokio::test]
async fn content_length_with_chunked_is_read_as_chunked_then_closed() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    // Both orders: hyper drops the length and reads the chunked body.
    for vector in [
        &b"POST /echo HTTP/1.1\r\nHost: a.test\r\nContent-Length: 100\r\n\
           Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..],
        &b"POST /echo HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\
           Content-Length: 100\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..],
    ] {
        let (out, closed) = send(&weir, vector).await;
        assert!(out.starts_with("HTTP/1.1 200"), "{out:?}");
        assert!(closed, "the connection was closed");
        assert!(
            out.to_ascii_lowercase().contains("connection: close"),
            "{out:?}"
        );
        let body = &out[out.find("\r\n\r\n").expect("head") + 4..];
        let echo = echo_json(body.trim());
        assert_eq!(echo["body_length"], 3, "read as chunked");
        assert!(
            echo["headers"].get("content-length").is_none(),
            "the length is not forwarded: {echo}"
        );
        assert_eq!(responses(&out), 1, "closed after the response: {out:?}");
    }
}

#[tokio::test]
async fn an_absolute_form_target_is_routed_by_its_authority() {
    let a = demo_upstream().await;
    let b = upstream(|_req| async { text(200, "b upstream") }).await;
    let weir = Weir::start(&format!(
        "[log]\naccess_log = false\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"a\"\nhost = \"a.example\"\nupstream = \"http://{a}\"\n\
         [[route]]\nname = \"b\"\nhost = \"b.example\"\nupstream = \"http://{}\"\n",
        b.addr
    ))
    .await;
    let out = raw(
        weir.addr("web"),
        b"GET http://a.example/echo HTTP/1.1\r\nHost: b.example\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out:?}");
    let body = &out[out.find("\r\n\r\n").expect("head") + 4..];
    let echo = echo_json(body.trim());
    assert_eq!(
        echo["headers"]["x-forwarded-host"][0], "a.example",
        "the target's host is forwarded: {echo}"
    );
    assert_eq!(echo["path"], "/echo");
}
