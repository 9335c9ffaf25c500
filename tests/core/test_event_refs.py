"""Events a context records (``EventRef``): from handlers and hooks, in the chain, shown to the model, and kept."""

from __future__ import annotations

from typing import Any

import pytest

from core import DefinitionError, EventRef, WorkingMemory, output

from ..framework.kit import R, bot, chat, msg


async def test_a_processed_event_is_shown_later_but_asks_for_no_step() -> None:
    def say(data: str, ctx: Any, agent: Any) -> None:
        ctx.emit("replied", {"chars": len(data)}, processed=True)

    agent, model = bot(
        [R('<output type="chat:message">Hello</output>'), R("")],
        outputs=(output(type="chat:message", handler=say),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
        assert len(model.requests) == 1
        await agent.send(chat, "u", msg("again"))
    event = next(c for c in chain if isinstance(c, EventRef))
    assert (event.name, event.data, event.source) == ("replied", {"chars": 5}, "output:chat:message")
    assert '<event name="replied" source="output:chat:message"' in model.requests[1].prompt
    assert '{"chars": 5}</event>' in model.requests[1].prompt


def test_an_event_outside_a_run_goes_to_working_memory_and_survives_a_dump() -> None:
    from core import ContextState

    state = ContextState(id="chat:u", context=chat, args="u", key="u", memory={}, working_memory=WorkingMemory())
    state.emit("created")
    loaded = WorkingMemory.load(state.working_memory.dump(), limit=10)
    assert [(type(e).__name__, e.kind) for e in loaded.logs] == [("EventRef", "event")]
    with pytest.raises(DefinitionError, match="event name"):
        state.emit("no spaces allowed")
