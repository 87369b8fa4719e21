//! HTTP/1.1 proxying end to end: headers, streaming, upgrades, trailers and
//! the RFC 9110 special cases.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use futures_util::{SinkExt, StreamExt};
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn echo_sets_forwarded_headers_and_keeps_host() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let (status, _, body) = get_with(
        &weir.url("web", "/echo?a=1"),
        &[
            ("host", "app.example.com"),
            ("x-forwarded-for", "6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("x-forwarded-proto", "https"),
        ],
    )
    .await;
    assert_eq!(status, 200);
    let echo = echo_json(&body);
    let h = &echo["headers"];
    assert_eq!(echo["path"], "/echo");
    assert_eq!(echo["query"], "a=1");
    assert_eq!(h["host"][0], "app.example.com");
    assert_eq!(
        h["x-forwarded-for"][0], "127.0.0.1",
        "client value replaced"
    );
    assert_eq!(h["x-real-ip"][0], "127.0.0.1");
    assert_eq!(h["x-forwarded-proto"][0], "http");
    assert_eq!(h["x-forwarded-host"][0], "app.example.com");
}

#[tokio::test]
async fn trusted_proxy_chain_is_appended() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[server]\ntrusted_proxies = [\"127.0.0.0/8\"]\n{}",
        simple_config(up, "")
    ))
    .await;
    let (_, _, body) = get_with(
        &weir.url("web", "/echo"),
        &[("x-forwarded-for", "203.0.113.7")],
    )
    .await;
    let echo = echo_json(&body);
    assert_eq!(
        echo["headers"]["x-forwarded-for"][0],
        "203.0.113.7, 127.0.0.1"
    );
    assert_eq!(echo["headers"]["x-real-ip"][0], "203.0.113.7");
}

#[tokio::test]
async fn hop_by_hop_headers_are_removed_both_ways() {
    let up = upstream(|req: Request<hyper::body::Incoming>| async move {
        // Report what arrived, and send hop-by-hop headers back.
        let seen: Vec<String> = req.headers().keys().map(|k| k.to_string()).collect();
        let mut r = Response::new(body(seen.join(",")));
        let h = r.headers_mut();
        h.insert("connection", HeaderValue::from_static("x-upstream-private"));
        h.insert("x-upstream-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("proxy-authenticate", HeaderValue::from_static("Basic"));
        h.insert("x-public", HeaderValue::from_static("1"));
        r
    })
    .await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let (status, headers, seen) = get_with(
        &weir.url("web", "/"),
        &[
            ("connection", "x-client-private"),
            ("x-client-private", "1"),
            ("keep-alive", "timeout=1"),
            ("proxy-authorization", "Basic eA=="),
            ("x-kept", "1"),
        ],
    )
    .await;
    assert_eq!(status, 200);
    let seen: Vec<&str> = seen.split(',').collect();
    assert!(seen.contains(&"x-kept"), "{seen:?}");
    for gone in ["x-client-private", "keep-alive", "proxy-authorization"] {
        assert!(
            !seen.contains(&gone),
            "{gone} reached the upstream: {seen:?}"
        );
    }
    assert!(headers.contains_key("x-public"));
    for gone in ["x-upstream-private", "keep-alive", "proxy-authenticate"] {
        assert!(
            !headers.contains_key(gone),
            "{gone} reached the client: {headers:?}"
        );
    }
}

#[tokio::test]
async fn response_streams_before_upstream_finishes() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    // 3 events 2 s apart: the first must arrive long before the last is sent.
    let resp = h1_client()
        .get(
            weir.url("web", "/sse?n=3&interval_ms=2000")
                .parse()
                .expect("url"),
        )
        .await
        .expect("response");
    let mut b = resp.into_body();
    let first = tokio::time::timeout(Duration::from_millis(1500), b.frame())
        .await
        .expect("first event is not buffered")
        .expect("frame")
        .expect("ok");
    let data = first.into_data().expect("data");
    assert!(String::from_utf8_lossy(&data).contains("\"n\":1"));
}

#[tokio::test]
async fn request_body_streams_to_upstream_before_client_finishes() {
    // The upstream answers as soon as the first chunk arrives; the client
    // only sends the rest after seeing that answer. A buffering proxy
    // would deadlock here.
    let up = upstream(|req: Request<hyper::body::Incoming>| async move {
        let mut b = req.into_body();
        let first = b
            .frame()
            .await
            .and_then(Result::ok)
            .and_then(|f| f.into_data().ok());
        let (mut tx, rx) =
            http_body_util::channel::Channel::<Bytes, std::convert::Infallible>::new(1);
        tokio::spawn(async move {
            let _ = tx.send_data(first.unwrap_or_default()).await;
            let mut rest = 0usize;
            while let Some(Ok(f)) = b.frame().await {
                rest += f.data_ref().map_or(0, |d| d.len());
            }
            let _ = tx.send_data(Bytes::from(format!("|{rest}"))).await;
        });
        Response::new(rx.boxed())
    })
    .await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let (body_tx, body_rx) =
        tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
    let stream = Box::pin(futures_util::stream::unfold(body_rx, |mut rx| async move {
        rx.recv().await.map(|f| (f, rx))
    }));
    let req = Request::post(weir.url("web", "/upload"))
        .body(StreamBody::new(stream))
        .expect("request");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    body_tx
        .send(Ok(Frame::data(Bytes::from_static(b"first"))))
        .await
        .expect("send");
    let resp = tokio::time::timeout(Duration::from_secs(5), client.request(req))
        .await
        .expect("upstream answered before the body ended")
        .expect("response");
    let mut b = resp.into_body();
    let echoed = b
        .frame()
        .await
        .expect("frame")
        .expect("ok")
        .into_data()
        .expect("data");
    assert_eq!(&echoed[..], b"first");
    body_tx
        .send(Ok(Frame::data(Bytes::from(vec![b'x'; 1000]))))
        .await
        .expect("send");
    drop(body_tx);
    let rest = b.collect().await.expect("rest").to_bytes();
    assert_eq!(&rest[..], b"|1000");
}

#[tokio::test]
async fn websocket_is_tunnelled() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let (mut ws, resp) = tokio_tungstenite::connect_async(format!("ws://{}/ws", weir.addr("web")))
        .await
        .expect("websocket handshake through weir");
    assert_eq!(resp.status(), 101);
    ws.send(Message::text("hello")).await.expect("send");
    let back = ws.next().await.expect("message").expect("ok");
    assert_eq!(back.into_text().expect("text").as_str(), "hello");
    ws.send(Message::binary(vec![1u8, 2, 3]))
        .await
        .expect("send");
    assert_eq!(
        ws.next()
            .await
            .expect("message")
            .expect("ok")
            .into_data()
            .as_ref(),
        &[1, 2, 3]
    );
}

fn trailer_upstream()
-> impl Fn(Request<hyper::body::Incoming>) -> std::future::Ready<Response<TestBody>> + Clone {
    |req: Request<hyper::body::Incoming>| {
        let asked = req.headers().get("te").is_some_and(|v| v == "trailers");
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-checksum", HeaderValue::from_static("abc123"));
        trailers.insert(
            "x-te-seen",
            HeaderValue::from_static(if asked { "yes" } else { "no" }),
        );
        let frames = vec![
            Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(b"payload"))),
            Ok(Frame::trailers(trailers)),
        ];
        let mut r = Response::new(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
            frames,
        ))));
        r.headers_mut()
            .insert("trailer", HeaderValue::from_static("x-checksum, x-te-seen"));
        std::future::ready(r)
    }
}

#[tokio::test]
async fn trailers_pass_to_http1_clients_that_accept_them() {
    let up = upstream(trailer_upstream()).await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let resp = send(
        http::Method::GET,
        &weir.url("web", "/"),
        &[("te", "trailers")],
        Bytes::new(),
    )
    .await;
    let collected = resp.into_body().collect().await.expect("body");
    let trailers = collected.trailers().cloned().expect("trailers arrived");
    assert_eq!(trailers["x-checksum"], "abc123");
    assert_eq!(trailers["x-te-seen"], "yes");
    assert_eq!(&collected.to_bytes()[..], b"payload");
}

#[tokio::test]
async fn head_204_and_304_have_no_body_and_keep_the_connection() {
    let up = upstream(|req: Request<hyper::body::Incoming>| async move {
        match req.uri().path() {
            "/204" => text(204, ""),
            "/304" => {
                let mut r = text(304, "");
                r.headers_mut()
                    .insert("etag", HeaderValue::from_static("\"v1\""));
                r
            }
            _ => text(200, "hello world"),
        }
    })
    .await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    s.write_all(
        b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\nGET /204 HTTP/1.1\r\nHost: a\r\n\r\n\
          GET /304 HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"v1\"\r\n\r\n\
          GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .expect("write");
    let (out, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "the final Connection: close ends it: {out}");
    let statuses: Vec<&str> = out.lines().filter(|l| l.starts_with("HTTP/1.1 ")).collect();
    assert_eq!(
        statuses,
        [
            "HTTP/1.1 200 OK",
            "HTTP/1.1 204 No Content",
            "HTTP/1.1 304 Not Modified",
            "HTTP/1.1 200 OK"
        ],
        "{out}"
    );
    let head = out.split("HTTP/1.1 204").next().expect("head response");
    assert!(
        head.to_ascii_lowercase().contains("content-length: 11"),
        "HEAD keeps the length: {head}"
    );
    assert!(!head.contains("hello world"), "HEAD has no body");
    assert_eq!(out.matches("hello world").count(), 1, "{out}");
}

#[tokio::test]
async fn expect_continue_is_answered_and_body_forwarded() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "max_request_body = 100")).await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
        .await
        .expect("write head");
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut s, &mut buf),
    )
    .await
    .expect("100 Continue in time")
    .expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 100 Continue"));
    s.write_all(b"hello").await.expect("write body");
    let (out, _) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("\"body_length\":5"), "{out}");
    assert!(
        !out.to_ascii_lowercase().contains("\"expect\""),
        "Expect is not forwarded: {out}"
    );
}

#[tokio::test]
async fn declared_oversize_body_gets_413_without_100_continue_or_upstream_contact() {
    let up = upstream(|_req| async { text(200, "should not be reached") }).await;
    let weir = Weir::start(&simple_config(up.addr, "max_request_body = \"1KiB\"")).await;
    let out = raw(
        weir.addr("web"),
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert!(!out.contains("100 Continue"), "{out}");
    assert!(
        out.to_ascii_lowercase().contains("connection: close"),
        "{out}"
    );
    assert_eq!(up.connections(), 0, "the upstream was never contacted");
}

#[tokio::test]
async fn chunked_body_crossing_the_limit_is_cut_with_413_and_closed() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "max_request_body = 1000")).await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    s.write_all(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .expect("head");
    for _ in 0..3 {
        s.write_all(b"1F4\r\n").await.expect("size");
        s.write_all(&[b'x'; 500]).await.expect("chunk");
        s.write_all(b"\r\n").await.expect("crlf");
    }
    let (out, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    assert!(closed, "connection closed after the cut");
}

#[tokio::test]
async fn body_under_the_limit_passes() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "max_request_body = 1000")).await;
    let resp = send(
        http::Method::POST,
        &weir.url("web", "/echo"),
        &[],
        vec![b'y'; 1000],
    )
    .await;
    let (status, _, b) = split(resp).await;
    assert_eq!(status, 200);
    assert_eq!(echo_json(&b)["body_length"], 1000);
}

#[tokio::test]
async fn upstream_connections_are_pooled() {
    let up = upstream(|_req| async { text(200, "ok") }).await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let client = h1_client();
    for _ in 0..5 {
        let (status, _, _) = get(&client, &weir.url("web", "/")).await;
        assert_eq!(status, 200);
    }
    assert_eq!(
        up.connections(),
        1,
        "one kept-alive upstream connection serves all"
    );
}

#[tokio::test]
async fn pool_idle_cap_zero_disables_reuse() {
    let up = upstream(|_req| async { text(200, "ok") }).await;
    let weir = Weir::start(&format!(
        "[upstream]\npool_max_idle_per_host = 0\n{}",
        simple_config(up.addr, "")
    ))
    .await;
    let client = h1_client();
    for _ in 0..3 {
        get(&client, &weir.url("web", "/")).await;
    }
    assert_eq!(up.connections(), 3);
}

#[tokio::test]
async fn malformed_request_gets_400_and_close() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "")).await;
    let out = raw(weir.addr("web"), b"GARBAGE\r\n\r\n", Duration::from_secs(5)).await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out:?}");
}

#[tokio::test]
async fn strip_prefix_and_upstream_base_path() {
    let up = demo_upstream().await;
    let weir = Weir::start(&format!(
        "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\npath = \"/api\"\nstrip_prefix = true\nupstream = \"http://{up}/\"\n\
         [[route]]\npath = \"/v\"\nupstream = \"http://{up}/echo\"\npreserve_host = false\n"
    ))
    .await;
    let client = h1_client();
    let (_, _, b) = get(&client, &weir.url("web", "/api/echo?x=1")).await;
    let e = echo_json(&b);
    assert_eq!(e["path"], "/echo");
    assert_eq!(e["query"], "x=1");
    let (_, _, b) = get(&client, &weir.url("web", "/v/deep")).await;
    let e = echo_json(&b);
    assert_eq!(e["path"], "/echo/v/deep");
    assert_eq!(
        e["headers"]["host"][0],
        up.to_string(),
        "preserve_host = false sends the upstream's authority"
    );
}

#[tokio::test]
async fn informational_103_from_upstream_does_not_confuse_the_final_response() {
    // A raw upstream that sends 103 Early Hints before its 200.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut s, &mut buf).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
                          HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal",
                    )
                    .await;
            });
        }
    });
    let weir = Weir::start(&simple_config(addr, "")).await;
    let (status, _, b) = get(&h1_client(), &weir.url("web", "/")).await;
    assert_eq!((status.as_u16(), b.as_str()), (200, "final"));
}

#[tokio::test]
async fn idle_upstream_connections_expire() {
    let up = upstream(|_req| async { text(200, "ok") }).await;
    let weir = Weir::start(&format!(
        "[upstream]\npool_idle_timeout = \"100ms\"\n{}",
        simple_config(up.addr, "")
    ))
    .await;
    let client = h1_client();
    get(&client, &weir.url("web", "/")).await;
    assert!(
        eventually(Duration::from_secs(3), || up.closed() == 1).await,
        "weir closed its idle upstream connection"
    );
    get(&client, &weir.url("web", "/")).await;
    assert_eq!(
        up.connections(),
        2,
        "the idle connection was closed, not reused"
    );
}

#[tokio::test]
async fn connect_method_is_refused() {
    let up = upstream(|_req| async { text(200, "should not be reached") }).await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let out = raw(
        weir.addr("web"),
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n",
        Duration::from_secs(2),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 405"), "{out}");
    assert_eq!(up.connections(), 0);
}

#[tokio::test]
async fn an_http10_upstream_answer_reaches_the_client_as_http11_and_keeps_it_alive() {
    // An upstream that speaks HTTP/1.0 (Python's http.server, say): it
    // answers each connection once, with an HTTP/1.0 status line.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let up = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tokio::io::AsyncReadExt::read(&mut s, &mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s
                    .write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await;
            });
        }
    });
    let weir = Weir::start(&simple_config(up, "")).await;
    let mut s = TcpStream::connect(weir.addr("web")).await.expect("connect");
    for _ in 0..2 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .expect("write");
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.ends_with(b"ok") {
            let n = tokio::time::timeout(
                Duration::from_secs(5),
                tokio::io::AsyncReadExt::read(&mut s, &mut buf),
            )
            .await
            .expect("answer in time")
            .expect("read");
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    }
}
