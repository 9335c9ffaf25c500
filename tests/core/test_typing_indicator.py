"""The "typing..." indicator's first request comes after the work that holds it has started (issue 51): a run
that starts inside the block reaches its own first wait before the indicator's request is made, so the
platform client's time for "typing..." does not delay the model call."""

from __future__ import annotations

import asyncio

from extensions.chat.typing_indicator import SharedTyping, keep_typing


async def test_the_first_typing_request_waits_for_the_run_started_in_the_block() -> None:
    order: list[str] = []

    async def send() -> None:
        order.append("typing")

    async def run() -> None:
        order.append("model called")
        await asyncio.sleep(0.01)
        order.append("answered")

    async with keep_typing(send, every=60):
        await asyncio.create_task(run())
    assert order == ["model called", "typing", "answered"]


async def test_a_shared_indicator_is_shown_once_the_run_has_started_and_kept_until_the_last_holder_leaves() -> None:
    sent: list[str] = []
    typing = SharedTyping(every=60)

    async def send() -> None:
        sent.append("typing")

    async with typing.hold("chat", send):
        started = asyncio.Event()

        async def run() -> None:
            started.set()
            await asyncio.sleep(0.01)

        task = asyncio.create_task(run())
        async with typing.hold("chat", send):  # a second message of the same chat: one loop
            await task
        assert started.is_set() and sent == ["typing"]
    assert sent == ["typing"]
