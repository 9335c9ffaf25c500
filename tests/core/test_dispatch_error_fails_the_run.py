"""A failure of the queue's storage (``DispatchError``: Redis away, the context's lease lost) while an output is
delivered fails the run whole: it is not an undelivered output the model reads and answers again, since a queue
worker would then acknowledge that answer and the batch's messages would never be answered (issue 28). Other
handler failures stay undelivered outputs the model is told about."""

from __future__ import annotations

from typing import Any

import pytest

from core import DispatchError, InMemoryStore, ModelRequest, PlatformError, ScriptedModel, context, create_agent, output

chat = context(type="chat", schema=str, key=lambda s: s)


def script(asked: list[str]) -> ScriptedModel:
    def answer(request: ModelRequest) -> str:
        asked.append(request.prompt)
        return '<response><output type="say">hello</output></response>'

    return ScriptedModel(answer)


async def test_a_dispatch_error_in_an_output_fails_the_run_and_the_model_is_not_asked_again() -> None:
    asked: list[str] = []

    async def post(data: str, ctx: Any, agent: Any) -> None:
        raise DispatchError("reply not stored: Redis away")

    agent = create_agent(
        model=script(asked), contexts=[chat], outputs=[output(type="say", handler=post)], memory=InMemoryStore()
    )
    async with agent:
        with pytest.raises(DispatchError, match="Redis away"):
            await agent.run(chat, "room", [])
        assert len(asked) == 1


async def test_a_platform_error_in_an_output_is_still_an_undelivered_output() -> None:
    asked: list[str] = []

    async def post(data: str, ctx: Any, agent: Any) -> None:
        raise PlatformError("the platform refused")

    agent = create_agent(
        model=script(asked),
        contexts=[chat],
        outputs=[output(type="say", handler=post, errors_to_model=True)],  # (the model reads what failed)
        memory=InMemoryStore(),
    )
    async with agent:
        logs = await agent.run(chat, "room", [])
        errors = [getattr(entry, "message", "") for entry in logs if entry.kind == "error"]
        assert "output 'say' was not delivered: the platform refused" in errors
        assert len(asked) > 1  # the model read the failure and was asked again
