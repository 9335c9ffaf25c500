"""The task runner: action handlers run in named queues with concurrency limits; the ones nobody waits for
(fire-and-forget calls) are owned here until they finish or the agent stops."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

__all__ = ("TaskRunner", "finish_or_cancel")

T = TypeVar("T")

log = logging.getLogger("core.task_runner")


class TaskRunner:
    """Limits how many handlers run at once, per queue and per key (an action's own limit)."""

    def __init__(self, queues: dict[str, int] | None = None, *, default_limit: int = 8) -> None:
        self.default_limit = default_limit
        """Limit of a queue that was not configured."""
        self._queues = {name: asyncio.Semaphore(limit) for name, limit in (queues or {}).items()}
        self._keys: dict[str, asyncio.Semaphore] = {}
        self._background: set[asyncio.Task[Any]] = set()

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

    def spawn(self, job: Coroutine[Any, Any, Any], *, name: str) -> None:
        """Run ``job`` without anyone waiting for it (a fire-and-forget call): the runner owns the task until
        it ends, logs what it raises, and ``close`` waits for it or cancels it."""
        task = asyncio.create_task(job, name=name)
        self._background.add(task)
        task.add_done_callback(self._ended)

    @property
    def pending(self) -> int:
        """Jobs started with ``spawn`` that have not ended yet."""
        return len(self._background)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background job %s failed", task.get_name(), exc_info=task.exception())

    async def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the jobs started with ``spawn``, then cancel the rest and wait
        for them to end (the agent is stopping: no job outlives it)."""
        await finish_or_cancel(self._background, timeout)


async def finish_or_cancel(tasks: Iterable[asyncio.Task[Any]], timeout: float) -> set[asyncio.Task[Any]]:
    """Let ``tasks`` end within ``timeout`` seconds, then cancel the rest and wait for them to end (a bounded
    stop: nothing outlives its owner). Returns the tasks that had to be cancelled."""
    running = set(tasks)
    if not running:
        return set()
    _, late = await asyncio.wait(running, timeout=timeout)
    for task in late:
        task.cancel()
    if late:
        await asyncio.wait(late)
    return late
