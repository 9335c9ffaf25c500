"""A run's events as an async iterator (``Agent.stream``): the run goes on in a task that reports each event to a
listener, and the iterator yields them as they come."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal

from .events import RunEvent, RunEventType

__all__ = ("Switched", "events_of")

Listener = Callable[[RunEvent], None]

Switched = Literal["type", "item"]
"""What ``is_type_switched`` marks in a stream: ``"type"``, the first event of a new type among those the stream
yields (the Ailoy format to the letter); ``"item"``, where a new box opens (``RunEvent.new_item``: each new output,
every tool call and result)."""


async def events_of(
    start: Callable[[Listener], Awaitable[None]], *, reasoning: bool, switched: Switched = "type"
) -> AsyncIterator[RunEvent]:
    """Run ``start(listener)`` in a task and yield what it reports until it ends or reports an error; without
    ``reasoning``, the model's reasoning events are left out (and ``is_type_switched`` counts only what is yielded).
    Leaving early waits for the run (it is not cut), and the run's own exception is raised here."""
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()

    async def drive() -> None:
        try:
            await start(queue.put_nowait)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(drive())
    last: RunEventType | None = None
    try:
        while True:
            event = await queue.get()
            if event is None:
                break
            if event.type is RunEventType.REASONING and not reasoning:
                continue
            flag = event.new_item if switched == "item" else event.type is not last
            if flag is not event.is_type_switched:
                event = dataclasses.replace(event, is_type_switched=flag)
            last = event.type
            yield event
            if event.type is RunEventType.ERROR:
                break
    finally:
        if not task.done():
            await asyncio.shield(task)
        task.result()
