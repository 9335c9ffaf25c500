"""Safe by default (core/safety.py): every bot gets the safety plugins (the loop guard first) unless it goes
without them by name; a bot written as the docs show, with no plugins named, answers a repeating model once."""

from __future__ import annotations

import random
from typing import Any

import pytest

from core import Bot, ScriptedModel, action, create_agent
from core.errors import DefinitionError
from core.loop_guard import LoopGuard
from core.safety import SAFE_DEFAULTS
from core.testing import StandInChat

REPEAT = (  # a call and a reply, so that without the guard each step's result asks for another step
    '<response><action_call name="roll">{}</action_call>'
    '<output type="test:message">Hello! How can I help?</output></response>'
)


def roll(args: dict, ctx: Any, agent: Any) -> int:  # (the README's dice bot, as written there)
    return random.randint(1, 6)


def readme_bot(**kw: Any) -> Bot:
    return Bot(name="dice", instructions="Roll the die when asked.", actions=[action(name="roll", handler=roll)], **kw)


async def answers(bot: Bot | None, **agent_kw: Any) -> tuple[list[str], ScriptedModel]:
    chat = StandInChat()
    model = ScriptedModel([REPEAT], repeat_last=True)  # a model that says the same thing at every step
    agent = create_agent(model=model, bot=bot, extensions=[chat.extension], **agent_kw)
    async with agent:
        await chat.says(agent, "hi", expect_output_errors=True)
    return chat.texts(), model


async def test_a_bot_from_the_docs_with_no_plugins_answers_a_repeating_model_once() -> None:
    texts, _ = await answers(readme_bot())
    assert texts == ["Hello! How can I help?"]


async def test_create_agent_with_the_bot_given_as_plugins_has_the_loop_guard_too() -> None:
    texts, _ = await answers(None, actions=[action(name="roll", handler=roll)])
    assert texts == ["Hello! How can I help?"]


async def test_a_bot_that_goes_without_the_loop_guard_by_name_gets_every_repeat() -> None:
    texts, _ = await answers(readme_bot(without=["loop-guard"]))
    assert len(texts) > 1 and set(texts) == {"Hello! How can I help?"}  # as many as its steps allow
    texts, _ = await answers(readme_bot(), without=["loop-guard"])
    assert len(texts) > 1


def test_the_loop_guard_comes_first_and_once() -> None:
    class Other(LoopGuard.__base__):  # type: ignore[misc,name-defined]
        name = "other"

    agent = create_agent(model=ScriptedModel([REPEAT]), plugins=[Other()])
    assert [p.name for p in agent.plugins] == ["loop-guard", "other"]
    mine = LoopGuard()
    agent = create_agent(model=ScriptedModel([REPEAT]), plugins=[Other(), mine])
    assert agent.plugins == (agent.plugins[0], mine) and agent.plugins[0].name == "other"  # the bot's own kept


def test_an_unknown_name_to_go_without_is_a_definition_error_naming_the_known_ones() -> None:
    with pytest.raises(DefinitionError, match=r"Bot\(without=\['loop_guard'\]\).*loop-guard, limits"):
        Bot(name="x", without=["loop_guard"])
    with pytest.raises(DefinitionError, match=r"create_agent\(without=\['nope'\]\)"):
        create_agent(model=ScriptedModel([REPEAT]), without=["nope"])


def test_the_plugins_guide_lists_every_safe_default() -> None:
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "plugins.md").read_text()
    for default in SAFE_DEFAULTS:
        assert f"| `{default.name}` |" in guide, default.name


def test_the_plugins_guide_lists_every_run_hook() -> None:
    from pathlib import Path

    from core.plugin import HOOKS

    guide = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "plugins.md").read_text()
    assert [h for h in HOOKS if f"- `{h}(" not in guide] == []
