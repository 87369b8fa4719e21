//! A fleet's ACME state in Redis (`[cluster]`): the account, each name's
//! certificate, the issuance locks and the answers to challenges in
//! progress, so several weirs behind one balancer order a name once and
//! all serve the result, as certmagic does with shared storage.
//!
//! Keys, under the cluster's prefix (`<dir-id>` names the CA as the state
//! directory's account file does):
//!
//! - `acme:account:<dir-id>` — the account credentials (JSON, private key
//!   inside), written once, by the instance that registered it;
//! - `acme:cert:<name>` — a hash: `pem` (chain then key, as in the state
//!   directory) and `not_after` (Unix seconds); a script replaces it only
//!   with a certificate that expires later;
//! - `acme:lock:<name>`, `acme:lock:account:<dir-id>` — an issuance lock:
//!   `SET NX PX` with a random token, renewed while the order runs,
//!   released by a compare-and-delete script;
//! - `acme:challenge:<name>` — the answer of the order in progress (JSON,
//!   with a TTL), and `acme:challenge-acks:<name>` — the instances that
//!   have it (a set).
//!
//! Nothing here runs on the request path: every instance copies pending
//! answers into its own [`Challenges`] by polling (see
//! [`mirror_challenges`]), so the TLS handshake and the http-01 path read
//! only local memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redis::Script;
use redis::aio::MultiplexedConnection;
use rustls::sign::CertifiedKey;

use super::answers::Challenges;
use super::store::{self, Stored};
use crate::cluster::Cluster;

/// The longest any call here waits for Redis (all off the request path).
const REDIS_WAIT: Duration = Duration::from_secs(2);
/// How long a published answer outlives an order whose instance died.
const CHALLENGE_TTL: Duration = Duration::from_secs(300);
/// The longest an order waits for the other instances to have its answer
/// before telling the CA to validate.
const ANNOUNCE_WAIT: Duration = Duration::from_secs(10);
/// How often every instance looks for answers of orders in progress.
const CHALLENGE_POLL: Duration = Duration::from_millis(500);
/// An instance waiting for another's order polls between these.
pub(crate) const WAIT_MIN: Duration = Duration::from_millis(250);
pub(crate) const WAIT_MAX: Duration = Duration::from_secs(2);
/// Answers larger than this in Redis are not ours (a token is 43
/// characters, a key authorization under 100).
const MAX_ANSWER: usize = 1024;
/// A certificate (chain and key) or an account larger than this in Redis
/// is not parsed (a chain of three with its key is about 5 KiB).
const MAX_STORED: usize = 64 * 1024;

/// Redis is down, did not answer in time, or refused.
#[derive(Debug, thiserror::Error)]
#[error("Redis: {0}")]
pub(crate) struct Unavailable(String);

/// `GET` a key holding `ARGV[1]`: delete it (1) or leave it (0).
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// Extend a lock this instance still holds: 1, or 0 when it is not ours.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
";

/// Store a certificate unless the one there expires as late or later.
/// ARGV: not_after (Unix seconds), PEM. Returns 1 when stored.
const OFFER: &str = r"
local current = tonumber(redis.call('HGET', KEYS[1], 'not_after'))
if current and current >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'not_after', ARGV[1], 'pem', ARGV[2])
return 1
";

/// Remove a certificate entry still holding `ARGV[1]` as its PEM.
const DISCARD: &str = r"
if redis.call('HGET', KEYS[1], 'pem') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// The fleet's ACME state, over the cluster's connection.
pub(crate) struct Fleet {
    cluster: Arc<Cluster>,
    /// The listener's `acme.ca_file`: extra roots a shared certificate's
    /// chain may verify to.
    ca_file: Option<std::path::PathBuf>,
    release: Script,
    renew: Script,
    offer: Script,
    discard: Script,
}

/// A challenge answer as the ordering instance publishes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Answer {
    /// The instance that ordered (it does not acknowledge its own).
    pub(crate) by: String,
    /// `http-01` or `tls-alpn-01`.
    pub(crate) challenge: String,
    pub(crate) token: String,
    pub(crate) key_authorization: String,
}

impl Fleet {
    pub(crate) fn new(cluster: Arc<Cluster>, ca_file: Option<std::path::PathBuf>) -> Self {
        Fleet {
            cluster,
            ca_file,
            release: Script::new(RELEASE),
            renew: Script::new(RENEW),
            offer: Script::new(OFFER),
            discard: Script::new(DISCARD),
        }
    }

    pub(crate) fn instance(&self) -> &str {
        self.cluster.instance()
    }

    fn conn(&self) -> Result<MultiplexedConnection, Unavailable> {
        self.cluster
            .connection()
            .ok_or_else(|| Unavailable("down".into()))
    }

    fn key(&self, suffix: &str) -> String {
        self.cluster.key(&format!("acme:{suffix}"))
    }

    /// The shared certificate for `name`, if there is a usable one. One
    /// that has expired, or does not parse, pair or cover the name, or is
    /// not one a CA issued ([`super::trust`]: chain, lifetime), is removed (unless replaced meanwhile): it is as good as none, and
    /// left there it would stop every later one from being stored.
    pub(crate) async fn certificate(&self, name: &str) -> Result<Option<Stored>, Unavailable> {
        let mut c = self.conn()?;
        let key = self.key(&format!("cert:{name}"));
        let pem: Option<String> =
            bounded(redis::cmd("HGET").arg(&key).arg("pem").query_async(&mut c)).await?;
        let Some(pem) = pem else { return Ok(None) };
        let why = if pem.len() > MAX_STORED {
            format!("{} bytes", pem.len())
        } else {
            match store::parse(pem.as_bytes(), name) {
                Ok(s) if s.not_after <= SystemTime::now() => "expired".to_string(),
                Ok(s) => match super::trust::refuse(&s, name, self.ca_file.as_deref()) {
                    None => return Ok(Some(s)),
                    Some(why) => why,
                },
                Err(why) => why,
            }
        };
        tracing::warn!(name = %name, why = %why, "the certificate in Redis is unusable; removing it");
        let mut invocation = self.discard.prepare_invoke();
        invocation.key(&key).arg(pem);
        bounded(invocation.invoke_async::<i64>(&mut c)).await?;
        Ok(None)
    }

    /// Store `s` for the fleet unless Redis has one expiring as late;
    /// whether it was stored.
    pub(crate) async fn offer_certificate(
        &self,
        name: &str,
        s: &Stored,
    ) -> Result<bool, Unavailable> {
        let mut c = self.conn()?;
        let mut invocation = self.offer.prepare_invoke();
        invocation
            .key(self.key(&format!("cert:{name}")))
            .arg(s.not_after_unix())
            .arg(&*s.pem);
        let stored: i64 = bounded(invocation.invoke_async(&mut c)).await?;
        Ok(stored == 1)
    }

    /// The shared account credentials (JSON) for the CA `dir_id`.
    pub(crate) async fn account(&self, dir_id: &str) -> Result<Option<String>, Unavailable> {
        let mut c = self.conn()?;
        let json: Option<String> = bounded(
            redis::cmd("GET")
                .arg(self.key(&format!("account:{dir_id}")))
                .query_async(&mut c),
        )
        .await?;
        match json {
            Some(j) if j.len() > MAX_STORED => Err(Unavailable(format!(
                "the account in Redis is {} bytes, not an account",
                j.len()
            ))),
            j => Ok(j),
        }
    }

    /// Share `json` as the account unless one is shared already.
    pub(crate) async fn offer_account(
        &self,
        dir_id: &str,
        json: &str,
    ) -> Result<bool, Unavailable> {
        let mut c = self.conn()?;
        let set: Option<String> = bounded(
            redis::cmd("SET")
                .arg(self.key(&format!("account:{dir_id}")))
                .arg(json)
                .arg("NX")
                .query_async(&mut c),
        )
        .await?;
        Ok(set.is_some())
    }

    /// The CA no longer knows the account `json`: remove it, unless
    /// another instance has shared a new one meanwhile.
    pub(crate) async fn forget_account(&self, dir_id: &str, json: &str) -> Result<(), Unavailable> {
        let mut c = self.conn()?;
        let mut invocation = self.release.prepare_invoke();
        invocation
            .key(self.key(&format!("account:{dir_id}")))
            .arg(json);
        bounded(invocation.invoke_async::<i64>(&mut c)).await?;
        Ok(())
    }

    /// Take the issuance lock `what` (`<name>` or `account:<dir-id>`) for
    /// the lease TTL: `None` when another instance holds it.
    pub(crate) async fn lock(
        self: &Arc<Self>,
        what: &str,
    ) -> Result<Option<IssuanceLock>, Unavailable> {
        let mut c = self.conn()?;
        let key = self.key(&format!("lock:{what}"));
        let token = format!("{}:{:016x}", self.instance(), fastrand::u64(..));
        let ttl = self.cluster.lease_ttl();
        let taken: Option<String> = bounded(
            redis::cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(ttl.as_millis() as u64)
                .query_async(&mut c),
        )
        .await?;
        Ok(taken.map(|_| IssuanceLock {
            fleet: self.clone(),
            key,
            token,
        }))
    }

    /// Whether any instance holds the lock `what`.
    pub(crate) async fn locked(&self, what: &str) -> Result<bool, Unavailable> {
        let mut c = self.conn()?;
        let n: i64 = bounded(
            redis::cmd("EXISTS")
                .arg(self.key(&format!("lock:{what}")))
                .query_async(&mut c),
        )
        .await?;
        Ok(n == 1)
    }

    /// Publish the answer to `name`'s challenge for every instance, and
    /// wait (at most [`ANNOUNCE_WAIT`]) until every other live instance
    /// says it has it, so the CA finds it wherever the balancer sends it.
    pub(crate) async fn announce(&self, name: &str, answer: &Answer) -> Result<(), Unavailable> {
        let json = serde_json::to_string(answer).map_err(|e| Unavailable(e.to_string()))?;
        let acks = self.key(&format!("challenge-acks:{name}"));
        let mut c = self.conn()?;
        bounded(
            redis::pipe()
                .del(&acks)
                .ignore()
                .cmd("SET")
                .arg(self.key(&format!("challenge:{name}")))
                .arg(json)
                .arg("PX")
                .arg(CHALLENGE_TTL.as_millis() as u64)
                .ignore()
                .query_async::<()>(&mut c),
        )
        .await?;
        let deadline = tokio::time::Instant::now() + ANNOUNCE_WAIT;
        loop {
            let others = self.cluster.instances().saturating_sub(1);
            let have: u32 = bounded(redis::cmd("SCARD").arg(&acks).query_async(&mut c)).await?;
            if have >= others {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(name = %name, have, of = others, "not every instance acknowledged the challenge answer in time; validating anyway");
                return Ok(());
            }
            tokio::time::sleep(CHALLENGE_POLL / 5).await;
        }
    }

    /// The order for `name` is over: its answer is no longer needed.
    pub(crate) async fn withdraw(&self, name: &str) -> Result<(), Unavailable> {
        let mut c = self.conn()?;
        bounded(
            redis::cmd("DEL")
                .arg(self.key(&format!("challenge:{name}")))
                .arg(self.key(&format!("challenge-acks:{name}")))
                .query_async::<i64>(&mut c),
        )
        .await?;
        Ok(())
    }

    /// The answers pending for `names`, in order.
    async fn pending(&self, names: &[String]) -> Result<Vec<Option<Answer>>, Unavailable> {
        let mut c = self.conn()?;
        let mut mget = redis::cmd("MGET");
        for n in names {
            mget.arg(self.key(&format!("challenge:{n}")));
        }
        let raw: Vec<Option<String>> = bounded(mget.query_async(&mut c)).await?;
        Ok(raw
            .into_iter()
            .map(|r| {
                r.filter(|r| r.len() <= MAX_ANSWER)
                    .and_then(|r| serde_json::from_str(&r).ok())
            })
            .collect())
    }

    async fn acknowledge(&self, name: &str) -> Result<(), Unavailable> {
        let mut c = self.conn()?;
        let acks = self.key(&format!("challenge-acks:{name}"));
        bounded(
            redis::pipe()
                .sadd(&acks, self.instance())
                .ignore()
                .pexpire(&acks, CHALLENGE_TTL.as_millis() as i64)
                .ignore()
                .query_async::<()>(&mut c),
        )
        .await
    }
}

/// An issuance lock this instance holds; [`IssuanceLock::release`] gives
/// it back, and a dead holder's lock expires with its lease.
pub(crate) struct IssuanceLock {
    fleet: Arc<Fleet>,
    key: String,
    token: String,
}

impl IssuanceLock {
    /// Renew the lease every third of its TTL; returns only when the lock
    /// is found to be another instance's (it expired while this one could
    /// not reach Redis). A Redis that does not answer is asked again: the
    /// order goes on, since finishing it wastes less than abandoning it.
    pub(crate) async fn keep(&self) {
        let ttl = self.fleet.cluster.lease_ttl();
        loop {
            tokio::time::sleep(ttl / 3).await;
            if let Ok(false) = self.extend(ttl).await {
                return;
            }
        }
    }

    /// Hold the lock for `ttl` from now (a failed order keeps it for its
    /// back-off, so the fleet retries at one instance's pace); whether it
    /// was still this instance's.
    pub(crate) async fn extend(&self, ttl: Duration) -> Result<bool, Unavailable> {
        let mut c = self.fleet.conn()?;
        let mut invocation = self.fleet.renew.prepare_invoke();
        invocation
            .key(&self.key)
            .arg(&self.token)
            .arg(ttl.as_millis().max(1) as u64);
        let renewed: i64 = bounded(invocation.invoke_async(&mut c)).await?;
        Ok(renewed == 1)
    }

    /// Give the lock back (only if it is still this instance's).
    pub(crate) async fn release(self) {
        let released = async {
            let mut c = self.fleet.conn()?;
            let mut invocation = self.fleet.release.prepare_invoke();
            invocation.key(&self.key).arg(&self.token);
            bounded(invocation.invoke_async::<i64>(&mut c)).await
        };
        if let Err(e) = released.await {
            tracing::debug!(lock = %self.key, error = %e, "issuance lock not released; it expires with its lease");
        }
    }
}

/// Copy the answers of orders other instances run for `names` into this
/// instance's `challenges` (and withdraw them when their order ends), and
/// acknowledge each, so the CA's validation succeeds on whichever instance
/// the balancer sends it to. Runs for as long as the listener's manager.
pub(crate) async fn mirror_challenges(
    fleet: Arc<Fleet>,
    names: Vec<String>,
    challenges: Arc<Challenges>,
) {
    // Per name: the answer copied, and the challenge certificate made for
    // it (tls-alpn-01), to withdraw exactly that.
    let mut copied: HashMap<String, (Answer, Option<Arc<CertifiedKey>>)> = HashMap::new();
    let mut poll = tokio::time::interval(CHALLENGE_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        poll.tick().await;
        let Ok(pending) = fleet.pending(&names).await else {
            continue;
        };
        for (name, answer) in names.iter().zip(pending) {
            let foreign = answer.filter(|a| a.by != fleet.instance());
            if copied.get(name).map(|(a, _)| a) == foreign.as_ref() {
                continue;
            }
            if let Some((old, key)) = copied.remove(name) {
                withdraw(&challenges, name, &old, key.as_ref());
            }
            let Some(answer) = foreign else { continue };
            let key = match answer.challenge.as_str() {
                "http-01" => {
                    challenges.mirror_http01(&answer.token, &answer.key_authorization);
                    None
                }
                "tls-alpn-01" => {
                    let digest = aws_lc_rs::digest::digest(
                        &aws_lc_rs::digest::SHA256,
                        answer.key_authorization.as_bytes(),
                    );
                    match super::answers::alpn_certificate(name, digest.as_ref()) {
                        Ok(key) => {
                            challenges.mirror_tls_alpn01(name, key.clone());
                            Some(key)
                        }
                        Err(e) => {
                            tracing::warn!(name = %name, error = %e, "cannot make the challenge certificate");
                            continue;
                        }
                    }
                }
                _ => continue,
            };
            tracing::debug!(name = %name, by = %answer.by, "answering another instance's challenge");
            copied.insert(name.clone(), (answer, key));
            if let Err(e) = fleet.acknowledge(name).await {
                tracing::debug!(name = %name, error = %e, "challenge not acknowledged");
            }
        }
    }
}

fn withdraw(challenges: &Challenges, name: &str, answer: &Answer, key: Option<&Arc<CertifiedKey>>) {
    match key {
        Some(key) => challenges.withdraw_tls_alpn01(name, key),
        None => challenges.withdraw_http01(&answer.token),
    }
}

/// With Redis down, from when this instance orders alone rather than
/// waiting for Redis (and the lock): at once when it has no certificate to
/// serve, else once its certificate is in the last tenth of its lifetime,
/// since an expired certificate costs more than a duplicate order.
pub(crate) fn alone_from(current: Option<&Stored>) -> SystemTime {
    let Some(s) = current else {
        return SystemTime::UNIX_EPOCH;
    };
    let lifetime = s
        .not_after
        .duration_since(s.not_before)
        .unwrap_or(Duration::ZERO);
    s.not_after
        .checked_sub(lifetime / 10)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// A Redis call under [`REDIS_WAIT`].
async fn bounded<T>(
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, Unavailable> {
    match tokio::time::timeout(REDIS_WAIT, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Unavailable(e.to_string())),
        Err(_) => Err(Unavailable(format!(
            "no answer within {}",
            humantime::format_duration(REDIS_WAIT)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(lifetime_days: u32, left_days: u32) -> (Stored, SystemTime) {
        let g = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).expect("generate");
        let pem = format!("{}{}", g.cert.pem(), g.signing_key.serialize_pem());
        let mut s = store::parse(pem.as_bytes(), "a.test").expect("parse");
        let day = Duration::from_secs(86_400);
        s.not_before = SystemTime::UNIX_EPOCH + day * 20_000;
        s.not_after = s.not_before + day * lifetime_days;
        let at = s.not_after - day * left_days;
        (s, at)
    }

    #[test]
    fn without_redis_only_a_missing_or_nearly_expired_certificate_is_ordered_alone() {
        let order_alone = |s: Option<&Stored>, at| alone_from(s) <= at;
        assert!(order_alone(None, SystemTime::now()), "nothing to serve");
        let (s, at) = stored(90, 30);
        assert!(
            !order_alone(Some(&s), at),
            "30 of 90 days left: wait for Redis"
        );
        let (s, at) = stored(90, 10);
        assert!(!order_alone(Some(&s), at), "10 of 90 days left: wait");
        let (s, at) = stored(90, 8);
        assert!(order_alone(Some(&s), at), "8 of 90 days left: order alone");
        let (s, at) = stored(90, 0);
        assert!(order_alone(Some(&s), at), "expiring now");
    }
}
