"""A run cancelled while it reads the model's answer (a queue worker lost the context's lease) closes the model's
stream before its task ends: no async generator is left suspended for the garbage collector, or for the event
loop's shutdown, where nested ones fail with "aclose(): asynchronous generator is already running"."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from core import InMemoryStore, ModelRequest, context, create_agent, output

chat = context(type="chat", schema=str, key=lambda s: s)


class HeldModel:
    """Answers with two outputs, in two chunks; notes when its stream is closed."""

    name = "held"
    model = ""
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.closed = 0
        self.finished = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        try:
            yield '<response><output type="say">first</output>'
            yield '<output type="say">second</output></response>'
            self.finished += 1
        finally:
            self.closed += 1


async def test_a_cancelled_run_closes_the_model_stream_before_its_task_ends() -> None:
    model = HeldModel()
    posting = asyncio.Event()

    async def post(data: str, ctx: Any, agent: Any) -> None:
        posting.set()
        await asyncio.Event().wait()  # a post that hangs: the run is cancelled here, between two chunks

    agent = create_agent(
        model=model, contexts=[chat], outputs=[output(type="say", handler=post)], memory=InMemoryStore()
    )
    async with agent:
        sending = asyncio.create_task(agent.send(chat, "room", {"type": "say", "data": "hi"}))
        await posting.wait()
        assert agent.cancel_run(agent.context_id(chat, "room"))
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sending
        assert (model.closed, model.finished) == (1, 0)  # closed at once, not finished
