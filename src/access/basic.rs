//! Basic authentication (RFC 7617) against a route's htpasswd users.
//!
//! bcrypt and argon2 are slow on purpose, so checking a password is the
//! costliest thing a client can make weir do for free. Three things keep
//! that bounded:
//! - **off the serving threads, a few at a time**: a verification runs on
//!   tokio's blocking pool under a process-wide [`Verifier`] of half the
//!   cores; a request waits for a turn (up to [`MAX_WAITING`] of them, for
//!   [`WAIT`] at most, without a thread), else it is shed with 503;
//! - **failures limited per address**: each wrong credential counts toward
//!   the route's [`AuthFailures`]; past it the address gets 429 before its
//!   credential is looked at;
//! - **a cache of what was verified**: a browser sends the same credential
//!   with every request; a pair verified in the last [`CACHE_TTL`] is
//!   found by its keyed hash (HMAC-SHA256 under a key made on first use, so
//!   the cache holds no password and cannot be precomputed against).
//!
//! The user name is compared in constant time against every user (by
//! keyed hash), and an unknown user's password is verified against the
//! first user's hash, so the time taken does not tell which users exist.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aws_lc_rs::hmac;
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::admit::auth_failures::AuthFailures;
use crate::config::{BasicAuth, PasswordHash};
use crate::respond::Rescue;
use crate::sync::Locked;

/// Requests that may wait for a verification turn at once.
pub(crate) const MAX_WAITING: usize = 64;
/// The longest wait for a turn.
pub(crate) const WAIT: Duration = Duration::from_secs(2);
/// How long a verified credential is taken without verifying it again.
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(300);
/// Verified credentials remembered per route.
const CACHE_MAX: usize = 1024;
/// Failed logins an address may make at once on a route, then
/// [`FAILURES_PER_MINUTE`] (as LLM routes' client tokens: an office
/// behind one address shares it).
pub(crate) const FAILURE_BURST: u32 = 10;
pub(crate) const FAILURES_PER_MINUTE: u32 = 6;

type Tag = [u8; 32];

/// The process-wide bound on verifications and the key of the tags.
pub(crate) struct Verifier {
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    /// Made on first use: aws-lc seeds its generator from jitter entropy
    /// (hundreds of millions of instructions), which a process with no
    /// basic-auth route must not pay at every start and reload.
    key: std::sync::OnceLock<hmac::Key>,
}

impl Verifier {
    /// Half the cores verify at most: the other half keeps serving.
    pub(crate) fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_permits((cores / 2).max(1))
    }

    pub(crate) fn with_permits(permits: usize) -> Self {
        Verifier {
            permits: Arc::new(Semaphore::new(permits.max(1))),
            waiting: AtomicUsize::new(0),
            key: std::sync::OnceLock::new(),
        }
    }

    fn tag(&self, parts: &[&[u8]]) -> Tag {
        let key = self.key.get_or_init(|| {
            let rng = aws_lc_rs::rand::SystemRandom::new();
            hmac::Key::generate(hmac::HMAC_SHA256, &rng).unwrap_or_else(|_| {
                hmac::Key::new(hmac::HMAC_SHA256, &fastrand::u64(..).to_le_bytes())
            })
        });
        let mut ctx = hmac::Context::with_key(key);
        for p in parts {
            // Lengths first, so ("ab","c") and ("a","bc") differ.
            ctx.update(&(p.len() as u64).to_le_bytes());
            ctx.update(p);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.sign().as_ref());
        out
    }

    /// A turn to verify, waiting (without a thread) behind at most
    /// [`MAX_WAITING`] others for up to [`WAIT`].
    async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Some(p);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        // Decremented however the wait ends, a dropped request included.
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _waiting = Waiting(&self.waiting);
        tokio::time::timeout(WAIT, self.permits.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

/// What a route's basic auth keeps across reloads: its failures per
/// address and the credentials it verified.
pub(crate) struct Kept {
    failures: AuthFailures,
    cache: std::sync::Mutex<HashMap<Tag, Instant>>,
}

impl Kept {
    pub(crate) fn new() -> Self {
        Kept {
            failures: AuthFailures::new(FAILURES_PER_MINUTE, FAILURE_BURST),
            cache: Default::default(),
        }
    }

    fn cached(&self, tag: &Tag) -> bool {
        self.cache
            .locked()
            .get(tag)
            .is_some_and(|at| at.elapsed() < CACHE_TTL)
    }

    fn remember(&self, tag: Tag) {
        let mut cache = self.cache.locked();
        if cache.len() >= CACHE_MAX {
            cache.retain(|_, at| at.elapsed() < CACHE_TTL);
            if cache.len() >= CACHE_MAX {
                // Full of live entries: start over rather than grow.
                cache.clear();
            }
        }
        cache.insert(tag, Instant::now());
    }
}

/// One snapshot's basic auth of one route.
pub(crate) struct Guard {
    challenge: HeaderValue,
    /// Each user's name tag and hash, in file order.
    users: Vec<(Tag, PasswordHash)>,
    kept: Arc<Kept>,
    verifier: Arc<Verifier>,
}

/// Where a request is, for the failure's log line.
pub(crate) struct Asker<'a> {
    pub(crate) peer: IpAddr,
    pub(crate) route: &'a str,
    pub(crate) host: &'a str,
}

impl Guard {
    pub(crate) fn new(auth: &BasicAuth, kept: Arc<Kept>, verifier: Arc<Verifier>) -> Self {
        Guard {
            challenge: auth.challenge.clone(),
            users: auth
                .users
                .iter()
                .map(|u| (verifier.tag(&[u.name.as_bytes()]), u.hash.clone()))
                .collect(),
            kept,
            verifier,
        }
    }

    /// Pass a request with a valid credential; else 401 with the
    /// challenge, 429 for an address past its failures, 503 when every
    /// verification turn is taken.
    pub(crate) async fn authenticate(
        &self,
        headers: &HeaderMap,
        asker: &Asker<'_>,
    ) -> Result<(), Rescue> {
        if let Some(secs) = self.kept.failures.refused(asker.peer) {
            return Err(Rescue::status(StatusCode::TOO_MANY_REQUESTS).retry_after(secs));
        }
        let (user, password) = match credentials(headers) {
            // No credential is no guess: the browser's first request.
            Credential::Missing => return Err(self.challenge()),
            Credential::Malformed => return Err(self.failed(asker)),
            Credential::Basic(user, password) => (user, password),
        };
        let user_tag = self.verifier.tag(&[&user]);
        // Every user compared, none skipped on a match.
        let mut found: Option<usize> = None;
        for (i, (tag, _)) in self.users.iter().enumerate() {
            if bool::from(tag.ct_eq(&user_tag)) {
                found = found.or(Some(i));
            }
        }
        let Some((_, hash)) = self.users.get(found.unwrap_or(0)) else {
            return Err(self.failed(asker));
        };
        let tag = self
            .verifier
            .tag(&[&user, &password, hash_text(hash).as_bytes()]);
        if found.is_some() && self.kept.cached(&tag) {
            return Ok(());
        }
        let Some(turn) = self.verifier.turn().await else {
            return Err(Rescue::shed("basic_auth"));
        };
        // A request waiting its turn may find another just verified it.
        if found.is_some() && self.kept.cached(&tag) {
            return Ok(());
        }
        let hash = hash.clone();
        let verified = tokio::task::spawn_blocking(move || {
            let ok = verify(&hash, &password);
            drop(turn);
            ok
        })
        .await
        // A verification that panicked is a failure, not a crash.
        .unwrap_or(false);
        if verified && found.is_some() {
            self.kept.remember(tag);
            Ok(())
        } else {
            Err(self.failed(asker))
        }
    }

    fn challenge(&self) -> Rescue {
        Rescue::status(StatusCode::UNAUTHORIZED).challenging(self.challenge.clone())
    }

    /// A wrong credential: counted toward the address's failures, and the
    /// line fail2ban matches.
    fn failed(&self, asker: &Asker<'_>) -> Rescue {
        self.kept.failures.failed(asker.peer);
        log_failed(asker);
        self.challenge()
    }
}

/// The line fail2ban's `weir` filter matches (deploy/fail2ban): one per
/// failure, so at most the failure limit's allowance per address.
fn log_failed(asker: &Asker<'_>) {
    tracing::warn!(
        target: "weir::auth",
        "weir: auth_failed client={} route={} host={}",
        asker.peer,
        asker.route,
        asker.host
    );
}

fn hash_text(hash: &PasswordHash) -> &str {
    match hash {
        PasswordHash::Bcrypt(h) | PasswordHash::Argon2(h) => h,
    }
}

/// Whether `password` matches `hash` (slow: on the blocking pool only).
fn verify(hash: &PasswordHash, password: &[u8]) -> bool {
    match hash {
        PasswordHash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
        PasswordHash::Argon2(h) => {
            use argon2::PasswordVerifier;
            argon2::PasswordHash::new(h).is_ok_and(|phc| {
                argon2::Argon2::default()
                    .verify_password(password, &phc)
                    .is_ok()
            })
        }
    }
}

enum Credential {
    Missing,
    Malformed,
    Basic(Vec<u8>, Vec<u8>),
}

/// The `Authorization: Basic` credential: user and password as bytes.
fn credentials(headers: &HeaderMap) -> Credential {
    use base64::Engine;
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return if headers.contains_key(header::AUTHORIZATION) {
            Credential::Malformed
        } else {
            Credential::Missing
        };
    };
    let bytes = value.as_bytes();
    let Some((scheme, token)) = bytes
        .iter()
        .position(|b| *b == b' ')
        .map(|i| (&bytes[..i], bytes[i + 1..].trim_ascii()))
    else {
        return Credential::Malformed;
    };
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return Credential::Malformed;
    }
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(token) else {
        return Credential::Malformed;
    };
    match decoded.iter().position(|b| *b == b':') {
        Some(i) => Credential::Basic(decoded[..i].to_vec(), decoded[i + 1..].to_vec()),
        None => Credential::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(users: &[(&str, PasswordHash)]) -> Guard {
        let auth = BasicAuth {
            challenge: HeaderValue::from_static("Basic realm=\"t\", charset=\"UTF-8\""),
            file: "t".into(),
            users: users
                .iter()
                .map(|(n, h)| crate::config::User {
                    name: n.to_string(),
                    hash: h.clone(),
                })
                .collect(),
        };
        Guard::new(
            &auth,
            Arc::new(Kept::new()),
            Arc::new(Verifier::with_permits(1)),
        )
    }

    fn basic(user_pass: &str) -> HeaderMap {
        use base64::Engine;
        let mut h = HeaderMap::new();
        let v = base64::engine::general_purpose::STANDARD.encode(user_pass);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {v}")).expect("header"),
        );
        h
    }

    const ASKER: Asker<'static> = Asker {
        peer: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        route: "r",
        host: "h",
    };

    #[tokio::test]
    async fn right_passes_wrong_and_unknown_fail_and_a_repeat_skips_bcrypt() {
        let hash = PasswordHash::Bcrypt(bcrypt::hash("secret", 4).expect("hash"));
        let g = guard(&[("alice", hash)]);
        assert!(g.authenticate(&basic("alice:secret"), &ASKER).await.is_ok());
        for wrong in ["alice:nope", "bob:secret", "alice", ":secret"] {
            let r = g
                .authenticate(&basic(wrong), &ASKER)
                .await
                .expect_err(wrong);
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{wrong}");
        }
        let missing = g
            .authenticate(&HeaderMap::new(), &ASKER)
            .await
            .expect_err("none");
        assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
        // With every turn taken, only a cached credential still passes.
        let _held = g
            .verifier
            .permits
            .clone()
            .try_acquire_owned()
            .expect("turn");
        g.verifier.waiting.store(MAX_WAITING, Ordering::Relaxed);
        assert!(g.authenticate(&basic("alice:secret"), &ASKER).await.is_ok());
        let shed = g
            .authenticate(&basic("alice:other"), &ASKER)
            .await
            .expect_err("busy");
        assert_eq!(shed.status, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn credentials_are_read_strictly() {
        assert!(matches!(
            credentials(&HeaderMap::new()),
            Credential::Missing
        ));
        let mut bearer = HeaderMap::new();
        bearer.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert!(matches!(credentials(&bearer), Credential::Malformed));
        let mut lower = HeaderMap::new();
        lower.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("basic YTpi"),
        );
        assert!(matches!(credentials(&lower), Credential::Basic(u, p) if u == b"a" && p == b"b"));
    }
}
