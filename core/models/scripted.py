"""A scripted model for tests and benchmarks: exact answers, streamed in chunks, with optional delays."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

from ..errors import ModelError
from .base import ModelRequest, ModelUsage

__all__ = ("ScriptedModel",)

Reply = str | BaseException | Callable[[ModelRequest], "str | BaseException"]


class ScriptedModel:
    """Answers with the next scripted reply.

    A reply is a string, an exception to raise, or a function of the request returning either. A single
    function instead of a list answers every request.
    """

    name = "scripted"
    model = ""
    """No provider model name: usage is counted under ``name``."""
    last_usage: ModelUsage | None = None
    """Never known: the step loop estimates a scripted answer's tokens."""

    def __init__(
        self,
        replies: Sequence[Reply] | Callable[[ModelRequest], str | BaseException],
        *,
        chunk_size: int = 16,
        delay: float = 0.0,
        first_delay: float = 0.0,
        repeat_last: bool = False,
        vision: bool = False,
        keep: int | None = None,
    ) -> None:
        self._replies: list[Reply] = [replies] if callable(replies) else list(replies)
        self._forever = callable(replies)
        self.chunk_size = max(1, chunk_size)
        """Characters per streamed chunk."""
        self.delay = delay
        """Seconds to wait between chunks."""
        self.first_delay = first_delay
        """Seconds to wait before the first chunk."""
        self.repeat_last = repeat_last
        """Keep answering with the last reply when the script runs out."""
        self.vision = vision
        """Declare that it sees images, so requests carry them (tests of the image path)."""
        self.keep = keep
        """How many of the newest requests ``requests`` holds (None: every one, for tests; a long-running bot
        passes a bound, or the list would grow by a prompt a message)."""
        self.requests: list[ModelRequest] = []
        """The requests received, in order (the newest ``keep``)."""
        self._received = 0
        self._next = 0

    def _reply_for(self, request: ModelRequest) -> str:
        if self._forever:
            reply = self._replies[0]
        elif self._next < len(self._replies):
            reply = self._replies[self._next]
            self._next += 1
        elif self.repeat_last and self._replies:
            reply = self._replies[-1]
        else:
            raise ModelError(f"scripted model: no reply left for request {self._received}")
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(request)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Stream the next reply in chunks of ``chunk_size`` characters."""
        self.requests.append(request)
        self._received += 1
        if self.keep is not None and len(self.requests) > self.keep:
            del self.requests[: len(self.requests) - self.keep]
        text = self._reply_for(request)
        if self.first_delay:
            await asyncio.sleep(self.first_delay)
        size = self.chunk_size
        for i in range(0, len(text), size):
            if self.delay and i:
                await asyncio.sleep(self.delay)
            yield text[i : i + size]
