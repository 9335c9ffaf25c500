"""The loop guard (core/loop_guard.py): what a run already did is refused back to the model, and a step that adds
nothing new ends the run."""

from __future__ import annotations

import asyncio
from typing import Any

from core import (
    ActionResult,
    ErrorLog,
    InMemoryStore,
    OutputRef,
    RunEvent,
    RunEventType,
    ScriptedModel,
    action,
    context,
    create_agent,
    output,
)
from core.loop_guard import LoopGuard, Repeats

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=5)


def R(body: str) -> str:
    return f"<response><reasoning>thinking</reasoning>{body}</response>"


def msg(text: str) -> dict[str, Any]:
    return {"type": "chat:message", "data": text}


def make(replies: Any, sent: list[str], **model_kw: Any) -> tuple[Any, ScriptedModel, list[str]]:
    ran: list[str] = []

    def remember(args: dict[str, str], ctx: Any, agent: Any) -> str:
        ran.append(args["fact"])
        return "ok"

    model = ScriptedModel(replies, **model_kw)
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[action(name="remember", schema=dict[str, str], handler=remember)],
        outputs=[output(type="chat:message", handler=lambda data, ctx, agent: sent.append(data))],
        memory=InMemoryStore(),
        plugins=[LoopGuard()],
    )
    return agent, model, ran


CALL = '<action_call name="remember">{"fact": "likes tea"}</action_call>'


async def test_a_repeated_call_is_refused_and_not_run_but_the_run_goes_on_when_something_else_is_new() -> None:
    sent: list[str] = []
    agent, model, ran = make([R(CALL), R(CALL + '<output type="chat:message">Noted.</output>')], sent, chunk_size=7)
    async with agent:
        chain = await agent.send(chat, "u", msg("I like tea"))
    assert ran == ["likes tea"] and sent == ["Noted."]
    refused = [c for c in chain if isinstance(c, ActionResult) and c.error]
    assert len(refused) == 1 and "already called with these arguments" in (refused[0].error or "")
    assert len(model.requests) == 3  # the refusal is an update the model reads


async def test_the_same_arguments_in_another_order_or_spacing_are_the_same_call() -> None:
    guard = Repeats()
    guard.call_done("remember", '{"a": 1, "b": 2}', step=1)
    assert guard.repeated_call("remember", '{ "b":2,\n "a":1 }', step=2)
    assert not guard.repeated_call("remember", '{"a": 1, "b": 2}', step=1)  # the same response: asked on purpose
    assert not guard.repeated_call("remember", '{"a": 1, "b": 3}', step=2)
    assert not guard.repeated_call("forget", '{"a": 1, "b": 2}', step=2)


async def test_the_same_reply_to_a_new_message_is_no_repeat() -> None:
    sent: list[str] = []
    reply = R('<output type="chat:message">Hello there, Ada</output>')
    agent, model, _ = make([reply], sent, chunk_size=3, repeat_last=True)
    events: list[RunEvent] = []
    agent.add_event_listener(events.append)
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
        chain += await agent.send(chat, "u", msg("hi again"))
    assert sent == ["Hello there, Ada", "Hello there, Ada"]  # one reply per message
    assert len(model.requests) == 2
    texts = [e for e in events if e.type == RunEventType.OUTPUT_TEXT and not e.final]
    assert "".join(e.content for e in texts) == "Hello there, Ada" * 2
    errors = [c for c in chain if isinstance(c, ErrorLog)]
    assert errors == []  # a new message starts a new run: nothing is refused


async def test_a_reply_that_starts_like_an_earlier_one_streams_once_it_differs() -> None:
    sent: list[str] = []
    agent, model, _ = make(
        [
            R(CALL + '<output type="chat:message">Noted.</output>'),
            R('<output type="chat:message">Noted.</output><output type="chat:message">Noted, and more.</output>'),
            R(""),
        ],
        sent,
        chunk_size=2,
    )
    events: list[RunEvent] = []
    agent.add_event_listener(events.append)
    async with agent:
        chain = await agent.send(chat, "u", msg("I like tea"))
    assert sent == ["Noted.", "Noted, and more."]
    deltas: dict[tuple[int, int | None], str] = {}
    finals = []
    for e in events:
        if e.type in (RunEventType.OUTPUT_TEXT, RunEventType.OUTPUT_TEXT_DONE):
            if e.final:
                finals.append((e.content, e.error))
            else:
                deltas[(e.step, e.output_index)] = deltas.get((e.step, e.output_index), "") + e.content
    assert sorted(deltas.values()) == ["Noted, and more.", "Noted."]  # the repeat was never streamed
    assert finals[1][0] == "" and "repeats one you already sent" in (finals[1][1] or "")
    refused = [c for c in chain if isinstance(c, OutputRef) and c.error]
    assert len(refused) == 1 and refused[0].content == "Noted."
    assert len(model.requests) == 3  # the second step also said something new: the model reads the refusal
    assert "repeats one you already sent" in model.requests[2].prompt


async def test_a_failed_reply_may_be_sent_again() -> None:
    attempts: list[str] = []

    def flaky(data: str, ctx: Any, agent: Any) -> None:
        attempts.append(data)
        if len(attempts) == 1:
            raise ConnectionError("platform down")

    model = ScriptedModel([R('<output type="m">Hi</output>')] * 2)
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="m", handler=flaky, errors_to_model=True)],  # the model is asked again
        memory=InMemoryStore(),
        plugins=[LoopGuard()],
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert attempts == ["Hi", "Hi"]


async def test_a_message_that_joins_the_run_may_get_the_same_reply_and_the_same_call_again() -> None:
    sent: list[str] = []
    ran: list[str] = []
    joined: list[asyncio.Task[Any]] = []
    reply = R(CALL + '<output type="chat:message">Noted.</output>')
    model = ScriptedModel([reply, reply, R("")])

    def remember(args: dict[str, str], ctx: Any, agent: Any) -> str:
        ran.append(args["fact"])
        return "ok"

    async def deliver(data: str, ctx: Any, agent: Any) -> None:
        sent.append(data)
        if len(sent) == 1:  # the user says it again while the run is still going: the input joins it
            joined.append(asyncio.create_task(agent.send(chat, "u", msg("I like tea"))))
            for _ in range(20):
                await asyncio.sleep(0)

    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[action(name="remember", schema=dict[str, str], handler=remember)],
        outputs=[output(type="chat:message", handler=deliver)],
        memory=InMemoryStore(),
        plugins=[LoopGuard()],
    )
    async with agent:
        first = await agent.send(chat, "u", msg("I like tea"))
        (second,) = await asyncio.gather(*joined)
    assert second is first, "the second message joined the first run"
    assert sent == ["Noted.", "Noted."] and ran == ["likes tea", "likes tea"]
