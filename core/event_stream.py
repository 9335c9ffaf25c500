"""A run's events as an async iterator (``Agent.stream``): the run goes on in a task that reports each event to a
listener, and the iterator yields them as they come."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from .events import RunEvent, RunEventType

__all__ = ("events_of",)

Listener = Callable[[RunEvent], None]


async def events_of(start: Callable[[Listener], Awaitable[None]], *, reasoning: bool) -> AsyncIterator[RunEvent]:
    """Run ``start(listener)`` in a task and yield what it reports until it ends or reports an error; without
    ``reasoning``, the model's reasoning events are left out. Leaving early waits for the run (it is not cut), and
    the run's own exception is raised here."""
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()

    async def drive() -> None:
        try:
            await start(queue.put_nowait)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(drive())
    try:
        while True:
            event = await queue.get()
            if event is None:
                break
            if event.type == RunEventType.REASONING and not reasoning:
                continue
            yield event
            if event.type == RunEventType.ERROR:
                break
    finally:
        if not task.done():
            await asyncio.shield(task)
        task.result()
