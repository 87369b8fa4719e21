//! The Lua scripts every shared decision runs as, one atomic script per
//! request. Time is always Redis's own (`TIME`), so instances whose clocks
//! disagree still share one limit.
//!
//! - **decide**: a client's GCRA rate check (and a runtime key's own
//!   rate beside the route's) and, when it passes, a lease on its token's
//!   or key's concurrency — in one script, so a request needs one round
//!   trip and a rate-limited request never takes a slot.
//! - **renew**: every lease this instance holds, re-added with a fresh
//!   expiry (re-created if Redis lost it: after a restart the fleet's
//!   count is whole again within one renewal).
//! - **heartbeat**: this instance's entry in the fleet's set, the expired
//!   ones dropped; answers the number of live instances.
//!
//! - **settle**, **renew_reservations**, **budget_view**: a client token's
//!   budget in flight and settled (see [`super::budgets`]; its reserve is
//!   part of **decide**).
//!
//! Releasing a lease is a plain `ZREM` (no script).
//!
//! Keys (under the configured prefix): `rl:<route>:<client>` — a string,
//! the client's theoretical arrival time in µs, expiring when it is in the
//! past (a missing key and an expired one mean the same: a full burst);
//! `cc:<route>:<token>` — a sorted set of lease ids scored by their expiry
//! in ms, expiring with its newest lease; `rk:<key id>` and `ck:<key id>`
//! — a runtime key's own rate and concurrency, the same on every route
//! (docs/decisions/106); `instances` — a sorted set of
//! instance ids scored by expiry in ms; `settled:<instance>` — a hash: the
//! highest sequence number of that instance's budget settles applied and
//! how many were refused (see **settle**).

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
/// moves the TAT to max(TAT, now) + t. `gcra_peek` returns 0 and the new
/// TAT, or the µs until a request would pass; `gcra_set` takes the pass.
///
/// `rates` checks the route's rate (KEYS[1], ARGV 1–2) and a runtime
/// key's own (the key after the books', and the two arguments after
/// theirs: see **decide**) before taking either, so a request one of them
/// refuses takes from neither. Returns 0, or the longest wait of those
/// that refuse and which refused (1 the route's, 2 the key's).
const GCRA: &str = r"
local function gcra_peek(key, t, tau, now)
  local tat = tonumber(redis.call('GET', key)) or now
  local earliest = tat - tau
  if now < earliest then
    return earliest - now, nil
  end
  return 0, math.max(tat, now) + t
end
local function gcra_set(key, new, now)
  local ttl = math.max(1, math.ceil((new - now) / 1000))
  redis.call('SET', key, string.format('%d', new), 'PX', ttl)
end
local function rates(now, books)
  local asked = {}
  if ARGV[1] ~= '' then asked[#asked + 1] = {KEYS[1], ARGV[1], ARGV[2], 1} end
  local at = 17 + 7 * books
  if (ARGV[at] or '') ~= '' then asked[#asked + 1] = {KEYS[3 + books], ARGV[at], ARGV[at + 1], 2} end
  local wait, which = 0, 0
  for _, r in ipairs(asked) do
    local w, new = gcra_peek(r[1], tonumber(r[2]), tonumber(r[3]), now)
    r[5] = new
    if w > wait then wait, which = w, r[4] end
  end
  if wait > 0 then return wait, which end
  for _, r in ipairs(asked) do gcra_set(r[1], r[5], now) end
  return 0, 0
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

/// KEYS: the rate key, the lease key (each repeats another when its part
/// is not asked, so every key a script names is under the prefix), then
/// the base key of each budget book asked (a client token's; or a key's
/// or person's and their team's). ARGV: t µs, tau µs (both empty: no
/// rate); limit, lease id, TTL ms (limit empty: no lease); the day's,
/// week's and month's start and end (Unix s, as the instance's budget
/// time zone places them: see `set_spans`); reservation member, TTL ms,
/// tokens and spend wanted, the number of books, then each book's seven
/// limits in `llm::ledger::Bound::ALL`'s order (each empty: unbounded).
/// A runtime key's own rate, when asked, comes last: its key after the
/// books' (KEYS[3 + books]), its t µs and tau µs after their limits.
/// Returns {µs to wait (0: passed), lease: 1 taken, 0 full, -1 not asked
/// or not reached, budget: 1 reserved, 0 refused, -1 not asked or not
/// reached, the refusing bound (1..7) — or, when a rate refused, which
/// (1 the route's, 2 the key's) —, µs until it would fit (-1: never),
/// the refusing book (1..)}, and when reserved, then per book its
/// fullest bound (1..7; 0: none bounded) and that bound's percent used
/// with this request — settled plus in flight, this reservation included,
/// ×100 / the limit, rounded down and at most `MAX_PERCENT`: the local
/// ledger's `warning` rule, for the soft limit (`warn_at`) — read from
/// what the check reads anyway.
///
/// The order is the local one: the rates (a request either refuses takes
/// from neither), every book checked, the slot, and only then every book
/// reserved — so a request refused anywhere holds nothing, and the
/// tightest bound of any book refuses (with the longest wait of those
/// that refuse: the request fits only once all have room).
const DECIDE_MAIN: &str = r"
local now = now_us()
local now_ms = math.floor(now / 1000)
local books = tonumber(ARGV[16]) or 0
local wait, limited = rates(now, books)
if wait > 0 then
  return {math.floor(wait), -1, -1, limited, 0, 0}
end
local fill = {}
local want_t, want_s = tonumber(ARGV[14]), tonumber(ARGV[15])
if books > 0 then
  set_spans(ARGV, 6, math.floor(now / 1000000))
  local book, bound, budget_wait = 0, 0, 0
  for b = 1, books do
    local base = KEYS[2 + b]
    budget_sweep(base, now_ms)
    local limits = {}
    for i = 1, 7 do
      limits[i] = tonumber(ARGV[16 + 7 * (b - 1) + i])
    end
    local i, w, f, p = budget_check(base, limits, want_t, want_s, now)
    fill[2 * b - 1], fill[2 * b] = f, p
    if i > 0 then
      if w < 0 then
        return {0, -1, 0, i, -1, b}
      end
      if book == 0 or w > budget_wait then book, bound, budget_wait = b, i, w end
    end
  end
  if book > 0 then
    return {0, -1, 0, bound, math.floor(budget_wait), book}
  end
end
local lease = -1
if ARGV[3] ~= '' then
  lease = acquire(KEYS[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), now_ms)
end
if lease == 0 or books == 0 then
  return {0, lease, -1, 0, 0, 0}
end
local ttl = tonumber(ARGV[13])
for b = 1, books do
  budget_take(KEYS[2 + b], ARGV[12], ARGV[14], ARGV[15], now_ms + ttl, ttl)
end
return {0, lease, 1, 0, 0, 0, unpack(fill)}
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

/// A budget book (a client token's, a key's, a person's or a team's),
/// the local ledger's rules (`llm::ledger`) in Redis. Under its base key
/// (`bg:<route>:<token>:`, `bk:<key id>:`, `bt:<team>:`) it has:
/// `tm:<start>` — tokens settled in the minute; `td:`, `sd:` — tokens and
/// spend in the day; `tw:`, `sw:` — in the week; `tmo:`, `smo:` — in the
/// month; each window named by its start (Unix s) and expiring
/// `WINDOW_MARGIN_S` after it ends. The minute is Redis's (`TIME`); the
/// day, week and month are passed by the instance (`set_spans`), as its
/// budget time zone places them, so every instance with the same zone
/// names the same window the same; `r` — the reservations in flight, a
/// sorted set of members `<instance>:<id>:<tokens>:<spend>` scored by
/// their expiry in ms (renewed while the request runs, swept by the next
/// reserve once expired, so a dead instance's reservations free
/// themselves); `rt` — their totals (`t`, `s`, `n`), kept with the set
/// and deleted with it when it empties, so a total can never outlive the
/// entries it sums. Amounts go to Redis as the decimal strings Rust sends
/// (exact int64); comparisons are Lua numbers, exact to 2^53 (9·10³ in
/// money at weir's 10⁻¹² unit; past that, a comparison is off by far less
/// than a unit).
const BUDGET: &str = r"
local KINDS = {'tm:', 'td:', 'sd:', 'tw:', 'sw:', 'tmo:', 'smo:'}
local PERIOD_OF = {1, 2, 2, 3, 3, 4, 4}
local SPEND = {false, false, true, false, true, false, true}
local WINDOW_MARGIN_S = 60
local SWEEP_MAX = 1000
local MAX_PERCENT = 1000000
local SPANS = {}
local function set_spans(args, at, now_s)
  local m = now_s - now_s % 60
  SPANS[1] = {m, m + 60}
  for p = 2, 4 do
    local i = at + 2 * (p - 2)
    SPANS[p] = {tonumber(args[i]) or 0, tonumber(args[i + 1]) or 0}
  end
end
local function window(base, i)
  local span = SPANS[PERIOD_OF[i]]
  return base .. KINDS[i] .. string.format('%d', span[1]), span[1], span[2]
end
local function member_amounts(m)
  local t, s = string.match(m, ':(%d+):(%d+)$')
  return t or '0', s or '0'
end
local function untake(base, m)
  if redis.call('ZREM', base .. 'r', m) == 0 then
    return
  end
  local t, s = member_amounts(m)
  if t ~= '0' then redis.call('HINCRBY', base .. 'rt', 't', '-' .. t) end
  if s ~= '0' then redis.call('HINCRBY', base .. 'rt', 's', '-' .. s) end
  redis.call('HINCRBY', base .. 'rt', 'n', -1)
  if redis.call('ZCARD', base .. 'r') == 0 then redis.call('DEL', base .. 'rt') end
end
local function budget_sweep(base, now_ms)
  local gone = redis.call('ZRANGEBYSCORE', base .. 'r', '-inf', now_ms, 'LIMIT', 0, SWEEP_MAX)
  for _, m in ipairs(gone) do
    untake(base, m)
  end
end
local function budget_check(base, limits, want_t, want_s, now)
  local rt = redis.call('HMGET', base .. 'rt', 't', 's')
  local reserved_t, reserved_s = tonumber(rt[1]) or 0, tonumber(rt[2]) or 0
  local bound, wait, fullest, percent = 0, 0, 0, 0
  for i = 1, 7 do
    local limit = limits[i]
    if limit then
      local want, reserved = want_t, reserved_t
      if SPEND[i] then want, reserved = want_s, reserved_s end
      if want > limit then
        return i, -1, 0, 0
      end
      local key, _, ends_s = window(base, i)
      local used = tonumber(redis.call('GET', key)) or 0
      if limit > 0 then
        local p = math.min(MAX_PERCENT, math.floor((used + reserved + want) * 100 / limit))
        if p >= percent then fullest, percent = i, p end
      end
      if used + reserved + want > limit then
        local ends = math.max(0, ends_s * 1000000 - now)
        local w = ends
        if used + want <= limit then w = math.min(ends, 1000000) end
        if bound == 0 or w > wait then bound, wait = i, w end
      end
    end
  end
  return bound, wait, fullest, percent
end
local function budget_keep(base, ttl)
  keep(base .. 'r', ttl)
  keep(base .. 'rt', ttl)
end
local function budget_take(base, m, t, s, expiry_ms, ttl)
  if redis.call('ZADD', base .. 'r', expiry_ms, m) == 1 then
    redis.call('HINCRBY', base .. 'rt', 't', t)
    redis.call('HINCRBY', base .. 'rt', 's', s)
    redis.call('HINCRBY', base .. 'rt', 'n', 1)
  end
  budget_keep(base, ttl)
end
";

/// KEYS: this instance's settled mark, then a budget's base key once per
/// settle; ARGV: the day's, week's and month's start and end (as
/// **decide**'s), then per settle its sequence number, the reservation member
/// (empty: usage without one, taken while Redis was away), tokens and
/// spend used. The reservation leaves what is in flight (unless swept
/// already) and the usage is charged to the windows current now, as the
/// local ledger does. Each settle runs under `pcall`, so one that Redis
/// refuses (a key of another type, a count past int64) cannot stop the
/// others.
///
/// Applied once: the mark (a hash) has `seq`, the highest sequence number
/// applied (an
/// instance sends its settles in order, and re-sends one only before any
/// later one, so everything at or below the mark was applied). A call
/// re-sent after a stall, or the stalled call run late, finds its
/// settles at or below the mark and does nothing. It also has `refused`,
/// how many of the instance's settles Redis refused in all, which the
/// script returns: the instance counts what is new to it, so a refusal in
/// a call whose answer was lost is counted with the next. The mark expires
/// two days after the instance's last settle (`SETTLED_TTL_S`).
const SETTLE_MAIN: &str = r"
local SETTLED_TTL_S = 172800
local now_s = math.floor(now_us() / 1000000)
set_spans(ARGV, 1, now_s)
local function settle(base, m, t, s)
  if m ~= '' then untake(base, m) end
  for i = 1, 7 do
    local amount = t
    if SPEND[i] then amount = s end
    if amount ~= '0' then
      local key, _, ends = window(base, i)
      redis.call('INCRBY', key, amount)
      redis.call('EXPIRE', key, math.max(1, ends - now_s + WINDOW_MARGIN_S))
    end
  end
end
local mark = redis.pcall('HMGET', KEYS[1], 'seq', 'refused')
local marked = type(mark) == 'table' and mark.err == nil
local applied, refused = 0, 0
if marked then
  applied, refused = tonumber(mark[1]) or 0, tonumber(mark[2]) or 0
end
local last = applied
for i = 2, #KEYS do
  local a = 6 + 4 * (i - 2)
  local seq = tonumber(ARGV[a + 1]) or 0
  if seq > applied then
    if not pcall(settle, KEYS[i], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]) then
      refused = refused + 1
    end
    if seq > last then last = seq end
  end
end
if marked then
  redis.call('HSET', KEYS[1], 'seq', string.format('%d', last), 'refused', string.format('%d', refused))
  redis.call('EXPIRE', KEYS[1], SETTLED_TTL_S)
end
return refused
";

/// KEYS: a budget's base key per reservation; ARGV: TTL ms, then each
/// reservation's member. Re-added with a fresh expiry — and re-counted if
/// Redis lost it or swept it while this instance could not reach it: the
/// request still runs.
const RENEW_RESERVATIONS_MAIN: &str = r"
local now_ms = math.floor(now_us() / 1000)
local ttl = tonumber(ARGV[1])
for i, base in ipairs(KEYS) do
  local m = ARGV[i + 1]
  local t, s = member_amounts(m)
  budget_take(base, m, t, s, now_ms + ttl, ttl)
end
return #KEYS
";

/// KEYS: a budget's base key; ARGV: the day's, week's and month's start
/// and end (as **decide**'s). Returns {used in each of the seven windows
/// (`llm::ledger::Bound::ALL`'s order), reserved tokens, reserved spend,
/// in flight, now s} — after a sweep, as a reserve would see it.
const BUDGET_VIEW_MAIN: &str = r"
local now = now_us()
budget_sweep(KEYS[1], math.floor(now / 1000))
local now_s = math.floor(now / 1000000)
set_spans(ARGV, 1, now_s)
local out = {}
for i = 1, 7 do
  out[i] = redis.call('GET', (window(KEYS[1], i))) or '0'
end
local rt = redis.call('HMGET', KEYS[1] .. 'rt', 't', 's', 'n')
out[8], out[9], out[10] = rt[1] or '0', rt[2] or '0', rt[3] or '0'
out[11] = string.format('%d', now_s)
return out
";

/// The scripts, hashed once (`EVALSHA`; redis-rs falls back to loading
/// the script on `NOSCRIPT`, and the supervisor loads all of them on
/// every connection, so the request path never pays that).
pub(super) struct Scripts {
    pub(crate) decide: Script,
    pub(crate) renew: Script,
    pub(crate) heartbeat: Script,
    pub(crate) settle: Script,
    pub(crate) renew_reservations: Script,
    pub(crate) budget_view: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            decide: Script::new(&[PRELUDE, GCRA, ACQUIRE, BUDGET, DECIDE_MAIN].concat()),
            renew: Script::new(&[PRELUDE, ACQUIRE, RENEW_MAIN].concat()),
            heartbeat: Script::new(&[PRELUDE, HEARTBEAT_MAIN].concat()),
            settle: Script::new(&[PRELUDE, ACQUIRE, BUDGET, SETTLE_MAIN].concat()),
            renew_reservations: Script::new(
                &[PRELUDE, ACQUIRE, BUDGET, RENEW_RESERVATIONS_MAIN].concat(),
            ),
            budget_view: Script::new(&[PRELUDE, ACQUIRE, BUDGET, BUDGET_VIEW_MAIN].concat()),
        }
    }

    pub(crate) fn all(&self) -> [&Script; 6] {
        [
            &self.decide,
            &self.renew,
            &self.heartbeat,
            &self.settle,
            &self.renew_reservations,
            &self.budget_view,
        ]
    }
}
