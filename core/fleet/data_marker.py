"""A Redis that lost the fleet's data, noticed. Nothing in Redis says it lost its data: a server that came back
without them (its volume lost, or persistence off) and was kept as the primary, or a flush, leaves an empty Redis
the fleet goes on with, the inputs waiting and the batches in hand gone without a word. So the data carry a marker,
the hash ``bots:fleet:data`` (``id``: random, written once; ``written``: when), which the first process to find it
missing writes. Each gateway and worker remembers the ``id`` it first read and reads it again at every readiness
check (every few seconds): another one, or none, means the data it worked with are gone. It says so once (an ERROR
line and ``bots_redis_data_lost_total``, which an alert rule reads) and notes when in the marker (``lost``) for
``bots doctor``."""

from __future__ import annotations

import time
import uuid
from typing import Any

__all__ = ("LOST", "DataMarker")

LOST = "Redis lost the fleet's data"
"""How the loss is named wherever it is reported (the alert rule's summary starts with it too)."""

WHAT_TO_DO = (
    "check the Redis servers' volumes and that AOF is on (appendonly yes), and the Redis and sentinel logs for a "
    "server that came back empty (docs/how-to/deploy.md, Redis's data)"
)


class DataMarker:
    """The marker of the fleet's data under ``prefix``."""

    def __init__(self, *, prefix: str = "bots:") -> None:
        self.key = prefix + "fleet:data"
        self.seen: str | None = None
        """The marker's ``id`` as this process last read it; None before its first reading."""

    async def check(self, client: Any) -> str | None:
        """Read the marker (writing it when missing); what happened, once, when it is not the one read before."""
        mark = await client.hget(self.key, "id")
        if mark is None:
            await client.hsetnx(self.key, "id", uuid.uuid4().hex)  # one writer wins; every process reads its id
            await client.hsetnx(self.key, "written", f"{time.time():.3f}")
            mark = await client.hget(self.key, "id")
        before, self.seen = self.seen, mark
        if before is None or mark == before:
            return None
        await client.hset(self.key, "lost", f"{time.time():.3f}")
        return (
            f"{LOST}: the marker {self.key} this process read is gone (a Redis server came back without its data "
            f"and serves as the primary, or Redis was flushed): the inputs waiting and the batches in hand then are "
            f"lost; {WHAT_TO_DO}"
        )

    async def report(self, client: Any, *, recent: float = 86400.0) -> str | None:
        """What ``bots doctor`` says of the marker: a process found it replaced within ``recent`` seconds."""
        lost = float(await client.hget(self.key, "lost") or 0)
        if not lost or time.time() - lost >= recent:
            return None
        minutes = max(0.0, time.time() - lost) / 60
        return f"{LOST} about {minutes:.0f} minutes ago (a process found the marker {self.key} replaced); {WHAT_TO_DO}"
