"""The task runner: action handlers run in named queues with concurrency limits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ("TaskRunner",)

T = TypeVar("T")


class TaskRunner:
    """Limits how many handlers run at once, per queue and per key (an action's own limit)."""

    def __init__(self, queues: dict[str, int] | None = None, *, default_limit: int = 8) -> None:
        self.default_limit = default_limit
        """Limit of a queue that was not configured."""
        self._queues = {name: asyncio.Semaphore(limit) for name, limit in (queues or {}).items()}
        self._keys: dict[str, asyncio.Semaphore] = {}

    async def run(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        queue: str = "main",
        key: str | None = None,
        limit: int | None = None,
    ) -> T:
        """Run ``fn()`` when the queue (and the key, if a limit is given) has room."""
        sem = self._queues.get(queue)
        if sem is None:
            sem = self._queues[queue] = asyncio.Semaphore(self.default_limit)
        async with sem:
            if key is None or limit is None:
                return await fn()
            key_sem = self._keys.get(key)
            if key_sem is None:
                key_sem = self._keys[key] = asyncio.Semaphore(limit)
            async with key_sem:
                return await fn()
