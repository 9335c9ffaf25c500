"""An output's log entry: there from the moment its tag opens, changed by what its handler returns."""

from __future__ import annotations

from typing import Any

from core import (
    InMemoryStore,
    ModelError,
    ModelRequest,
    OutputRef,
    OutputRefResponse,
    ScriptedModel,
    context,
    create_agent,
    output,
)

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=4)


def R(body: str) -> str:
    return f"<response><reasoning>thinking</reasoning>{body}</response>"


def msg(text: str) -> dict[str, Any]:
    return {"type": "chat:message", "data": text}


async def test_a_response_list_adds_entries_each_shown_through_format() -> None:
    def split(data: str, ctx: Any, agent: Any) -> list[OutputRefResponse]:
        return [OutputRefResponse(data=part, params={"part": i}) for i, part in enumerate(data.split("|"))]

    say = output(type="m", handler=split, format=lambda ref: f"part {ref.params['part']}: {ref.data}")
    model = ScriptedModel([R('<output type="m" to="ada">one|two</output>'), R("")])
    agent = create_agent(model=model, contexts=[chat], outputs=[say], memory=InMemoryStore())
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
        await agent.send(chat, "u", msg("again"))
    refs = [c for c in chain if isinstance(c, OutputRef)]
    assert [(r.data, r.params, r.text) for r in refs] == [
        ("one", {"part": "0"}, "part 0: one"),
        ("two", {"part": "1"}, "part 1: two"),
    ]
    memory = model.requests[1].prompt
    assert memory.index("part 0: one") < memory.index("part 1: two")


async def test_a_dict_may_keep_the_output_unprocessed_too() -> None:
    seen: list[str] = []

    def send(data: str, ctx: Any, agent: Any) -> dict[str, Any]:
        seen.append(data)
        return {"processed": len(seen) > 1}

    model = ScriptedModel([R('<output type="m">draft</output>'), R('<output type="m">final</output>')])
    agent = create_agent(model=model, contexts=[chat], outputs=[output(type="m", handler=send)], memory=InMemoryStore())
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert seen == ["draft", "final"] and len(model.requests) == 2


async def test_an_output_cut_off_by_a_failing_model_says_it_was_not_delivered() -> None:
    delivered: list[str] = []

    class Breaks:
        name = "breaks"
        model = ""
        vision = False
        last_usage = None

        async def stream(self, request: ModelRequest) -> Any:
            yield '<response><output type="m">half an ans'
            raise ModelError("connection reset")

    agent = create_agent(
        model=Breaks(),
        contexts=[chat],
        outputs=[output(type="m", handler=lambda data, ctx, agent: delivered.append(data))],
        memory=InMemoryStore(),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    ref = next(c for c in chain if isinstance(c, OutputRef))
    assert ref.content == "half an ans" and "broke off" in (ref.error or "") and delivered == []


async def test_agent_say_in_an_output_s_handler_posts_through_another_output_never_itself() -> None:
    posted: list[str] = []

    async def show(data: str, ctx: Any, agent: Any) -> None:
        await agent.say(ctx.state, f"shown: {data}")

    reply = output(type="reply", handler=lambda data, ctx, agent: posted.append(data))
    listing = output(type="list", handler=show)
    model = ScriptedModel([R('<output type="list">milk</output>'), R("")])
    agent = create_agent(model=model, contexts=[chat], outputs=[reply, listing], memory=InMemoryStore())
    async with agent:
        chain = await agent.send(chat, "u", msg("my notes?"))
    assert posted == ["shown: milk"]
    assert [r.error for r in chain if isinstance(r, OutputRef)] == [None]  # (a say is not in the chain)

    # the output's handler is the only way out (no platform's reply beside it): a clear error, not a recursion
    alone = create_agent(
        model=ScriptedModel([R('<output type="list">milk</output>'), R("")]),
        contexts=[chat],
        outputs=[listing],
        memory=InMemoryStore(),
    )
    async with alone:
        chain = await alone.send(chat, "u", msg("my notes?"))
    errors = [r.error for r in chain if isinstance(r, OutputRef) and r.error]
    assert len(errors) == 1 and "has no other output to post through" in errors[0], errors
