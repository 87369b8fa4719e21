//! An Anthropic-shaped upstream for the fleet's budget tests: every
//! answer reports the same usage (10 input + 5 output tokens), requests
//! for the model `held` are held open until the test lets them go, and
//! requests are counted (all, and at most in flight at once).

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

/// Tokens the upstream reports for every answer.
pub const USED: u64 = 15;

/// The upstream: counts requests (all, and in flight at once), holds
/// those for the model `held` until [`Upstream::release`].
pub struct Upstream {
    pub url: String,
    pub seen: Arc<AtomicUsize>,
    pub in_flight: Arc<AtomicUsize>,
    pub most: Arc<AtomicUsize>,
    pub gate: watch::Sender<bool>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let seen = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (gate, open) = watch::channel(false);
        let (s, f, m) = (seen.clone(), in_flight.clone(), most.clone());
        let up = super::upstream(move |req: http::Request<hyper::body::Incoming>| {
            let (seen, in_flight, most, mut open) = (s.clone(), f.clone(), m.clone(), open.clone());
            async move {
                let body = http_body_util::BodyExt::collect(req.into_body())
                    .await
                    .expect("request body")
                    .to_bytes();
                let request: Value = serde_json::from_slice(&body).expect("json");
                let model = request["model"].as_str().unwrap_or("").to_string();
                seen.fetch_add(1, Ordering::SeqCst);
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                if model == "held" {
                    let _ = open.wait_for(|o| *o).await;
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let answer = json!({
                    "id": "msg_1", "type": "message", "role": "assistant", "model": model,
                    "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn", "stop_sequence": null,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                });
                let mut resp = http::Response::new(super::body(answer.to_string()));
                resp.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                resp
            }
        })
        .await;
        Upstream {
            url: format!("http://{}", up.addr),
            seen,
            in_flight,
            most,
            gate,
        }
    }

    pub fn release(&self) {
        self.gate.send_replace(true);
    }

    pub fn hold(&self) {
        self.gate.send_replace(false);
    }

    pub fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    pub async fn until_in_flight(&self, n: usize) {
        let reached = super::eventually(Duration::from_secs(10), || self.in_flight() == n).await;
        assert!(
            reached,
            "{} in flight at the upstream, not {n}",
            self.in_flight()
        );
    }
}
