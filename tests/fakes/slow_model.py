"""Slow models for Stop (issue 37): ``SlowModelServer``, a fake OpenAI-compatible server on 127.0.0.1 that writes
some answers without end and notes when the client closed each stream (the model call cancelled), and
``EndlessModel``, the same in-process."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Container
from typing import Any

from aiohttp import web

from core import ModelRequest

from .openai_server import FakeOpenAIServer, Reply

__all__ = ("EndlessModel", "SlowModelServer")


class EndlessModel:
    """In-process: the first answer writes a story in ``output_type`` for ten seconds, then calls the action
    ``later``; the next answers are ``Short answer <n>.``. Notes its prompts and whether the first was cancelled."""

    name = model = "endless"
    vision = False
    last_usage = None

    def __init__(self, output_type: str) -> None:
        self.output_type = output_type
        self.calls = 0
        self.prompts: list[str] = []
        self.writing = asyncio.Event()
        """Set once the first answer wrote its first words."""
        self.cancelled = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.calls += 1
        self.prompts.append(request.prompt)
        if self.calls > 1:
            yield f'<response><output type="{self.output_type}">Short answer {self.calls}.</output></response>'
            return
        try:
            yield f'<response><output type="{self.output_type}">Once upon a time'
            self.writing.set()
            for _ in range(500):
                await asyncio.sleep(0.02)
                yield " and then"
            yield '</output><action_call name="later">{}</action_call></response>'
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled = True
            raise


class SlowModelServer(FakeOpenAIServer):
    """Answers with ``<output type="{output_type}">``: call number ``n`` (from 1) in ``endless`` writes
    ``Answer n:`` then `` and more`` every ``delay`` seconds until the client closes the stream; any other call
    answers ``Answer n.`` at once."""

    def __init__(self, output_type: str, *, endless: Container[int] = (1,), delay: float = 0.05) -> None:
        super().__init__()
        self.output_type = output_type
        self.endless = endless
        self.delay = delay
        self.calls = 0
        self.began: dict[int, float] = {}
        """``time.monotonic()`` when each endless call wrote its first words."""
        self.closed: dict[int, float] = {}
        """``time.monotonic()`` when the server found each endless call's stream closed by the client (at its next
        write: up to ``delay`` after the client closed it)."""
        self.writing = asyncio.Event()
        """Set while an endless call writes."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await super()._handle(request)
        except ConnectionError:  # the client closed the stream: noted in ``closed``, nothing to answer
            return web.Response()

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        self.calls += 1
        n = self.calls
        base = {"id": f"chatcmpl-slow-{n}", "object": "chat.completion.chunk", "created": int(time.time())}

        async def send(text: str) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        opening = f'<response><output type="{self.output_type}">Answer {n}'
        if n not in self.endless:
            await send(f"{opening}.</output></response>")
            done = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            await response.write(f"data: {json.dumps(done)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            return
        try:
            await send(f"{opening}:")
            self.began[n] = time.monotonic()
            self.writing.set()
            while True:
                await asyncio.sleep(self.delay)
                await send(" and more")
        except (ConnectionError, asyncio.CancelledError):  # the client closed the stream (the model call ended)
            self.closed[n] = time.monotonic()
            self.writing.clear()
            raise

    async def wait_closed(self, n: int, *, timeout: float = 30.0) -> float:
        """``time.monotonic()`` when the client closed the stream of call ``n`` (waits up to ``timeout``)."""
        async with asyncio.timeout(timeout):
            while n not in self.closed:
                await asyncio.sleep(0.005)
        return self.closed[n]
