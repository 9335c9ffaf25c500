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

    def __init__(self, output_type: str) -> None:
        self.output_type = output_type
        self.prompts: list[str] = []
        """The prompt of each call, in order."""
        self.started = asyncio.Event()
        """Set once the first call began."""
        self.release = asyncio.Event()
        """Set by the test: the first call answers."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.prompts.append(request.prompt)
        n = len(self.prompts)
        if n == 1:
            self.started.set()
            await self.release.wait()
        yield f'<response><output type="{self.output_type}">Answer {n}.</output></response>'
