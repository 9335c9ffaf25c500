"""An input that arrives while its context runs joins that run once it is prepared; when the run finishes while
the input is being prepared (its handler reads a store, a file is fetched), the input starts the next run instead
of being pushed into a run that is over (it was lost: an approval's decision told while the run that asked for it
was ending never reached the model)."""

from __future__ import annotations

import asyncio
from typing import Any

from core import InMemoryStore, ModelRequest, OutputRef, ScriptedModel, context, create_agent, input, output

chat = context(type="chat", schema=str, key=lambda s: s)


async def test_an_input_prepared_while_the_run_ends_starts_the_next_run() -> None:
    said: list[str] = []
    first_run: list[asyncio.Task[Any]] = []
    gate = asyncio.Event()
    preparing = asyncio.Event()

    async def slow(data: Any, ctx: Any, agent: Any) -> Any:
        preparing.set()
        await asyncio.shield(first_run[0])  # the run it would join is over (its memory saved) before this returns
        return data

    def reply(request: ModelRequest) -> str:
        updates = request.prompt.rsplit("<updates>", 1)[-1]
        text = "second" if "late news" in updates else "first"
        return f'<response><output type="chat:message">{text}</output></response>'

    class Gated(ScriptedModel):
        async def stream(self, request: ModelRequest) -> Any:  # type: ignore[override]
            await gate.wait()
            async for chunk in super().stream(request):
                yield chunk

    model = Gated(reply)
    agent = create_agent(
        model=model,
        contexts=[chat],
        inputs=[input(type="late", schema=str, handler=slow)],
        outputs=[output(type="chat:message", handler=lambda data, ctx, ag: said.append(str(data)))],
        memory=InMemoryStore(),
    )
    await agent.start()
    try:
        first_run.append(asyncio.create_task(agent.send(chat, "c", {"type": "text", "data": "hello"})))
        await asyncio.sleep(0)
        late = asyncio.create_task(agent.send(chat, "c", {"type": "late", "data": "late news"}))
        await asyncio.wait_for(preparing.wait(), 30)
        gate.set()  # the first run answers and ends while the late input is still being prepared
        await asyncio.wait_for(first_run[0], 30)
        chain = await asyncio.wait_for(late, 30)
        assert said == ["first", "second"]
        assert [e.content for e in chain if isinstance(e, OutputRef)] == ["second"]
        assert len(model.requests) == 2 and "late news" in model.requests[1].prompt
    finally:
        await agent.stop()
