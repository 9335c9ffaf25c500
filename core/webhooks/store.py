"""Where webhook deliveries are remembered and counted: this process's memory (``bots run``) or Redis, shared by
every gateway of a fleet (``core.webhooks.redis_store``), so a delivery sent to two gateways is taken once."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ("MemoryWebhookStore", "WebhookStore")


class WebhookStore(Protocol):
    """Claims of deliveries and counts of requests per source."""

    async def claim(self, keys: Sequence[str], ttl: float) -> bool:
        """Take ``keys`` for ``ttl`` seconds, all or none: False when one of them is taken already."""
        ...

    async def keep(self, keys: Sequence[str], ttl: float) -> None:
        """Hold the claimed ``keys`` for ``ttl`` seconds from now (the delivery was stored)."""
        ...

    async def release(self, keys: Sequence[str]) -> None:
        """Give ``keys`` back (a delivery that could not be queued may be sent again)."""
        ...

    async def hit(self, key: str, window: float) -> int:
        """Count one request under ``key`` in the current window of ``window`` seconds; the count so far."""
        ...


class MemoryWebhookStore:
    """A ``WebhookStore`` in this process's memory (at most ``size`` claims kept)."""

    def __init__(self, *, size: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._claims: dict[str, float] = {}
        self._counts: dict[str, tuple[int, int]] = {}
        self._size = size
        self._clock = clock

    async def claim(self, keys: Sequence[str], ttl: float) -> bool:
        now = self._clock()
        if any(self._claims.get(k, 0.0) > now for k in keys):
            return False
        for key in keys:
            self._claims.pop(key, None)
            self._claims[key] = now + ttl
        while len(self._claims) > self._size:
            self._claims.pop(next(iter(self._claims)))
        return True

    async def keep(self, keys: Sequence[str], ttl: float) -> None:
        now = self._clock()
        for key in keys:
            self._claims[key] = now + ttl

    async def release(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._claims.pop(key, None)

    async def hit(self, key: str, window: float) -> int:
        slot = int(self._clock() // window)
        seen, count = self._counts.get(key, (slot, 0))
        count = count + 1 if seen == slot else 1
        self._counts[key] = (slot, count)
        return count
