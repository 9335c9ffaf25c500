"""``GatedModel``: an in-process model whose first answer waits until the test lets it go, so messages can be sent
while the bot is busy (issue 37, the busy policies); it notes each call's prompt."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from core import ModelRequest

__all__ = ("GatedModel",)


class GatedModel:
    """Answers call ``n`` with ``Answer n.`` in ``output_type``; the first call waits for ``release`` first."""

    name = model = "gated"
    vision = False
    last_usage = None

    def __init__(self, output_type: str, *, shown_first: bool = False) -> None:
        self.output_type = output_type
        self.shown_first = shown_first
        """The first call writes its first words (``Answer 1``, shown in the chat) before it waits: a message sent
        then meets an answer already visible, which the busy policy decides about (before, the call would start
        again with it: ``core.busy``)."""
        self.prompts: list[str] = []
        """The prompt of each call, in order."""
        self.started = asyncio.Event()
        """Set once the first call began."""
        self.release = asyncio.Event()
        """Set by the test: the first call answers."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.prompts.append(request.prompt)
        n = len(self.prompts)
        if n == 1 and self.shown_first:
            yield f'<response><output type="{self.output_type}">Answer {n}'
            self.started.set()
            await self.release.wait()
            yield ".</output></response>"
            return
        if n == 1:
            self.started.set()
            await self.release.wait()
        yield f'<response><output type="{self.output_type}">Answer {n}.</output></response>'
