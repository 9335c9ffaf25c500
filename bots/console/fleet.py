"""The fleet as Redis holds it, for the console: the processes alive (their presence leases), the queue, the
conversations with work and their oldest waiting message, the dead-letter list (run a batch again, or drop it),
and the Discord shards held.

Every process of a fleet (``bots gateway``, ``bots worker``) keeps a presence lease, a member of the sorted set
``<prefix>presence`` scored by when it expires, renewed every ``PRESENCE_EVERY`` seconds (``Presence``). A process
that stops renewing drops off the page within ``PRESENCE_TTL`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.events import RunEvent

__all__ = (
    "PRESENCE_EVERY",
    "PRESENCE_TTL",
    "DeadBatch",
    "FleetSnapshot",
    "FleetView",
    "Member",
    "Presence",
    "RunEventRelay",
)

log = logging.getLogger("bots.console")

PRESENCE_EVERY = 5.0
"""Seconds between two renewals of a process's presence."""
PRESENCE_TTL = 15.0
"""Seconds a presence lasts without renewal."""
SCAN_ACTIVE = 500
"""Conversations with work looked at for the oldest waiting message at most."""
WATCH_TTL = 30.0
"""Seconds a console's interest in a conversation's run events lasts unless renewed (``FleetView.follow``)."""
WATCH_EVERY = 2.0
"""Seconds between two looks of a worker at the conversations watched (``RunEventRelay``)."""


@dataclass(frozen=True, kw_only=True)
class Member:
    """A process of the fleet, from its presence lease."""

    role: str
    """``gateway``, ``worker`` or ``run``."""
    id: str
    """Its id (host, pid and a random part)."""
    host: str
    """The machine."""
    started: float
    """When it started (seconds since the epoch)."""
    expires_in: float
    """Seconds before its lease expires unless renewed."""
    version: str = ""
    """The project's version it runs (empty: a process of a version before it was announced)."""
    entry_format: int = 0
    """The newest inbox entry format it reads and writes (``core.fleet.entry_format``; 0: not announced)."""


@dataclass(frozen=True, kw_only=True)
class DeadBatch:
    """A batch that failed ``REDIS_MAX_ATTEMPTS`` times."""

    cid: str
    """Its conversation."""
    id: str
    """The batch's number in its conversation."""
    messages: int
    """Inputs in it."""
    first_ts: float
    """When its oldest input was stored (seconds since the epoch; 0 if unknown)."""
    raw: str = field(repr=False)
    """The list element, exactly (to remove it)."""


@dataclass(kw_only=True)
class FleetSnapshot:
    """What the fleet page shows."""

    members: list[Member] = field(default_factory=list)
    queue_depth: int = 0
    """Drain jobs waiting for a worker."""
    active: int = 0
    """Conversations with work (waiting or running)."""
    waiting: int = 0
    """Messages waiting in the inboxes looked at."""
    oldest_wait: float | None = None
    """Seconds the oldest waiting message has waited (None: nothing waits)."""
    dead: list[DeadBatch] = field(default_factory=list)
    shards: list[tuple[str, int, int]] = field(default_factory=list)
    """``(bot, gateways alive, shard leases held)`` per Discord bot and shard count."""
    error: str | None = None
    """Why Redis could not be read."""


def _dead(raw: str) -> DeadBatch | None:
    try:
        item = json.loads(raw)
        entries = item.get("entries") or []
        first = min((float(e.get("t", 0)) for e in entries if isinstance(e, dict)), default=0.0)
        return DeadBatch(cid=str(item["cid"]), id=str(item["id"]), messages=len(entries), first_ts=first, raw=raw)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class FleetView:
    """Reads the fleet's state from Redis (``client``: redis.asyncio, decoded responses) under ``prefix``."""

    def __init__(self, client: Any, *, prefix: str, dispatcher: Any = None) -> None:
        self.client = client
        self.prefix = prefix
        self.dispatcher = dispatcher
        """A ``core.fleet.RedisDispatcher`` on the same Redis: a dead batch run again is ingested through it."""

    async def snapshot(self) -> FleetSnapshot:
        """The fleet now (``error`` set when Redis cannot be read)."""
        snap = FleetSnapshot()
        try:
            async with asyncio.timeout(5.0):
                await self._read(snap)
        except Exception as exc:
            snap.error = f"{type(exc).__name__}: {exc}"[:200]
        return snap

    async def _read(self, snap: FleetSnapshot) -> None:
        c, p = self.client, self.prefix
        now_ms = time.time() * 1000
        await c.zremrangebyscore(f"{p}presence", "-inf", now_ms)
        for member, score in await c.zrange(f"{p}presence", 0, -1, withscores=True):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                info = json.loads(member)
                snap.members.append(
                    Member(
                        role=str(info["role"]),
                        id=str(info["id"]),
                        host=str(info.get("host", "")),
                        started=float(info.get("started", 0)),
                        expires_in=max(0.0, (float(score) - now_ms) / 1000),
                        version=str(info.get("version", "")),
                        entry_format=int(info.get("format", 0)),
                    )
                )
        snap.members.sort(key=lambda m: (m.role, m.id))
        snap.queue_depth = int(await c.zcard(f"{p}queue"))
        snap.active = int(await c.zcard(f"{p}active"))
        now = time.time()
        for cid in await c.zrange(f"{p}active", 0, SCAN_ACTIVE - 1):
            inbox = f"{p}{{{cid}}}:inbox"
            length = int(await c.llen(inbox))
            snap.waiting += length
            if not length:
                continue
            first = await c.lindex(inbox, 0)
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                waited = now - float(json.loads(first).get("t", now))
                snap.oldest_wait = waited if snap.oldest_wait is None else max(snap.oldest_wait, waited)
        for raw in await c.lrange(f"{p}dead", 0, -1):
            batch = _dead(raw)
            if batch is not None:
                snap.dead.append(batch)
        async for key in c.scan_iter(match=f"{p}shards:*:members", count=200):
            name = key[len(f"{p}shards:") : -len(":members")]
            alive = int(await c.zcount(key, now_ms, "+inf"))
            leases = 0
            async for _ in c.scan_iter(match=f"{p}shards:{name}:lease:*", count=200):
                leases += 1
            snap.shards.append((name, alive, leases))

    async def follow(self, cid: str, put: Callable[[dict[str, Any]], None]) -> None:
        """The live tail across the fleet: mark ``cid`` as watched (workers then publish its run events on
        ``<prefix>tail:<cid>``) and hand each event to ``put`` until cancelled."""
        watched = f"{self.prefix}tail:watched"

        async def renew() -> None:
            while True:
                await self.client.zadd(watched, {cid: time.time() * 1000 + WATCH_TTL * 1000})
                await asyncio.sleep(WATCH_TTL / 3)

        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        async with contextlib.aclosing(pubsub), asyncio.TaskGroup() as tg:
            await pubsub.subscribe(f"{self.prefix}tail:{cid}")
            renewing = tg.create_task(renew())
            try:
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        with contextlib.suppress(ValueError, TypeError):
                            put(dict(json.loads(message["data"])))
            finally:
                renewing.cancel()

    async def _take_dead(self, cid: str, batch_id: str) -> DeadBatch | None:
        for raw in await self.client.lrange(f"{self.prefix}dead", 0, -1):
            batch = _dead(raw)
            if batch is not None and batch.cid == cid and batch.id == batch_id:
                removed = await self.client.lrem(f"{self.prefix}dead", 1, raw)
                return batch if removed else None
        return None

    async def drop(self, cid: str, batch_id: str) -> bool:
        """Remove a dead batch for good; False when it is not there (already dropped or run again)."""
        return await self._take_dead(cid, batch_id) is not None

    async def run_again(self, cid: str, batch_id: str) -> int:
        """Put a dead batch's inputs back in its conversation's inbox (a worker answers them like new ones);
        returns how many. The batch leaves the dead-letter list first, so two presses run it once."""
        if self.dispatcher is None:
            raise RuntimeError("no dispatcher to run a dead batch again")
        batch = await self._take_dead(cid, batch_id)
        if batch is None:
            return 0
        entries = json.loads(batch.raw)["entries"]
        for entry in entries:
            await self.dispatcher.ingest(cid, json.dumps(entry, separators=(",", ":"), ensure_ascii=False))
        return len(entries)


class Presence:
    """This process's presence lease in the fleet, renewed in a task it owns."""

    def __init__(self, client: Any, *, prefix: str, role: str) -> None:
        self.client = client
        self.prefix = prefix
        host = socket.gethostname()
        self.id = f"{host}:{os.getpid()}:{os.urandom(3).hex()}"
        """This process's id in the fleet (a gateway's web pages are reached through it)."""
        from core.fleet.entry_format import ENTRY_FORMAT

        from ..version import version

        self.member = json.dumps(
            {
                "role": role,
                "id": self.id,
                "host": host,
                "started": time.time(),
                "version": version(),
                "format": ENTRY_FORMAT,
            },
            separators=(",", ":"),
        )
        """What this process is, as the console shows it."""
        self._task: asyncio.Task[None] | None = None

    async def beat(self) -> None:
        """Renew the lease once."""
        await self.client.zadd(f"{self.prefix}presence", {self.member: time.time() * 1000 + PRESENCE_TTL * 1000})

    async def _loop(self) -> None:
        while True:
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("could not renew this process's presence in Redis: %s", exc)
            await asyncio.sleep(PRESENCE_EVERY)

    async def start(self) -> None:
        """Beat now and every ``PRESENCE_EVERY`` seconds."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="presence")

    async def stop(self) -> None:
        """Stop beating and leave the fleet's list at once."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(Exception):
            await self.client.zrem(f"{self.prefix}presence", self.member)


class RunEventRelay:
    """A worker's side of the live tail: the run events of the conversations a console watches, published on
    ``<prefix>tail:<cid>`` (an agent event listener, and a task it owns)."""

    def __init__(self, client: Any, *, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.watched: frozenset[str] = frozenset()
        """The conversations some console watches (looked up every ``WATCH_EVERY`` seconds)."""
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue(1000)
        self._task: asyncio.Task[None] | None = None

    def on_event(self, event: RunEvent) -> None:
        """The agent's event listener (synchronous, never raises)."""
        if event.context_id not in self.watched:
            return
        from .data import tail_item

        item = json.dumps(tail_item(event), separators=(",", ":"))  # ASCII: a lone surrogate is escaped
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait((event.context_id, item))

    async def _look(self) -> None:
        while True:
            try:
                now = time.time() * 1000
                key = f"{self.prefix}tail:watched"
                await self.client.zremrangebyscore(key, "-inf", now)
                self.watched = frozenset(await self.client.zrange(key, 0, -1))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("could not read the watched conversations: %s", exc)
            await asyncio.sleep(WATCH_EVERY)

    async def _publish(self) -> None:
        while True:
            cid, item = await self._queue.get()
            try:
                await self.client.publish(f"{self.prefix}tail:{cid}", item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("a run event for the live tail was dropped: %s", exc)

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._look())
            tg.create_task(self._publish())

    async def start(self) -> None:
        """Start looking and publishing."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="run-event-relay")

    async def stop(self) -> None:
        """Stop."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
