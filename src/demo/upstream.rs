//! The demo's built-in upstream: a small real HTTP server with endpoints
//! that exercise what a proxy must get right (echo, large streams, SSE,
//! WebSocket, slow answers). Integration tests use it as well.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;

type DemoBody = BoxBody<Bytes, Infallible>;

/// Chunk size for `/bytes/N`.
const CHUNK: usize = 16 * 1024;

/// Start the demo upstream on `addr` (port 0 picks one) and return where it listens.
pub async fn spawn(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            tokio::spawn(async move {
                let service =
                    service_fn(|req| async move { Ok::<_, Infallible>(route(req).await) });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(local)
}

fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<DemoBody> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn query_param(req: &Request<Incoming>, name: &str) -> Option<u64> {
    req.uri()
        .query()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

async fn route(req: Request<Incoming>) -> Response<DemoBody> {
    let path = req.uri().path().to_string();
    match path.as_str() {
        p if p == "/echo" || p.starts_with("/echo/") => echo(req).await,
        "/sse" => sse(
            query_param(&req, "n").unwrap_or(5),
            query_param(&req, "interval_ms").unwrap_or(500),
        ),
        "/ws" => websocket(req),
        "/slow" => {
            let ms = query_param(&req, "ms").unwrap_or(1000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            full(StatusCode::OK, "text/plain", format!("slept {ms} ms\n"))
        }
        p if p.starts_with("/bytes/") => match p["/bytes/".len()..].parse::<u64>() {
            Ok(n) => bytes(n),
            Err(_) => full(
                StatusCode::BAD_REQUEST,
                "text/plain",
                "use /bytes/N with N a number of bytes\n",
            ),
        },
        "/" => full(
            StatusCode::OK,
            "text/plain",
            "weir demo upstream: /echo /bytes/N /sse?n=K&interval_ms=M /ws /slow?ms=M\n",
        ),
        _ => full(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    }
}

async fn echo(req: Request<Incoming>) -> Response<DemoBody> {
    let (parts, body) = req.into_parts();
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in &parts.headers {
        headers
            .entry(k.as_str().to_string())
            .or_default()
            .push(String::from_utf8_lossy(v.as_bytes()).into_owned());
    }
    // Count the body without keeping it: echo must work for huge uploads.
    let mut body = body;
    let mut body_length: u64 = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => body_length += f.data_ref().map_or(0, |d| d.len() as u64),
            Err(_) => return full(StatusCode::BAD_REQUEST, "text/plain", "body read failed\n"),
        }
    }
    let json = format!(
        "{{\"method\":{},\"path\":{},\"query\":{},\"headers\":{},\"body_length\":{}}}\n",
        json_string(parts.method.as_str()),
        json_string(parts.uri.path()),
        json_string(parts.uri.query().unwrap_or("")),
        json_headers(&headers),
        body_length
    );
    full(StatusCode::OK, "application/json", json)
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_headers(h: &BTreeMap<String, Vec<String>>) -> String {
    let items: Vec<String> = h
        .iter()
        .map(|(k, vs)| {
            let vs: Vec<String> = vs.iter().map(|v| json_string(v)).collect();
            format!("{}:[{}]", json_string(k), vs.join(","))
        })
        .collect();
    format!("{{{}}}", items.join(","))
}

/// N bytes, produced chunk by chunk as the client reads them.
fn bytes(n: u64) -> Response<DemoBody> {
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(2);
    tokio::spawn(async move {
        let chunk = Bytes::from(vec![b'x'; CHUNK]);
        let mut left = n;
        while left > 0 {
            let take = left.min(CHUNK as u64) as usize;
            if tx.send_data(chunk.slice(..take)).await.is_err() {
                return;
            }
            left -= take as u64;
        }
    });
    let mut r = Response::new(body.boxed());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    r
}

/// K server-sent events, one every M milliseconds.
fn sse(n: u64, interval_ms: u64) -> Response<DemoBody> {
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
    tokio::spawn(async move {
        for i in 1..=n {
            let event = format!("id: {i}\nevent: tick\ndata: {{\"n\":{i},\"of\":{n}}}\n\n");
            if tx.send(Frame::data(Bytes::from(event))).await.is_err() {
                return;
            }
            if i < n {
                tokio::time::sleep(Duration::from_millis(interval_ms)).await;
            }
        }
    });
    let mut r = Response::new(body.boxed());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// WebSocket echo: every text or binary message is sent back.
fn websocket(mut req: Request<Incoming>) -> Response<DemoBody> {
    let key = req.headers().get("sec-websocket-key").cloned();
    let is_upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let Some(key) = key.filter(|_| is_upgrade) else {
        return full(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "expected a WebSocket upgrade\n",
        );
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let mut ws =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        while let Some(Ok(msg)) = ws.next().await {
            if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
                break;
            }
        }
    });
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", v);
    }
    r
}
