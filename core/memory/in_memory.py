"""A memory store in a dict: for tests and for bots that need no persistence."""

from __future__ import annotations

from typing import Any

__all__ = ("InMemoryStore",)


class InMemoryStore:
    """Keeps values in a dict, as given: callers pass values they no longer change (the agent stores fresh
    dumps), so nothing is copied and a save costs the same whatever the size of the value."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        """The stored values by key."""

    async def get(self, key: str) -> Any | None:
        """The value under ``key``, or None."""
        return self.data.get(key)

    async def set(self, key: str, value: Any) -> None:
        """Store ``value``."""
        self.data[key] = value

    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        self.data.pop(key, None)

    async def close(self) -> None:
        """Nothing to release."""
