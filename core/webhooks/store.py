"""Where webhook deliveries are remembered and counted: this process's memory (``bots run``) or Redis, shared by
every gateway of a fleet (``core.webhooks.redis_store``), so a delivery sent to two gateways is taken once."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ("MemoryWebhookStore", "WebhookStore", "sliding")


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

    async def hit(self, key: str, window: float) -> float:
        """Count one request under ``key``; the requests of the last ``window`` seconds, this one included
        (``sliding``)."""
        ...


def sliding(count: int, before: int, now: float, window: float) -> float:
    """The requests of the last ``window`` seconds, from the counts of two fixed windows: ``count`` in the window
    ``now`` is in, ``before`` in the one before it, taken in the part of it still within ``window`` seconds (as if
    its requests came evenly). Counted by the fixed window alone, a source could send twice the limit across a
    window's turn."""
    return count + before * (1.0 - (now % window) / window)


class MemoryWebhookStore:
    """A ``WebhookStore`` in this process's memory (at most ``size`` claims kept)."""

    def __init__(self, *, size: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._claims: dict[str, float] = {}
        self._counts: dict[str, tuple[int, int, int]] = {}
        """Source -> its window, the requests in it, those in the window before."""
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

    async def hit(self, key: str, window: float) -> float:
        now = self._clock()
        slot = int(now // window)
        seen, count, before = self._counts.get(key, (slot, 0, 0))
        if seen != slot:
            count, before = 0, count if seen == slot - 1 else 0
        self._counts[key] = (slot, count + 1, before)
        return sliding(count + 1, before, now, window)
