"""A run cancelled from outside (a queue worker lost the context's lease: ``Agent.cancel_run``) while its model call is
being cancelled for a restart (an input joined before a word was shown, ``core.busy``) or for a person's Stop: one
CancelledError comes for both. Taken as the restart's, it swallowed the lease's: the run went on, asked the model
again and answered (in a fleet, its posts then refused), and its task stayed cancelling (a later ``asyncio.timeout``
in it would raise CancelledError instead of TimeoutError)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core import InMemoryStore, ModelRequest, context, create_agent, output
from core.engine import Run

chat = context(type="chat", schema=str, key=lambda s: s)


class SlowModel:
    """Answers after a pause, so that a call can be cancelled before a word of it is shown."""

    name = "slow"
    model = ""
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.calls = 0
        self.started = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.calls += 1
        self.started.set()
        await asyncio.sleep(0.2)
        yield '<response><output type="say">the answer</output></response>'


@pytest.mark.parametrize("pressed", ["restart", "stop", "restart-and-stop"])
async def test_a_lost_lease_during_a_restart_or_a_stop_ends_the_run(pressed: str) -> None:
    model = SlowModel()
    posted: list[str] = []

    async def post(data: str, ctx: Any, agent: Any) -> None:
        posted.append(data)

    agent = create_agent(
        model=model, contexts=[chat], outputs=[output(type="say", handler=post)], memory=InMemoryStore()
    )
    async with agent:
        sending = asyncio.create_task(agent.send(chat, "room", {"type": "say", "data": "hi"}))
        await model.started.wait()
        cid = agent.context_id(chat, "room")
        run = agent._runs.get(cid)
        assert isinstance(run, Run)
        if "restart" in pressed:
            assert run.restart()
        if "stop" in pressed:
            assert run.stop()
        assert agent.cancel_run(cid)  # before the run's task has seen either
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(sending, 10)
        await asyncio.sleep(0.3)
    assert posted == [] and model.calls == 1


async def test_a_stop_pressed_during_a_restart_stops_the_run() -> None:
    """Both cancels are the run's own: the Stop ends it, stopped (its memory saved), not cancelled."""
    model = SlowModel()
    posted: list[str] = []

    async def post(data: str, ctx: Any, agent: Any) -> None:
        posted.append(data)

    agent = create_agent(
        model=model, contexts=[chat], outputs=[output(type="say", handler=post)], memory=InMemoryStore()
    )
    async with agent:
        sending = asyncio.create_task(agent.send(chat, "room", {"type": "say", "data": "hi"}))
        await model.started.wait()
        run = agent._runs.get(agent.context_id(chat, "room"))
        assert isinstance(run, Run)
        assert run.restart()
        assert run.stop()
        await asyncio.wait_for(sending, 10)
        assert run.stopped
    assert posted == [] and model.calls == 1
