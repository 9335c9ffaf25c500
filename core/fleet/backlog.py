"""The backlog of the fleet, measured by every worker every few seconds for ``bots_queue_depth``.

Three depths, each a label ``queue`` of the gauge:

- ``inbox``: inputs stored by the gateways and not yet taken by a worker, all conversations (the length of the
  inbox of each conversation with work, ``<prefix>active``; the first ``SCAN_LIMIT`` of them);
- ``jobs``: conversations with work waiting for a free worker slot (drain jobs in ``<prefix>queue``);
- ``dead``: batches that failed ``REDIS_MAX_ATTEMPTS`` times (``<prefix>dead``), for an operator to look at.

The worker autoscaler scales on ``inbox`` (or ``jobs``): a worker mostly waits on the model, so its CPU says little.

``jobs`` and ``dead`` are one command each. ``inbox`` is one ``LLEN`` per conversation with work (10,000
conversations: about half a second on a loaded machine), so one worker at a time counts it (``shared_backlog``):
the one holding ``<prefix>backlog:measurer`` (a key with an expiry, taken with ``SET NX``), which leaves the count
in the hash ``<prefix>backlog`` for the others to report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .backend import RedisBackend

__all__ = ("SCAN_LIMIT", "Backlog", "measure_backlog", "shared_backlog")

SCAN_LIMIT = 10_000
"""Conversations with work whose inbox is counted at most (each is one LLEN, pipelined)."""


@dataclass(frozen=True, kw_only=True)
class Backlog:
    """The fleet's backlog at one moment."""

    inbox: int
    """Inputs waiting in the inboxes, not yet taken by a worker."""
    jobs: int
    """Conversations with work waiting for a worker."""
    dead: int
    """Batches in the dead-letter list."""

    def depths(self) -> dict[str, int]:
        """By the ``queue`` label of ``bots_queue_depth``."""
        return {"inbox": self.inbox, "jobs": self.jobs, "dead": self.dead}


async def measure_backlog(backend: RedisBackend) -> Backlog:
    """Read the backlog (a few round trips, none blocking Redis for long); ``DispatchError`` when Redis is away."""
    keys = backend.keys
    client = backend.client

    async def read() -> Backlog:
        pipe = client.pipeline(transaction=False)
        pipe.zcard(keys.queue)
        pipe.llen(keys.dead)
        pipe.zrange(keys.active, 0, SCAN_LIMIT - 1)
        jobs, dead, active = await pipe.execute()
        inbox = 0
        if active:
            pipe = client.pipeline(transaction=False)
            for cid in active:
                pipe.llen(keys.context(_text(cid)).inbox)
            inbox = sum(int(n) for n in await pipe.execute())
        return Backlog(inbox=inbox, jobs=int(jobs), dead=int(dead))

    result: Backlog = await backend.run(read, what="measuring the backlog", retry_for=0)
    return result


async def shared_backlog(backend: RedisBackend, *, owner: str, every: float) -> Backlog:
    """The backlog as ``measure_backlog`` reads it, ``inbox`` counted by one worker of the fleet at a time: ``owner``
    (this worker's id) counts it while it holds the measurer key (kept for two rounds of ``every`` seconds), the
    others read what it left. ``DispatchError`` when Redis is away."""
    keys = backend.keys
    client = backend.client
    shared, lock = keys.prefix + "backlog", keys.prefix + "backlog:measurer"
    hold_ms = max(1000, int(every * 2000))

    async def mine() -> bool:
        if await client.set(lock, owner, nx=True, px=hold_ms):
            return True
        if _text(await client.get(lock)) == owner:
            await client.pexpire(lock, hold_ms)
            return True
        return False

    async def read_shared() -> tuple[Any, Any, Any]:
        pipe = client.pipeline(transaction=False)
        pipe.hget(shared, "inbox")
        pipe.zcard(keys.queue)
        pipe.llen(keys.dead)
        inbox, jobs, dead = await pipe.execute()
        return inbox, jobs, dead

    if not await backend.run(mine, what="taking the backlog's measure", retry_for=0):
        inbox, jobs, dead = await backend.run(read_shared, what="reading the backlog", retry_for=0)
        if inbox is not None:  # (none yet: the measurer has not counted since it took the key)
            return Backlog(inbox=int(inbox), jobs=int(jobs), dead=int(dead))
    backlog = await measure_backlog(backend)

    async def store() -> None:
        pipe = client.pipeline(transaction=False)
        pipe.hset(shared, mapping={"inbox": backlog.inbox})
        pipe.pexpire(shared, hold_ms * 2)
        await pipe.execute()

    await backend.run(store, what="storing the backlog", retry_for=0)
    return backlog


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
