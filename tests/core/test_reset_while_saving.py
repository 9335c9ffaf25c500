"""``/reset`` (``agent.reset``) that arrives while a run is saving its memory: the run had checked that nothing asked
it to forget, then began writing; the reset deleted, and the run's writes still on their way put the conversation
back. The reset now waits for a save already begun, then deletes: nothing of the conversation is left."""

from __future__ import annotations

import asyncio
from typing import Any

from core import InMemoryStore, ScriptedModel, context, create_agent, input, output

chat = context(type="chat", schema=str, key=lambda s: s)


class HeldStore(InMemoryStore):
    """Holds the first write of a working memory until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()
        self.release = asyncio.Event()

    async def set(self, key: str, value: Any) -> None:
        if key.startswith("working:") and not self.writing.is_set():
            self.writing.set()
            await self.release.wait()
        await super().set(key, value)


async def test_a_reset_during_the_save_of_a_run_leaves_nothing_behind() -> None:
    store = HeldStore()
    agent = create_agent(
        model=ScriptedModel(['<response><output type="say">noted</output></response>']),
        contexts=[chat],
        inputs=[input(type="msg")],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=store,
    )
    async with agent:
        cid = agent.context_id(chat, "room")
        sending = asyncio.create_task(agent.send(chat, "room", {"type": "msg", "data": "remember me"}))
        await store.writing.wait()  # the run is saving: its context memory written, its working memory on its way
        resetting = asyncio.create_task(agent.reset(chat, "room"))
        await asyncio.sleep(0.05)
        store.release.set()
        async with asyncio.timeout(10):
            await sending
            await resetting
        assert await store.get(f"working:{cid}") is None
        assert await store.get(f"context:{cid}") is None
