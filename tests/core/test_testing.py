"""Testing outputs that post (issue 48, ``core.testing``): the README's notes bot shows its notes with its own output,
whose handler posts through the conversation's platform with ``agent.say``. Driven directly in a ScriptedModel test,
with no platform, that output failed and the test passed anyway: the error was only on ``OutputRef.error``. The
stand-in platform (``StandInChat``) gives the conversation a reply output that keeps what is posted, and its
``says`` fails the test when an output failed, unless the test says it expects it."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from core import Bot, OutputRef, ScriptedModel, action, context, create_agent, output, read_state
from core.errors import PlatformError
from core.testing import OutputFailed, StandInChat, check_outputs


class Note(BaseModel):
    text: str
    _outputPath: str = "†state.notes"
    _outputMethod: Literal["push"] = "push"


def listed(state: Any) -> str:
    return ", ".join(read_state(state, "†state.notes", [])) or "none"


async def show(text: str, ctx: Any, agent: Any) -> None:
    await agent.say(ctx.state, f"{text} {listed(ctx.state)}")


notes = context(type="notes", schema=str, key=lambda chat: chat, render=lambda state: "Notes: " + listed(state))
bot = Bot(
    name="notes",
    context=notes,
    actions=[action(name="keep", description="Keeps a note", schema=Note, handler=lambda args, ctx, agent: args.text)],
    outputs=[output(type="notes:list", description="Shows the notes", handler=show)],
)

KEEP = '<response><action_call name="keep">{"text": "buy milk"}</action_call></response>'
SHOW = '<response><output type="notes:list">You keep:</output></response>'
IDLE = "<response><reasoning>done</reasoning></response>"


async def test_an_output_that_posts_with_agent_say_posts_on_the_stand_in_platform() -> None:
    chat = StandInChat()
    agent = create_agent(model=ScriptedModel([KEEP, IDLE, SHOW]), bot=bot, extensions=[chat.extension])
    async with agent:
        await chat.says(agent, "Remember milk")
        await chat.says(agent, "What do you keep?")
    assert chat.texts() == ["You keep: buy milk"]


async def test_a_failed_output_fails_the_test_unless_it_is_expected() -> None:
    """Driven directly, with no platform to post through, ``agent.say`` fails: ``check_outputs`` says so."""
    agent = create_agent(model=ScriptedModel([SHOW]), bot=bot)
    async with agent:
        chain = await agent.send(notes, "1", {"type": "notes:message", "data": "What do you keep?"})
    failed = [e for e in chain if isinstance(e, OutputRef) and e.error]
    assert [e.type for e in failed] == ["notes:list"]
    with pytest.raises(OutputFailed, match=r"output 'notes:list' failed: .*expect_output_errors=True"):
        check_outputs(chain)


async def test_a_platform_down_fails_says_unless_the_test_expects_it() -> None:
    chat = StandInChat()
    chat.fail_with = PlatformError("the platform is down")
    agent = create_agent(model=ScriptedModel([SHOW, SHOW]), bot=bot, extensions=[chat.extension])
    async with agent:
        with pytest.raises(OutputFailed, match="the platform is down"):
            await chat.says(agent, "What do you keep?")
        chain = await chat.says(agent, "What do you keep?", expect_output_errors=True)
    assert any(isinstance(e, OutputRef) and e.type == "notes:list" and e.error for e in chain)
    assert chat.posted == []
