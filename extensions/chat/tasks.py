"""The tasks a chat adapter answers messages in: owned, traced, and ended with the adapter.

An adapter decides on each incoming message at once and answers it in a task, so one slow conversation
never holds up the platform's event loop. ``MessageTasks`` owns those tasks: each runs with the message's
correlation id (``core.trace``) on every log line down to the reply, a failure is logged, and the adapter
waits for them (``wait``) or, when it stops, gives them a bounded time before cancelling them (``close``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Coroutine
from typing import Any

from core.task_runner import finish_or_cancel
from core.trace import correlation_id

__all__ = ("MessageTasks",)


class MessageTasks:
    """Tasks answering messages, each with its message's correlation id."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        """Where a failed task is reported."""
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str, correlation: str) -> asyncio.Task[None]:
        """Run ``coro`` in an owned task whose log lines (and the run it starts) carry ``correlation``; the
        task is returned for those who want to know when it ends (it stays owned here)."""
        context = contextvars.copy_context()
        context.run(correlation_id.set, correlation)
        task = asyncio.create_task(coro, name=name, context=context)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("%s failed", task.get_name(), exc_info=task.exception())

    async def wait(self) -> None:
        """Return once every task spawned so far, and every task those spawned, has ended."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self, *, timeout: float) -> None:
        """Give the tasks ``timeout`` seconds to end, then cancel the rest and wait for them."""
        await finish_or_cancel(self._tasks, timeout)
