"""The fleet's pending approvals (``core.approvals``), in Redis: whoever receives the press (a gateway), whoever
times a request out and whoever runs the approved call (workers) change it with a compare-and-set on its status.

Keys (prefix ``bots:``)::

    bots:appr:<id>      string   "<status>|<nonce>|<the approval's JSON>" (a settled one expires after a day)
    bots:appr:due       zset     id -> when to look at it next (ms): its timeout while pending, a new send of
                                 the decision while its conversation has not been told

Every change is one script (``CAS``): it writes the new value only when the status is still the one the caller
read, so of two presses, a press and the timeout, or two workers, one changes it (the script run again after its
answer was lost, Redis restarting, finds its own value and says it changed it). A decision is written only if nothing
was written since it was read (else read again): it keeps where the request was posted, noted meanwhile. A worker
killed while the approved call runs leaves it ``running``; its batch, delivered again, finds that and tells the model
the outcome is unknown (the call never starts twice).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ..approvals.model import Approval, ApprovalStatus, Decision, valid_id
from .backend import RedisBackend

__all__ = ("RedisApprovalStore",)

ADD = """
-- KEYS: key due      ARGV: id value due_ms
if not redis.call('SET', KEYS[1], ARGV[2], 'NX') then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""

CAS = """
-- KEYS: key due      ARGV: id expected_status value due_ms ('' = not due any more) ttl_s ('' = none)
local value = redis.call('GET', KEYS[1])
if value == ARGV[3] then return 1 end  -- this very change, run again after a lost answer
if not value or string.sub(value, 1, #ARGV[2] + 1) ~= ARGV[2] .. '|' then return 0 end
redis.call('SET', KEYS[1], ARGV[3])
if ARGV[4] == '' then redis.call('ZREM', KEYS[2], ARGV[1]) else redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1]) end
if ARGV[5] ~= '' then redis.call('EXPIRE', KEYS[1], ARGV[5]) end
return 1
"""

KEEP_SECONDS = 86400
"""Seconds a settled approval is kept (a batch delivered again finds its outcome; a late press is told)."""


def _value(approval: Approval) -> str:
    """``<status>|<nonce>|<JSON>``: the nonce tells one writer's change from another's that would write the same."""
    doc = json.dumps(approval.to_json(), separators=(",", ":"), ensure_ascii=False)
    return f"{approval.status.value}|{uuid.uuid4().hex[:12]}|{doc}"


def _parse(value: str | None) -> Approval | None:
    if value is None:
        return None
    return Approval.model_validate_json(value.split("|", 2)[2])


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


class RedisApprovalStore:
    """Approvals shared by every process of a fleet (``core.approvals.ApprovalStore``), on the backend's
    connection (its retries while Redis restarts)."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        """The connection, shared with the queue."""
        self.prefix = backend.config.prefix
        """Prefix of every key."""
        register = backend.client.register_script
        self._add = register(ADD)
        self._cas = register(CAS)

    def key(self, approval_id: str) -> str:
        """The key of one approval."""
        return f"{self.prefix}appr:{approval_id}"

    @property
    def due_key(self) -> str:
        """The sorted set of ids by when to look at them next."""
        return f"{self.prefix}appr:due"

    async def _change(
        self,
        before: Approval,
        after: Approval,
        *,
        due: float | None,
        keep: bool = False,
        what: str,
        version: str | None = None,
    ) -> bool:
        """Write ``after`` if ``before``'s status is still the stored one (with ``version``, ``<status>|<nonce>`` as
        read: if nobody has written since)."""
        changed = await self.backend.call(
            self._cas,
            [self.key(before.id), self.due_key],
            [
                before.id,
                version or before.status.value,
                _value(after),
                "" if due is None else _ms(due),
                KEEP_SECONDS if keep else "",
            ],
            what=what,
            confirm=True,  # a presser is told, a call started: the change must survive a failover
        )
        return bool(changed)

    async def add(self, approval: Approval) -> bool:
        added = await self.backend.call(
            self._add,
            [self.key(approval.id), self.due_key],
            [approval.id, _value(approval), _ms(approval.expires_at)],
            what=f"storing approval {approval.id}",
            confirm=True,
        )
        return bool(added)

    async def get(self, approval_id: str) -> Approval | None:
        if not valid_id(approval_id):
            return None
        client = self.backend.client
        value = await self.backend.run(lambda: client.get(self.key(approval_id)), what="reading an approval")
        return _parse(value)

    async def _read(self, approval_id: str) -> tuple[Approval, str] | None:
        """The approval and its version (``<status>|<nonce>``: which write it is), or None."""
        client = self.backend.client
        value = await self.backend.run(lambda: client.get(self.key(approval_id)), what="reading an approval")
        found = _parse(value)
        if value is None or found is None:
            return None
        status, nonce, _ = value.split("|", 2)
        return found, f"{status}|{nonce}"

    async def set_prompt(self, approval_id: str, prompt: str) -> Approval | None:
        client = self.backend.client
        for _ in range(3):  # the status may change between the read and the write (a press)
            found = await self.get(approval_id)
            if found is None:
                return None
            if found.status is ApprovalStatus.DONE:  # its conversation was told already: nothing left to change
                return found.model_copy(update={"prompt": prompt})
            score = await self.backend.run(
                lambda: client.zscore(self.due_key, approval_id), what="reading an approval's due time"
            )
            after = found.model_copy(update={"prompt": prompt})
            due = None if score is None else float(score) / 1000
            if await self._change(found, after, due=due, what=f"noting where approval {approval_id} was asked"):
                return after
        return None

    async def decide(
        self, approval_id: str, decision: Decision, *, by: str | None, name: str, at: float, retry_at: float
    ) -> Approval | None:
        if not valid_id(approval_id):
            return None
        for _ in range(3):  # pending, but written meanwhile (where it was posted): decided from what is stored now
            read = await self._read(approval_id)
            if read is None or read[0].status is not ApprovalStatus.PENDING:
                return None
            found, version = read
            decided = found.model_copy(
                update={"status": ApprovalStatus(decision.value), "decided_by": by, "decider": name, "decided_at": at}
            )
            if await self._change(
                found, decided, due=retry_at, what=f"deciding approval {approval_id}", version=version
            ):
                return decided
        return None

    async def start(self, approval_id: str) -> Approval | None:
        found = await self.get(approval_id)
        if found is None or found.status is not ApprovalStatus.APPROVED:
            return None
        running = found.model_copy(update={"status": ApprovalStatus.RUNNING})
        if await self._change(found, running, due=None, what=f"starting the call of approval {approval_id}"):
            return running
        return None

    async def finish(self, approval_id: str, outcome: dict[str, Any] | None) -> None:
        for _ in range(3):
            found = await self.get(approval_id)
            if found is None or found.status is ApprovalStatus.DONE:
                return
            done = found.model_copy(update={"status": ApprovalStatus.DONE, "outcome": outcome})
            if await self._change(found, done, due=None, keep=True, what=f"settling approval {approval_id}"):
                return

    async def _read_many(self, ids: Callable[[], Awaitable[list[Any]]], *, what: str) -> list[Approval]:
        """The approvals whose ids ``ids`` reads from the due set, in one round trip more."""
        client = self.backend.client

        async def read() -> list[str | None]:
            found = await ids()
            if not found:
                return []
            pipe = client.pipeline(transaction=False)
            for aid in found:
                pipe.get(self.key(aid))
            values: list[str | None] = await pipe.execute()
            return values

        values = await self.backend.run(read, what=what)
        return [found for found in map(_parse, values) if found is not None]

    async def due(self, now: float, *, limit: int) -> list[Approval]:
        client = self.backend.client
        return await self._read_many(
            lambda: client.zrangebyscore(self.due_key, "-inf", _ms(now), start=0, num=max(1, limit)),
            what="reading the approvals due",
        )

    async def pending(self, conversation: str) -> list[Approval]:
        # (every pending request is due at its timeout: all are in the set)
        approvals = await self._read_many(
            lambda: self.backend.client.zrange(self.due_key, 0, -1), what="reading the approvals pending"
        )
        return [a for a in approvals if a.conversation == conversation and a.status is ApprovalStatus.PENDING]

    async def retry_at(self, approval_id: str, at: float) -> None:
        client = self.backend.client
        await self.backend.run(
            lambda: client.zadd(self.due_key, {approval_id: _ms(at)}, xx=True), what="postponing an approval"
        )

    async def next_due(self) -> float | None:
        client = self.backend.client
        found = await self.backend.run(
            lambda: client.zrange(self.due_key, 0, 0, withscores=True), what="reading the next approval due"
        )
        return float(found[0][1]) / 1000 if found else None
