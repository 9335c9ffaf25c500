"""Keeping a platform's "typing..." indicator alive for as long as a run lasts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ("keep_typing",)

log = logging.getLogger("extensions.chat")


@contextlib.asynccontextmanager
async def keep_typing(send: Callable[[], Awaitable[object]], *, every: float) -> AsyncIterator[None]:
    """Call ``send()`` now and every ``every`` seconds until the block exits; failures are only logged
    (a missing typing indicator must never cost a reply)."""

    async def loop() -> None:
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
