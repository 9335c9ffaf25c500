"""An input that arrives while its context runs joins that run once it is prepared (its handler reads a store, a
file is fetched): the run does not end while one is being prepared, so the input is prepared once, against the
state that is saved, and answered in the same run. Pushed into a run that had ended, it was lost (an approval's
decision told while the run that asked for it was ending never reached the model); prepared again for a new run,
its handler's writes happened twice."""

from __future__ import annotations

import asyncio
from typing import Any

from core import InMemoryStore, ModelRequest, OutputRef, ScriptedModel, context, create_agent, input, output
from core.testing import updates_of

chat = context(type="chat", schema=str, key=lambda s: s, create=lambda state: {"seen": []})


async def test_an_input_prepared_while_the_run_ends_joins_it_once() -> None:
    said: list[str] = []
    gate, preparing, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    prepared: list[str] = []

    async def slow(data: Any, ctx: Any, agent: Any) -> Any:
        preparing.set()
        await release.wait()  # the run's answer to the first message is out before this returns
        prepared.append(data)
        ctx.state.memory["seen"].append(data)
        return data

    def reply(request: ModelRequest) -> str:
        updates = updates_of(request.prompt)
        text = "second" if "late news" in updates else "first"
        return f'<response><output type="chat:message">{text}</output></response>'

    class Gated(ScriptedModel):
        async def stream(self, request: ModelRequest) -> Any:  # type: ignore[override]
            await gate.wait()
            async for chunk in super().stream(request):
                yield chunk

    model = Gated(reply)
    memory = InMemoryStore()
    agent = create_agent(
        model=model,
        contexts=[chat],
        inputs=[input(type="late", schema=str, handler=slow)],
        outputs=[output(type="chat:message", handler=lambda data, ctx, ag: said.append(str(data)))],
        memory=memory,
    )
    await agent.start()
    try:
        first = asyncio.create_task(agent.send(chat, "c", {"type": "text", "data": "hello"}))
        await asyncio.sleep(0)
        late = asyncio.create_task(agent.send(chat, "c", {"type": "late", "data": "late news"}))
        await asyncio.wait_for(preparing.wait(), 30)
        gate.set()  # the first answer is written and delivered while the late input is still being prepared
        while said != ["first"]:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the run is at its end, waiting for the input being prepared
        assert not first.done()
        release.set()
        chain = await asyncio.wait_for(late, 30)
        assert await asyncio.wait_for(first, 30) == chain  # one run answered both
        assert said == ["first", "second"] and prepared == ["late news"]  # prepared once
        assert [e.content for e in chain if isinstance(e, OutputRef)] == ["first", "second"]
        assert len(model.requests) == 2 and "late news" in model.requests[1].prompt
        state = await agent.load_state(chat, "c")
        assert state.memory["seen"] == ["late news"]  # its write saved, once
    finally:
        await agent.stop()
