//! The connection driver against a handler of a few lines, over an
//! in-memory socket (`tokio::io::duplex`) under tokio's paused clock: the
//! clock only moves when every task is waiting, so the drain's grace is
//! exact and nothing sleeps for real.

use std::sync::Mutex;
use std::task::{Context, Poll};

use http::Version;
use http_body_util::Full;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::registry::Registry;
use super::*;
use crate::sync::Locked;

/// Answers 200 with the request's path as the body. `/slow` waits for
/// `release` first, so a test holds a request in flight.
#[derive(Default)]
struct Echo {
    seen: Mutex<Vec<(Version, String)>>,
    started: Notify,
    release: Notify,
}

impl Handler for Echo {
    type Body = Marked;

    async fn handle(&self, req: Request<Incoming>, conn: &ConnInfo) -> Response<Marked> {
        // The marks the gateway makes (see `Handler`).
        conn.slot.state.request_started();
        let finished = Finished(conn.slot.state.clone());
        let path = req.uri().path().to_string();
        self.seen.locked().push((req.version(), path.clone()));
        if path == "/slow" {
            self.started.notify_one();
            self.release.notified().await;
        }
        Response::new(Marked {
            body: Full::new(Bytes::from(path)),
            _finished: finished,
        })
    }
}

/// Marks the request finished when its response body goes.
struct Finished(Arc<ConnState>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A response body holding its request's mark until it goes.
struct Marked {
    body: Full<Bytes>,
    _finished: Finished,
}

impl http_body::Body for Marked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// One connection being served, and the client's end of it.
struct Served {
    client: DuplexStream,
    state: Arc<ConnState>,
    handler: Arc<Echo>,
    metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Serve a connection: `alpn` as TLS would have decided it, or `None` for
/// cleartext (sniffed).
fn serve_one(alpn: Option<bool>) -> Served {
    let registry = Registry::new(0, 0);
    let peer: std::net::SocketAddr = ([192, 0, 2, 1], 40000).into();
    let phase = Phase::ReadingHead;
    let Ok((slot, _)) = registry.admit(peer.ip(), "test".into(), phase, Gauge::default()) else {
        panic!("no cap, so always admitted");
    };
    let state = slot.state.clone();
    let (shutdown, shutdown_rx) = watch::channel(false);
    let info = ConnInfo {
        peer,
        tls: alpn.is_some(),
        redirect: None,
        slot: Arc::new(slot),
        shutdown: shutdown_rx,
        peer_text: std::sync::OnceLock::new(),
    };
    let (client, server) = tokio::io::duplex(64 * 1024);
    let io = TrackedIo::new(server, state.clone(), alpn, 1000);
    let handler = Arc::new(Echo::default());
    let metrics = Arc::new(Metrics::new());
    let settings = ConnSettings::new(
        &Default::default(),
        &Default::default(),
        crate::config::defaults::DRAIN_GRACE,
    );
    let task = tokio::spawn({
        let (handler, metrics) = (handler.clone(), metrics.clone());
        async move { serve_http(io, info, handler, metrics, &settings).await }
    });
    Served {
        client,
        state,
        handler,
        metrics,
        shutdown,
        task,
    }
}

/// Long enough for anything a test waits for; a test that would hang
/// fails here instead.
const PATIENCE: Duration = Duration::from_secs(60);

async fn within<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(PATIENCE, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: not within {PATIENCE:?}"),
    }
}

/// Run every other task until it waits: under the paused clock time only
/// moves (here by 1 ms) when nothing else can run.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

async fn until(what: &str, cond: impl Fn() -> bool) {
    within(what, async {
        while !cond() {
            settle().await;
        }
    })
    .await;
}

async fn send(client: &mut DuplexStream, bytes: &[u8]) {
    client.write_all(bytes).await.expect("the duplex takes it");
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes()
}

/// One HTTP/1.1 response (head and Content-Length body), as text.
async fn response(client: &mut DuplexStream) -> String {
    within("a response", async {
        let mut got = Vec::new();
        loop {
            let text = String::from_utf8_lossy(&got);
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    return text.into_owned();
                }
            }
            let mut buf = [0u8; 1024];
            let n = client.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before a whole response: {text:?}");
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await
}

/// Everything until the server closes, as text.
async fn until_closed(client: &mut DuplexStream) -> String {
    let mut got = Vec::new();
    within("the close", client.read_to_end(&mut got))
        .await
        .expect("read");
    String::from_utf8_lossy(&got).into_owned()
}

/// A cleartext connection that has answered `GET /a` and is idle.
async fn idle_connection() -> Served {
    let mut c = serve_one(None);
    send(&mut c.client, &get("/a")).await;
    assert!(response(&mut c.client).await.ends_with("/a"));
    until("idle", || c.state.phase() == Phase::Idle).await;
    c
}

/// The drain's grace for a quiet HTTP/1.1 connection.
const DRAIN_GRACE: Duration = crate::config::defaults::DRAIN_GRACE;

#[tokio::test(start_paused = true)]
async fn a_drain_answers_the_request_in_flight_then_closes() {
    let mut c = serve_one(None);
    send(&mut c.client, &get("/slow")).await;
    within("the request", c.handler.started.notified()).await;
    c.shutdown.send_replace(true);
    // The connection sees the drain begin before its answer is ready.
    settle().await;
    c.handler.release.notify_one();
    let answered = Instant::now();
    let answer = until_closed(&mut c.client).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("/slow"), "{answer}");
    // This handler adds no `Connection: close` (the gateway's does), so
    // the connection goes once it has been quiet for the drain's grace.
    let quiet = answered.elapsed();
    assert!(
        quiet >= DRAIN_GRACE && quiet < DRAIN_GRACE + GRACEFUL_CLOSE_GRACE,
        "closed after the grace of quiet that followed the answer: {quiet:?}"
    );
    within("the task", c.task).await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn a_drain_waits_for_a_request_longer_than_the_grace() {
    let mut c = serve_one(None);
    send(&mut c.client, &get("/slow")).await;
    within("the request", c.handler.started.notified()).await;
    c.shutdown.send_replace(true);
    tokio::time::sleep(GRACEFUL_CLOSE_GRACE * 5).await;
    c.handler.release.notify_one();
    let answer = until_closed(&mut c.client).await;
    assert!(answer.ends_with("/slow"), "{answer}");
}

#[tokio::test(start_paused = true)]
async fn a_drain_closes_an_idle_keep_alive_connection_after_the_grace() {
    let mut c = idle_connection().await;
    let drain = Instant::now();
    c.shutdown.send_replace(true);
    // A request the client is about to write would still be answered.
    tokio::time::sleep(DRAIN_GRACE / 2).await;
    assert!(!c.task.is_finished(), "still open within the grace");
    assert_eq!(until_closed(&mut c.client).await, "");
    assert!(
        drain.elapsed() <= DRAIN_GRACE + GRACEFUL_CLOSE_GRACE,
        "{:?}",
        drain.elapsed()
    );
}

/// A connection that has sent nothing yet may have a request on its way
/// (a client that connected just as the drain began): it gets the grace,
/// then it is closed — sniffing on cleartext, or in hyper after ALPN.
#[tokio::test(start_paused = true)]
async fn a_drain_gives_a_silent_connection_the_grace_then_closes_it() {
    for alpn in [None, Some(false)] {
        let mut c = serve_one(alpn);
        settle().await;
        let drain = Instant::now();
        c.shutdown.send_replace(true);
        assert_eq!(until_closed(&mut c.client).await, "", "{alpn:?}");
        let waited = drain.elapsed();
        assert!(
            (GRACEFUL_CLOSE_GRACE..GRACEFUL_CLOSE_GRACE * 2).contains(&waited),
            "{alpn:?}: closed after {waited:?}"
        );
        within("the task", c.task).await.expect("no panic");
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_arriving_within_the_drain_grace_is_answered() {
    for alpn in [None, Some(false)] {
        let mut c = serve_one(alpn);
        settle().await;
        c.shutdown.send_replace(true);
        tokio::time::sleep(GRACEFUL_CLOSE_GRACE / 2).await;
        send(&mut c.client, &get("/late")).await;
        let answer = until_closed(&mut c.client).await;
        assert!(
            answer.starts_with("HTTP/1.1 200 OK\r\n"),
            "{alpn:?}: {answer}"
        );
        assert!(answer.ends_with("/late"), "{alpn:?}: {answer}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_http1_connection_parks_and_serves_the_next_request() {
    let mut c = idle_connection().await;
    assert!(c.state.request_park(), "the sweeper's ask");
    until("parked", || c.state.park_state() == Park::Waiting).await;
    assert_eq!(c.metrics.parked_gauge().get(), 1);

    send(&mut c.client, &get("/b")).await;
    assert!(response(&mut c.client).await.ends_with("/b"));
    assert_eq!(c.state.park_state(), Park::No);
    assert_eq!(c.metrics.parked_gauge().get(), 0);
    assert!(c.metrics.encode().contains("connection_parks_total 1\n"));
}

#[tokio::test(start_paused = true)]
async fn a_half_arrived_pipelined_head_is_replayed_after_a_park() {
    let mut c = serve_one(None);
    let mut pipelined = get("/a");
    pipelined.extend_from_slice(b"GET /b HTTP/1.1\r\nHo");
    send(&mut c.client, &pipelined).await;
    assert!(response(&mut c.client).await.ends_with("/a"));
    until("idle", || c.state.phase() == Phase::Idle).await;
    assert!(c.state.request_park(), "the sweeper's ask");
    until("parked", || {
        c.metrics.encode().contains("connection_parks_total 1\n")
    })
    .await;

    send(&mut c.client, b"st: a\r\n\r\n").await;
    let answer = response(&mut c.client).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("/b"), "{answer}");
}

/// An HTTP/2 frame header: length, type, flags, stream.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 1;
const GOAWAY: u8 = 7;

/// An empty SETTINGS, then GET / on stream 1 (HPACK: :method GET,
/// :scheme http, :path /, :authority a) with END_STREAM | END_HEADERS.
fn settings_and_get() -> Vec<u8> {
    let mut bytes = frame(4, 0, 0, &[]);
    bytes.extend(frame(
        HEADERS,
        0x5,
        1,
        &[0x82, 0x86, 0x84, 0x41, 0x01, b'a'],
    ));
    bytes
}

/// The next HTTP/2 frame's type and stream; `None` once the server closed.
async fn next_frame(client: &mut DuplexStream) -> Option<(u8, u32)> {
    let mut head = [0u8; 9];
    client.read_exact(&mut head).await.ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0u8; len];
    client.read_exact(&mut payload).await.ok()?;
    Some((
        head[3],
        u32::from_be_bytes([head[5], head[6], head[7], head[8]]),
    ))
}

/// Read frames until the response to stream 1 begins.
async fn response_headers(client: &mut DuplexStream) {
    within("the response's HEADERS", async {
        while next_frame(client).await.expect("a frame") != (HEADERS, 1) {}
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn the_http2_preface_is_recognised_split_across_reads() {
    let mut c = serve_one(None);
    for piece in [&PREFACE[..1], &PREFACE[1..10], &PREFACE[10..]] {
        send(&mut c.client, piece).await;
        // The server reads each piece on its own.
        settle().await;
    }
    send(&mut c.client, &settings_and_get()).await;
    response_headers(&mut c.client).await;
    let seen = c.handler.seen.locked();
    assert_eq!(*seen, [(Version::HTTP_2, "/".to_string())]);
}

/// HTTP/2's graceful close needs the client to answer GOAWAY's PING; one
/// that never does cannot hold the drain open past the grace.
#[tokio::test(start_paused = true)]
async fn an_http2_client_that_ignores_goaway_is_dropped_after_the_grace() {
    let mut c = serve_one(Some(true));
    send(&mut c.client, PREFACE).await;
    send(&mut c.client, &settings_and_get()).await;
    response_headers(&mut c.client).await;
    until("idle", || c.state.phase() == Phase::Idle).await;
    let drain = Instant::now();
    c.shutdown.send_replace(true);
    let mut goaway = false;
    within("the close", async {
        while let Some((kind, _)) = next_frame(&mut c.client).await {
            goaway |= kind == GOAWAY;
        }
    })
    .await;
    assert!(goaway, "GOAWAY first");
    let waited = drain.elapsed();
    assert!(
        (GRACEFUL_CLOSE_GRACE..GRACEFUL_CLOSE_GRACE * 2).contains(&waited),
        "dropped after {waited:?}"
    );
}
