"""The backlog of the fleet, measured by every worker every few seconds for ``bots_queue_depth``.

Three depths, each a label ``queue`` of the gauge:

- ``inbox``: inputs stored by the gateways and not yet taken by a worker, all conversations (the length of the
  inbox of each conversation with work, ``<prefix>active``; the first ``SCAN_LIMIT`` of them);
- ``jobs``: conversations with work waiting for a free worker slot (drain jobs in ``<prefix>queue``);
- ``dead``: batches that failed ``REDIS_MAX_ATTEMPTS`` times (``<prefix>dead``), for an operator to look at.

The worker autoscaler scales on ``inbox`` (or ``jobs``): a worker mostly waits on the model, so its CPU says little.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .backend import RedisBackend

__all__ = ("SCAN_LIMIT", "Backlog", "measure_backlog")

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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
