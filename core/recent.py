"""``Recent``: a mapping that keeps what was kept last, up to a number of entries (the oldest leave first): the
caches of things read from a store that a process keeps between runs (a conversation's facts, its summary, its
chat settings)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

__all__ = ("Recent",)

K = TypeVar("K")
V = TypeVar("V")


class Recent(OrderedDict[K, V]):
    """At most ``size`` entries, the least recently kept or used leaving first."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        """Entries kept at most."""

    def keep(self, key: K, value: V) -> None:
        """``value`` for ``key``, now the most recent; the oldest leave past ``size``."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)

    def used(self, key: K) -> V | None:
        """What is kept for ``key`` (now the most recent), or None."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value
