"""Stop (issue 37): a person stops an answer while it is written; the model call is cancelled at once, what was
written is kept with a mark, no later action runs, and the stop is in the run's chain and events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from core import ErrorLog, InMemoryStore, ModelRequest, OutputRef, RunEventType, action, context, create_agent, output
from core.engine import STOP_MARK

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=5)


class Slow:
    """Writes an answer a word at a time, forever, and calls an action first; notes when it was cancelled."""

    name = "slow"
    model = "slow"
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.calls += 1
        try:
            yield '<response><output type="say">Here is a long answer'
            self.started.set()
            while True:
                await asyncio.sleep(0.01)
                yield " and more"
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled = True
            raise


async def test_stop_cancels_the_model_call_keeps_what_was_written_and_ends_the_run() -> None:
    model, said, ran = Slow(), [], []
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[action(name="later", handler=lambda args, ctx, agent: ran.append(1))],
        outputs=[output(type="say", handler=lambda data, ctx, agent: said.append(data))],
        memory=InMemoryStore(),
    )
    events = []
    async with agent:
        sending = asyncio.create_task(
            agent.run(
                chat, "c", [agent.make_input({"type": "chat:message", "data": "tell me"})], listener=events.append
            )
        )
        await asyncio.wait_for(model.started.wait(), 5)
        assert agent.stop_answer("chat:c") is True
        chain = await asyncio.wait_for(sending, 5)
        assert agent.stop_answer("chat:c") is False  # nothing left to stop
    assert model.cancelled and model.calls == 1
    assert len(said) == 1 and said[0].startswith("Here is a long answer") and said[0].endswith(STOP_MARK)
    assert ran == []
    assert any(isinstance(e, ErrorLog) and e.source == "stop" for e in chain)
    assert any(isinstance(e, OutputRef) and str(e.content).endswith(STOP_MARK) for e in chain)
    assert any(e.type is RunEventType.ERROR and "stopped" in str(e.content) for e in events)
    state = await agent.load_state(chat, "c")
    assert any(isinstance(e, OutputRef) for e in state.working_memory.logs)  # saved: the next run sees it


async def test_a_new_message_after_a_stop_gets_an_answer() -> None:
    model = Slow()
    agent = create_agent(
        model=model, contexts=[chat], outputs=[output(type="say", handler=lambda data, ctx, agent: None)]
    )
    async with agent:
        first = asyncio.create_task(agent.send(chat, "c", {"type": "chat:message", "data": "one"}))
        await asyncio.wait_for(model.started.wait(), 5)
        agent.stop_answer("chat:c")
        await asyncio.wait_for(first, 5)
        model.started.clear()
        second = asyncio.create_task(agent.send(chat, "c", {"type": "chat:message", "data": "two"}))
        await asyncio.wait_for(model.started.wait(), 5)
        assert agent.stop_answer("chat:c")
        await asyncio.wait_for(second, 5)
    assert model.calls == 2


async def test_a_stop_pressed_while_the_run_is_prepared_stops_it_as_it_starts() -> None:
    model, said = Slow(), []
    loading = asyncio.Event()

    class SlowStore(InMemoryStore):
        async def get(self, key: str) -> object:
            loading.set()
            await asyncio.sleep(0.05)
            return await super().get(key)

    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: said.append(data))],
        memory=SlowStore(),
    )
    async with agent:
        sending = asyncio.create_task(agent.send(chat, "c", {"type": "chat:message", "data": "one"}))
        await asyncio.wait_for(loading.wait(), 5)
        assert agent.stop_answer("chat:c") is True  # the run is still loading its state
        chain = await asyncio.wait_for(sending, 5)
    assert model.calls == 0 and said == []
    assert any(isinstance(e, ErrorLog) and e.source == "stop" for e in chain)


async def test_a_run_given_as_stopped_records_its_inputs_and_answers_nothing() -> None:
    model = Slow()
    agent = create_agent(model=model, contexts=[chat], outputs=[output(type="say", handler=lambda *a: None)])
    async with agent:
        ref = agent.make_input({"type": "chat:message", "data": "stopped before it began"})
        chain = await asyncio.wait_for(agent.run(chat, "c", [ref], stopped=True), 5)
        state = await agent.load_state(chat, "c")
    assert model.calls == 0
    assert any(isinstance(e, ErrorLog) and e.source == "stop" for e in chain)
    assert [e.data for e in state.working_memory.logs if e.kind == "input"] == ["stopped before it began"]


async def test_a_message_sent_while_a_stopped_answer_is_delivered_gets_an_answer_of_its_own() -> None:
    """A run that was stopped takes no more inputs: a message sent while its marked answer is still being delivered
    (a slow platform edit) starts the next run; it once joined the stopped run (busy policy steer) and was recorded
    but never answered."""

    class Then(Slow):
        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
            if self.calls == 0:
                async for chunk in super().stream(request):
                    yield chunk
                return
            self.calls += 1
            yield '<response><output type="say">answer 2</output></response>'

    model, said, delivering, release = Then(), [], asyncio.Event(), asyncio.Event()

    async def say(data: str, ctx: object, agent: object) -> None:
        if data.endswith(STOP_MARK):  # the stopped answer's delivery is slow
            delivering.set()
            await release.wait()
        said.append(data)

    agent = create_agent(model=model, contexts=[chat], outputs=[output(type="say", handler=say)])  # (busy: steer)
    async with agent:
        first = asyncio.create_task(agent.send(chat, "c", {"type": "chat:message", "data": "tell me"}))
        await asyncio.wait_for(model.started.wait(), 5)
        assert agent.stop_answer("chat:c") is True
        await asyncio.wait_for(delivering.wait(), 5)
        second = asyncio.create_task(agent.send(chat, "c", {"type": "chat:message", "data": "and now?"}))
        await asyncio.sleep(0.05)  # (it arrives while the stopped answer is delivered)
        release.set()
        await asyncio.wait_for(first, 5)
        await asyncio.wait_for(second, 5)
    assert model.calls == 2
    assert said[-1] == "answer 2" and said[0].endswith(STOP_MARK)
