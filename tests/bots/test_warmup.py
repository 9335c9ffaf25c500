"""The warm-up (``bots.warmup``) builds a first message's request on every platform, in the instance the
platform's context names with ``example_args`` (issue 47: it loaded Telegram's and Discord's with the string
"warm-up", whose key function read ``args.thread_id``, and ``bots run`` exited right after "Telegram bot started").
The process-level proof is ``tests/gate``; this is the quick one, with no model loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.app import build_agent
from bots.settings import Settings
from bots.warmup import first_request
from core import ScriptedModel, context
from core.errors import DefinitionError
from tests.apps.test_own_args import own_bot

WARMED = {
    "telegram": "telegram:chat:1",  # a private chat
    "discord": "discord:channel:1",  # a direct message
    "web": "web:chat:visitor",
    "cli": "cli:session:default",  # the session the terminal chat opens
}


def settings_in(tmp_path: Path) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        bot={"data_dir": tmp_path / "data"},
        llm={"provider": "scripted"},
        telegram={"token": "1:fake"},
        discord={"token": "fake"},
    )


@pytest.mark.parametrize("platform", sorted(WARMED))
@pytest.mark.parametrize("bot", ["assistant", "own args"])
async def test_the_warm_up_builds_a_first_request_on_every_platform(tmp_path: Path, platform: str, bot: str) -> None:
    own = own_bot().bot if bot == "own args" else None
    agent = build_agent(
        settings_in(tmp_path), bot=own, platforms=[platform], model=ScriptedModel([]), compact_prompt=True
    )
    request = await first_request(agent)
    assert request is not None and request.metadata == {"context_id": WARMED[platform]}
    assert request.turns and "Hello!" in request.turns[-1][1]


async def test_the_terminal_is_warmed_first_when_the_bot_has_it(tmp_path: Path) -> None:
    agent = build_agent(
        settings_in(tmp_path), platforms=["telegram", "cli"], model=ScriptedModel([]), compact_prompt=True
    )
    request = await first_request(agent)
    assert request is not None and request.metadata == {"context_id": "cli:session:default"}


def test_example_args_that_do_not_fit_the_schema_name_the_argument() -> None:
    with pytest.raises(DefinitionError, match="example_args"):
        context(type="room", schema=int, key=str, example_args="not a number")
