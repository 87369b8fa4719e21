//! Holds shared by the fleet: one instance's 429/503/529 with a retry hint
//! cools that LLM upstream member for every instance.
//!
//! A hold learnt here ([`Holds::learnt`]) is queued for the supervisor
//! and never waited for: the queue is bounded, a full one drops the hold
//! (it stays local) and counts it. The supervisor sends it as one script
//! ([`PUBLISH_MAIN`]) that writes the hold's key with the hold's remaining
//! time as its TTL — so an instance that starts or reconnects later reads
//! it — and announces it on the fleet's channel, so the others apply it
//! at once. A key that already holds the member longer is left alone and
//! nothing is announced.
//!
//! Announcements arrive on a RESP2 subscriber connection of their own
//! ([`subscribe`]), opened by the supervisor with the request path's
//! connection and read in the same loop: it ends, and is opened again and
//! the keys re-read, whenever that connection is. A hold received is
//! applied to the registered members with its id and never sent again
//! (an instance ignores its own announcements, and applying a hold does
//! not queue it), so nothing echoes. Received holds, like every hold,
//! never shorten a longer one.
//!
//! Times travel as durations (the hold's remaining milliseconds), never as
//! clock readings, so instances' clocks do not matter.
//!
//! Keys (under the prefix): `hold:<member id>` — a string, the reason,
//! expiring when the hold ends; `holds` — a sorted set of member ids
//! scored by their hold's end in Redis's ms, so a connection reads the
//! current holds without scanning the keyspace. Channel: `<prefix>holds`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::Script;
use redis::aio::{MultiplexedConnection, PubSubStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::BACKGROUND_TIMEOUT;
use super::scripts::PRELUDE;
use crate::sync::Locked;
use crate::telemetry::ClusterMetrics;
use crate::upstream::balance::Reason;

/// Holds waiting for the supervisor: far more than a burst of 429s from
/// every member of a large config; past it a hold stays local.
pub(super) const OUTBOX: usize = 256;
/// The longest hold taken from the fleet: an upstream's own hint is capped
/// at this (`llm::upstream::MAX_HINT`); anything longer is not weir's.
const LONGEST: Duration = Duration::from_secs(300);
/// Holds read from Redis at a connection, at most.
const READ_MAX: usize = 1000;
/// Holds remembered for members not registered (yet): a route built by a
/// reload, or before the first connection ended.
const KNOWN_MAX: usize = 10_000;
/// The longest announcement read; longer ones are not weir's.
const MESSAGE_MAX: usize = 1024;

type Failed = String;

/// One member that can be held out by the fleet (an LLM upstream's
/// endpoint × key).
pub(crate) trait Holdable: Send + Sync {
    /// Hold it out until `until` (unless it is held longer already). Learnt
    /// from the fleet: never published again.
    fn hold_from_fleet(&self, until: Instant, reason: Reason);

    /// Hold one client credential (its hash, in hex) off it until `until`:
    /// a hold the member named in answer to that credential, learnt from
    /// the fleet.
    fn hold_tenant_from_fleet(&self, tenant: &str, until: Instant, reason: Reason);
}

/// What separates a member's id from a client credential's hash in the id
/// of a hold that belongs to that credential alone (`<member id>#<hash>`).
pub(super) const TENANT_SEPARATOR: char = '#';

/// A hold's id split into its member's id and a client credential's hash,
/// when it is a credential's hold: a member's own id always ends in
/// `:<key digest>`, so 32 hex digits after the last separator are a hash.
fn tenant_hold(id: &str) -> Option<(&str, &str)> {
    let (member, tenant) = id.rsplit_once(TENANT_SEPARATOR)?;
    (tenant.len() == 32 && tenant.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some((member, tenant))
}

/// The live members with one id (weakly: they go with their routes).
type Seats = Vec<Weak<dyn Holdable>>;

/// A hold to send to the fleet.
pub(super) struct Outgoing {
    id: Arc<str>,
    until: Instant,
    reason: Reason,
}

pub(super) struct Holds {
    /// This instance in announcements, to skip its own.
    instance: String,
    outbox: mpsc::Sender<Outgoing>,
    /// Members by id; a reload may have two (the old route's and the
    /// new's) until the old one is dropped.
    members: Mutex<HashMap<Arc<str>, Seats>>,
    /// Every hold known, for members registered later.
    known: Mutex<HashMap<Arc<str>, (Instant, Reason)>>,
    metrics: ClusterMetrics,
    publish: Script,
    read: Script,
}

/// KEYS: the hold's key, the index of holds. ARGV: member id, reason, ms,
/// channel, announcement. Returns 1 (written and announced) or 0 (held as
/// long or longer already).
const PUBLISH_MAIN: &str = r"
local now_ms = math.floor(now_us() / 1000)
local ms = tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) >= ms then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ms)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
redis.call('ZADD', KEYS[2], now_ms + ms, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ms then
  redis.call('PEXPIRE', KEYS[2], ms)
end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
";

/// KEYS: the index of holds. ARGV: the hold keys' prefix, the most to
/// read. Returns {{id, reason, ms left}, ...} for the holds still on.
const READ_MAIN: &str = r"
local now_ms = math.floor(now_us() / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local out = {}
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local left = redis.call('PTTL', key)
  local reason = redis.pcall('GET', key)
  if left > 0 and type(reason) == 'string' then
    out[#out + 1] = {id, reason, left}
  end
end
return out
";

impl Holds {
    /// The holds, and the receiving end of their outbox (the supervisor's).
    pub(super) fn new(instance: String, metrics: ClusterMetrics) -> (Self, Outbox) {
        let (outbox, receiver) = mpsc::channel(OUTBOX);
        let holds = Holds {
            instance,
            outbox,
            members: Mutex::default(),
            known: Mutex::default(),
            metrics,
            publish: Script::new(&[PRELUDE, PUBLISH_MAIN].concat()),
            read: Script::new(&[PRELUDE, READ_MAIN].concat()),
        };
        (holds, receiver)
    }

    /// `member` is the fleet's member `id`: holds for it, known now or
    /// learnt later, apply to it while it lives.
    pub(super) fn register(&self, id: Arc<str>, member: &Arc<dyn Holdable>) {
        let now = Instant::now();
        let (known, tenants) = {
            let known = self.known.locked();
            let own = known.get(&id).copied().filter(|(until, _)| *until > now);
            // Its credentials' holds (a scan of a bounded map, once per
            // member and reload).
            let tenants: Vec<(String, Instant, Reason)> = known
                .iter()
                .filter(|(_, (until, _))| *until > now)
                .filter_map(|(k, (until, why))| {
                    let (of, tenant) = tenant_hold(k)?;
                    (of == &*id).then(|| (tenant.to_string(), *until, *why))
                })
                .collect();
            (own, tenants)
        };
        for (tenant, until, reason) in tenants {
            member.hold_tenant_from_fleet(&tenant, until, reason);
        }
        {
            let mut members = self.members.locked();
            let list = members.entry(id).or_default();
            list.retain(|m| m.strong_count() > 0);
            list.push(Arc::downgrade(member));
        }
        if let Some((until, reason)) = known {
            member.hold_from_fleet(until, reason);
        }
    }

    /// A hold learnt here, from the member's own answer: remembered, and
    /// queued for the fleet when Redis is `up` (else it stays local). Never
    /// waits.
    pub(super) fn learnt(&self, id: &Arc<str>, until: Instant, reason: Reason, up: bool) {
        if reason == Reason::Unreachable {
            // This instance's view of the network, not the member's word.
            return;
        }
        self.remember(id, until, reason, Instant::now());
        if !up {
            self.metrics.holds_redis_down.inc();
            return;
        }
        let outgoing = Outgoing {
            id: id.clone(),
            until,
            reason,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.outbox.try_send(outgoing) {
            self.metrics.holds_queue_full.inc();
        }
    }

    fn remember(&self, id: &Arc<str>, until: Instant, reason: Reason, now: Instant) {
        let mut known = self.known.locked();
        if known.len() >= KNOWN_MAX && !known.contains_key(id) {
            known.retain(|_, (u, _)| *u > now);
            if known.len() >= KNOWN_MAX {
                return;
            }
        }
        let entry = known.entry(id.clone()).or_insert((until, reason));
        if entry.0 < until {
            *entry = (until, reason);
        }
    }

    /// A hold from the fleet: applied to the member `id` (if this
    /// instance has it) for `wait` from now, never shortening a longer
    /// hold, and not sent on.
    fn apply(&self, id: &str, wait: Duration, reason: Reason) {
        let now = Instant::now();
        let until = now + wait.min(LONGEST);
        let id: Arc<str> = id.into();
        self.remember(&id, until, reason, now);
        // A credential's hold goes to the member's seats, for that
        // credential.
        if let Some((member, tenant)) = tenant_hold(&id) {
            for seat in self.live(member) {
                seat.hold_tenant_from_fleet(tenant, until, reason);
            }
            return;
        }
        for member in self.live(&id) {
            member.hold_from_fleet(until, reason);
        }
    }

    /// The live seats of member `id`.
    fn live(&self, id: &str) -> Vec<Arc<dyn Holdable>> {
        self.members
            .locked()
            .get(id)
            .map(|list| list.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }

    /// An announcement on the channel: another instance's hold.
    pub(super) fn announced(&self, payload: &[u8]) {
        if payload.len() > MESSAGE_MAX {
            return;
        }
        let Ok(text) = std::str::from_utf8(payload) else {
            return;
        };
        let mut parts = text.splitn(4, ' ');
        let (Some(instance), Some(reason), Some(ms), Some(id)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        if instance == self.instance {
            return;
        }
        let (Some(reason), Ok(ms)) = (shared_reason(reason), ms.parse::<u64>()) else {
            return;
        };
        self.metrics.holds_announced.inc();
        self.apply(id, Duration::from_millis(ms), reason);
    }

    /// Send one queued hold: its key and its announcement, in one script.
    pub(super) async fn send(
        &self,
        conn: &mut MultiplexedConnection,
        prefix: &str,
        hold: Outgoing,
    ) -> Result<(), Failed> {
        let left = hold.until.saturating_duration_since(Instant::now());
        let ms = left.as_millis().min(LONGEST.as_millis()) as u64;
        if ms == 0 {
            return Ok(());
        }
        let reason = hold.reason.name();
        let message = format!("{} {reason} {ms} {}", self.instance, hold.id);
        let mut invocation = self.publish.prepare_invoke();
        invocation
            .key(format!("{prefix}hold:{}", hold.id))
            .key(format!("{prefix}holds"))
            .arg(&*hold.id)
            .arg(reason)
            .arg(ms)
            .arg(channel(prefix))
            .arg(message);
        let call = invocation.invoke_async::<i64>(conn);
        match tokio::time::timeout(BACKGROUND_TIMEOUT, call).await {
            Ok(Ok(_)) => {
                self.metrics.holds_sent.inc();
                Ok(())
            }
            // Redis refused it (another program's key of another type):
            // this hold stays local, the connection is fine.
            Ok(Err(e)) if super::answered(&e) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer to a hold".into()),
        }
    }

    /// The current holds in Redis, applied: at every connection, after
    /// subscribing, so a hold is either read here or announced after.
    pub(super) async fn read_all(
        &self,
        conn: &mut MultiplexedConnection,
        prefix: &str,
    ) -> Result<(), Failed> {
        let mut invocation = self.read.prepare_invoke();
        invocation
            .key(format!("{prefix}holds"))
            .arg(format!("{prefix}hold:"))
            .arg(READ_MAX);
        let call = invocation.invoke_async::<Vec<(String, String, i64)>>(conn);
        let holds = match tokio::time::timeout(BACKGROUND_TIMEOUT, call).await {
            Ok(Ok(holds)) => holds,
            // The index is another program's: there are no holds to read.
            Ok(Err(e)) if super::answered(&e) => Vec::new(),
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no answer to the read of holds".into()),
        };
        for (id, reason, left) in holds.iter().take(READ_MAX) {
            let (Some(reason), Ok(ms)) = (shared_reason(reason), u64::try_from(*left)) else {
                continue;
            };
            self.metrics.holds_read.inc();
            self.apply(id, Duration::from_millis(ms), reason);
        }
        Ok(())
    }
}

/// The supervisor's end of the holds' queue.
pub(super) type Outbox = mpsc::Receiver<Outgoing>;

/// The fleet's channel for holds.
fn channel(prefix: &str) -> String {
    format!("{prefix}holds")
}

/// A reason the fleet shares, by name.
fn shared_reason(name: &str) -> Option<Reason> {
    [Reason::RateLimited, Reason::Overloaded]
        .into_iter()
        .find(|r| r.name() == name)
}

/// A subscriber connection on the fleet's channel: its messages, ending
/// when the connection does. `None` when Redis refuses the subscription
/// (an ACL without the channel: Redis 7 gives new users none): holds are
/// then read at each connection but not heard as they happen, and shared
/// limits go on — a refusal that will not fix itself must not keep
/// Redis "down".
pub(super) async fn subscribe(
    client: &redis::Client,
    prefix: &str,
) -> Result<Option<PubSubStream>, Failed> {
    let timeout = |what: &str| {
        format!(
            "no answer to {what} within {}",
            humantime::format_duration(BACKGROUND_TIMEOUT)
        )
    };
    let mut pubsub = match tokio::time::timeout(BACKGROUND_TIMEOUT, client.get_async_pubsub()).await
    {
        Ok(Ok(pubsub)) => pubsub,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(timeout("the subscriber connection")),
    };
    match tokio::time::timeout(BACKGROUND_TIMEOUT, pubsub.subscribe(channel(prefix))).await {
        Ok(Ok(())) => Ok(Some(pubsub.into_on_message())),
        Ok(Err(e)) if super::answered(&e) => {
            tracing::warn!(
                target: "weir::cluster",
                error = %e,
                channel = channel(prefix),
                "cluster: Redis refused the subscription to holds; other instances' holds are read only when this one (re)connects (grant the channel to weir's user)"
            );
            Ok(None)
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(timeout("the subscription")),
    }
}

/// The next announcement, or never without a subscription.
pub(super) async fn next(announcements: &mut Option<PubSubStream>) -> Option<redis::Msg> {
    use futures_util::StreamExt;
    match announcements {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::balance::{Ejection, Group, Member, Policy};

    /// A real group's member, as the LLM upstreams register theirs; the
    /// credentials' holds it was told.
    struct Seat(Arc<Group<()>>, Mutex<Vec<(String, Reason)>>);

    impl Holdable for Seat {
        fn hold_from_fleet(&self, until: Instant, reason: Reason) {
            self.0.hold(0, until, reason, Instant::now());
        }

        fn hold_tenant_from_fleet(&self, tenant: &str, _: Instant, reason: Reason) {
            self.1.locked().push((tenant.into(), reason));
        }
    }

    fn seated() -> (Arc<Group<()>>, Arc<dyn Holdable>) {
        let member = Member {
            target: (),
            weight: 1,
            backup: false,
        };
        let group = Arc::new(Group::new(
            vec![member],
            Policy::RoundRobin,
            Ejection::default(),
        ));
        (group.clone(), Arc::new(Seat(group, Mutex::default())))
    }

    #[tokio::test(start_paused = true)]
    async fn a_credentials_hold_goes_to_that_credential_never_to_the_member() {
        let (holds, _outbox) = holds();
        let group = seated().0;
        let seat = Arc::new(Seat(group.clone(), Mutex::default()));
        let as_holdable: Arc<dyn Holdable> = seat.clone();
        let id: Arc<str> = "llm:up:https://a.test/:0123456789abcdef".into();
        assert_eq!(tenant_hold(&id), None, "a member's own id");
        assert_eq!(tenant_hold("r#x:up:https://a.test/:0123456789abcdef"), None);
        holds.register(id.clone(), &as_holdable);
        let tenant = "0123456789abcdef0123456789abcdef";
        holds.announced(format!("there-2 rate_limited 5000 {id}#{tenant}").as_bytes());
        assert_eq!(group.held(0, Instant::now()), None, "the member stays in");
        assert_eq!(
            *seat.1.locked(),
            vec![(tenant.to_string(), Reason::RateLimited)]
        );
        // A member registered later (a reload) learns it too.
        let late = Arc::new(Seat(seated().0, Mutex::default()));
        let late_holdable: Arc<dyn Holdable> = late.clone();
        holds.register(id, &late_holdable);
        assert_eq!(
            *late.1.locked(),
            vec![(tenant.to_string(), Reason::RateLimited)]
        );
    }

    fn holds() -> (Holds, Outbox) {
        let metrics = crate::telemetry::Metrics::new().cluster();
        Holds::new("here-1-00000001".into(), metrics)
    }

    #[tokio::test(start_paused = true)]
    async fn a_received_hold_never_shortens_a_longer_one_and_is_not_sent_on() {
        let (holds, mut outbox) = holds();
        let (group, seat) = seated();
        let id: Arc<str> = "llm:up:https://a.test/:0123".into();
        holds.register(id.clone(), &seat);
        let now = Instant::now();
        let long = now + Duration::from_secs(10);
        group.hold(0, long, Reason::RateLimited, now);

        holds.announced(format!("there-2-00000002 overloaded 2000 {id}").as_bytes());
        assert_eq!(
            group.held(0, Instant::now()).map(|(u, _)| u),
            Some(long),
            "a 2 s hold from the fleet does not shorten a 10 s one"
        );
        holds.announced(format!("there-2-00000002 overloaded 20000 {id}").as_bytes());
        let (until, reason) = group.held(0, Instant::now()).expect("held");
        assert_eq!(until, now + Duration::from_secs(20), "a longer one extends");
        assert_eq!(reason, Reason::Overloaded);
        assert!(
            outbox.try_recv().is_err(),
            "a received hold is not queued for the fleet"
        );
        assert_eq!(holds.metrics.holds_announced.get(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn own_announcements_and_foreign_messages_are_ignored() {
        let (holds, _outbox) = holds();
        let (group, seat) = seated();
        let id: Arc<str> = "m".into();
        holds.register(id.clone(), &seat);
        for message in [
            format!("here-1-00000001 rate_limited 5000 {id}"),
            format!("there-2 unreachable 5000 {id}"),
            format!("there-2 rate_limited soon {id}"),
            "there-2 rate_limited 5000".into(),
            format!("there-2 rate_limited 5000 {id} {}", "x".repeat(MESSAGE_MAX)),
        ] {
            holds.announced(message.as_bytes());
            assert_eq!(group.held(0, Instant::now()), None, "{message}");
        }
        assert_eq!(holds.metrics.holds_announced.get(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_learnt_here_is_queued_once_and_kept_local_when_redis_is_down() {
        let (holds, mut outbox) = holds();
        let id: Arc<str> = "m".into();
        let until = Instant::now() + Duration::from_secs(3);
        holds.learnt(&id, until, Reason::RateLimited, true);
        let queued = outbox.try_recv().expect("queued for the fleet");
        assert_eq!((&*queued.id, queued.until), ("m", until));
        holds.learnt(&id, until, Reason::Unreachable, true);
        holds.learnt(&id, until, Reason::Overloaded, false);
        assert!(outbox.try_recv().is_err(), "refusals and Redis down: local");
        assert_eq!(holds.metrics.holds_redis_down.get(), 1);
        for _ in 0..OUTBOX + 3 {
            holds.learnt(&id, until, Reason::Overloaded, true);
        }
        assert_eq!(
            holds.metrics.holds_queue_full.get(),
            3,
            "a full queue drops"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_registered_later_gets_the_holds_already_known() {
        let (holds, _outbox) = holds();
        holds.announced(b"there-2 rate_limited 4000 m");
        let (group, seat) = seated();
        holds.register("m".into(), &seat);
        let (until, _) = group.held(0, Instant::now()).expect("held at registration");
        assert_eq!(until, Instant::now() + Duration::from_secs(4));
        tokio::time::advance(Duration::from_secs(5)).await;
        let (group, seat) = seated();
        holds.register("m".into(), &seat);
        assert_eq!(group.held(0, Instant::now()), None, "an ended hold is not");
    }
}
