"""The terminal chat prints replies as they stream, handles commands, and survives model errors."""

from __future__ import annotations

import asyncio

from core import InMemoryStore, ModelError, ScriptedModel, create_agent
from core.facts import Facts, FactScope, remember
from extensions.terminal import chat, cli_extension, cli_session, typed
from tests.facts.shown import kept as kept_in


def _io(lines: list[str]) -> tuple[object, list[str]]:
    queue = list(lines)
    written: list[str] = []

    async def read_line() -> str | None:
        return queue.pop(0) if queue else None

    return read_line, written


async def test_chat_streams_replies_and_handles_commands() -> None:
    model = ScriptedModel(
        [
            '<response><reasoning>hi</reasoning><output type="cli:message">Hello, Ada!</output></response>',
            ModelError("provider down"),
            '<response><output type="cli:message">Back again.</output></response>',
        ],
        chunk_size=3,
    )
    agent = create_agent(model=model, extensions=[cli_extension()], memory=InMemoryStore())
    read_line, written = _io(["hi", "", "/help", "are you there?", "/reset", "still?", "/quit", "never read"])
    async with agent:
        await chat(agent, read_line=read_line, write=written.append, bot_name="bot")  # type: ignore[arg-type]
    out = "".join(written)
    assert "bot> Hello, Ada!\n" in out
    assert written.count("Hello, Ada!") == 0, "the reply arrived in pieces, as it streamed"
    assert "[error] provider down" in out
    assert "(conversation forgotten)" in out
    assert "bot> Back again." in out
    assert len(model.requests) == 3
    assert "are you there?" not in model.requests[2].prompt, "/reset forgot the conversation"


async def test_a_fact_kept_in_the_terminal_is_the_person_s_own() -> None:
    """The person at the terminal is the session's (``cli:default``, the id ``chat_of`` and the admin list use):
    what they ask the bot to remember is theirs alone, not everyone's in the chat, and their id stays out of the
    prompt."""
    model = ScriptedModel(
        [
            '<response><action_call name="remember">{"fact": "My cat is called Tom"}</action_call></response>',
            '<response><output type="cli:message">Kept.</output></response>',
        ]
    )
    facts = Facts()
    agent = create_agent(
        model=model, extensions=[cli_extension()], actions=[remember], plugins=[facts], memory=InMemoryStore()
    )
    read_line, written = _io(["Please remember that my cat is called Tom."])
    async with agent:
        await chat(agent, read_line=read_line, write=written.append)  # type: ignore[arg-type]
        kept = await facts.store.of_conversation("cli:session:default")
    assert [(f.text, f.owner, f.scope) for f in kept] == [("My cat is called Tom", "cli:default", FactScope.PRIVATE)]
    # (told to them, it is theirs: "Your cat ...", as the model answers it)
    assert kept_in(model.requests[1].prompt) == ["Your cat is called Tom"]
    assert "user_id" not in model.requests[0].prompt and "tier" not in model.requests[0].prompt


async def test_an_answer_no_typed_line_asked_for_is_printed_above_the_prompt() -> None:
    """A reminder that fired in the terminal chat was answered into nothing: only the answer to a typed line was
    printed (as it streamed). An answer of another run (here a message that arrives while the prompt waits) is
    printed once, above a new prompt; the answer to a typed line still once."""
    model = ScriptedModel(
        [
            '<response><output type="cli:message">Hello!</output></response>',
            '<response><output type="cli:message">Time to stretch!</output></response>',
        ]
    )
    agent = create_agent(model=model, extensions=[cli_extension()], memory=InMemoryStore())
    written: list[str] = []
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    await lines.put("hi")
    async with agent:
        talking = asyncio.create_task(chat(agent, read_line=lines.get, write=written.append, bot_name="bot"))
        while "bot> Hello!" not in "".join(written) or not "".join(written).endswith("you> "):
            await asyncio.sleep(0.01)
        await agent.send(cli_session, "default", typed("default", "the reminder fires"))
        await lines.put(None)
        await talking
    out = "".join(written)
    assert out.count("Hello!") == 1 and out.count("Time to stretch!") == 1
    assert "you> \nbot> Time to stretch!\nyou> " in out
