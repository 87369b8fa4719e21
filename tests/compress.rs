//! Response compression on proxy routes, end to end: weir (in-process,
//! and once as the real binary) between a real upstream on port 0 and
//! real clients, every compressed body decoded by a decoder that is not
//! weir's — curl `--compressed` (libcurl's zlib,
//! brotli and zstd), Python's zlib, the `zstd` command — except where a
//! stream is read while it is still open (the codec crates' decoders, in
//! this process).

mod common;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use futures_util::{SinkExt, StreamExt};
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;

/// A page of HTML about 4 KiB long, compressible as pages are.
fn page() -> Vec<u8> {
    let mut p = b"<!doctype html><title>weir</title><ul>".to_vec();
    for i in 0..120 {
        p.extend_from_slice(format!("<li>item {i} of the list</li>\n").as_bytes());
    }
    p
}

/// `n` bytes of text that compresses like real text, not like zeros:
/// words drawn from a small vocabulary by a fixed generator.
fn text(n: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "weir ",
        "proxy ",
        "gzip ",
        "stream ",
        "upstream ",
        "client ",
        "brotli ",
        "zstd ",
        "the ",
        "of ",
        "and\n",
        "a ",
    ];
    let mut out = Vec::with_capacity(n + 16);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
    }
    out.truncate(n);
    out
}

fn with(status: u16, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Response<TestBody> {
    let mut r = Response::new(common::body(body));
    *r.status_mut() = http::StatusCode::from_u16(status).expect("status");
    for (k, v) in headers {
        r.headers_mut().append(
            http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
            v.parse().expect("value"),
        );
    }
    r
}

/// A body the handler writes frame by frame.
fn streamed(content_type: &str) -> (mpsc::Sender<Bytes>, Response<TestBody>) {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(Frame::data(b)), rx))
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    r.headers_mut()
        .insert("content-type", content_type.parse().expect("type"));
    (tx, r)
}

/// The test's upstream: one answer per path. `/slow` and `/sse` send a
/// first piece, then wait for the test to say it read it (`gate`).
async fn site(gate: Arc<Notify>, big: Arc<Vec<u8>>) -> Upstream {
    upstream(move |req: Request<Incoming>| {
        let gate = gate.clone();
        let big = big.clone();
        async move {
            let html = [("content-type", "text/html; charset=utf-8")];
            match req.uri().path() {
                "/page" => with(
                    200,
                    &[
                        html[0],
                        ("etag", "\"v1\""),
                        ("vary", "Origin"),
                        ("accept-ranges", "bytes"),
                    ],
                    page(),
                ),
                "/missing" => with(404, &html, page()),
                "/small" => with(200, &html, &b"<p>short</p>"[..]),
                "/png" => with(200, &[("content-type", "image/png")], page()),
                "/json" => with(200, &[("content-type", "application/problem+json")], page()),
                "/encoded" => with(200, &[html[0], ("content-encoding", "gzip")], page()),
                "/no-transform" => with(200, &[html[0], ("cache-control", "no-transform")], page()),
                "/empty" => with(200, &html, Bytes::new()),
                "/no-content" => with(204, &html, Bytes::new()),
                "/range" => match req.headers().get("range") {
                    Some(_) => with(
                        206,
                        &[html[0], ("content-range", "bytes 0-9/4000")],
                        &b"<!doctype "[..],
                    ),
                    None => with(200, &html, page()),
                },
                "/big" => with(200, &[("content-type", "text/plain")], big.to_vec()),
                "/slow" | "/sse" => {
                    let sse = req.uri().path() == "/sse";
                    let (tx, resp) = streamed(if sse {
                        "text/event-stream"
                    } else {
                        "text/plain"
                    });
                    tokio::spawn(async move {
                        let first: &[u8] = if sse {
                            b"data: one\n\n"
                        } else {
                            b"first chunk\n"
                        };
                        let _ = tx.send(Bytes::from_static(first)).await;
                        gate.notified().await;
                        let last: &[u8] = if sse {
                            b"data: two\n\n"
                        } else {
                            b"second chunk\n"
                        };
                        let _ = tx.send(Bytes::from_static(last)).await;
                    });
                    resp
                }
                _ => with(404, &[], Bytes::new()),
            }
        }
    })
    .await
}

/// Weir compressing the catch-all route to a fresh [`site`], with
/// `compress` as the route's `[route.compress]` keys.
struct Setup {
    weir: Weir,
    gate: Arc<Notify>,
    big: Arc<Vec<u8>>,
}

async fn setup(compress: &str) -> Setup {
    let gate = Arc::new(Notify::new());
    let big = Arc::new(text(8 * 1024 * 1024));
    let up = site(gate.clone(), big.clone()).await;
    let weir = Weir::start(&simple_config(
        up.addr,
        &format!("[route.compress]\n{compress}\n"),
    ))
    .await;
    Setup { weir, gate, big }
}

impl Setup {
    fn url(&self, path: &str) -> String {
        self.weir.url("web", path)
    }
}

/// A request over HTTP/1.1 with `headers`: status, headers, raw body.
async fn fetch(
    method: http::Method,
    url: &str,
    headers: &[(&str, &str)],
) -> (http::StatusCode, HeaderMap, Bytes) {
    let resp = send(method, url, headers, Bytes::new()).await;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes();
    (parts.status, parts.headers, bytes)
}

async fn get_raw(url: &str, accept: &str) -> (http::StatusCode, HeaderMap, Bytes) {
    fetch(http::Method::GET, url, &[("accept-encoding", accept)]).await
}

fn encoding(h: &HeaderMap) -> Option<&str> {
    h.get("content-encoding")
        .map(|v| v.to_str().expect("ascii"))
}

/// Decode `body` of `coding` in this process (for the negotiation
/// matrix; the tests of the codings themselves use outside decoders).
fn decode_here(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        "gzip" => flate2::read::GzDecoder::new(body).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(body, 4096).read_to_end(&mut out),
        "zstd" => zstd::stream::read::Decoder::new(body)
            .expect("zstd")
            .read_to_end(&mut out),
        other => panic!("unexpected coding {other}"),
    }
    .expect("decodes");
    out
}

/// Run `cmd` with `input` on stdin; its stdout.
async fn pipe(cmd: &str, args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = tokio::process::Command::new(cmd)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        stdin.write_all(&input).await.expect("write stdin");
    });
    let out = child.wait_with_output().await.expect("run");
    writer.await.expect("writer");
    assert!(out.status.success(), "{cmd} failed");
    out.stdout
}

fn tool(name: &str) -> bool {
    std::process::Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// curl `--compressed` with `accept` as the only coding offered: the
/// decoded body (written to a file) and the response headers.
async fn curl_decoded(url: &str, accept: &str, dir: &std::path::Path) -> (Vec<u8>, String) {
    let body = dir.join(format!("body-{accept}"));
    let head = dir.join(format!("head-{accept}"));
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--compressed", "-H"])
        .arg(format!("Accept-Encoding: {accept}"))
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .arg(url)
        .output()
        .await
        .expect("curl");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        std::fs::read(&body).expect("body"),
        std::fs::read_to_string(&head)
            .expect("head")
            .to_ascii_lowercase(),
    )
}

fn curl_found() -> bool {
    can_run(
        tool("curl"),
        "curl is not installed",
        "apt-get install curl",
        "WEIR_REQUIRE_CURL",
    )
}

#[tokio::test]
async fn curl_decodes_every_coding_of_a_page_and_of_8_mib() {
    if !curl_found() {
        return;
    }
    let s = setup("").await;
    let dir = tempfile::tempdir().expect("dir");
    for coding in ["br", "zstd", "gzip"] {
        let (page_body, head) = curl_decoded(&s.url("/page"), coding, dir.path()).await;
        assert!(
            head.contains(&format!("content-encoding: {coding}\r\n")),
            "{head}"
        );
        assert_eq!(page_body, page(), "{coding}: the page decodes as sent");
        let (big, head) = curl_decoded(&s.url("/big"), coding, dir.path()).await;
        assert!(
            head.contains(&format!("content-encoding: {coding}\r\n")),
            "{head}"
        );
        assert!(
            big == *s.big,
            "{coding}: 8 MiB decode byte for byte ({} bytes)",
            big.len()
        );
    }
}

#[tokio::test]
async fn python_zlib_and_the_zstd_command_decode_what_weir_sent() {
    let s = setup("").await;
    let (_, h, gz) = get_raw(&s.url("/big"), "gzip").await;
    assert_eq!(encoding(&h), Some("gzip"));
    assert!(gz.len() < s.big.len() / 2, "compressed: {} bytes", gz.len());
    let py =
        "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read(), 31))";
    if can_run(
        tool("python3"),
        "python3 is not installed",
        "apt-get install python3",
        "WEIR_REQUIRE_PYTHON",
    ) {
        assert!(
            pipe("python3", &["-c", py], &gz).await == *s.big,
            "Python's zlib decodes the gzip stream"
        );
    }
    let (_, h, zst) = get_raw(&s.url("/big"), "zstd").await;
    assert_eq!(encoding(&h), Some("zstd"));
    if can_run(
        tool("zstd"),
        "the zstd command is not installed",
        "apt-get install zstd",
        "WEIR_REQUIRE_ZSTD",
    ) {
        assert!(
            pipe("zstd", &["-d", "-c"], &zst).await == *s.big,
            "zstd -d decodes the zstd stream"
        );
    }
}

#[tokio::test]
async fn accept_encoding_is_negotiated_by_q_value_then_server_order() {
    let s = setup("").await;
    for (accept, want) in [
        ("gzip, deflate, br, zstd", Some("br")),
        ("gzip, zstd", Some("zstd")),
        ("gzip", Some("gzip")),
        ("br;q=0.5, gzip;q=0.9", Some("gzip")),
        ("*", Some("br")),
        ("br;q=0, *;q=0.5", Some("zstd")),
        ("gzip, identity;q=0", Some("gzip")),
        ("gzip;q=0.5, identity", None),
        ("*;q=0", None),
        ("identity", None),
        ("deflate", None),
        ("", None),
    ] {
        let (status, h, body) = get_raw(&s.url("/page"), accept).await;
        assert_eq!(status, 200);
        assert_eq!(encoding(&h), want, "Accept-Encoding: {accept:?}");
        let decoded = match want {
            Some(c) => decode_here(c, &body),
            None => body.to_vec(),
        };
        assert_eq!(decoded, page(), "Accept-Encoding: {accept:?}");
    }
    // No Accept-Encoding at all: as it is.
    let (_, h, body) = fetch(http::Method::GET, &s.url("/page"), &[]).await;
    assert_eq!(encoding(&h), None);
    assert_eq!(body.as_ref(), page().as_slice());
}

#[tokio::test]
async fn the_configured_order_and_algorithms_are_the_servers_preference() {
    let s = setup("algorithms = [\"gzip\", \"br\"]\n").await;
    let (_, h, _) = get_raw(&s.url("/page"), "br, gzip, zstd").await;
    assert_eq!(encoding(&h), Some("gzip"), "a tie goes to the first listed");
    let (_, h, _) = get_raw(&s.url("/page"), "br;q=1, gzip;q=0.5").await;
    assert_eq!(
        encoding(&h),
        Some("br"),
        "a higher q-value wins over the order"
    );
    let (_, h, _) = get_raw(&s.url("/page"), "zstd").await;
    assert_eq!(encoding(&h), None, "zstd is not offered");
}

#[tokio::test]
async fn what_is_never_compressed() {
    let s = setup("").await;
    let all = "br, zstd, gzip";
    for (path, why) in [
        ("/small", "shorter than min_size"),
        ("/png", "not a listed type"),
        ("/encoded", "already encoded"),
        ("/no-transform", "Cache-Control: no-transform"),
        ("/empty", "no body"),
        ("/no-content", "204"),
    ] {
        let (_, h, _) = get_raw(&s.url(path), all).await;
        assert_eq!(
            encoding(&h),
            if path == "/encoded" {
                Some("gzip")
            } else {
                None
            },
            "{path}: {why}"
        );
    }
    // The encoded answer passes untouched.
    let (_, _, body) = get_raw(&s.url("/encoded"), all).await;
    assert_eq!(
        body.as_ref(),
        page().as_slice(),
        "an encoded body is not encoded again"
    );
    // A client that asks for no transformation.
    let (_, h, body) = fetch(
        http::Method::GET,
        &s.url("/page"),
        &[("accept-encoding", all), ("cache-control", "no-transform")],
    )
    .await;
    assert_eq!(encoding(&h), None);
    assert_eq!(body.as_ref(), page().as_slice());
    // A range request, answered 206 or whole.
    let (status, h, body) = fetch(
        http::Method::GET,
        &s.url("/range"),
        &[("accept-encoding", all), ("range", "bytes=0-9")],
    )
    .await;
    assert_eq!(status, 206);
    assert_eq!(encoding(&h), None, "206");
    assert_eq!(body.as_ref(), b"<!doctype ");
    let (status, h, _) = fetch(
        http::Method::GET,
        &s.url("/page"),
        &[("accept-encoding", all), ("range", "bytes=0-9")],
    )
    .await;
    assert_eq!(
        (status.as_u16(), encoding(&h)),
        (200, None),
        "a Range request answered whole"
    );
    // What is compressed beside them: an error page, a +json type.
    for path in ["/missing", "/json"] {
        let (_, h, body) = get_raw(&s.url(path), "gzip").await;
        assert_eq!(encoding(&h), Some("gzip"), "{path}");
        assert_eq!(decode_here("gzip", &body), page(), "{path}");
    }
}

#[tokio::test]
async fn vary_is_merged_etags_weakened_and_the_length_dropped() {
    let s = setup("").await;
    let (_, h, _) = get_raw(&s.url("/page"), "gzip").await;
    assert_eq!(h["vary"], "Origin, Accept-Encoding");
    assert_eq!(h.get_all("vary").iter().count(), 1);
    assert_eq!(h["etag"], "W/\"v1\"");
    assert!(!h.contains_key("content-length"), "{h:?}");
    assert!(!h.contains_key("accept-ranges"), "{h:?}");
    // Uncompressed for this client, but the answer still varies by coding.
    let (_, h, _) = get_raw(&s.url("/page"), "identity").await;
    assert_eq!(h["vary"], "Origin, Accept-Encoding");
    assert_eq!(
        h["etag"], "\"v1\"",
        "the identity answer keeps its strong tag"
    );
    assert_eq!(h["content-length"], page().len().to_string());
    assert_eq!(h["accept-ranges"], "bytes");
    // Not a compressible answer: no Vary added.
    let (_, h, _) = get_raw(&s.url("/png"), "gzip").await;
    assert!(!h.contains_key("vary"), "{h:?}");
}

#[tokio::test]
async fn a_head_gets_the_headers_its_get_would() {
    let s = setup("").await;
    let (_, get_h, _) = get_raw(&s.url("/page"), "br").await;
    let (status, head_h, body) = fetch(
        http::Method::HEAD,
        &s.url("/page"),
        &[("accept-encoding", "br")],
    )
    .await;
    assert_eq!(status, 200);
    assert!(body.is_empty());
    for name in ["content-encoding", "vary", "etag", "content-type"] {
        assert_eq!(head_h.get(name), get_h.get(name), "{name}");
    }
    assert!(!head_h.contains_key("content-length"), "{head_h:?}");
}

/// A decoder fed a stream as it arrives: what it has decoded so far.
enum Partial {
    Gzip(flate2::write::GzDecoder<Vec<u8>>),
    Brotli(Box<brotli::DecompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Decoder<'static, Vec<u8>>),
}

impl Partial {
    fn new(coding: &str) -> Partial {
        match coding {
            "gzip" => Partial::Gzip(flate2::write::GzDecoder::new(Vec::new())),
            "br" => Partial::Brotli(Box::new(brotli::DecompressorWriter::new(Vec::new(), 4096))),
            _ => Partial::Zstd(zstd::stream::write::Decoder::new(Vec::new()).expect("zstd")),
        }
    }

    fn feed(&mut self, bytes: &[u8]) -> String {
        let out = match self {
            Partial::Gzip(d) => {
                d.write_all(bytes).expect("gzip");
                d.flush().expect("flush");
                d.get_ref()
            }
            Partial::Brotli(d) => {
                d.write_all(bytes).expect("br");
                d.flush().expect("flush");
                d.get_ref()
            }
            Partial::Zstd(d) => {
                d.write_all(bytes).expect("zstd");
                d.flush().expect("flush");
                d.get_ref()
            }
        };
        String::from_utf8_lossy(out).into_owned()
    }
}

/// Read `body` until what `decoded` makes of it contains `want`; fails if
/// that takes longer than 10 s (the upstream is waiting for us, so only a
/// flush can bring it).
async fn read_until(
    body: &mut http_body_util::BodyDataStream<Incoming>,
    mut decoded: impl FnMut(&[u8]) -> String,
    want: &str,
) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .unwrap_or_else(|_| panic!("{want:?} did not arrive while the upstream waited"))
            .expect("more body")
            .expect("ok");
        let so_far = decoded(&chunk);
        if so_far.contains(want) {
            return so_far;
        }
    }
}

#[tokio::test]
async fn a_streamed_body_is_flushed_chunk_by_chunk() {
    let s = setup("").await;
    for coding in ["gzip", "br", "zstd"] {
        let resp = send(
            http::Method::GET,
            &s.url("/slow"),
            &[("accept-encoding", coding)],
            Bytes::new(),
        )
        .await;
        assert_eq!(encoding(resp.headers()), Some(coding));
        let mut body = resp.into_body().into_data_stream();
        let mut decoder = Partial::new(coding);
        // The upstream sent one chunk and waits: it must arrive decodable.
        read_until(&mut body, |b| decoder.feed(b), "first chunk\n").await;
        s.gate.notify_one();
        let all = read_until(&mut body, |b| decoder.feed(b), "second chunk\n").await;
        assert_eq!(all, "first chunk\nsecond chunk\n", "{coding}");
    }
}

#[tokio::test]
async fn an_event_stream_passes_uncompressed_and_unbuffered() {
    let s = setup("").await;
    let resp = send(
        http::Method::GET,
        &s.url("/sse"),
        &[("accept-encoding", "br, zstd, gzip")],
        Bytes::new(),
    )
    .await;
    assert_eq!(encoding(resp.headers()), None);
    assert!(!resp.headers().contains_key("vary"));
    let mut body = resp.into_body().into_data_stream();
    let mut seen = String::new();
    read_until(
        &mut body,
        |b| {
            seen.push_str(&String::from_utf8_lossy(b));
            seen.clone()
        },
        "data: one\n\n",
    )
    .await;
    s.gate.notify_one();
    let all = read_until(
        &mut body,
        |b| {
            seen.push_str(&String::from_utf8_lossy(b));
            seen.clone()
        },
        "data: two\n\n",
    )
    .await;
    assert_eq!(all, "data: one\n\ndata: two\n\n");
}

#[tokio::test]
async fn a_websocket_upgrade_on_a_compressing_route_is_tunnelled_as_it_is() {
    let up = demo_upstream().await;
    let weir = Weir::start(&simple_config(up, "compress = {}\n")).await;
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
        format!("ws://{}/ws", weir.addr("web")),
    )
    .expect("request");
    req.headers_mut()
        .insert("accept-encoding", "gzip, br".parse().expect("value"));
    let (mut ws, resp) = tokio_tungstenite::connect_async(req)
        .await
        .expect("upgrade");
    assert_eq!(resp.status(), 101);
    assert!(!resp.headers().contains_key("content-encoding"));
    ws.send(Message::text("hello hello hello hello hello hello"))
        .await
        .expect("send");
    let back = ws.next().await.expect("message").expect("ok");
    assert_eq!(
        back.into_text().expect("text").as_str(),
        "hello hello hello hello hello hello"
    );
}

#[tokio::test]
async fn a_route_without_compress_sends_what_it_gets() {
    let gate = Arc::new(Notify::new());
    let up = site(gate, Arc::new(Vec::new())).await;
    let weir = Weir::start(&simple_config(up.addr, "")).await;
    let (_, h, body) = get_raw(&weir.url("web", "/page"), "br, zstd, gzip").await;
    assert_eq!(encoding(&h), None);
    assert!(
        !h["vary"]
            .to_str()
            .expect("ascii")
            .contains("Accept-Encoding")
    );
    assert_eq!(h["etag"], "\"v1\"");
    assert_eq!(body.as_ref(), page().as_slice());
}

#[tokio::test]
async fn the_weir_binary_compresses_what_curl_decodes() {
    if !curl_found() {
        return;
    }
    let big = Arc::new(text(1 << 20));
    let up = site(Arc::new(Notify::new()), big.clone()).await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("weir.toml");
    // JSON log lines: how the harness finds the listener's address.
    let config =
        simple_config(up.addr, "compress = {}\n").replace("[log]\n", "[log]\nformat = \"json\"\n");
    std::fs::write(&path, config).expect("config");
    let mut weir = common::process::Proc::run(path.to_str().expect("utf-8 path"));
    let addr = weir.listening("web");
    for coding in ["br", "zstd", "gzip"] {
        let (body, head) = curl_decoded(&format!("http://{addr}/big"), coding, dir.path()).await;
        assert!(
            head.contains(&format!("content-encoding: {coding}\r\n")),
            "{head}"
        );
        assert!(body == *big, "{coding}: decoded byte for byte");
    }
}

#[tokio::test]
async fn an_http2_client_gets_the_same_compressed_answer() {
    let s = setup("").await;
    let mut b = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
    b.http2_only(true);
    let h2 = b.build::<_, http_body_util::Full<Bytes>>(
        hyper_util::client::legacy::connect::HttpConnector::new(),
    );
    for coding in ["br", "zstd", "gzip"] {
        let req = Request::get(s.url("/page"))
            .header("accept-encoding", coding)
            .body(http_body_util::Full::new(Bytes::new()))
            .expect("request");
        let resp = h2.request(req).await.expect("response");
        assert_eq!(resp.version(), http::Version::HTTP_2);
        assert_eq!(encoding(resp.headers()), Some(coding));
        assert!(!resp.headers().contains_key("content-length"));
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(decode_here(coding, &body), page(), "{coding}");
    }
}
