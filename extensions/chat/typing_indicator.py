"""Keeping a platform's "typing..." indicator alive for as long as a run lasts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable

__all__ = ("SharedTyping", "keep_typing")

log = logging.getLogger("extensions.chat")


@contextlib.asynccontextmanager
async def keep_typing(send: Callable[[], Awaitable[object]], *, every: float) -> AsyncIterator[None]:
    """Call ``send()`` at once and every ``every`` seconds until the block exits; failures are only logged
    (a missing typing indicator must never cost a reply). The first call waits for one turn of the event loop:
    the work that holds the indicator (a run, calling its model) goes first, and the request that shows "typing..."
    (a round trip through the platform's client, a millisecond or two of this process's time) follows it, rather
    than delaying the model call by as much."""

    async def loop() -> None:
        await asyncio.sleep(0)
        while True:
            try:
                async with asyncio.timeout(every):
                    await send()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the platform refused: keep the reply going
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(every)

    task = asyncio.create_task(loop(), name="typing")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class SharedTyping:
    """One "typing..." loop per conversation, however many messages in it are being answered at once."""

    def __init__(self, *, every: float) -> None:
        self.every = every
        """Seconds between two indicators."""
        self._loops: dict[Hashable, tuple[contextlib.AsyncExitStack, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable, send: Callable[[], Awaitable[object]]) -> AsyncIterator[None]:
        """Keep the indicator of ``key`` alive until the last holder of ``key`` leaves."""
        entry = self._loops.get(key)
        if entry is None:
            stack = contextlib.AsyncExitStack()
            entry = self._loops[key] = (stack, [0])
            await stack.enter_async_context(keep_typing(send, every=self.every))
        stack, users = entry
        users[0] += 1
        try:
            yield
        finally:
            users[0] -= 1
            if users[0] == 0 and self._loops.get(key) is entry:
                del self._loops[key]
                await stack.aclose()
