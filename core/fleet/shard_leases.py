"""Dividing a platform's shards among any number of gateway processes: leases with fencing tokens.

A Discord bot's events arrive over ``count`` gateway connections (shards). ``ShardLeases`` makes each
shard held by at most one process at a time and spreads them fairly:

- every process beats a heartbeat (``<prefix>shards:<name>:members``, a sorted set of live holders scored by
  when they expire) and renews the leases it holds in the same script, every ``ttl / 3``;
- its fair share is ``ceil(count / live processes)``: below it, it takes free shards one at a time (each
  lease holds ``"<fencing token>|<holder>"``, the token counted per shard in ``...fences``); above it (a
  process joined), it gives shards back: the connection is closed first, then the lease is deleted, so a
  shard is never connected by two processes;
- a lease that is not renewed (the process died, was paused or lost Redis) expires after ``ttl``; its holder
  closes the shard as soon as it cannot be sure the lease is still its own (``deadline``), before anyone
  else may take it. A renewal refused because the token changed drops the shard at once.

``IdentifySlots`` spaces the IDENTIFYs of all processes: Discord allows ``max_concurrency`` of them per
``interval`` (5 s), one per bucket ``shard % max_concurrency``; a slot is a Redis key that lives
``interval``.

The owner supplies ``connect(shard)`` (open the shard's connection; return once it is launched) and
``disconnect(shard)`` (close it; return once it is closed).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..errors import ConfigError, DispatchError
from .backend import RedisBackend

__all__ = ("IdentifySlots", "ShardLeases")

log = logging.getLogger("core.fleet.shard_leases")

ShardCall = Callable[[int], Awaitable[None]]


@dataclass(kw_only=True)
class _Held:
    value: str
    """``"<fencing token>|<holder>"`` as stored in the lease."""
    token: int
    """The fencing token of this holding."""


class ShardLeases:
    """Holds a fair share of shards ``0 .. count - 1`` of ``name`` while ``run()`` runs."""

    def __init__(
        self,
        backend: RedisBackend,
        name: str,
        *,
        count: int,
        ttl: float,
        connect: ShardCall,
        disconnect: ShardCall,
        retry_pause: float = 1.0,
    ) -> None:
        if count < 1:
            raise ConfigError(f"ShardLeases(count={count}): a shard count must be at least 1")
        self.backend = backend
        """The connection."""
        self.name = name
        """Whose shards (never a secret: a hash of the token)."""
        self.count = count
        """How many shards there are."""
        self.ttl = ttl
        """Seconds a lease (and a process's membership) lasts without renewal."""
        self.holder = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        """This process's name in the leases."""
        self.members = 1
        """Live gateway processes at the last heartbeat (this one included)."""
        self.deadline = 0.0
        """``time.monotonic()`` until which the held leases are surely still this process's."""
        self.changed = asyncio.Event()
        """Set whenever the held shards change (tests and metrics wait on it)."""
        self.settled = asyncio.Event()
        """Set once this process holds its fair share (or every shard it could take): startup is over."""
        self._connect, self._disconnect = connect, disconnect
        self._retry_pause = retry_pause
        self._held: dict[int, _Held] = {}
        self._wake = asyncio.Event()
        prefix = backend.keys.shards(name)
        self._members_key = prefix + "members"
        self._fences_key = prefix + "fences"
        self._lease_prefix = prefix + "lease:"

    @property
    def held(self) -> list[int]:
        """The shards this process holds, in order."""
        return sorted(self._held)

    @property
    def share(self) -> int:
        """How many shards this process should hold: ``ceil(count / live processes)``."""
        return math.ceil(self.count / max(1, self.members))

    def lease_key(self, shard: int) -> str:
        """The Redis key of one shard's lease."""
        return f"{self._lease_prefix}{shard}"

    async def run(self) -> None:
        """Heartbeat, renew, take and give back shards until cancelled; then close every held shard and
        give its lease back. A ``ConfigError`` from ``connect`` (a token refused) ends it."""
        try:
            try:
                await self._beat()
            except DispatchError as exc:  # Redis is down: the heartbeats keep trying
                log.warning("%s: cannot join the gateways yet: %s", self.name, exc)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._heartbeats(), name=f"shards:{self.name}:heartbeat")
                tg.create_task(self._balance(), name=f"shards:{self.name}:balance")
        finally:
            await asyncio.shield(self._give_back_all())

    # -- heartbeat -------------------------------------------------------------------------------------

    async def _beat(self) -> None:
        """One heartbeat: membership and every held lease renewed; shards whose lease was lost are closed."""
        b = self.backend
        held = dict(self._held)
        shards = list(held)
        sent = time.monotonic()
        members, lost = await b.call(
            b.shard_renew,
            [self._members_key, *(self.lease_key(s) for s in shards)],
            [self.holder, int(self.ttl * 1000), *(held[s].value for s in shards)],
            what=f"renewing the {self.name} shard leases",
            retry_for=max(0.0, self.deadline - sent) if self._held else None,
        )
        self.deadline = sent + self.ttl * 0.9
        previous, self.members = self.members, int(members)
        if self.members != previous:
            log.info(
                "%s: %d gateway processes share %d shards (%d each at most)",
                self.name,
                self.members,
                self.count,
                self.share,
            )
            self._wake.set()
        for index in lost:
            shard = shards[int(index) - 1]
            if self._held.get(shard) is held[shard]:
                log.warning("%s shard %d: lease lost (another process holds it); closing it", self.name, shard)
                await self._drop(shard, release=False)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                await self._beat()
            except DispatchError as exc:
                if self._held and time.monotonic() >= self.deadline:
                    log.warning("%s: shard leases may have expired (%s); closing every shard", self.name, exc)
                    for shard in self.held:
                        await self._drop(shard, release=False)

    # -- balance ---------------------------------------------------------------------------------------

    async def _balance(self) -> None:
        while True:
            self._wake.clear()
            try:
                acted = await self._step()
            except DispatchError as exc:
                log.warning("%s: cannot take shards now: %s", self.name, exc)
                acted = False
            if not acted:
                self.settled.set()
                try:
                    async with asyncio.timeout(self.ttl / 3):
                        await self._wake.wait()
                except TimeoutError:
                    pass

    async def _step(self) -> bool:
        """Take or give back one shard toward the fair share; False when there is nothing to do."""
        if not self._held and time.monotonic() >= self.deadline:
            await self._beat()  # standing by through a Redis outage: be counted again before taking shards
        share = self.share
        if len(self._held) > share:
            shard = max(self._held)
            log.info(
                "%s shard %d: given back (%d processes share %d shards)", self.name, shard, self.members, self.count
            )
            await self._drop(shard, release=True)
            return True
        if len(self._held) >= share:
            return False
        b = self.backend
        keys = [self.lease_key(s) for s in range(self.count)]
        current = await b.run(lambda: b.client.mget(keys), what=f"reading the {self.name} shard leases")
        free = [s for s, value in enumerate(current) if value is None]
        if not free:
            return False
        shard = random.choice(free)
        token = await b.call(
            b.shard_take,
            [self.lease_key(shard), self._fences_key],
            [shard, self.holder, int(self.ttl * 1000)],
            what=f"taking {self.name} shard {shard}",
        )
        if not token:
            return True  # another process was faster: look again
        self._held[shard] = _Held(value=f"{token}|{self.holder}", token=int(token))
        log.info("%s shard %d: taken (fencing token %s); connecting", self.name, shard, token)
        self.changed.set()
        try:
            await self._connect(shard)
        except ConfigError:
            await self._drop(shard, release=True)
            raise
        except Exception as exc:
            log.warning("%s shard %d: could not connect (%s); giving it back", self.name, shard, exc)
            await self._drop(shard, release=True)
            await asyncio.sleep(self._retry_pause)
        return True

    async def _drop(self, shard: int, *, release: bool) -> None:
        """Close ``shard``, then (``release``) delete its lease if it still holds this process's token."""
        held = self._held.pop(shard, None)
        if held is None:
            return
        self.changed.set()
        try:
            await self._disconnect(shard)
        except Exception as exc:
            log.warning("%s shard %d: closing failed: %s", self.name, shard, exc)
        if not release:
            return
        b = self.backend
        try:
            await b.call(
                b.release_lock,
                [self.lease_key(shard)],
                [held.value, 0],
                what=f"giving back {self.name} shard {shard}",
                retry_for=0,
            )
        except DispatchError as exc:
            log.warning("%s shard %d: lease not given back (%s); it expires in %.0fs", self.name, shard, exc, self.ttl)
        self._wake.set()

    async def _give_back_all(self) -> None:
        for shard in self.held:
            await self._drop(shard, release=True)
        b = self.backend
        try:
            await b.run(lambda: b.client.zrem(self._members_key, self.holder), what="leaving the gateways", retry_for=0)
        except DispatchError as exc:
            log.debug("%s: membership not removed (%s); it expires in %.0fs", self.name, exc, self.ttl)


class IdentifySlots:
    """One IDENTIFY per ``interval`` seconds per bucket (``shard % max_concurrency``), across processes."""

    def __init__(self, backend: RedisBackend, name: str, *, max_concurrency: int, interval: float) -> None:
        self.backend = backend
        """The connection."""
        self.max_concurrency = max(1, max_concurrency)
        """Discord's ``session_start_limit.max_concurrency``: buckets that may identify at the same time."""
        self.interval = interval
        """Seconds between two IDENTIFYs of one bucket (``DISCORD_IDENTIFY_INTERVAL``, 5 on Discord)."""
        self._prefix = backend.keys.shards(name) + "identify:"
        self._value = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"

    async def wait(self, shard: int) -> None:
        """Return once ``shard`` may send its IDENTIFY (its bucket's slot is taken for ``interval``)."""
        b = self.backend
        key = f"{self._prefix}{shard % self.max_concurrency}"
        ms = max(1, int(self.interval * 1000))
        while True:
            taken = await b.run(lambda: b.client.set(key, self._value, nx=True, px=ms), what="taking an identify slot")
            if taken:
                return
            left = await b.run(lambda: b.client.pttl(key), what="reading an identify slot")
            await asyncio.sleep(max(0.01, (left if left and left > 0 else 10) / 1000))
