"""A named single-holder lease: one Telegram poller per bot token across any number of gateways.

``async with PlatformLock(backend, "telegram:<token hash>") as lock:`` (or ``acquire()`` / ``release()``)
waits (standby) until this process holds the name, renews it in the background and releases it on exit.
If a renewal is refused or cannot be made before the lease runs out, ``lock.lost`` is set: the holder
must stop polling at once (another gateway may take over after ``ttl``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from types import TracebackType

from ..errors import DispatchError
from .backend import RedisBackend

__all__ = ("PlatformLock",)

log = logging.getLogger("core.fleet.lock")


class PlatformLock:
    """A lease on ``name`` held by one process at a time."""

    def __init__(self, backend: RedisBackend, name: str, *, ttl: float = 10.0) -> None:
        self.backend = backend
        """The connection."""
        self.name = name
        """What is locked (never a secret: hash tokens before using them here)."""
        self.ttl = ttl
        """Seconds the lease lasts without renewal."""
        self.key = backend.keys.lock(name)
        """The Redis key."""
        self.value = f"{os.getpid()}:{uuid.uuid4().hex}"
        """This holder's value (only the holder's renewals and release are accepted)."""
        self.lost = asyncio.Event()
        """Set when the lease is lost while held."""
        self.deadline = 0.0
        """``time.monotonic()`` until which the lease is surely held."""
        self._renewer: asyncio.Task[None] | None = None

    async def try_acquire(self) -> bool:
        """Take the lease if nobody holds it."""
        sent = time.monotonic()
        client = self.backend.client
        ok = await self.backend.run(
            lambda: client.set(self.key, self.value, nx=True, px=int(self.ttl * 1000)),
            what=f"taking the {self.name} lock",
        )
        if ok:
            self.deadline = sent + self.ttl * 0.9
        return bool(ok)

    async def acquire(self, *, poll: float | None = None) -> None:
        """Wait until this process holds the lease (a standby gateway waits here), then keep renewing it
        in a task this lock owns until ``release()``."""
        every = poll if poll is not None else max(0.05, self.ttl / 5)
        announced = False
        while not await self.try_acquire():
            if not announced:
                log.info("%s is held by another process; standing by", self.name)
                announced = True
            await asyncio.sleep(every)
        self.lost.clear()
        self._renewer = asyncio.create_task(self._renew(), name=f"lock:{self.name}")

    async def _renew(self) -> None:
        b = self.backend
        while True:
            await asyncio.sleep(self.ttl / 3)
            sent = time.monotonic()
            try:
                ok = await b.call(
                    b.release_lock,
                    [self.key],
                    [self.value, int(self.ttl * 1000)],
                    what=f"renewing the {self.name} lock",
                    retry_for=max(0.0, self.deadline - sent),
                )
            except DispatchError as exc:
                if time.monotonic() < self.deadline:
                    continue
                log.warning("%s lock: %s", self.name, exc)
                ok = 0
            if not ok:
                log.warning("%s lock lost: stop using it", self.name)
                self.lost.set()
                return
            self.deadline = sent + self.ttl * 0.9

    async def release(self) -> None:
        """Stop renewing and give the lease up (only if still ours)."""
        if self._renewer is None:
            return
        self._renewer.cancel()
        await asyncio.gather(self._renewer, return_exceptions=True)
        self._renewer = None
        if self.lost.is_set():
            return
        b = self.backend
        try:
            await b.call(
                b.release_lock, [self.key], [self.value, 0], what=f"releasing the {self.name} lock", retry_for=0
            )
        except DispatchError as exc:
            log.warning("%s lock not released (%s); it expires in %.0fs", self.name, exc, self.ttl)

    async def __aenter__(self) -> PlatformLock:
        await self.acquire()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release()
