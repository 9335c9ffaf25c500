"""The memory store protocol: where context memory and working memory live between runs."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ("MemoryStore",)


@runtime_checkable
class MemoryStore(Protocol):
    """An async key-value store of JSON-compatible values.

    Keys are ``context:<context id>`` (the context's memory) and ``working:<context id>`` (its logs).
    Implementations raise ``MemoryStoreError`` on failure.
    """

    async def get(self, key: str) -> Any | None:
        """The value under ``key``, or None."""
        ...

    async def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...
