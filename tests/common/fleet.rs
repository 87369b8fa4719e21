//! A fleet of real weir processes sharing one Redis (`[cluster]`), for
//! the cluster tests, and what they do to it: Redis killed and restarted
//! under the fleet, a member killed.

#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::process::{Proc, write_config};
use super::redis::Redis;

pub const TOKEN: &str = "tok-fleet";

/// One weir of the fleet.
pub struct Member {
    pub proc: Proc,
    pub web: SocketAddr,
    pub admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Member {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.web)
    }

    pub async fn metric(&self, name: &str) -> Option<u64> {
        super::metric_at(self.admin, name).await
    }

    /// Whether the metric `name` reads `want` within `within`.
    pub async fn metric_becomes(&self, name: &str, want: u64, within: Duration) -> bool {
        super::eventually_metric_at(self.admin, name, want, within).await
    }

    /// A Messages request to its LLM route with the client token.
    pub async fn post(&self, body: String) -> (u16, http::HeaderMap, String) {
        let (status, headers, text) =
            super::post_json(&self.url("/v1/messages"), body, &[("x-api-key", TOKEN)]).await;
        (status.as_u16(), headers, text)
    }

    /// Lines of its log containing `text`, seen so far.
    pub fn lines(&mut self, text: &str) -> usize {
        self.proc.all_lines(|l| l.contains(text)).len()
    }
}

/// `n` weirs from `config` (`{redis}` and `{dir}` filled in; each has a
/// client token file `{dir}/tokens`), once each counts `n` live instances.
pub async fn fleet(n: usize, redis: &Redis, config: &str) -> Vec<Member> {
    let mut members = Vec::new();
    for _ in 0..n {
        members.push(join(redis, config));
    }
    for m in &members {
        let counted = m
            .metric_becomes("weir_cluster_instances", n as u64, Duration::from_secs(10))
            .await;
        assert!(counted, "an instance did not count {n} live instances");
    }
    members
}

/// Kill Redis, then wait until every member has seen it go.
pub async fn kill_redis(redis: &mut Redis, fleet: &[Member]) {
    redis.kill();
    every_member_sees_redis(fleet, false, "did not see Redis go").await;
}

/// Start Redis again on its port (empty), then wait until every member
/// has reconnected.
pub async fn restart_redis(redis: &mut Redis, fleet: &[Member]) {
    redis.restart();
    every_member_sees_redis(fleet, true, "did not reconnect").await;
}

async fn every_member_sees_redis(fleet: &[Member], up: bool, failed: &str) {
    for m in fleet {
        let seen = m
            .metric_becomes("weir_cluster_redis_up", up.into(), Duration::from_secs(10))
            .await;
        assert!(seen, "{} {failed}", m.web);
    }
}

/// [`llm_config`] with a shared limit (a token's concurrency of 4), a
/// 50 ms bound and `fail_closed`.
pub fn fail_closed_llm_config(up: &str) -> String {
    llm_config(
        up,
        "max_concurrent_per_token = 4",
        "timeout = \"50ms\"\non_failure = \"fail_closed\"",
    )
}

/// What a request on an LLM route under a shared limit gets while Redis
/// is gone and the mode is `fail_closed`: an answer at once, 503 with
/// Retry-After, in Anthropic's error envelope.
pub async fn refused_without_redis(m: &Member, body: String) {
    let started = Instant::now();
    let (status, headers, text) = m.post(body).await;
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "answered after {:?}",
        started.elapsed()
    );
    assert_eq!(status, 503, "{text}");
    assert_eq!(headers["retry-after"], "1");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["type"], "error", "Anthropic's envelope: {text}");
    assert_eq!(v["error"]["type"], "overloaded_error", "{text}");
}

/// SIGKILL `m`, then poll `served` every 50 ms for up to `within`: how
/// long after the kill it first held, if it did.
pub async fn kill_and_time<F, Fut>(m: &Member, within: Duration, mut served: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    m.proc.signal("-KILL");
    let killed = Instant::now();
    while killed.elapsed() < within {
        if served().await {
            return Some(killed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// One weir more from `config`, once it listens.
pub fn join(redis: &Redis, config: &str) -> Member {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tokens"), format!("{TOKEN}\n")).expect("tokens");
    let text = config
        .replace("{redis}", &redis.url())
        .replace("{dir}", &dir.path().display().to_string());
    let path = write_config(&dir, &text);
    let mut proc = Proc::run(&path);
    let web = proc.listening("web");
    let admin = proc.admin();
    Member {
        proc,
        web,
        admin,
        _dir: dir,
    }
}

/// An Anthropic route `llm` with the client token, over `up`.
pub fn llm_config(up: &str, route: &str, cluster: &str) -> String {
    format!(
        "[log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
         client_tokens_file = \"{{dir}}/tokens\"\n{route}\n\
         [[route.upstreams]]\nname = \"up\"\nurl = \"{up}\"\n\
         [cluster]\nurl = \"{{redis}}\"\n{cluster}\n"
    )
}

/// A proxy route `api` to `up`, limited per client, and a `[cluster]`
/// with `cluster` keys.
pub fn proxy_config(up: SocketAddr, rate: &str, cluster: &str) -> String {
    format!(
        "[log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"api\"\nupstream = \"http://{up}\"\n{rate}\n\
         [cluster]\nurl = \"{{redis}}\"\n{cluster}\n"
    )
}

pub async fn ok_upstream() -> SocketAddr {
    super::upstream(|_| async { super::text(200, "ok") })
        .await
        .addr
}

/// A GET of `url`: its status, and how long the answer took (a request
/// that takes 5 s is reported as status 0).
pub async fn timed_get(url: &str) -> (u16, Duration) {
    let started = Instant::now();
    let client = super::h1_client();
    let uri: http::Uri = url.parse().expect("url");
    let status = match tokio::time::timeout(Duration::from_secs(5), client.get(uri)).await {
        Ok(Ok(resp)) => {
            let status = resp.status().as_u16();
            let _ = http_body_util::BodyExt::collect(resp.into_body()).await;
            status
        }
        _ => 0,
    };
    (status, started.elapsed())
}

/// `n` GETs of `url` one after another: (passed, refused with 429,
/// longest wait).
pub async fn burst(url: &str, n: usize) -> (usize, usize, Duration) {
    let (mut passed, mut limited, mut longest) = (0, 0, Duration::ZERO);
    for _ in 0..n {
        let (status, took) = timed_get(url).await;
        match status {
            200 => passed += 1,
            429 => limited += 1,
            other => panic!("status {other} from {url}"),
        }
        longest = longest.max(took);
    }
    (passed, limited, longest)
}
