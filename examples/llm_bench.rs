//! The LLM benchmark's two tools (driven by bench/llm.sh):
//!
//! - `llm_bench mock PORT GAP_MS` — weir's mock provider (Anthropic and
//!   OpenAI APIs, canned 20-word answers, GAP_MS between stream events).
//! - `llm_bench load URL PATH RATE SECONDS STREAM_SHARE [CONCURRENCY]` — an
//!   open-loop load at RATE requests/s for SECONDS (a request starts on
//!   schedule whether or not earlier ones finished), STREAM_SHARE of them
//!   streaming; or, with CONCURRENCY, a closed loop of that many clients
//!   (the overload run). Prints one JSON line: time to the first body bytes
//!   and total time, p50/p99 in ms, per kind, and the statuses seen
//!   (`503+ra` = a 503 with Retry-After).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

#[derive(Default)]
struct Samples {
    first: BTreeMap<&'static str, Vec<f64>>,
    total: BTreeMap<&'static str, Vec<f64>>,
    statuses: BTreeMap<String, u64>,
    errors: u64,
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

/// The request body; the model is `BENCH_MODEL` (default `bench`).
fn body(path: &str, stream: bool) -> String {
    let words = "Write twenty words about rivers.";
    let model = std::env::var("BENCH_MODEL").unwrap_or_else(|_| "bench".into());
    if path.ends_with("/messages") {
        serde_json::json!({"model":model,"max_tokens":64,"stream":stream,"messages":[{"role":"user","content":words}]}).to_string()
    } else {
        serde_json::json!({"model":model,"stream":stream,"messages":[{"role":"user","content":words}]}).to_string()
    }
}

type BenchClient = Client<HttpConnector, Full<Bytes>>;

async fn one(
    client: BenchClient,
    url: String,
    path: String,
    stream: bool,
    samples: Arc<Mutex<Samples>>,
) {
    let kind = if stream { "stream" } else { "json" };
    let started = Instant::now();
    let req = http::Request::post(format!("{url}{path}"))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "sk-bench")
        .header("authorization", "Bearer sk-bench")
        .body(Full::new(Bytes::from(body(&path, stream))))
        .expect("request");
    let resp = match tokio::time::timeout(Duration::from_secs(30), client.request(req)).await {
        Ok(Ok(r)) => r,
        _ => {
            samples.lock().expect("lock").errors += 1;
            return;
        }
    };
    let status = resp.status().as_u16();
    let label = if status == 503 && resp.headers().contains_key("retry-after") {
        "503+ra".to_string()
    } else {
        status.to_string()
    };
    let mut body = resp.into_body();
    let mut first = None;
    let mut failed = false;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) if f.is_data() => {
                first.get_or_insert_with(|| started.elapsed());
            }
            Ok(_) => {}
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    let total = started.elapsed();
    let mut s = samples.lock().expect("lock");
    *s.statuses.entry(label).or_default() += 1;
    if failed {
        s.errors += 1;
        return;
    }
    if status == 200 {
        s.first
            .entry(kind)
            .or_default()
            .push(first.unwrap_or(total).as_secs_f64() * 1000.0);
        s.total
            .entry(kind)
            .or_default()
            .push(total.as_secs_f64() * 1000.0);
    }
}

async fn load(args: &[String]) {
    let url = args[0].clone();
    let path = args[1].clone();
    let rate: f64 = args[2].parse().expect("rate");
    let seconds: f64 = args[3].parse().expect("seconds");
    let stream_share: f64 = args[4].parse().expect("stream share");
    let concurrency: Option<usize> = args.get(5).map(|c| c.parse().expect("concurrency"));
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: BenchClient = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(4096)
        .build(connector);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    match concurrency {
        None => {
            let interval = Duration::from_secs_f64(1.0 / rate);
            let mut n: u64 = 0;
            let mut next = tokio::time::Instant::now();
            while Instant::now() < deadline {
                tokio::time::sleep_until(next).await;
                // Every other request streams at 0.5, and so on.
                let stream =
                    ((n as f64 + 1.0) * stream_share).floor() > (n as f64 * stream_share).floor();
                tasks.push(tokio::spawn(one(
                    client.clone(),
                    url.clone(),
                    path.clone(),
                    stream,
                    samples.clone(),
                )));
                n += 1;
                next += interval;
            }
        }
        Some(c) => {
            for i in 0..c {
                let (client, url, path, samples) =
                    (client.clone(), url.clone(), path.clone(), samples.clone());
                tasks.push(tokio::spawn(async move {
                    let mut n = i as u64;
                    while Instant::now() < deadline {
                        let stream = ((n as f64 + 1.0) * stream_share).floor()
                            > (n as f64 * stream_share).floor();
                        one(
                            client.clone(),
                            url.clone(),
                            path.clone(),
                            stream,
                            samples.clone(),
                        )
                        .await;
                        n += c as u64;
                    }
                }));
            }
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut s = samples.lock().expect("lock");
    let mut out = serde_json::Map::new();
    for kind in ["json", "stream"] {
        let first = s.first.entry(kind).or_default();
        let p50f = percentile(first, 0.5);
        let p99f = percentile(first, 0.99);
        let n = first.len();
        let total = s.total.entry(kind).or_default();
        out.insert(
            kind.into(),
            serde_json::json!({
                "n": n,
                "first_p50_ms": p50f, "first_p99_ms": p99f,
                "total_p50_ms": percentile(total, 0.5), "total_p99_ms": percentile(total, 0.99),
            }),
        );
    }
    out.insert("statuses".into(), serde_json::json!(s.statuses));
    out.insert("errors".into(), serde_json::json!(s.errors));
    out.insert("seconds".into(), serde_json::json!(elapsed));
    let answered: u64 = s.statuses.values().sum();
    out.insert(
        "answered_per_s".into(),
        serde_json::json!(answered as f64 / elapsed),
    );
    println!("{}", serde_json::Value::Object(out));
}

async fn mock(args: &[String]) {
    let port: u16 = args[0].parse().expect("port");
    let gap = Duration::from_millis(args.get(1).map_or(0, |g| g.parse().expect("gap ms")));
    const WORDS: [&str; 20] = [
        "Rivers",
        " carve",
        " valleys",
        " slowly",
        ",",
        " carrying",
        " silt",
        " from",
        " high",
        " mountains",
        " toward",
        " patient",
        " seas",
        " that",
        " wait",
        " beneath",
        " the",
        " turning",
        " sky",
        ".",
    ];
    let mock = weir::testing::demo::llm::spawn(([127, 0, 0, 1], port).into(), move |seen| {
        weir::testing::demo::llm::success(seen, &WORDS, gap)
    })
    .await
    .expect("bind");
    eprintln!("mock LLM on {}", mock.addr);
    std::future::pending::<()>().await;
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    match args.first().map(String::as_str) {
        Some("mock") => runtime.block_on(mock(&args[1..])),
        Some("load") => runtime.block_on(load(&args[1..])),
        _ => eprintln!(
            "usage: llm_bench mock PORT [GAP_MS] | load URL PATH RATE SECONDS STREAM_SHARE [CONCURRENCY]"
        ),
    }
}
