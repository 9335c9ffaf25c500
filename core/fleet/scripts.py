"""The Lua scripts: each step of a context's life is one atomic script.

Every script that changes a context checks the fencing token first (``fenced``): a worker whose lease
expired (crashed, paused, cut off) finds a newer token and its writes are refused. The token a worker
sends is ``<counter>|<owner>``, the whole lease value: after a failover that lost the last writes, the
counter may be handed out again, to another claim, whose owner differs. Times come from the Redis server
clock (``TIME``), so workers' clocks do not matter.

A script whose write an acknowledgement relies on (``INGEST``, ``BEGIN_REPLY``, ``MARK_POSTED``) writes
something on every run, even when it finds its work done (a redelivery, a reply stored by an earlier run):
run again after a ``WAIT`` that too few replicas answered, its own write carries the earlier one to them.

Each take of a batch carries a token of its own, random, made by the worker that takes it (``take`` in the batch
hash, the same on every redelivery of that take, and in its reply ledger): the batch id is a counter a failover can
hand out again (the promoted replica, or a primary back with its own data, may lack the take), to another take with
other inputs. The scripts that write a batch's ledger, join it or acknowledge it check the take (``same_take``), so
an attempt at a take a failover lost cannot count for the new take under the same id: its writes are refused
(``stale``, ``MARK_POSTED`` -1) and it gives its lease up. A batch an older worker took has no token: it is checked
as '' (a worker of this version taking it again keeps it so; a rolling upgrade loses nothing).
"""

from __future__ import annotations

__all__ = (
    "BEGIN_REPLY",
    "CONFIRM_ACK",
    "INGEST",
    "JOIN",
    "MARK_POSTED",
    "OVERDUE",
    "RELEASE_LOCK",
    "RENEW",
    "RESCUE",
    "SHARD_RENEW",
    "SHARD_TAKE",
    "STEP",
    "STOP",
    "STORE_MODEL",
)

_COMMON = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ms(x) return string.format('%d', x) end
local function fenced(lease_key, token)
  local cur = redis.call('GET', lease_key)
  return cur and (cur == token or string.sub(cur, 1, #token + 1) == token .. '|')
end
-- whether the batch held is the take a write is for ('' for a take without a token: an older worker's)
local function same_take(batch, take)
  return (redis.call('HGET', batch, 'take') or '') == take
end
-- the posted marks of take may go into ledger: 0 when there is no ledger (acknowledged, or nothing begun: nothing to
-- mark), -1 when it or the batch held is another take's (a failover lost this take), else 1
local function may_mark(batch, ledger, take)
  local t = redis.call('HGET', ledger, 'take')
  if not t and redis.call('EXISTS', ledger) == 0 then return 0 end
  if (t and t ~= take) or not same_take(batch, take) then return -1 end
  return 1
end
-- a fenced write of take to ledger: a ledger recording another take (left by a take a failover lost under the same
-- batch id) is dropped, and the take is recorded with the write (appended to the field-value list write)
local function own_ledger(ledger, take, write)
  if take == '' then return end
  local t = redis.call('HGET', ledger, 'take')
  if t == take then return end
  if t then redis.call('DEL', ledger) end
  table.insert(write, 'take')
  table.insert(write, take)
end
-- make job_id the context's drain job: it enters arq's queue, where idle workers block on BZMPOP (the
-- worker runs it from its id: no job payload is stored)
local function schedule(meta, queue, active, job_id, cid, check_ms, now)
  redis.call('HSET', meta, 'sched', job_id)
  redis.call('ZADD', queue, ms(now), job_id)
  redis.call('ZADD', active, ms(now + check_ms), cid)
end
"""

INGEST = (
    _COMMON
    + """
-- KEYS: inbox meta queue active batch stop
-- ARGV: entry cap seen_field floor_field id cid new_job_id check_ms confirming trim_at keep keep_ms
--       quiet_ms quiet_pinned busy busy_pinned arrivals stops stop_keep_ms
-- The conversation's quiet window and busy policy: its own choice ('quiet' and 'busy' in the meta hash, kept there
-- by /quiet and /busy: RedisDispatcher.set_controls) unless the operator pinned them, else quiet_ms and busy.
-- A window > 0: note when the burst waiting began ('qfirst'), when its newest input came ('qlast') and the window
-- ('qms'), for the take (STEP). When a drain job is already responsible: with steer, publish cid on arrivals (the
-- worker running the conversation gives the input to its run; with collect and queue, only while nothing of its
-- answer is shown yet: core.busy); with interrupt, stop the batch held as STOP does,
-- without the inputs waiting (the new one among them is answered next: core.busy).
-- Dedupe lives in the meta hash, bounded per conversation: 'd:<key>' -> when it was stored (ms), the newest
-- ids only; and for keys ending in a number that grows per conversation (QueueConfig.ordered_dedupe),
-- 'f:<source>' -> the greatest number dropped from the window: anything not above it was seen.
-- seen_field '': no dedupe; floor_field '': the key is not ordered.
local meta = KEYS[2]
local seen_f, floor_f, id = ARGV[3], ARGV[4], ARGV[5]
local got = redis.call(
  'HMGET', meta, 'sched', seen_f ~= '' and seen_f or 'sched', floor_f ~= '' and floor_f or 'sched', 'busy', 'quiet'
)
local function not_above(a, b)  -- decimal strings: a <= b
  if #a ~= #b then return #a < #b end
  return a <= b
end
if seen_f ~= '' then
  local dup = got[2]
  local floor = floor_f ~= '' and got[3]
  if dup or (floor and not_above(id, floor)) then
    if ARGV[9] == '1' then  -- a write for the WAIT to carry (see the module's docstring)
      if dup then redis.call('HSET', meta, seen_f, dup) else redis.call('HSET', meta, floor_f, floor) end
    end
    return 'dup'
  end
end
local size = redis.call('RPUSH', KEYS[1], ARGV[1])
if size > tonumber(ARGV[2]) then
  redis.call('RPOP', KEYS[1])
  return 'full'
end
local now = now_ms()
local quiet = tonumber(ARGV[13])
if ARGV[14] ~= '1' and got[5] then quiet = tonumber(got[5]) or quiet end
if quiet > 0 then
  if size == 1 then redis.call('HSET', meta, 'qfirst', ms(now), 'qlast', ms(now), 'qms', ms(quiet))
  else redis.call('HSET', meta, 'qlast', ms(now), 'qms', ms(quiet)) end
end
local sched = got[1]
if seen_f ~= '' then
  if sched then
    redis.call('HSET', meta, seen_f, ms(now))
  else
    redis.call('HSET', meta, seen_f, ms(now), 'sched', ARGV[7])
  end
  if redis.call('HLEN', meta) > tonumber(ARGV[10]) then
    -- the window is full: forget the oldest ids (never one younger than keep_ms), raising the floors
    local all = redis.call('HGETALL', meta)
    local ids = {}
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'd:' then table.insert(ids, {all[i], tonumber(all[i + 1])}) end
    end
    table.sort(ids, function(a, b) return a[2] < b[2] end)
    local floors = {}
    local drop = {}
    for i = 1, #ids - tonumber(ARGV[11]) do
      if ids[i][2] > now - tonumber(ARGV[12]) then break end
      local key = string.sub(ids[i][1], 3)
      local source, n = string.match(key, '^(.*):(%d+)$')
      if source then
        local f = 'f:' .. source
        if not floors[f] then floors[f] = redis.call('HGET', meta, f) or '0' end
        if not not_above(n, floors[f]) then floors[f] = n end
      end
      table.insert(drop, ids[i][1])
    end
    if #drop > 0 then
      redis.call('HDEL', meta, unpack(drop))
      for f, n in pairs(floors) do redis.call('HSET', meta, f, n) end
    end
  end
elseif not sched then
  redis.call('HSET', meta, 'sched', ARGV[7])
end
if sched then
  local busy = ARGV[15]
  if ARGV[16] ~= '1' and got[4] then busy = got[4] end
  if busy ~= 'interrupt' then  -- (collect, queue: the worker gives it to the run only while nothing is shown)
    redis.call('PUBLISH', ARGV[17], ARGV[6])
  else
    local held = redis.call('HGET', KEYS[5], 'id')
    if held then
      redis.call('PUBLISH', ARGV[18], ARGV[6])
      redis.call('SET', KEYS[6], held .. '|', 'PX', ARGV[19])
    end
  end
  return 'queued'
end
redis.call('ZADD', KEYS[3], ms(now), ARGV[7])
redis.call('ZADD', KEYS[4], ms(now + tonumber(ARGV[8])), ARGV[6])
return 'scheduled'
"""
)

RENEW = (
    _COMMON
    + """
-- KEYS: lease active      ARGV: token lease_ms cid
if not fenced(KEYS[1], ARGV[1]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ms(now_ms() + tonumber(ARGV[2])), ARGV[3])
return 1
"""
)

STEP = (
    _COMMON
    + """
-- KEYS: lease batch inbox meta queue active dead acked_ledger write_keys... read_keys... usage_keys...
-- ARGV: token cid ack_id mode batch_size lease_ms max_attempts new_job_id check_ms own_job_id owner
--       nwrites nreads nusage usage_ttl quiet_ms quiet_windows new_take ack_take value_or_nil... (in out cost)...
-- token '': first claim the context for drain job own_job_id (only if it is the scheduled one).
-- ack_id: acknowledge that batch if it is current and the take ack_take ('' for an older worker's take): apply the
--   writes (JSON values; '' deletes), add the usage counted while it ran (HINCRBY), drop the batch and its ledger,
--   note the take acknowledged ('acked_take' in meta, for CONFIRM_ACK). Another batch or take held, or none and the
--   take not acknowledged here (a failover lost it: its inputs may be waiting again, under the same batch id):
--   {'stale', 'take'}, and a lease still ours is freed for the sweep to hand the context out again at once.
-- new_take: the token of a batch taken now (the take's own, random; see the module's docstring).
-- mode 'take': then hand out the next batch (an unacknowledged one first) or release the context.
-- mode 'handoff': then release if nothing waits, else schedule a fresh drain job.
-- mode 'handback': like handoff, for a run given up unfinished (worker stopping): the batch stays.
-- The quiet window: the one INGEST noted with the burst ('qms'; else quiet_ms). A claim reads the burst's times with
--   'sched'; a later take reads them when quiet_ms > 0 (the operator's window, or the one this job saw). When the
--   window is > 0, a take waits until no input came for that long (and at most quiet_windows windows after the
--   burst's first): {'quiet', token, '', ms to wait, '', dead_id, '0', window}, the lease kept, nothing taken.
-- Returns {status, token, batch_id, attempt, entries, dead_id, redelivered, window, cuts, take, read values...}
-- (window: the quiet window the take found, '' when it did not look; cuts: where inputs joined a batch handed out
-- again, JOIN, '' none)
local cid = ARGV[2]
local lease_ms = tonumber(ARGV[6])
local nwrites = tonumber(ARGV[12])
local nreads = tonumber(ARGV[13])
local nusage = tonumber(ARGV[14])
local token = ARGV[1]
local W, R, U = 8, 8 + nwrites, 8 + nwrites + nreads
local A = 19 + nwrites
local claimed = false
local q = nil
if token == '' then
  local m = redis.call('HMGET', KEYS[4], 'sched', 'qfirst', 'qlast', 'qms')
  if m[1] ~= ARGV[10] then return {'stale'} end
  q = {m[2], m[3], m[4]}
  local cur = redis.call('GET', KEYS[1])
  if cur then
    local sep = string.find(cur, '|', 1, true)
    if string.sub(cur, sep + 1) ~= ARGV[11] then return {'held'} end
    token = string.sub(cur, 1, sep - 1)  -- our own claim, sent again after a lost reply
  else
    token = tostring(redis.call('HINCRBY', KEYS[4], 'fence', 1))
    redis.call('SET', KEYS[1], token .. '|' .. ARGV[11], 'PX', lease_ms)
    claimed = true
  end
elseif not fenced(KEYS[1], token) then
  return {'stale'}
else
  token = string.match(token, '^[^|]*')
end
local acked = false
if ARGV[3] ~= '' then
  local cur = redis.call('HMGET', KEYS[2], 'id', 'take')
  if cur[1] == ARGV[3] and (cur[2] or '') == ARGV[19] then
    local sets, dels = {}, {KEYS[2], KEYS[8]}
    for i = 1, nwrites do
      local v = ARGV[19 + i]
      if v == '' then table.insert(dels, KEYS[W + i]) else
        table.insert(sets, KEYS[W + i])
        table.insert(sets, v)
      end
    end
    if #sets > 0 then redis.call('MSET', unpack(sets)) end
    redis.call('DEL', unpack(dels))
    for i = 1, nusage do
      local key = KEYS[U + i]
      local fresh = false
      for j, field in ipairs({'in', 'out', 'cost'}) do
        local add = tonumber(ARGV[A + 3 * (i - 1) + j])
        if add ~= 0 and redis.call('HINCRBY', key, field, add) == add then fresh = true end
      end
      if fresh then redis.call('EXPIRE', key, ARGV[15]) end
    end
    if ARGV[19] ~= '' then redis.call('HSET', KEYS[4], 'acked_take', ARGV[19]) end
    acked = true
  elseif cur[1] or (ARGV[19] ~= '' and redis.call('HGET', KEYS[4], 'acked_take') ~= ARGV[19]) then
    if not claimed then  -- (fenced: the lease is ours, and nothing of ours runs any more)
      redis.call('DEL', KEYS[1])
      redis.call('ZADD', KEYS[6], ms(now_ms()), cid)
    end
    return {'stale', 'take'}
  end
end
local now = nil
local window = ''
local function release()
  redis.call('DEL', KEYS[1])
  redis.call('HDEL', KEYS[4], 'sched')
  redis.call('ZREM', KEYS[6], cid)
end
local function handed_out(id, attempt, entries, dead, redelivered, cuts, take)
  if not claimed then redis.call('PEXPIRE', KEYS[1], lease_ms) end
  now = now or now_ms()
  redis.call('ZADD', KEYS[6], ms(now + lease_ms), cid)
  local out = {'batch', token, id, attempt, entries, dead, redelivered, window, cuts or '', take or ''}
  if nreads > 0 then
    local reads = {}
    for i = 1, nreads do reads[i] = KEYS[R + i] end
    local values = redis.call('MGET', unpack(reads))
    for i = 1, nreads do out[10 + i] = values[i] end
  end
  return out
end
if ARGV[4] == 'take' then
  local dead = ''
  if not acked then
    local held = redis.call('HMGET', KEYS[2], 'id', 'attempt', 'entries', 'cuts', 'take')
    if held[1] then
      local id, entries = held[1], held[3]
      local attempt = tonumber(held[2]) + 1
      if attempt <= tonumber(ARGV[7]) then
        redis.call('HSET', KEYS[2], 'attempt', attempt)
        return handed_out(id, attempt, entries, '', '1', held[4], held[5])
      end
      local gone = '{"cid":' .. cjson.encode(cid) .. ',"id":"' .. id .. '","entries":' .. entries .. '}'
      redis.call('RPUSH', KEYS[7], gone)
      redis.call('LTRIM', KEYS[7], -1000, -1)
      redis.call('DEL', KEYS[2], string.sub(KEYS[2], 1, #KEYS[2] - 5) .. 'ledger:' .. id)
      dead = id
    end
  end
  local quiet = tonumber(ARGV[16])
  if not q and quiet > 0 then q = redis.call('HMGET', KEYS[4], 'qfirst', 'qlast', 'qms') end
  if q and q[2] then
    quiet = tonumber(q[3] or '') or quiet
    window = ms(quiet)
    local waiting = quiet > 0 and redis.call('LLEN', KEYS[3]) or 0
    if waiting > 0 and waiting < tonumber(ARGV[5]) then
      now = now or now_ms()
      local last = tonumber(q[2])
      local wait = math.min(last + quiet, tonumber(q[1] or q[2]) + tonumber(ARGV[17]) * quiet) - now
      if wait > 0 then
        redis.call('PEXPIRE', KEYS[1], lease_ms)
        redis.call('ZADD', KEYS[6], ms(now + lease_ms), cid)
        return {'quiet', token, '', wait, '', dead, '0', window}
      end
    end
  end
  local items = redis.call('LPOP', KEYS[3], tonumber(ARGV[5]))
  if not items then
    release()
    return {'released', token, '', 0, '', dead, '0'}
  end
  local id = tostring(redis.call('HINCRBY', KEYS[4], 'seq', 1))
  local entries = '[' .. table.concat(items, ',') .. ']'
  redis.call('HSET', KEYS[2], 'id', id, 'attempt', 1, 'entries', entries, 'take', ARGV[18])
  return handed_out(id, 1, entries, dead, '0', '', ARGV[18])
end
local held = not acked and redis.call('EXISTS', KEYS[2]) == 1
if not held and redis.call('LLEN', KEYS[3]) == 0 then
  release()
  return {'released', token, '', 0, '', '', '0'}
end
if ARGV[4] == 'handback' and held then
  redis.call('HINCRBY', KEYS[2], 'attempt', -1)  -- handed back unfinished: not a failed delivery
end
redis.call('DEL', KEYS[1])
schedule(KEYS[4], KEYS[5], KEYS[6], ARGV[8], cid, tonumber(ARGV[9]), now_ms())
return {'handed_off', token, '', 0, '', '', '0'}
"""
)

CONFIRM_ACK = """
-- KEYS: batch meta      ARGV: acked_batch_id take
-- after an acknowledgement too few replicas confirmed in time: is it on the primary we reach now (the take
-- acknowledged is the one meta notes; for a take without a token, an older worker's: the batch held is no longer
-- the one acknowledged)? A failover may have lost it, or the take itself. If so, write, so that the WAIT after this
-- carries the acknowledgement to the replicas too. 0: the acknowledgement is not here.
local take = ARGV[2] or ''
if take ~= '' then
  if redis.call('HGET', KEYS[2], 'acked_take') ~= take then return 0 end
elseif redis.call('HGET', KEYS[1], 'id') == ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[2], 'acked', ARGV[1])
return 1
"""

OVERDUE = (
    _COMMON
    + """
-- KEYS: active      ARGV: limit
-- the contexts whose lease (or scheduled job) is overdue by the server's clock: a sweeping worker's own clock may
-- be off (a minute behind, it would find a dead worker's conversations a minute late)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now_ms()), 'LIMIT', 0, tonumber(ARGV[1]))
"""
)

RESCUE = (
    _COMMON
    + """
-- KEYS: active lease inbox batch meta queue
-- ARGV: cid new_job_id check_ms
local cid = ARGV[1]
local now = now_ms()
local score = redis.call('ZSCORE', KEYS[1], cid)
if not score then return 'gone' end
if tonumber(score) > now then return 'early' end
local pttl = redis.call('PTTL', KEYS[2])
if pttl > 0 then
  redis.call('ZADD', KEYS[1], ms(now + pttl), cid)
  return 'held'
end
if pttl == -1 then
  redis.call('DEL', KEYS[2])
end
if redis.call('LLEN', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('HDEL', KEYS[5], 'sched')
  redis.call('ZREM', KEYS[1], cid)
  return 'idle'
end
local sched = redis.call('HGET', KEYS[5], 'sched')
if sched and redis.call('ZSCORE', KEYS[6], sched) then  -- still waiting for a free worker
  redis.call('ZADD', KEYS[1], ms(now + tonumber(ARGV[3])), cid)
  return 'waiting'
end
schedule(KEYS[5], KEYS[6], KEYS[1], ARGV[2], cid, tonumber(ARGV[3]), now)
return 'rescheduled'
"""
)

BEGIN_REPLY = (
    _COMMON
    + """
-- KEYS: lease ledger batch
-- ARGV: token take model_field model_text n (reply_field reply) x n (field reply)...
-- stores the n entries of a reply that are not stored yet (an earlier attempt at the take may have stored them)
-- and the model's answer so far (unless stored complete); the pairs after the entries are earlier replies of this
-- run marked posted, carried along (not fenced: written, as MARK_POSTED does, while the batch is this take).
-- Returns {'stale'} (the lease or the take lost) or {'ok', stored_1, ..., stored_n}: what an earlier attempt stored
-- for each entry, '' for the ones stored now. The ledger lives as long as its batch: the acknowledgement (or the
-- dead-letter move) deletes it.
local take = ARGV[2]
local n = tonumber(ARGV[5])
local marks = 6 + 2 * n
if not fenced(KEYS[1], ARGV[1]) or not same_take(KEYS[3], take) then
  if #ARGV >= marks and may_mark(KEYS[3], KEYS[2], take) == 1 then
    redis.call('HSET', KEYS[2], unpack(ARGV, marks))
  end
  return {'stale'}
end
local write = {}
own_ledger(KEYS[2], take, write)
local fields = {ARGV[3] .. ':done'}
for i = 1, n do fields[i + 1] = ARGV[4 + 2 * i] end
local cur = redis.call('HMGET', KEYS[2], unpack(fields))
local out = {'ok'}
local stored = #write
for i = 1, n do
  if cur[i + 1] then
    out[i + 1] = cur[i + 1]
  else
    out[i + 1] = ''
    table.insert(write, ARGV[4 + 2 * i])
    table.insert(write, ARGV[5 + 2 * i])
  end
end
if #write == stored then  -- a write for a WAIT to carry (see the module's docstring)
  table.insert(write, ARGV[6])
  table.insert(write, cur[2])
elseif cur[1] ~= '1' then
  table.insert(write, ARGV[3])
  table.insert(write, ARGV[4])
end
for i = marks, #ARGV do table.insert(write, ARGV[i]) end
redis.call('HSET', KEYS[2], unpack(write))
return out
"""
)

STORE_MODEL = (
    _COMMON
    + """
-- KEYS: lease ledger batch      ARGV: token take model_field text
if not fenced(KEYS[1], ARGV[1]) or not same_take(KEYS[3], ARGV[2]) then return 0 end
local write = {ARGV[3], ARGV[4], ARGV[3] .. ':done', '1'}
own_ledger(KEYS[2], ARGV[2], write)
redis.call('HSET', KEYS[2], unpack(write))
return 1
"""
)

MARK_POSTED = (
    _COMMON
    + """
-- KEYS: ledger batch      ARGV: take (reply_field reply)...
-- not fenced: a mark records a fact, even from a worker that lost its lease meanwhile, as long as the batch is the
-- take it posted for. Returns 1, 0 (no ledger: nothing to mark) or -1 (another take: the worker's is lost)
local ok = may_mark(KEYS[2], KEYS[1], ARGV[1])
if ok == 1 then redis.call('HSET', KEYS[1], unpack(ARGV, 2)) end
return ok
"""
)

RELEASE_LOCK = """
-- KEYS: lock      ARGV: value ttl_ms ('0': release)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
"""

SHARD_TAKE = """
-- KEYS: lease fences     ARGV: shard holder ttl_ms
-- take a free shard: its lease holds '<fencing token>|<holder>'; returns the token, or 0 when taken
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('SET', KEYS[1], token .. '|' .. ARGV[2], 'PX', ARGV[3])
return token
"""

SHARD_RENEW = (
    _COMMON
    + """
-- KEYS: members lease...  ARGV: holder ttl_ms value...
-- one heartbeat of a gateway: its membership (the live gateways share the shards) and every lease it
-- holds, each renewed only if it still holds this holder's fencing token; returns {live gateways, lost}
local now = now_ms()
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], ttl * 2)
local lost = {}
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ttl)
  else
    table.insert(lost, i - 1)
  end
end
return {redis.call('ZCARD', KEYS[1]), lost}
"""
)

STOP = """
-- KEYS: batch inbox stop        ARGV: channel cid keep_ms by
-- A person pressed Stop: record what it covers (the batch taken and not yet acknowledged, and the time its
-- gateway stored the newest input waiting, as the input says) for whichever worker takes them, and tell every
-- worker at once (pub/sub). Returns 1 when a batch was held or inputs waited, 0 when nothing was stored to stop.
-- by (a platform-qualified user id; '' for the chat's admin): someone the answer may not be for. The batch held
-- is stopped only when one of its inputs is theirs, the inputs waiting are covered only when all of them are, and
-- with no batch held they must be: else nothing is done and -1 is returned (core.agent.Agent.request_stop).
local by = ARGV[4] or ''
local function author(entry)  -- core.usage.user_of of an entry's input
  local i = type(entry) == 'table' and entry.i
  local p = type(i) == 'table' and i.params
  if type(p) ~= 'table' then return nil end
  local user = p.user_id
  if type(user) ~= 'string' or user == '' then user = p.author_id end
  if type(user) ~= 'string' or user == '' then return nil end
  local platform = p.platform
  if type(platform) ~= 'string' or platform == '' then platform = string.match(tostring(i.type or ''), '^[^:]*') end
  return platform .. ':' .. user
end
local function decoded(raw)
  local ok, entry = pcall(cjson.decode, raw)
  if ok then return entry end
  return nil
end
local held = redis.call('HGET', KEYS[1], 'id') or ''
local waiting = ''
local last = redis.call('LINDEX', KEYS[2], -1)
if last then
  local entry = decoded(last)
  if type(entry) == 'table' and type(entry.t) == 'number' then waiting = string.format('%.17g', entry.t) end
end
if by ~= '' then
  if waiting ~= '' then
    for _, raw in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
      if author(decoded(raw)) ~= by then waiting = '' break end
    end
  end
  if held ~= '' then
    local mine = false
    local entries = decoded(redis.call('HGET', KEYS[1], 'entries') or '[]')
    for _, entry in ipairs(type(entries) == 'table' and entries or {}) do
      if author(entry) == by then mine = true break end
    end
    if not mine then return -1 end
  elseif waiting == '' then
    if last then return -1 end
    return 0
  end
end
redis.call('PUBLISH', ARGV[1], ARGV[2])
if held == '' and waiting == '' then
  redis.call('DEL', KEYS[3])
  return 0
end
redis.call('SET', KEYS[3], held .. '|' .. waiting, 'PX', ARGV[3])
return 1
"""

JOIN = (
    _COMMON
    + """
-- KEYS: lease batch inbox        ARGV: token batch_id cap join_id take
-- Inputs that came while the batch runs join it (core.busy steer): up to cap inputs in the batch, popped from the
-- inbox and appended to the batch's entries (so a batch run again after a crash has them), fenced; 'cuts' records
-- how many entries the batch held before each join ('1,3'), so a batch run again is given to the agent in the same
-- parts, in the same order, and the answers stored by the earlier attempt are replayed for the inputs they read.
-- join_id makes it safe to run again (a reply lost on the way): the same join_id returns what that join took.
-- Returns {'joined', entries joined} or {'none'} (nothing waits, or the batch is full), {'stale'} (not ours).
if not fenced(KEYS[1], ARGV[1]) then return {'stale'} end
local held = redis.call('HMGET', KEYS[2], 'id', 'entries', 'cuts', 'jid', 'jlast', 'take')
if held[1] ~= ARGV[2] or (held[6] or '') ~= (ARGV[5] or '') then return {'stale'} end
if held[4] == ARGV[4] then return {'joined', held[5]} end
local count = #cjson.decode(held[2])
local room = tonumber(ARGV[3]) - count
if room <= 0 then return {'none'} end
local items = redis.call('LPOP', KEYS[3], room)
if not items then return {'none'} end
local joined = table.concat(items, ',')
local cuts = held[3] and (held[3] .. ',' .. count) or tostring(count)
redis.call(
  'HSET', KEYS[2], 'entries', string.sub(held[2], 1, #held[2] - 1) .. ',' .. joined .. ']', 'cuts', cuts,
  'jid', ARGV[4], 'jlast', '[' .. joined .. ']'
)
return {'joined', '[' .. joined .. ']'}
"""
)
