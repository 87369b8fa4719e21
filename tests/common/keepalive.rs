//! A keep-alive HTTP/1.1 load, as `wrk -c N` makes it: N connections, each
//! sending 1 KiB POSTs back to back, reconnecting when the server closes.
//! Every request is classified, so a drain's losses are counted exactly:
//!
//! - `ok`: a complete 200 answer;
//! - `refused`: the connection was seen closed (or refused) *before* the
//!   request was written — a client retries those, nothing was lost;
//! - `lost`: the request was written (or writing it failed) and the
//!   connection closed without a complete answer.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// A client connection, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
type Conn = Box<dyn Io>;

/// TLS for the load: a connector and the name to ask for.
#[derive(Clone)]
pub struct Tls {
    pub connector: tokio_rustls::TlsConnector,
    pub name: rustls_pki_types::ServerName<'static>,
}

/// How many requests ended which way.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub ok: u64,
    /// Answers with `Connection: close` (the drain's last answers).
    pub closing_answers: u64,
    pub refused: u64,
    pub lost: u64,
    /// Answers other than 200.
    pub failed: u64,
    /// What happened to the first few lost or failed requests.
    pub problems: Vec<String>,
    /// Every answered request's time, in microseconds.
    pub latencies_us: Vec<u64>,
}

impl Tally {
    /// The `q` quantile (0..=1) of answer times, in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let mut v = self.latencies_us.clone();
        if v.is_empty() {
            return 0.0;
        }
        v.sort_unstable();
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        v[i] as f64 / 1000.0
    }
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    ok: AtomicU64,
    tally: Mutex<Tally>,
}

/// A running load; [`Load::stop`] ends it and returns the tally.
pub struct Load {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

pub const BODY_LEN: usize = 1024;

impl Load {
    /// `connections` clients sending POST `path` to `addr`, over TLS
    /// when `tls` is given.
    pub fn start(
        addr: SocketAddr,
        tls: Option<Tls>,
        connections: usize,
        path: &'static str,
    ) -> Load {
        let shared = Arc::new(Shared::default());
        let tasks = (0..connections)
            .map(|_| tokio::spawn(client(addr, tls.clone(), path, shared.clone())))
            .collect();
        Load { shared, tasks }
    }

    /// Complete answers so far.
    pub fn ok(&self) -> u64 {
        self.shared.ok.load(Ordering::Relaxed)
    }

    /// Wait until `n` more requests than now have been answered.
    pub async fn answered_more(&self, n: u64, within: Duration) -> bool {
        let want = self.ok() + n;
        let deadline = Instant::now() + within;
        while self.ok() < want {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    pub async fn stop(self) -> Tally {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        self.shared.tally.lock().expect("tally").clone()
    }
}

enum Ended {
    Ok { close: bool },
    Refused,
    Lost(String),
    Failed(String),
}

async fn client(addr: SocketAddr, tls: Option<Tls>, path: &'static str, shared: Arc<Shared>) {
    let request = {
        let mut r = format!(
            "POST {path} HTTP/1.1\r\nHost: drain.test\r\nContent-Length: {BODY_LEN}\r\n\r\n"
        )
        .into_bytes();
        r.extend(std::iter::repeat_n(b'x', BODY_LEN));
        r
    };
    let mut conn: Option<Conn> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let ended = one(&mut conn, addr, tls.as_ref(), &request).await;
        let reconnect = record(&shared, ended, started);
        if reconnect {
            conn = None;
            // A refused connect must not spin.
            tokio::task::yield_now().await;
        }
    }
}

/// Count one request's end; true when the connection is done.
fn record(shared: &Shared, ended: Ended, started: Instant) -> bool {
    let mut t = shared.tally.lock().expect("tally");
    match ended {
        Ended::Ok { close } => {
            t.ok += 1;
            shared.ok.fetch_add(1, Ordering::Relaxed);
            t.latencies_us.push(started.elapsed().as_micros() as u64);
            if close {
                t.closing_answers += 1;
            }
            close
        }
        Ended::Refused => {
            t.refused += 1;
            true
        }
        Ended::Lost(why) => {
            t.lost += 1;
            if t.problems.len() < 10 {
                t.problems.push(format!("lost: {why}"));
            }
            true
        }
        Ended::Failed(why) => {
            t.failed += 1;
            if t.problems.len() < 10 {
                t.problems.push(format!("failed: {why}"));
            }
            true
        }
    }
}

/// One request on the open connection, or on a new one.
async fn one(
    conn: &mut Option<Conn>,
    addr: SocketAddr,
    tls: Option<&Tls>,
    request: &[u8],
) -> Ended {
    if let Some(s) = conn {
        // What a pooling client does before reusing a connection: one
        // the server already closed is not written to.
        let mut probe = [0u8; 1];
        match futures_util::FutureExt::now_or_never(s.read(&mut probe)) {
            None => {}
            Some(Ok(0) | Err(_)) => return Ended::Refused,
            Some(Ok(_)) => return Ended::Failed("bytes before a request".into()),
        }
    }
    let s = match conn {
        Some(s) => s,
        None => match connect(addr, tls).await {
            Some(s) => conn.insert(s),
            None => return Ended::Refused,
        },
    };
    if let Err(e) = s.write_all(request).await {
        return Ended::Lost(format!("write: {e}"));
    }
    if let Err(e) = s.flush().await {
        return Ended::Lost(format!("flush: {e}"));
    }
    match tokio::time::timeout(Duration::from_secs(10), read_answer(s)).await {
        Ok(Ok((200, close))) => Ended::Ok { close },
        Ok(Ok((status, _))) => Ended::Failed(format!("status {status}")),
        Ok(Err(e)) => Ended::Lost(e),
        Err(_) => Ended::Lost("no answer in 10 s".into()),
    }
}

/// A new connection (with its TLS handshake done); `None` if refused.
async fn connect(addr: SocketAddr, tls: Option<&Tls>) -> Option<Conn> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let _ = tcp.set_nodelay(true);
    match tls {
        None => Some(Box::new(tcp)),
        Some(t) => {
            let s = t.connector.connect(t.name.clone(), tcp).await.ok()?;
            Some(Box::new(s))
        }
    }
}

/// Read one answer (Content-Length framed): its status and whether it
/// carries `Connection: close`.
async fn read_answer(s: &mut Conn) -> Result<(u16, bool), String> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut chunk).await {
            Ok(0) => return Err(format!("closed after {} bytes of the answer", buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("read after {} bytes: {e}", buf.len())),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head
        .get(9..12)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line: {head:?}"))?;
    let close = head.contains("\r\nconnection: close");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no content-length: {head:?}"))?;
    while buf.len() < head_end + len {
        match s.read(&mut chunk).await {
            Ok(0) => return Err("closed mid-body".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("read mid-body: {e}")),
        }
    }
    Ok((status, close))
}
