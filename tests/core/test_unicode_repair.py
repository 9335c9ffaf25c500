"""Text that is not valid Unicode (a lone surrogate) is repaired where it enters: it never crashes the model
client, the SQLite history or working memory's JSON, and never costs the messages batched with it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core import (
    ModelRequest,
    OutputRef,
    ScriptedModel,
    SQLiteStore,
    action,
    context,
    create_agent,
    input,
    output,
)
from core.memory import SQLiteHistory
from core.memory.long_memory import LongMemory
from core.testing import updates_of
from core.unicode_text import repair_strings, repair_text

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=4)
BAD = "\ud800"
"""A lone surrogate: a JSON escape (``"\\ud800"``) decodes to it, no encoding can write it."""


def _saved(logs: Any) -> str:
    """Working memory as JSON, which a lone surrogate would make fail."""
    return "".join(entry.model_dump_json() for entry in logs)


def _say(text: str) -> str:
    return f'<response><reasoning>ok</reasoning><output type="chat:message">{text}</output></response>'


def test_repair_replaces_lone_surrogates_and_joins_pairs() -> None:
    assert repair_text(f"a{BAD}b\udfff") == "a\ufffdb\ufffd"
    assert repair_text("\ud83d\ude00") == "😀"  # a pair written as two code points is the character
    valid = "plain text, ünïcode, 😀"
    assert repair_text(valid) is valid
    nested: dict[str, Any] = {"k": ["x", ("y",)], "n": 1}
    assert repair_strings(nested) is nested  # nothing to repair: the same object
    assert repair_strings({f"k{BAD}": [BAD, (BAD, 2)]}) == {"k\ufffd": ["\ufffd", ("\ufffd", 2)]}


async def test_a_lone_surrogate_among_other_messages_costs_none_of_them(tmp_path: Path) -> None:
    heard: list[str] = []
    sent: list[str] = []

    def answer(request: ModelRequest) -> str:
        updates = updates_of(request.prompt)
        heard.append(updates)
        return _say("answered")

    history = SQLiteHistory(tmp_path / "history.sqlite3")
    agent = create_agent(
        model=ScriptedModel(answer, first_delay=0.05),
        contexts=[chat],
        inputs=[input(type="chat:message", schema=str)],
        outputs=[output(type="chat:message", handler=lambda data, ctx, ag: sent.append(data))],
        memory=SQLiteStore(tmp_path / "memory.sqlite3"),
        plugins=[LongMemory(history)],
    )
    texts = ["first", f"broken {BAD} text", "third", f"{BAD}", "fifth"]
    async with agent:
        chains = await asyncio.gather(
            *(agent.send(chat, "room", {"type": "chat:message", "data": t, "params": {"user": t}}) for t in texts)
        )
        state = await agent.load_state(chat, "room")
    for chain in chains:  # every sender got its answer, the ones next to the broken text too
        assert any(isinstance(e, OutputRef) and e.data == "answered" for e in chain)
    prompts = "".join(heard)
    assert "first" in prompts and "third" in prompts and "fifth" in prompts and "broken \ufffd text" in prompts
    stored = await history.search("chat:room", limit=20)
    said = sorted(e.text for e in stored if e.role == "user")
    assert said == sorted(["first", "broken \ufffd text", "third", "\ufffd", "fifth"])
    assert all(BAD not in e.who for e in stored)
    assert BAD not in _saved(state.working_memory.logs)  # working memory was saved as JSON
    await history.close()


async def test_a_lone_surrogate_from_an_action_or_the_model_is_repaired_before_it_is_stored(tmp_path: Path) -> None:
    sent: list[str] = []
    calls = {"n": 0}

    def answer(request: ModelRequest) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            return '<response><action_call name="lookup">{}</action_call></response>'
        return _say(f"the tool said {BAD} here")

    history = SQLiteHistory(tmp_path / "history.sqlite3")
    agent = create_agent(
        model=ScriptedModel(answer),
        contexts=[chat],
        actions=[action(name="lookup", handler=lambda args, ctx, ag: {"title": f"odd {BAD} name", BAD: [BAD]})],
        outputs=[output(type="chat:message", handler=lambda data, ctx, ag: sent.append(data))],
        memory=SQLiteStore(tmp_path / "memory.sqlite3"),
        plugins=[LongMemory(history)],
    )
    async with agent:
        await agent.send(chat, "room", {"type": "chat:message", "data": "look it up"})
        calls["n"] = 1  # the next message is answered straight away: the run before left everything usable
        await agent.send(chat, "room", {"type": "chat:message", "data": "and again"})
        state = await agent.load_state(chat, "room")
    assert sent == ["the tool said \ufffd here", "the tool said \ufffd here"]
    assert BAD not in _saved(state.working_memory.logs)
    assert "odd \ufffd name" in _saved(state.working_memory.logs)
    replies = [e.text for e in await history.search("chat:room", limit=20) if e.role == "assistant"]
    assert replies == ["the tool said \ufffd here", "the tool said \ufffd here"]
    await history.close()
