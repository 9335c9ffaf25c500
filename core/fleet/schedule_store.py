"""The fleet's schedules, in Redis: any number of workers claim due occurrences and fire each exactly once.

Keys (prefix ``bots:``)::

    bots:sched:<id>           string   "<next occurrence, ms>|<the schedule's JSON>"
    bots:sched:due            zset     id -> when to look at it next: its occurrence, or a claim's expiry
    bots:sched:conv:<cid>     set      ids of a conversation's schedules
    bots:sched:user:<user>    set      ids of the schedules a user set

One occurrence: **claim** (one script) hands the due ids out, moving each one's score to ``now + lease`` so no
other worker takes it meanwhile; the worker sends the conversation its ``schedule`` input through the ingest
script (``RedisDispatcher``, the path of every message) with the dedupe key ``schedule:<id>:<occurrence ms>``;
then **advance** (one script, compare-and-set on ``next``) moves the schedule to its next occurrence or drops a
one-off. A worker killed anywhere in between leaves the claim to expire: the next claimer sends again (the
ingest drops it as a redelivery when the first send got through) and advances. So the input is stored once and
the schedule moves once, however many workers there are; the drain path (lease, fence, reply ledger) then
answers it once. With ``appendonly yes`` a schedule survives a Redis restart like an inbox does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from ..errors import ValidationError
from ..schedules.model import Schedule, to_utc, valid_id
from ..schedules.store import ScheduleLimitError
from .backend import RedisBackend

__all__ = ("RedisScheduleStore", "ServerClock")

log = logging.getLogger("core.fleet")

ADD = """
-- KEYS: key due conv_set user_set      ARGV: id doc next_ms conv user per_conv per_user
local fresh = redis.call('EXISTS', KEYS[1]) == 0
if fresh and ARGV[6] ~= '' then
  local n = redis.call('SCARD', KEYS[3])
  if n >= tonumber(ARGV[6]) then return {'conv', n} end
end
if fresh and ARGV[7] ~= '' and ARGV[5] ~= '' then
  local n = redis.call('SCARD', KEYS[4])
  if n >= tonumber(ARGV[7]) then return {'user', n} end
end
redis.call('SET', KEYS[1], ARGV[3] .. '|' .. ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
if ARGV[5] ~= '' then redis.call('SADD', KEYS[4], ARGV[1]) end
return {'ok', 0}
"""

CANCEL = """
-- KEYS: key due      ARGV: id prefix
-- (the sets are named from the schedule's conversation and creator: one Redis, not a cluster)
local value = redis.call('GET', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if not value then return false end
local doc = string.sub(value, string.find(value, '|', 1, true) + 1)
local found = cjson.decode(doc)
redis.call('DEL', KEYS[1])
redis.call('SREM', ARGV[2] .. 'sched:conv:' .. found.conversation, ARGV[1])
if type(found.creator) == 'string' then redis.call('SREM', ARGV[2] .. 'sched:user:' .. found.creator, ARGV[1]) end
return doc
"""

CLAIM = """
-- KEYS: due      ARGV: now_ms limit lease_ms prefix
-- (the schedules' keys are named from the ids found: one Redis, not a cluster)
local now = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
local until_ms = string.format('%d', now + tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  local value = redis.call('GET', ARGV[4] .. 'sched:' .. id)
  if value then
    redis.call('ZADD', KEYS[1], until_ms, id)
    out[#out + 1] = string.sub(value, string.find(value, '|', 1, true) + 1)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
"""

ADVANCE = """
-- KEYS: key due conv_set user_set      ARGV: id expected_ms next_ms('' = done) doc
local value = redis.call('GET', KEYS[1])
if not value or string.sub(value, 1, #ARGV[2] + 1) ~= ARGV[2] .. '|' then return 0 end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('SREM', KEYS[3], ARGV[1])
  redis.call('SREM', KEYS[4], ARGV[1])
  return 1
end
redis.call('SET', KEYS[1], ARGV[3] .. '|' .. ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""


def _ms(when: datetime) -> str:
    return str(int(to_utc(when).timestamp() * 1000))


def _doc(value: str | None) -> str | None:
    """The schedule's JSON in the value of its key."""
    return None if value is None else value.partition("|")[2]


def _dump(schedule: Schedule) -> str:
    return json.dumps(schedule.to_json(), separators=(",", ":"), ensure_ascii=False)


class RedisScheduleStore:
    """Schedules shared by every process of a fleet (``core.schedules.ScheduleStore``), on the backend's
    connection (its retries while Redis restarts, its errors naming ``REDIS_URL``)."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        """The connection, shared with the queue."""
        self.prefix = backend.config.prefix
        """Prefix of every key."""
        register = backend.client.register_script
        self._add = register(ADD)
        self._cancel = register(CANCEL)
        self._claim = register(CLAIM)
        self._advance = register(ADVANCE)

    # -- keys ------------------------------------------------------------------------------------------

    def key(self, schedule_id: str) -> str:
        """The key of one schedule (``"<next occurrence, ms>|<JSON>"``)."""
        return f"{self.prefix}sched:{schedule_id}"

    @property
    def due_key(self) -> str:
        """The sorted set of ids by next occurrence (or claim expiry)."""
        return f"{self.prefix}sched:due"

    def conversation_key(self, conversation: str) -> str:
        """The set of a conversation's schedule ids."""
        return f"{self.prefix}sched:conv:{conversation}"

    def creator_key(self, creator: str | None) -> str:
        """The set of the schedule ids a user set."""
        return f"{self.prefix}sched:user:{creator or ''}"

    def _keys(self, schedule: Schedule) -> list[str]:
        return [
            self.key(schedule.id),
            self.due_key,
            self.conversation_key(schedule.conversation),
            self.creator_key(schedule.creator),
        ]

    # -- the store -------------------------------------------------------------------------------------

    async def add(
        self, schedule: Schedule, *, per_conversation: int | None = None, per_creator: int | None = None
    ) -> None:
        """Store ``schedule``; ``ScheduleLimitError`` when its conversation or creator is at the limit given
        (checked in the same script)."""
        if schedule.next_fire_at is None:
            raise ValidationError("a schedule without a next occurrence cannot be added")
        status, count = await self.backend.call(
            self._add,
            self._keys(schedule),
            [
                schedule.id,
                _dump(schedule),
                _ms(schedule.next_fire_at),
                schedule.conversation,
                schedule.creator or "",
                "" if per_conversation is None else per_conversation,
                "" if per_creator is None else per_creator,
            ],
            what=f"storing schedule {schedule.id}",
            confirm=True,  # the user is told it is set
        )
        if status == "conv":
            raise ScheduleLimitError(
                f"{schedule.conversation} already has {count} active schedules (at most {per_conversation}): "
                "cancel one first"
            )
        if status == "user":
            raise ScheduleLimitError(
                f"you already have {count} active schedules (at most {per_creator}): cancel one first"
            )

    async def get(self, schedule_id: str) -> Schedule | None:
        """The active schedule ``schedule_id``, or None (an id that is no schedule id's shape, too)."""
        if not valid_id(schedule_id):
            return None
        client = self.backend.client
        value = await self.backend.run(lambda: client.get(self.key(schedule_id)), what="reading a schedule")
        doc = _doc(value)
        return None if doc is None else Schedule.model_validate_json(doc)

    async def _listed(self, ids_of: Callable[[], Awaitable[Iterable[str]]], *, what: str) -> list[Schedule]:
        """The schedules whose ids ``ids_of`` reads, in one pipelined round trip more, soonest first."""
        client = self.backend.client

        async def read() -> list[Any]:
            ids = list(await ids_of())
            if not ids:
                return []
            pipe = client.pipeline(transaction=False)
            for sid in ids:
                pipe.get(self.key(sid))
            return [_doc(value) for value in await pipe.execute()]

        docs = await self.backend.run(read, what=what)
        found = [Schedule.model_validate_json(doc) for doc in docs if doc is not None]
        return sorted(found, key=lambda s: (s.next_fire_at or datetime.max.replace(tzinfo=UTC), s.id))

    async def _members(self, set_key: str) -> list[Schedule]:
        return await self._listed(lambda: self.backend.client.smembers(set_key), what="listing schedules")

    async def by_conversation(self, conversation: str) -> list[Schedule]:
        """The active schedules of a conversation, soonest first."""
        return await self._members(self.conversation_key(conversation))

    async def by_creator(self, creator: str) -> list[Schedule]:
        """The active schedules a user set, soonest first."""
        return await self._members(self.creator_key(creator))

    async def cancel(self, schedule_id: str) -> Schedule | None:
        """Remove ``schedule_id``; the removed schedule or None (an id that is no schedule id's shape, too)."""
        if not valid_id(schedule_id):
            return None
        doc = await self.backend.call(
            self._cancel,
            [self.key(schedule_id), self.due_key],
            [schedule_id, self.prefix],
            what=f"cancelling schedule {schedule_id}",
            confirm=True,
        )
        return None if not doc else Schedule.model_validate_json(doc)

    async def claim(self, now: datetime, *, limit: int, lease: float) -> list[Schedule]:
        """Up to ``limit`` occurrences due at ``now``, each hidden from other claims for ``lease`` seconds."""
        docs = await self.backend.call(
            self._claim,
            [self.due_key],
            [_ms(now), limit, int(lease * 1000), self.prefix],
            what="claiming due schedules",
        )
        found = [Schedule.model_validate_json(doc) for doc in docs]
        return sorted(found, key=lambda s: (s.next_fire_at or datetime.max.replace(tzinfo=UTC), s.id))

    async def advance(self, schedule: Schedule, *, next_fire_at: datetime | None, missed: bool = False) -> bool:
        """Move ``schedule`` past the occurrence it was claimed with (compare-and-set on it)."""
        if schedule.next_fire_at is None:
            return False
        moved = schedule
        if next_fire_at is not None:
            moved = schedule.model_copy(
                update={
                    "next_fire_at": to_utc(next_fire_at),
                    "fired": schedule.fired + (0 if missed else 1),
                    "missed": schedule.missed + (1 if missed else 0),
                }
            )
        done = await self.backend.call(
            self._advance,
            self._keys(schedule),
            [
                schedule.id,
                _ms(schedule.next_fire_at),
                "" if next_fire_at is None else _ms(next_fire_at),
                "" if next_fire_at is None else _dump(moved),
            ],
            what=f"advancing schedule {schedule.id}",
        )
        return bool(done)

    async def upcoming(self, limit: int) -> list[Schedule]:
        """The ``limit`` active schedules due soonest (a claimed one is listed by its claim's expiry: it is being
        fired)."""
        if limit <= 0:
            return []
        return await self._listed(
            lambda: self.backend.client.zrange(self.due_key, 0, limit - 1), what="listing the next schedules"
        )

    async def next_due(self) -> datetime | None:
        """When the soonest occurrence (or claim expiry) is due."""
        client = self.backend.client
        first = await self.backend.run(
            lambda: client.zrange(self.due_key, 0, 0, withscores=True), what="reading the next schedule"
        )
        if not first:
            return None
        return datetime.fromtimestamp(float(first[0][1]) / 1000, UTC)

    async def pending(self) -> int:
        """Active schedules in all."""
        client = self.backend.client
        count = await self.backend.run(lambda: client.zcard(self.due_key), what="counting schedules")
        return int(count)

    async def close(self) -> None:
        """Nothing to release: the backend is shared (its owner closes it)."""


class ServerClock:
    """The time of the Redis primary (``TIME``) as this process sees it: its own clock plus an offset measured at
    most every ``every`` seconds (``sync``, called by the scheduler at each look at the store). The workers of a
    fleet then agree on when a schedule is due and on what "in 2 minutes" means whatever their machines' clocks
    say, as the leases do (their scripts read ``TIME``)."""

    def __init__(self, backend: RedisBackend, *, every: float = 60.0, local: Callable[[], float] = time.time) -> None:
        self.backend = backend
        """The connection to the primary."""
        self.every = every
        """Seconds between two measures at most."""
        self.local = local
        """This machine's clock, seconds since the epoch (a test's may be off)."""
        self.offset = 0.0
        """Seconds to add to ``local`` to read the primary's clock (0 until measured)."""
        self._next = 0.0

    def now(self) -> datetime:
        """The primary's current instant, as last measured (aware, UTC)."""
        return datetime.fromtimestamp(self.local() + self.offset, UTC)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep`` (durations are the same on every clock)."""
        await asyncio.sleep(max(0.0, seconds))

    async def sync(self) -> None:
        """Measure the offset again when ``every`` seconds have passed since the last measure that worked (halfway
        through the round trip). A failure raises and keeps the last offset; the next call tries again (the
        scheduler fires nothing in between: until a first measure works, this machine's clock is all there is)."""
        if time.monotonic() < self._next:
            return
        client = self.backend.client
        before = self.local()
        seconds, micros = await self.backend.run(client.time, what="reading Redis's clock")
        after = self.local()
        offset = seconds + micros / 1e6 - (before + after) / 2
        if abs(offset - self.offset) > 1.0:
            log.info("this machine's clock is %.1fs off the Redis primary's: schedules follow Redis's", -offset)
        self.offset = offset
        self._next = time.monotonic() + self.every
