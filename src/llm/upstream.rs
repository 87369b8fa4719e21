//! An LLM upstream: its pooled client, how it is authenticated, and its
//! cooldown — the time until which failover skips it because it said it
//! is rate limited or overloaded, or because it refused connections.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::time::Instant;

use crate::config::{LlmUpstreamConfig, UpstreamSettings};
use crate::sync::Locked;
use crate::worker::PerWorker;

pub type LlmClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Why an upstream is cooling down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cooling {
    /// It answered 429 with a retry hint.
    RateLimited,
    /// It answered 503/529 with a retry hint.
    Overloaded,
    /// It refused or dropped connections: skipped with a growing back-off.
    Unreachable,
}

#[derive(Debug, Default)]
struct CooldownState {
    until: Option<(Instant, Cooling)>,
    refusals: u32,
}

/// The longest an upstream's own retry hint keeps it out of rotation.
const MAX_HINT: Duration = Duration::from_secs(300);
const REFUSED_START: Duration = Duration::from_secs(1);
const REFUSED_MAX: Duration = Duration::from_secs(60);

pub struct LlmUpstream {
    pub config: LlmUpstreamConfig,
    /// One pool per worker.
    pub client: PerWorker<LlmClient>,
    cooldown: Mutex<CooldownState>,
}

impl LlmUpstream {
    pub fn new(
        config: &LlmUpstreamConfig,
        settings: &UpstreamSettings,
        tls: &rustls::ClientConfig,
        workers: usize,
    ) -> Self {
        LlmUpstream {
            config: config.clone(),
            client: PerWorker::new(workers, || {
                use crate::proxy::upstream::{connector, pooled_client};
                pooled_client(
                    connector(config.connect_timeout, tls, config.http),
                    settings,
                    config.http,
                )
            }),
            cooldown: Mutex::new(CooldownState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CooldownState> {
        self.cooldown.locked()
    }

    /// Whether failover should skip this upstream now, and until when.
    pub fn cooling(&self, now: Instant) -> Option<(Instant, Cooling)> {
        let state = self.state();
        state.until.filter(|(until, _)| *until > now)
    }

    /// The upstream answered: it is reachable again.
    pub fn answered(&self) {
        let mut s = self.state();
        s.refusals = 0;
        if matches!(s.until, Some((_, Cooling::Unreachable))) {
            s.until = None;
        }
    }

    /// The upstream refused the connection: back off 1 s, 2 s, 4 s … 60 s.
    pub fn refused(&self, now: Instant) -> Instant {
        let mut s = self.state();
        let wait = REFUSED_START
            .saturating_mul(1u32 << s.refusals.min(6))
            .min(REFUSED_MAX);
        s.refusals = s.refusals.saturating_add(1);
        let until = now + wait;
        s.until = Some((until, Cooling::Unreachable));
        until
    }

    /// The upstream said when to come back (429/503/529 with a retry
    /// hint): skip it until then.
    pub fn hinted(&self, now: Instant, wait: Duration, why: Cooling) -> Instant {
        let until = now + wait.min(MAX_HINT);
        let mut s = self.state();
        if s.until.is_none_or(|(u, _)| u < until) {
            s.until = Some((until, why));
        }
        until
    }
}

/// The retry hint in an upstream's response: `retry-after-ms`, then
/// `retry-after` in seconds (the order the official SDKs read them in).
pub fn retry_hint(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    number("retry-after").map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Credential;

    fn upstream() -> LlmUpstream {
        let tls = crate::pki::client_config(None).expect("tls");
        LlmUpstream::new(
            &LlmUpstreamConfig {
                name: "a".into(),
                url: "http://127.0.0.1:1".parse().expect("url"),
                credential: Credential::Passthrough,
                connect_timeout: Duration::from_secs(1),
                api: crate::config::UpstreamApi::Anthropic,
                accepts: crate::config::Accepts::default(),
                http: crate::config::UpstreamHttp::Http1,
            },
            &UpstreamSettings::default(),
            &tls,
            1,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_back_off_and_an_answer_resets() {
        let u = upstream();
        let now = Instant::now();
        assert_eq!(u.refused(now), now + Duration::from_secs(1));
        assert_eq!(u.refused(now), now + Duration::from_secs(2));
        assert_eq!(u.refused(now), now + Duration::from_secs(4));
        assert!(u.cooling(now).is_some());
        assert!(u.cooling(now + Duration::from_secs(5)).is_none());
        u.answered();
        assert!(u.cooling(now).is_none());
        assert_eq!(u.refused(now), now + Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn hints_cool_until_then() {
        let u = upstream();
        let now = Instant::now();
        u.hinted(now, Duration::from_secs(7), Cooling::RateLimited);
        assert_eq!(
            u.cooling(now),
            Some((now + Duration::from_secs(7), Cooling::RateLimited))
        );
        u.answered();
        assert!(
            u.cooling(now).is_some(),
            "an answer elsewhere does not undo a hint"
        );
    }

    #[test]
    fn hints_are_read_like_the_sdks() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().expect("v"));
        assert_eq!(retry_hint(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "1500".parse().expect("v"));
        assert_eq!(retry_hint(&h), Some(Duration::from_millis(1500)));
        h.clear();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("v"),
        );
        assert_eq!(retry_hint(&h), None);
    }
}
