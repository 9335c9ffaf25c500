"""A Redis memory store: any worker can run any context.

Values are JSON strings. Inside a queued run the writes are held back and committed by the fenced
acknowledgement together with dropping the batch, so a worker that lost its lease cannot overwrite
newer memory, and a batch's effects on memory happen exactly once.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import DispatchError, MemoryStoreError
from .backend import RedisBackend
from .options import QueueConfig
from .scope import current_scope

__all__ = ("RedisMemoryStore",)


class RedisMemoryStore:
    """Context memory and working memory in Redis (``<prefix>{<context id>}:mem:<kind>``)."""

    def __init__(self, backend: RedisBackend | QueueConfig) -> None:
        owns = isinstance(backend, QueueConfig)
        self.backend = RedisBackend(backend) if isinstance(backend, QueueConfig) else backend
        """The connection."""
        self._owns_backend = owns

    def _scoped(self) -> dict[str, str | None] | None:
        scope = current_scope()
        if scope is None or scope.backend is not self.backend:
            return None
        return scope.staged

    async def get(self, key: str) -> Any | None:
        """The value under ``key`` (a write held back by the current run included), or None."""
        rkey = self.backend.keys.memory(key)
        scope = current_scope()
        if scope is not None and scope.backend is self.backend and rkey in scope.staged:
            text = scope.staged[rkey]
        elif scope is not None and scope.backend is self.backend and rkey in scope.loaded:
            text = scope.loaded[rkey]  # read with the batch (under the lease, so no other run wrote it since)
        else:
            try:
                text = await self.backend.run(lambda: self.backend.client.get(rkey), what=f"reading {key}")
            except DispatchError as exc:
                raise MemoryStoreError(str(exc)) from exc
        return None if text is None else json.loads(text)

    async def set(self, key: str, value: Any) -> None:
        """Store ``value`` as JSON; inside a queued run the write waits for the acknowledgement."""
        rkey = self.backend.keys.memory(key)
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        staged = self._scoped()
        if staged is not None:
            staged[rkey] = text
            return
        try:
            await self.backend.run(lambda: self.backend.client.set(rkey, text), what=f"writing {key}")
        except DispatchError as exc:
            raise MemoryStoreError(str(exc)) from exc

    async def delete(self, key: str) -> None:
        """Remove ``key``; inside a queued run the removal waits for the acknowledgement."""
        rkey = self.backend.keys.memory(key)
        staged = self._scoped()
        if staged is not None:
            staged[rkey] = None
            return
        try:
            await self.backend.run(lambda: self.backend.client.delete(rkey), what=f"deleting {key}")
        except DispatchError as exc:
            raise MemoryStoreError(str(exc)) from exc

    async def close(self) -> None:
        """Close the connection if this store opened it."""
        if self._owns_backend:
            await self.backend.close()
