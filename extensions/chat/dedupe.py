"""Remembering recent platform ids so a redelivered event is answered once."""

from __future__ import annotations

import time
from collections import OrderedDict

__all__ = ("RecentIds",)


class RecentIds:
    """A bounded, time-limited set of ids. ``add`` returns False for an id already seen."""

    def __init__(self, *, size: int = 10_000, ttl: float = 3600.0) -> None:
        self.size = size
        """At most this many ids are remembered."""
        self.ttl = ttl
        """Seconds an id is remembered."""
        self._ids: OrderedDict[str, float] = OrderedDict()

    def add(self, key: str) -> bool:
        """Remember ``key``; False if it was already remembered (a duplicate)."""
        now = time.monotonic()
        while self._ids:
            oldest, at = next(iter(self._ids.items()))
            if now - at <= self.ttl and len(self._ids) < self.size:
                break
            del self._ids[oldest]
        if key in self._ids:
            return False
        self._ids[key] = now
        return True

    def __contains__(self, key: str) -> bool:
        return key in self._ids
