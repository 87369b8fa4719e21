//! The Lua scripts every shared decision runs as, one atomic script per
//! request. Time is always Redis's own (`TIME`), so instances whose clocks
//! disagree still share one limit.
//!
//! - **decide**: a client's GCRA rate check and, when it passes, a lease
//!   on its token's concurrency — both in one script, so a request needs
//!   one round trip and a rate-limited request never takes a slot.
//! - **renew**: every lease this instance holds, re-added with a fresh
//!   expiry (re-created if Redis lost it: after a restart the fleet's
//!   count is whole again within one renewal).
//! - **heartbeat**: this instance's entry in the fleet's set, the expired
//!   ones dropped; answers the number of live instances.
//!
//! Releasing a lease is a plain `ZREM` (no script).
//!
//! Keys (under the configured prefix): `rl:<route>:<client>` — a string,
//! the client's theoretical arrival time in µs, expiring when it is in the
//! past (a missing key and an expired one mean the same: a full burst);
//! `cc:<route>:<token>` — a sorted set of lease ids scored by their expiry
//! in ms, expiring with its newest lease; `instances` — a sorted set of
//! instance ids scored by expiry in ms.

use redis::Script;

/// Shared by every script: Redis's clock, and effects replication on the
/// Redis versions that need to be asked for it (5 and later always do it),
/// so writing after `TIME` is allowed and replicas get the writes.
pub(super) const PRELUDE: &str = r"
if redis.replicate_commands then redis.replicate_commands() end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
";

/// GCRA as the `governor` crate does it (so a shared limit answers what a
/// local one would): `t` between requests at the rate, `tau` = t ×
/// (burst − 1). A request at `now` passes unless `now` < TAT − tau; a pass
/// moves the TAT to max(TAT, now) + t. Returns 0, or the µs until a
/// request would pass.
const GCRA: &str = r"
local function gcra(key, t, tau, now)
  local tat = tonumber(redis.call('GET', key)) or now
  local earliest = tat - tau
  if now < earliest then
    return earliest - now
  end
  local new = math.max(tat, now) + t
  local ttl = math.max(1, math.ceil((new - now) / 1000))
  redis.call('SET', key, string.format('%d', new), 'PX', ttl)
  return 0
end
";

/// A lease on one of `limit` slots: drop the expired, count, add. Returns
/// 1 (taken) or 0 (full).
const ACQUIRE: &str = r"
local function keep(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local function acquire(key, limit, id, ttl, now_ms)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)
  if redis.call('ZCARD', key) >= limit then
    return 0
  end
  redis.call('ZADD', key, now_ms + ttl, id)
  keep(key, ttl)
  return 1
end
";

/// KEYS: the rate key, the lease key (each repeats the other when its part
/// is not asked, so every key a script names is under the prefix).
/// ARGV: t µs, tau µs (both empty: no rate); limit, lease id, TTL ms
/// (limit empty: no lease). Returns {µs to wait (0: passed), lease: 1
/// taken, 0 full, -1 not asked or not reached}.
const DECIDE_MAIN: &str = r"
local now = now_us()
local wait = 0
if ARGV[1] ~= '' then
  wait = gcra(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), now)
end
local lease = -1
if wait == 0 and ARGV[3] ~= '' then
  lease = acquire(KEYS[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), math.floor(now / 1000))
end
return {math.floor(wait), lease}
";

/// KEYS: the lease set of each lease; ARGV: TTL ms, then each lease's id.
/// A key that is not a sorted set (another program's) is skipped, so it
/// cannot stop the renewal of every other lease.
const RENEW_MAIN: &str = r"
local now_ms = math.floor(now_us() / 1000)
local ttl = tonumber(ARGV[1])
local renewed = 0
for i, key in ipairs(KEYS) do
  if type(redis.pcall('ZADD', key, now_ms + ttl, ARGV[i + 1])) == 'number' then
    keep(key, ttl)
    renewed = renewed + 1
  end
end
return renewed
";

/// KEYS: the fleet's instance set; ARGV: this instance's id, TTL ms.
const HEARTBEAT_MAIN: &str = r"
local now_ms = math.floor(now_us() / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now_ms + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
";

/// The scripts, hashed once (`EVALSHA`; redis-rs falls back to loading
/// the script on `NOSCRIPT`, and the supervisor loads all of them on
/// every connection, so the request path never pays that).
pub(super) struct Scripts {
    pub decide: Script,
    pub renew: Script,
    pub heartbeat: Script,
}

impl Scripts {
    pub fn new() -> Self {
        Scripts {
            decide: Script::new(&[PRELUDE, GCRA, ACQUIRE, DECIDE_MAIN].concat()),
            renew: Script::new(&[PRELUDE, ACQUIRE, RENEW_MAIN].concat()),
            heartbeat: Script::new(&[PRELUDE, HEARTBEAT_MAIN].concat()),
        }
    }

    pub fn all(&self) -> [&Script; 3] {
        [&self.decide, &self.renew, &self.heartbeat]
    }
}
