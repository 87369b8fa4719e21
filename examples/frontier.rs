//! The frontier benchmark's load generator (driven by bench/frontier.sh).
//!
//! `frontier URL BODY_FILE SECONDS CONCURRENCY [HEADER ...]` runs a closed
//! loop of CONCURRENCY clients, each on its own keep-alive HTTP/1.1
//! connection, POSTing BODY_FILE to URL for SECONDS, and prints one JSON
//! line: requests/s, errors, statuses and latency percentiles in µs (from
//! writing the request to reading the last byte of the answer), plus, for
//! streamed answers, the time to the first body bytes (with
//! `FRONTIER_FIRST=TEXT`, to the first read after which the body holds
//! TEXT: `content_block_delta` times the first token of an Anthropic
//! stream, not the `message_start` a gateway may hold back until content
//! comes) and the largest gap between two reads of the body. With
//! `FRONTIER_REQUESTS=N` the clients stop after N requests in all (or at
//! SECONDS, whichever comes first): a fixed count, for instruction counts.
//!
//! The client is deliberately thin — the request is serialised once, the
//! answer is framed by `Content-Length` or chunked encoding and otherwise
//! not parsed — so that at concurrency 1 what it measures is the hop, not
//! the client. It runs on one current-thread runtime: pin it to a core.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Default)]
struct Tally {
    total_us: Vec<u32>,
    first_us: Vec<u32>,
    gap_us: Vec<u32>,
    statuses: std::collections::BTreeMap<u16, u64>,
    errors: u64,
}

fn percentile(v: &mut [u32], p: f64) -> u32 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

/// Where the head ends, if it has.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(head).ok()?;
    text.split("\r\n").skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Is a chunked body complete in `body`? Returns its end when it is.
fn chunked_end(body: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let line_end = body[at..].windows(2).position(|w| w == b"\r\n")? + at;
        let size_text = std::str::from_utf8(&body[at..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            // No trailers are expected: the final CRLF ends the body.
            return (body.len() >= at + 2).then_some(at + 2);
        }
        if body.len() < at + size + 2 {
            return None;
        }
        at += size + 2;
    }
}

struct Answer {
    status: u16,
    first: Duration,
    gap: Duration,
    total: Duration,
}

async fn exchange(
    stream: &mut TcpStream,
    request: &[u8],
    buf: &mut Vec<u8>,
    first_mark: Option<&[u8]>,
) -> std::io::Result<Answer> {
    let start = Instant::now();
    stream.write_all(request).await?;
    buf.clear();
    let mut chunk = [0u8; 65536];
    let mut head = None;
    let mut first = None;
    let mut last_read = start;
    let mut gap = Duration::ZERO;
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let now = Instant::now();
        buf.extend_from_slice(&chunk[..n]);
        if head.is_none() {
            head = head_end(buf);
        }
        let Some(h) = head else { continue };
        if buf.len() > h {
            let arrived = match first_mark {
                None => true,
                Some(mark) => buf[h..].windows(mark.len()).any(|w| w == mark),
            };
            if first.is_none() && arrived {
                first = Some(now - start);
            }
            if buf.len() > h + n {
                gap = gap.max(now - last_read);
            }
        }
        last_read = now;
        let head_bytes = &buf[..h];
        let status = std::str::from_utf8(&head_bytes[9..12])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let done = if let Some(len) = header(head_bytes, "content-length") {
            let len: usize = len.parse().unwrap_or(0);
            buf.len() >= h + len
        } else if header(head_bytes, "transfer-encoding").is_some() {
            chunked_end(&buf[h..]).is_some()
        } else {
            status == 204 || status == 304
        };
        if done {
            let total = now - start;
            return Ok(Answer {
                status,
                first: first.unwrap_or(total),
                gap,
                total,
            });
        }
    }
}

async fn client(
    addr: String,
    request: std::rc::Rc<Vec<u8>>,
    until: Instant,
    tally: std::rc::Rc<std::cell::RefCell<Tally>>,
    left: std::rc::Rc<std::cell::Cell<u64>>,
) {
    let mut buf = Vec::with_capacity(65536);
    let first_mark = std::env::var("FRONTIER_FIRST").ok();
    // Take one request from the count, if any is left.
    let take = || {
        let n = left.get();
        left.set(n.saturating_sub(1));
        n > 0
    };
    'connect: while Instant::now() < until && left.get() > 0 {
        let Ok(mut stream) = TcpStream::connect(&addr).await else {
            tally.borrow_mut().errors += 1;
            continue;
        };
        let _ = stream.set_nodelay(true);
        while Instant::now() < until && take() {
            match exchange(
                &mut stream,
                &request,
                &mut buf,
                first_mark.as_deref().map(str::as_bytes),
            )
            .await
            {
                Ok(a) => {
                    let mut t = tally.borrow_mut();
                    *t.statuses.entry(a.status).or_default() += 1;
                    if !(200..300).contains(&a.status) {
                        t.errors += 1;
                    }
                    t.total_us.push(a.total.as_micros() as u32);
                    t.first_us.push(a.first.as_micros() as u32);
                    t.gap_us.push(a.gap.as_micros() as u32);
                }
                Err(_) => {
                    tally.borrow_mut().errors += 1;
                    continue 'connect;
                }
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: frontier URL BODY_FILE SECONDS CONCURRENCY [HEADER ...]");
        std::process::exit(2);
    }
    let url: hyper::Uri = args[0].parse().expect("URL");
    let body = std::fs::read(&args[1]).expect("BODY_FILE");
    let seconds: f64 = args[2].parse().expect("SECONDS");
    let concurrency: usize = args[3].parse().expect("CONCURRENCY");
    let authority = url.authority().expect("URL with a host").to_string();
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for h in &args[4..] {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let mut request = request.into_bytes();
    request.extend_from_slice(&body);
    let request = std::rc::Rc::new(request);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let tally = std::rc::Rc::new(std::cell::RefCell::new(Tally::default()));
    let left = std::rc::Rc::new(std::cell::Cell::new(
        std::env::var("FRONTIER_REQUESTS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX),
    ));
    let local = tokio::task::LocalSet::new();
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(seconds);
    local.block_on(&runtime, async {
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                tokio::task::spawn_local(client(
                    authority.clone(),
                    request.clone(),
                    until,
                    tally.clone(),
                    left.clone(),
                ))
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut t = tally.borrow_mut();
    let n = t.total_us.len();
    let statuses: Vec<String> = t
        .statuses
        .iter()
        .map(|(s, c)| format!("\"{s}\":{c}"))
        .collect();
    let (p50, p90, p99, p999, max) = (
        percentile(&mut t.total_us, 0.50),
        percentile(&mut t.total_us, 0.90),
        percentile(&mut t.total_us, 0.99),
        percentile(&mut t.total_us, 0.999),
        t.total_us.last().copied().unwrap_or(0),
    );
    let (f50, f99) = (
        percentile(&mut t.first_us, 0.50),
        percentile(&mut t.first_us, 0.99),
    );
    let (g50, g99, gmax) = (
        percentile(&mut t.gap_us, 0.50),
        percentile(&mut t.gap_us, 0.99),
        t.gap_us.last().copied().unwrap_or(0),
    );
    println!(
        "{{\"concurrency\":{concurrency},\"requests\":{n},\"rps\":{:.1},\"errors\":{},\"statuses\":{{{}}},\"p50_us\":{p50},\"p90_us\":{p90},\"p99_us\":{p99},\"p999_us\":{p999},\"max_us\":{max},\"first_p50_us\":{f50},\"first_p99_us\":{f99},\"gap_p50_us\":{g50},\"gap_p99_us\":{g99},\"gap_max_us\":{gmax}}}",
        n as f64 / elapsed,
        t.errors,
        statuses.join(",")
    );
}
