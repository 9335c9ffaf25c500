"""A model call's charge is written whole when the answer is stopped while it is written (issue 49: "tokens are
charged to each author for their own messages"). The privacy matrix once counted a 1000-token call for the
conversation and for neither person, with the ``interrupt`` busy policy: the call had answered and its tokens were
being added, the conversation's counter first, when the next person's message stopped the answer; the cancellation
reached the usage plugin between the conversation's counter and the people's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from core import AgentOptions, InMemoryStore, ModelRequest, context, create_agent, output
from core.busy import BusyPolicy
from core.engine import Run
from core.entries import InputRef
from core.plugin import Plugin, RunHooks, RunView
from core.usage import InMemoryUsage, day_of
from core.usage.plugin import Usage
from tests.core.reporting_model import TOKENS_IN, TOKENS_OUT, Answers

ROOM = context(type="room", schema=str, key=lambda s: s, max_steps=4)


def said(text: str, user: str, message: str) -> dict[str, Any]:
    return {"type": "room:message", "data": text, "params": {"user": user, "user_id": user, "message_id": message}}


class Held(InMemoryUsage):
    """Counters whose first addition is written at once and answered only at ``release``, as a store that writes in
    a thread or a server is (``SQLiteUsage``, ``RedisUsage``): what its caller was waiting for is written even when
    the caller is cancelled meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def add(
        self,
        *,
        day: str,
        keys: Sequence[str],
        input_tokens: int,
        output_tokens: int,
        cost: int,
        charge: str | None = None,
    ) -> bool:
        added = await super().add(
            day=day, keys=keys, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost, charge=charge
        )
        if not self.holding.is_set():
            self.holding.set()
            await self.release.wait()
        return added


class Runs(Plugin):
    """Keeps the runs it sees begin."""

    name = "runs"

    def __init__(self) -> None:
        self.runs: list[Run] = []

    def begin(self, run: RunView) -> RunHooks | None:
        assert isinstance(run, Run)
        self.runs.append(run)
        return None


async def test_an_answer_interrupted_while_its_tokens_are_counted_charges_them_to_its_asker() -> None:
    """Alice's answer is shown and its 1000 tokens are being counted when Bob's message interrupts it: the
    conversation's tokens are Alice's and Bob's, every one (they were the conversation's alone)."""
    store, runs = Held(), Runs()
    agent = create_agent(
        model=Answers(),
        contexts=[ROOM],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[Usage(store), runs],
        memory=InMemoryStore(),
        options=AgentOptions(busy=BusyPolicy.INTERRUPT, quiet_ms=0),
    )
    async with agent:
        alice = asyncio.create_task(agent.send(ROOM, "r", said("a long question " * 20, "alice", "1")))
        await asyncio.wait_for(store.holding.wait(), 10)  # (the conversation's counter is written)
        bob = asyncio.create_task(agent.send(ROOM, "r", said("and mine?", "bob", "2")))
        async with asyncio.timeout(10):
            while not runs.runs[0].stopped:  # (Bob's message stopped Alice's answer)
                await asyncio.sleep(0.01)
        store.release.set()
        await asyncio.wait_for(asyncio.gather(alice, bob), 10)
        day = day_of()
        chat = await store.totals("chat:room:r", [day])
        people = [await store.totals(f"user:room:{who}", [day]) for who in ("alice", "bob")]
    assert len(runs.runs) == 2  # (Alice's answer, then Bob's)
    assert chat.input_tokens == 2 * TOKENS_IN
    assert [p.input_tokens for p in people] == [TOKENS_IN, TOKENS_IN]
    assert sum(p.output_tokens for p in people) == chat.output_tokens == 2 * TOKENS_OUT


class Unseen(Answers):
    """Its first call shows nothing and waits (an input that joins meanwhile starts it again, ``core.busy``); every
    call after it answers at once."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.waiting = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.calls += 1
        if self.calls == 1:
            self.waiting.set()
            await asyncio.Event().wait()  # (cancelled by the restart)
        async for chunk in super().stream(request):
            yield chunk


async def test_a_message_that_joins_while_a_restarted_call_is_charged_is_answered_with_the_others() -> None:
    """Bob's message starts Alice's unseen call again, and Carol's joins while that cancelled call's tokens are being
    counted: the next call answers the three of them (the run was cancelled, its senders too, and its memory lost)."""
    store, runs, model = Held(), Runs(), Unseen()
    agent = create_agent(
        model=model,
        contexts=[ROOM],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[Usage(store), runs],
        memory=InMemoryStore(),
        options=AgentOptions(busy=BusyPolicy.INTERRUPT, quiet_ms=0),
    )
    async with agent:
        sends = [asyncio.create_task(agent.send(ROOM, "r", said("my question", "alice", "1")))]
        await asyncio.wait_for(model.waiting.wait(), 10)
        sends.append(asyncio.create_task(agent.send(ROOM, "r", said("and mine?", "bob", "2"))))
        await asyncio.wait_for(store.holding.wait(), 10)  # (the cancelled call is being charged)
        sends.append(asyncio.create_task(agent.send(ROOM, "r", said("me too", "carol", "3"))))
        async with asyncio.timeout(10):
            while not any(isinstance(e, InputRef) and e.params.get("user") == "carol" for e in runs.runs[0].chain):
                await asyncio.sleep(0.01)
        store.release.set()
        chains = await asyncio.wait_for(asyncio.gather(*sends), 10)
        day = day_of()
        chat = await store.totals("chat:room:r", [day])
        people = [await store.totals(f"user:room:{who}", [day]) for who in ("alice", "bob", "carol")]
        state = await agent.load_state(ROOM, "r")
    assert len(runs.runs) == 1 and model.calls == 2
    assert all(chain is chains[0] for chain in chains)
    assert sum(1 for e in state.working_memory.logs if isinstance(e, InputRef)) == 3  # (saved)
    assert all(p.input_tokens > 0 for p in people)
    assert sum(p.input_tokens for p in people) == chat.input_tokens
