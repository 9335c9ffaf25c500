"""The author's context is the author's on every platform (issue 48): one bot whose context declares its own
schema (``tests/apps/own_args_bot.py``: ``chat_id: str``, the platform, a thread) and whose render reads
``state.args`` runs unchanged with a scripted model, in the terminal (``bots chat``'s loop), on the web chat, on
Telegram and Discord (``bots run`` as a process on the fakes) and in a fleet (a gateway and two workers on a real
Redis). Before, on a platform ``state.args`` were the platform's (Telegram's ``chat_id`` an int), and every message
was answered "Sorry, something went wrong". A schema the platform's chat cannot fill names ``from_platform``; the
author's ``from_platform`` builds the arguments when given."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

from bots.app import build_agent
from bots.settings import Settings
from core import PlatformChat, ScriptedModel, context, create_agent
from core.bot import own_args
from extensions.telegram import ChatArgs, telegram_chat
from extensions.terminal import chat
from extensions.web import web_runtime
from tests.bots_fleet import Process, env_for, start_fleet, stop_all
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer
from tests.web.conftest import WEB_SECRET, client
from tests.web.visiting import talk

from .support import OWN_ARGS, PLATFORMS, ROOT, ScriptedServer
from .test_examples_as_apps import platform_settings, talk_on_both

BOT_FILE = ROOT / OWN_ARGS.app


def own_bot() -> ModuleType:
    """The bot file, imported as ``bots run`` imports it."""
    spec = importlib.util.spec_from_file_location("own_args_bot", BOT_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("own_args_bot", module)
    spec.loader.exec_module(module)
    return module


def answers(reply: str) -> list[str]:
    return OWN_ARGS.answers(reply)


def prompts_of(model: ScriptedModel) -> list[str]:
    return [r.prompt for r in model.requests]


def saved_on(platform: str) -> str:
    return OWN_ARGS.saved[0].replace("{platform}", platform)


def assert_saved_shown(prompts: list[str], platform: str) -> None:
    """The render ran with the author's arguments: the first turn shows no notes, the second the note."""
    first = next(p for p in prompts if OWN_ARGS.first.says in p)
    second = next(p for p in prompts if OWN_ARGS.second.says in p)
    assert "notes: (none)" in first, first
    assert saved_on(platform) in second, second


def test_a_bots_own_args_in_a_scripted_model_test() -> None:
    mod = own_bot()
    model = ScriptedModel(answers("noted:message"))

    async def run() -> None:
        agent = create_agent(model=model, bot=mod.bot)
        async with agent:
            for turn in (OWN_ARGS.first, OWN_ARGS.second):
                await agent.send(mod.chats, mod.Chat(chat_id="7"), {"type": "noted:message", "data": turn.says})

    asyncio.run(run())
    assert_saved_shown(prompts_of(model), "test")


def settings_in(tmp_path: Path, **values: Any) -> Settings:
    config: dict[str, Any] = {"bot": {"data_dir": tmp_path / "data", "quiet_ms": 0}, "llm": {"provider": "scripted"}}
    config.update(values)
    return Settings(_env_file=None, **config)  # type: ignore[call-arg]


async def test_a_bots_own_args_in_the_terminal(tmp_path: Path) -> None:
    mod = own_bot()
    model = ScriptedModel(answers("cli:message"))
    agent = build_agent(settings_in(tmp_path), bot=mod.bot, platforms=["cli"], model=model)
    typed = [OWN_ARGS.first.says, OWN_ARGS.second.says]
    written: list[str] = []

    async def read_line() -> str | None:
        return typed.pop(0) if typed else None

    async with agent:
        await chat(agent, read_line=read_line, write=written.append)
    shown = "".join(written)
    assert "Noted." in shown and "Bread." in shown and "wrong" not in shown, shown
    assert_saved_shown(prompts_of(model), "cli")


async def test_a_bots_own_args_on_the_web_chat(tmp_path: Path) -> None:
    from tests.web.conftest import _free_port

    mod = own_bot()
    model = ScriptedModel(answers("web:message"))
    settings = settings_in(tmp_path, web={"port": _free_port(), "secret": WEB_SECRET})
    agent = build_agent(settings, bot=mod.bot, platforms=["web"], model=model)
    async with agent, client() as session:
        runtime = web_runtime(agent)
        assert runtime is not None and runtime.address is not None
        await talk(runtime.address, session, OWN_ARGS.first.says, until="Noted.")
        await talk(runtime.address, session, OWN_ARGS.second.says, until="Bread.")
    assert_saved_shown(prompts_of(model), "web")


def check_platforms(model: ScriptedServer) -> None:
    for platform in PLATFORMS:
        assert_saved_shown(model.prompts(platform), platform)


async def test_a_bots_own_args_on_telegram_and_discord_in_one_process(tmp_path: Path, processes: list[Process]) -> None:
    async with ScriptedServer(OWN_ARGS) as model, FakeTelegramServer() as telegram, FakeDiscord() as discord:
        bot = Process(
            "run", env_for(tmp_path, **platform_settings(telegram, discord, model)), tmp_path, app=str(BOT_FILE)
        )
        processes.append(bot)
        await bot.start()
        await bot.wait_for("ready with discord, telegram")
        await talk_on_both(OWN_ARGS, model, telegram, discord)
        assert await bot.terminate() == 0, bot.lines[-5:]
    check_platforms(model)
    assert not [line for line in bot.lines if line.get("level") in ("ERROR", "CRITICAL")], bot.lines


async def test_a_bots_own_args_on_a_gateway_and_two_workers(
    tmp_path: Path, redis_server: RedisServer, processes: list[Process]
) -> None:
    async with ScriptedServer(OWN_ARGS) as model, FakeTelegramServer() as telegram, FakeDiscord() as discord:
        settings = {**platform_settings(telegram, discord, model), "REDIS_URL": redis_server.url}
        gateway, workers = await start_fleet(tmp_path, settings, processes, workers=2, app=str(BOT_FILE))
        await talk_on_both(OWN_ARGS, model, telegram, discord)
        await stop_all(gateway, *workers)
    check_platforms(model)
    for process in (gateway, *workers):
        assert not [line for line in process.lines if line.get("level") in ("ERROR", "CRITICAL")], process.lines


class Room(BaseModel):
    room: str
    owner: int


def test_a_schema_the_chat_cannot_fill_names_from_platform_and_the_authors_function_builds_it() -> None:
    from core.errors import DefinitionError
    from core.registry import Registry

    def laid(own: Any) -> Any:
        registry = Registry()
        registry.register([telegram_chat], [], [], [], owner="test")
        registry.lay(own)
        return registry.contexts[telegram_chat.type]

    bare = context(type="room", schema=Room, key=lambda r: r.room)
    with pytest.raises(DefinitionError, match="required field 'room' is filled by no platform's chat; give the "):
        laid(bare)  # said when the bot is laid over the platforms (the agent is built), not at each message

    class Private(BaseModel):
        user_id: str  # filled in a private chat only

    group = context(type="private", schema=Private, key=lambda p: p.user_id)
    with pytest.raises(DefinitionError, match=r"cannot be built from a telegram chat .* from_platform"):
        own_args(laid(group), ChatArgs(chat_id=-5, thread_id=3))
    assert own_args(laid(group), ChatArgs(chat_id=42)) == Private(user_id="42")

    def from_platform(chat: PlatformChat) -> Room:
        return Room(room=f"{chat.platform}/{chat.chat_id}/{chat.thread_id}", owner=chat.args.chat_id)

    given = context(type="room", schema=Room, key=lambda r: r.room, from_platform=from_platform)
    assert own_args(laid(given), ChatArgs(chat_id=-5, thread_id=3)) == Room(room="telegram/-5/3", owner=-5)
