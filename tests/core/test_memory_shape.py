"""Memory whose shape changes safely (issue 48, ``core.memory_shape``): a conversation's memory kept by another bot
or an older version of this one is brought to the current shape (``create``'s keys filled in, or the context's
``upgrade`` with the version kept beside it); memory of another bot that does not fit is never handed over; memory
kept by a newer version is refused with an error saying what to do. Each bot's context is laid over one platform
conversation (a ``conversation=True`` context), on one memory store, as bots run one after the other in a folder."""

from __future__ import annotations

from typing import Any

import pytest

from core import Bot, ContextState, ScriptedModel, context, create_agent
from core.errors import RunError
from core.memory import InMemoryStore
from core.memory_shape import Shape, fits

platform = context(type="chat", schema=str, key=lambda chat: chat, conversation=True)
"""A platform's conversation, as the terminal's ``cli:session`` is."""

IDLE = "<response><reasoning>ok</reasoning></response>"


def todo_bot(*, version: int = 1, create: Any = None, upgrade: Any = None, name: str = "todo") -> Bot:
    def render(state: ContextState[Any]) -> str:
        return f"Todo list: {', '.join(state.memory['todos']) or '(empty)'}; done: {state.memory.get('done')}"

    own = context(
        type=name,
        schema=str,
        create=create or (lambda state: {"todos": []}),
        render=render,
        version=version,
        upgrade=upgrade,
    )
    return Bot(name=name, context=own)


async def talk(bot: Bot | None, memory: InMemoryStore, *, text: str = "hi") -> tuple[ScriptedModel, Any]:
    """One message to the conversation ``a`` of ``platform`` with ``bot`` (None: no context of its own, as the
    built-in assistant); the model and the conversation's memory after it."""
    model = ScriptedModel([IDLE])
    agent = create_agent(model=model, bot=bot or Bot(name="assistant"), contexts=[platform], memory=memory)
    async with agent:
        await agent.send(platform, "a", {"type": "chat:message", "data": text})
        state = await agent.load_state(platform, "a")
    return model, state.memory


async def test_a_conversation_another_bot_used_is_brought_to_the_new_bots_shape() -> None:
    memory = InMemoryStore()
    _, kept = await talk(None, memory)
    assert kept == {}
    model, kept = await talk(todo_bot(), memory)
    assert "Todo list: (empty)" in model.requests[0].prompt
    assert kept == {"todos": []}
    assert Shape.load(await memory.get("shape:chat:a")) == Shape(context="todo", version=1)


async def test_memory_kept_before_shapes_were_is_filled_in_from_create() -> None:
    memory = InMemoryStore()
    await memory.set("context:chat:a", {"notes": ["x"]})  # (an older release kept no shape)
    model, kept = await talk(todo_bot(), memory)
    assert kept == {"notes": ["x"], "todos": []}
    assert "Todo list: (empty)" in model.requests[0].prompt


async def test_a_key_create_gains_with_a_new_version_is_filled_in() -> None:
    memory = InMemoryStore()
    await talk(todo_bot(create=lambda state: {"todos": ["milk"]}), memory)
    newer = todo_bot(version=2, create=lambda state: {"todos": [], "done": []})
    model, kept = await talk(newer, memory)
    assert kept == {"todos": ["milk"], "done": []}
    assert "Todo list: milk; done: []" in model.requests[0].prompt
    assert Shape.load(await memory.get("shape:chat:a")) == Shape(context="todo", version=2)


async def test_an_upgrade_function_brings_an_older_versions_memory_with_its_version() -> None:
    memory = InMemoryStore()
    await talk(todo_bot(create=lambda state: {"items": "milk,eggs"}), memory)
    seen: list[int] = []

    def upgrade(old: Any, version: int) -> Any:
        seen.append(version)
        return {"todos": old["items"].split(",")}

    model, kept = await talk(todo_bot(version=3, upgrade=upgrade), memory)
    assert seen == [1]
    assert kept == {"todos": ["milk", "eggs"]}
    assert "Todo list: milk, eggs" in model.requests[0].prompt


async def test_another_bots_memory_that_does_not_fit_is_never_handed_over(caplog: pytest.LogCaptureFixture) -> None:
    memory = InMemoryStore()
    await talk(todo_bot(name="notes", create=lambda state: {"todos": "a text, not a list"}), memory)
    model, kept = await talk(todo_bot(), memory)
    assert kept == {"todos": []}
    assert "Todo list: (empty)" in model.requests[0].prompt
    assert "kept by context 'notes' (another bot) and does not fit" in caplog.text


async def test_memory_of_a_newer_version_is_refused_saying_what_to_do() -> None:
    memory = InMemoryStore()
    await talk(todo_bot(version=2), memory)
    agent = create_agent(model=ScriptedModel([IDLE]), bot=todo_bot(version=1), contexts=[platform], memory=memory)
    async with agent:
        with pytest.raises(RunError, match=r"newer than this bot's \(1\): run the newer bot, or /reset"):
            await agent.load_state(platform, "a")


def test_fits_compares_json_kinds_key_by_key() -> None:
    assert fits({"todos": [], "n": 1.5, "extra": "x"}, {"todos": ["a"], "n": 0, "missing": True})
    assert not fits({"todos": "x"}, {"todos": []})
    assert not fits(["a"], {"todos": []})
    assert fits({"flag": None}, {"flag": False}) and not fits({"flag": 1}, {"flag": False})
