"""The Lua scripts: each step of a context's life is one atomic script.

Every script that changes a context checks the fencing token first (``fenced``): a worker whose lease
expired (crashed, paused, cut off) finds a newer token and its writes are refused. The token a worker
sends is ``<counter>|<owner>``, the whole lease value: after a failover that lost the last writes, the
counter may be handed out again, to another claim, whose owner differs. Times come from the Redis server
clock (``TIME``), so workers' clocks do not matter.

A script whose write an acknowledgement relies on (``INGEST``, ``BEGIN_REPLY``, ``MARK_POSTED``) writes
something on every run, even when it finds its work done (a redelivery, a reply stored by an earlier run):
run again after a ``WAIT`` that too few replicas answered, its own write carries the earlier one to them.
"""

from __future__ import annotations

__all__ = (
    "BEGIN_REPLY",
    "CONFIRM_ACK",
    "INGEST",
    "MARK_POSTED",
    "RELEASE_LOCK",
    "RENEW",
    "RESCUE",
    "SHARD_RENEW",
    "SHARD_TAKE",
    "STEP",
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
-- make job_id the context's drain job: it enters arq's queue, where idle workers block on BZMPOP
local function schedule(meta, queue, active, job_key, job_id, payload, job_ttl, cid, check_ms, now)
  redis.call('HSET', meta, 'sched', job_id)
  redis.call('SET', job_key, payload, 'PX', job_ttl)
  redis.call('ZADD', queue, ms(now), job_id)
  redis.call('ZADD', active, ms(now + check_ms), cid)
end
"""

INGEST = (
    _COMMON
    + """
-- KEYS: inbox meta dedupe queue active new_job_key
-- ARGV: entry cap dedupe_ttl_ms cid new_job_id payload job_ttl_ms check_ms confirming
local use_dedupe = ARGV[3] ~= '0'
if use_dedupe and redis.call('EXISTS', KEYS[3]) == 1 then
  if ARGV[9] == '1' then redis.call('PEXPIRE', KEYS[3], ARGV[3]) end  -- a write for the WAIT to carry
  return 'dup'
end
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[2]) then return 'full' end
if use_dedupe then redis.call('SET', KEYS[3], '1', 'PX', ARGV[3]) end
redis.call('RPUSH', KEYS[1], ARGV[1])
if redis.call('HGET', KEYS[2], 'sched') then return 'queued' end
schedule(KEYS[2], KEYS[4], KEYS[5], KEYS[6], ARGV[5], ARGV[6], ARGV[7], ARGV[4], tonumber(ARGV[8]), now_ms())
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
-- KEYS: lease batch inbox meta queue active dead acked_ledger new_job_key own_job_key own_retry_key
--       write_keys... read_keys...
-- (own_job_key and own_retry_key are arq's keys of this drain job: dropped here when the job is done,
--  so arq has nothing left to clean up)
-- ARGV: token cid ack_id mode batch_size lease_ms max_attempts new_job_id payload job_ttl_ms check_ms
--       own_job_id owner nwrites nreads (op value)...
-- token '': first claim the context for drain job own_job_id (only if it is the scheduled one).
-- ack_id: acknowledge that batch (apply the writes, drop the batch and its ledger) if it is current.
-- mode 'take': then hand out the next batch (an unacknowledged one first) or release the context.
-- mode 'handoff': then release if nothing waits, else schedule a fresh drain job.
-- mode 'handback': like handoff, for a run given up unfinished (worker stopping): the batch stays.
-- Returns {status, token, batch_id, attempt, entries, dead_id, redelivered, read values...}
local cid = ARGV[2]
local lease_ms = tonumber(ARGV[6])
local nwrites = tonumber(ARGV[14])
local nreads = tonumber(ARGV[15])
local now = now_ms()
local token = ARGV[1]
if token == '' then
  if redis.call('HGET', KEYS[4], 'sched') ~= ARGV[12] then
    redis.call('ZREM', KEYS[5], ARGV[12])
    redis.call('DEL', KEYS[10], KEYS[11])
    return {'stale'}
  end
  local cur = redis.call('GET', KEYS[1])
  if cur then
    local sep = string.find(cur, '|', 1, true)
    if string.sub(cur, sep + 1) ~= ARGV[13] then return {'held'} end
    token = string.sub(cur, 1, sep - 1)  -- our own claim, sent again after a lost reply
  else
    token = tostring(redis.call('HINCRBY', KEYS[4], 'fence', 1))
    redis.call('SET', KEYS[1], token .. '|' .. ARGV[13], 'PX', lease_ms)
    redis.call('ZREM', KEYS[5], ARGV[12])
  end
elseif not fenced(KEYS[1], token) then
  return {'stale'}
else
  token = string.match(token, '^[^|]*')
end
if ARGV[3] ~= '' then
  local cur = redis.call('HGET', KEYS[2], 'id')
  if cur == ARGV[3] then
    for i = 1, nwrites do
      if ARGV[14 + 2 * i] == 's' then
        redis.call('SET', KEYS[11 + i], ARGV[15 + 2 * i])
      else
        redis.call('DEL', KEYS[11 + i])
      end
    end
    redis.call('DEL', KEYS[2], KEYS[8])
  elseif cur then
    return {'stale'}
  end
end
local function release()
  redis.call('DEL', KEYS[1], KEYS[10], KEYS[11])
  redis.call('HDEL', KEYS[4], 'sched')
  redis.call('ZREM', KEYS[6], cid)
end
local function handed_out(id, attempt, entries, dead, redelivered)
  redis.call('PEXPIRE', KEYS[1], lease_ms)
  redis.call('ZADD', KEYS[6], ms(now + lease_ms), cid)
  local out = {'batch', token, id, attempt, entries, dead, redelivered}
  for i = 1, nreads do
    out[7 + i] = redis.call('GET', KEYS[11 + nwrites + i])
  end
  return out
end
if ARGV[4] == 'take' then
  local dead = ''
  if redis.call('EXISTS', KEYS[2]) == 1 then
    local attempt = redis.call('HINCRBY', KEYS[2], 'attempt', 1)
    local id = redis.call('HGET', KEYS[2], 'id')
    local entries = redis.call('HGET', KEYS[2], 'entries')
    if attempt <= tonumber(ARGV[7]) then
      return handed_out(id, attempt, entries, '', '1')
    end
    redis.call('RPUSH', KEYS[7], '{"cid":' .. cjson.encode(cid) .. ',"id":"' .. id .. '","entries":' .. entries .. '}')
    redis.call('LTRIM', KEYS[7], -1000, -1)
    redis.call('DEL', KEYS[2])
    dead = id
  end
  local items = redis.call('LRANGE', KEYS[3], 0, tonumber(ARGV[5]) - 1)
  if #items == 0 then
    release()
    return {'released', token, '', 0, '', dead, '0'}
  end
  redis.call('LTRIM', KEYS[3], #items, -1)
  local id = tostring(redis.call('HINCRBY', KEYS[4], 'seq', 1))
  local entries = '[' .. table.concat(items, ',') .. ']'
  redis.call('HSET', KEYS[2], 'id', id, 'attempt', 1, 'entries', entries)
  return handed_out(id, 1, entries, dead, '0')
end
if redis.call('LLEN', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[2]) == 0 then
  release()
  return {'released', token, '', 0, '', '', '0'}
end
if ARGV[4] == 'handback' and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'attempt', -1)  -- handed back unfinished: not a failed delivery
end
redis.call('DEL', KEYS[1], KEYS[10], KEYS[11])
schedule(KEYS[4], KEYS[5], KEYS[6], KEYS[9], ARGV[8], ARGV[9], ARGV[10], cid, tonumber(ARGV[11]), now)
return {'handed_off', token, '', 0, '', '', '0'}
"""
)

CONFIRM_ACK = """
-- KEYS: batch meta      ARGV: acked_batch_id
-- after an acknowledgement too few replicas confirmed in time: is it on the primary we reach now (the
-- batch held is no longer the one acknowledged; a failover may have lost it)? If so, write, so that the
-- WAIT after this carries the acknowledgement to the replicas too. 0: the acknowledgement is not here.
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'acked', ARGV[1])
return 1
"""

RESCUE = (
    _COMMON
    + """
-- KEYS: active lease inbox batch meta queue new_job_key
-- ARGV: cid new_job_id payload job_ttl_ms check_ms
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
  redis.call('ZADD', KEYS[1], ms(now + tonumber(ARGV[5])), cid)
  return 'waiting'
end
if sched then redis.call('ZREM', KEYS[6], sched) end
schedule(KEYS[5], KEYS[6], KEYS[1], KEYS[7], ARGV[2], ARGV[3], ARGV[4], cid, tonumber(ARGV[5]), now)
return 'rescheduled'
"""
)

BEGIN_REPLY = (
    _COMMON
    + """
-- KEYS: lease ledger      ARGV: token reply_field reply model_field model_prefix ttl_ms (field reply)...
-- the pairs after ttl_ms are earlier replies of this run marked posted, carried along (not fenced)
if #ARGV > 6 and redis.call('EXISTS', KEYS[2]) == 1 then
  for i = 7, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
if not fenced(KEYS[1], ARGV[1]) then return {'stale'} end
local cur = redis.call('HGET', KEYS[2], ARGV[2])
if cur then
  redis.call('PEXPIRE', KEYS[2], ARGV[6])  -- a write for a WAIT to carry (see the module's docstring)
  return {'exists', cur}
end
if redis.call('HGET', KEYS[2], ARGV[4] .. ':done') ~= '1' then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {'new'}
"""
)

STORE_MODEL = (
    _COMMON
    + """
-- KEYS: lease ledger      ARGV: token model_field text ttl_ms
if not fenced(KEYS[1], ARGV[1]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3], ARGV[2] .. ':done', '1')
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
"""
)

MARK_POSTED = """
-- KEYS: ledger      ARGV: (reply_field reply)...
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""

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
