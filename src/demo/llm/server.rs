//! The mock provider's server: a real hyper server that records every
//! request and plays a script's [`Reply`] step by step.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::sync::Locked;
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A request the mock received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: http::Method,
    pub path: String,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Seen {
    /// The request body as JSON (null when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// Whether the client asked for a stream.
    pub fn streaming(&self) -> bool {
        self.json()["stream"].as_bool().unwrap_or(false)
    }

    pub fn model(&self) -> String {
        self.json()["model"].as_str().unwrap_or("").to_string()
    }
}

/// One step of a reply body.
#[derive(Debug, Clone)]
pub enum Step {
    Send(Bytes),
    Wait(Duration),
    /// End the connection abruptly (after whatever was sent). Tests only:
    /// the demo's providers never break.
    #[cfg(feature = "test-steps")]
    Cut,
    /// Send nothing more, and never end. Tests only.
    #[cfg(feature = "test-steps")]
    Stall,
}

/// What the mock answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Before the response head.
    pub delay: Duration,
    pub body: Vec<Step>,
}

impl Reply {
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A running mock provider.
#[derive(Clone)]
pub struct MockLlm {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    finished: Arc<AtomicUsize>,
    abandoned: Arc<AtomicUsize>,
}

impl MockLlm {
    /// Requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.locked().clone()
    }

    /// Replies sent to the end.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }

    /// Replies whose client went away before the end (the connection was
    /// closed under them).
    pub fn abandoned(&self) -> usize {
        self.abandoned.load(Ordering::SeqCst)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// Start a mock provider on `addr` (port 0 picks one).
pub async fn spawn(
    addr: SocketAddr,
    script: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
) -> std::io::Result<MockLlm> {
    let listener = TcpListener::bind(addr).await?;
    let mock = MockLlm {
        addr: listener.local_addr()?,
        seen: Arc::default(),
        finished: Arc::default(),
        abandoned: Arc::default(),
    };
    let script: Script = Arc::new(script);
    let server = mock.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // Head and body go out as separate writes: without this, Nagle
            // and delayed ACKs add 40 ms to every answer.
            let _ = stream.set_nodelay(true);
            let script = script.clone();
            let mock = server.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let script = script.clone();
                    let mock = mock.clone();
                    async move { Ok::<_, Infallible>(answer(req, &script, &mock).await) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(mock)
}

/// Counts a reply as abandoned when dropped before it finished — whether
/// the client left while the reply was waiting to start or mid-body.
struct Abandoned {
    done: bool,
    count: Arc<AtomicUsize>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if !self.done {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn answer(req: Request<Incoming>, script: &Script, mock: &MockLlm) -> Response<MockBody> {
    let guard = Abandoned {
        done: false,
        count: mock.abandoned.clone(),
    };
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let seen = Seen {
        method: parts.method,
        path: parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string(),
        headers: parts.headers,
        body,
    };
    let reply = script(&seen);
    mock.seen.locked().push(seen);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let (tx, rx) = mpsc::channel(16);
    let steps = reply.body;
    let finished = mock.finished.clone();
    tokio::spawn(async move {
        for step in steps {
            match step {
                Step::Send(b) => {
                    if tx.send(Ok(b)).await.is_err() {
                        return;
                    }
                }
                Step::Wait(d) => tokio::time::sleep(d).await,
                #[cfg(feature = "test-steps")]
                Step::Cut => {
                    // Let what was sent reach the wire first: a cut that
                    // also swallowed the bytes before it would be a
                    // different failure.
                    let all = tx.max_capacity();
                    if let Ok(emptied) = tx.reserve_many(all).await {
                        drop(emptied);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = tx.send(Err(())).await;
                    return;
                }
                #[cfg(feature = "test-steps")]
                Step::Stall => {
                    tx.closed().await;
                    return;
                }
            }
        }
        finished.fetch_add(1, Ordering::SeqCst);
    });
    let mut resp = Response::new(MockBody { rx, guard });
    *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    for (name, value) in reply.headers {
        if let (Ok(n), Ok(v)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            resp.headers_mut().append(n, v);
        }
    }
    resp
}

/// The reply body: what the script's steps send; notes a client that left.
pub struct MockBody {
    rx: mpsc::Receiver<Result<Bytes, ()>>,
    guard: Abandoned,
}

#[derive(Debug)]
struct CutError;

impl std::fmt::Display for CutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scripted cut")
    }
}

impl std::error::Error for CutError {}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(Some(Err(()))) => {
                self.guard.done = true;
                Poll::Ready(Some(Err(Box::new(CutError))))
            }
            Poll::Ready(None) => {
                self.guard.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
