"""A run cancelled in the instant it is started, before its task first runs (a queue worker loses the context's
lease, or gives a join up, while ``agent.run`` has just put the run in the table): its caller gets the cancellation,
and the conversation is free again. A task cancelled before its first step never enters its coroutine, so the run's
own clean-up never ran: the pending run stayed in the table with a future never resolved, its caller waited for
ever, and every later ``agent.run`` of the conversation joined it and waited too (in a fleet: a worker renewing the
lease of a batch it never ran, until it stopped)."""

from __future__ import annotations

import asyncio

import pytest

from core import InMemoryStore, ScriptedModel, context, create_agent, input, output

chat = context(type="chat", schema=str, key=lambda s: s)
SAID = '<response><output type="say">hello</output></response>'


async def test_a_run_cancelled_before_its_task_starts_frees_the_conversation() -> None:
    said: list[str] = []

    async def say(data: str, ctx: object, agent: object) -> None:
        said.append(data)

    agent = create_agent(
        model=ScriptedModel([SAID, SAID]),
        contexts=[chat],
        inputs=[input(type="msg")],
        outputs=[output(type="say", handler=say)],
        memory=InMemoryStore(),
    )
    async with agent:
        cid = agent.context_id(chat, "room")
        first = asyncio.create_task(agent.send(chat, "room", {"type": "msg", "data": "one"}))
        while agent.cancel_run(cid) is False:  # (the instant its run is in the table, before the run's task runs)
            await asyncio.sleep(0)
        async with asyncio.timeout(10):
            with pytest.raises(asyncio.CancelledError):
                await first
            await agent.send(chat, "room", {"type": "msg", "data": "two"})
    assert said == ["hello"]
