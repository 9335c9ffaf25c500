"""A memory store in a dict: for tests and for bots that need no persistence."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ("InMemoryStore",)


class InMemoryStore:
    """Keeps values in a dict. Values are copied on ``set`` so a later change by the caller is not stored."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        """The stored values by key."""

    async def get(self, key: str) -> Any | None:
        """The value under ``key``, or None."""
        return self.data.get(key)

    async def set(self, key: str, value: Any) -> None:
        """Store a copy of ``value``."""
        self.data[key] = copy.deepcopy(value) if isinstance(value, dict | list) else value

    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self.data.pop(key, None)

    async def close(self) -> None:
        """Nothing to release."""
