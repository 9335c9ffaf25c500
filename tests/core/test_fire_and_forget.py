"""Fire-and-forget calls: validated like any call, then run on in the task runner, owned until they end or the
agent stops; nothing waits for them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, Field

from core import ActionResult, DefinitionError, InMemoryStore, ScriptedModel, action, context, create_agent, output
from tests.agent_args import agent_args

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=4)


class Ping(BaseModel):
    to: str


def R(body: str) -> str:
    return f"<response><reasoning>thinking</reasoning>{body}</response>"


def make(replies: list[str], act: Any, **kw: Any) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(replies)
    agent = create_agent(
        **agent_args(
            model=model,
            contexts=[chat],
            actions=[act],
            outputs=[output(type="chat:message", handler=lambda data, ctx, agent: None)],
            memory=InMemoryStore(),
            **kw,
        )
    )
    return agent, model


async def test_stop_cancels_a_fire_and_forget_call_that_outlives_the_stop_timeout() -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def forever(args: Any, ctx: Any, agent: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    agent, _ = make(
        [R('<action_call name="wait">{}</action_call>')],
        action(name="wait", handler=forever, fire_and_forget=True),
        stop_timeout=0.05,
    )
    async with agent:
        await agent.send(chat, "u", {"type": "chat:message", "data": "go"})
        await asyncio.wait_for(started.wait(), 30)
        assert agent.tasks.pending == 1
    assert cancelled == [True] and agent.tasks.pending == 0


async def test_invalid_arguments_of_a_fire_and_forget_call_are_an_error_the_model_reads() -> None:
    ran: list[str] = []
    agent, model = make(
        [R('<action_call name="ping">{"nobody": 1}</action_call>'), R("")],
        action(name="ping", schema=Ping, handler=lambda args, ctx, agent: ran.append(args.to), fire_and_forget=True),
    )
    async with agent:
        chain = await agent.send(chat, "u", {"type": "chat:message", "data": "go"})
    errors = [c.error for c in chain if isinstance(c, ActionResult)]
    assert len(errors) == 1 and "to" in (errors[0] or "") and ran == []
    assert len(model.requests) == 2


async def test_a_template_on_a_fire_and_forget_call_s_result_is_an_error_not_a_wait() -> None:
    release = asyncio.Event()

    async def slow(args: Any, ctx: Any, agent: Any) -> str:
        await release.wait()
        return "late"

    echo = action(name="echo", handler=lambda args, ctx, agent: args)
    model = ScriptedModel(
        [
            R('<action_call name="slow">{}</action_call><action_call name="echo">{"v": "{{calls[0]}}"}</action_call>'),
            R(""),
        ]
    )
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[action(name="slow", handler=slow, fire_and_forget=True), echo],
        outputs=[output(type="chat:message")],
        memory=InMemoryStore(),
    )
    async with agent:
        chain = await asyncio.wait_for(agent.send(chat, "u", {"type": "chat:message", "data": "go"}), 30)
        release.set()
    errors = [c.error or "" for c in chain if isinstance(c, ActionResult)]
    assert len(errors) == 1 and "not waited for" in errors[0]


def test_a_fire_and_forget_action_that_declares_an_output_path_is_a_definition_error() -> None:
    class Saved(BaseModel):
        output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")

    act = action(name="save", schema=Saved, handler=lambda args, ctx, agent: None, fire_and_forget=True)
    with pytest.raises(DefinitionError, match="without_output_path"):
        create_agent(model=ScriptedModel([]), contexts=[chat], actions=[act])
    ok = action(name="save", schema=Saved, handler=lambda args, ctx, agent: None, fire_and_forget="without_output_path")
    create_agent(model=ScriptedModel([]), contexts=[chat], actions=[ok])
