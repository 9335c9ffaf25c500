"""The model's idle deadline counts only the time spent waiting for its next chunk: not the time the step loop
spends on a chunk (a slow output handler), and a cancellation from elsewhere stays a cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from core import ModelError
from core.model_call import stream_model
from core.models.base import ModelRequest

REQUEST = ModelRequest(system="s", prompt="p")


class Chunks:
    """Streams ``chunks``, waiting ``pause`` seconds before each."""

    name = "chunks"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, chunks: list[str], *, pause: float = 0.0) -> None:
        self.chunks = chunks
        self.pause = pause

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        for chunk in self.chunks:
            await asyncio.sleep(self.pause)
            yield chunk


async def _charge(input_tokens: int, output_tokens: int, estimated: bool, cached: int = 0) -> None:
    pass


def _deps(model: Any, idle: float) -> Any:
    return SimpleNamespace(model=model, model_idle_timeout=idle)


async def test_time_spent_on_a_chunk_does_not_count_against_the_model() -> None:
    got = []
    async for chunk in stream_model(_deps(Chunks(["a", "b", "c"]), 0.05), REQUEST, charge=_charge):
        got.append(chunk)
        await asyncio.sleep(0.15)  # the step loop busy with the chunk (an output handler), three deadlines long
    assert got == ["a", "b", "c"]


async def test_a_model_silent_past_the_deadline_fails_the_call() -> None:
    got = []
    with pytest.raises(ModelError, match=r"sent nothing for 0\.05s"):
        async for chunk in stream_model(_deps(Chunks(["a", "b"], pause=0.3), 0.05), REQUEST, charge=_charge):
            got.append(chunk)
    assert got == []


async def test_a_wait_cut_short_by_a_slow_chunk_then_a_silent_model() -> None:
    class Then:
        name, model, vision, last_usage = "then", "", False, None

        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
            await asyncio.sleep(0.01)  # well within the deadline
            yield "a"
            await asyncio.sleep(5)  # past it
            yield "b"

    got = []
    with pytest.raises(ModelError, match="sent nothing"):
        async for chunk in stream_model(_deps(Then(), 0.5), REQUEST, charge=_charge):
            got.append(chunk)
    assert got == ["a"]


async def test_a_cancellation_from_elsewhere_is_not_a_timeout() -> None:
    async def read() -> None:
        async for _ in stream_model(_deps(Chunks(["a"], pause=5), 0.05), REQUEST, charge=_charge):
            pass

    task = asyncio.create_task(read())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_deadline_leaves_no_timer_behind() -> None:
    loop = asyncio.get_running_loop()
    before = len([h for h in getattr(loop, "_scheduled", []) if not h.cancelled()])
    async for _ in stream_model(_deps(Chunks(["a", "b"]), 30), REQUEST, charge=_charge):
        pass
    after = len([h for h in getattr(loop, "_scheduled", []) if not h.cancelled()])
    assert after == before
