"""The README's bot and each bot of ``examples/`` as an APP, on Telegram and on Discord through the fake
platforms and a scripted model behind a fake OpenAI-compatible server: in one process (``bots run APP``) and through
a gateway and two workers on a real Redis (``bots gateway APP``, ``bots worker APP``). In each conversation the
author's action is called, what it saved (``_outputPath``) is in the model's prompt of the next turn, and the
author's own output posts on the platform (``agent.say``). A worker running another bot than its gateway leaves the
gateway's batches to a worker that runs the same one; a bot file with a mistake stops ``bots run`` with exit code 2
and the file and line of the mistake.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bots_fleet import Process, env_for, start_fleet, stop_all
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer

from .support import (
    CONVERSATIONS,
    DEADLINE,
    PLATFORMS,
    ROOT,
    Conversation,
    DiscordUser,
    ScriptedServer,
    TelegramUser,
    readme_bot,
)


def platform_settings(telegram: FakeTelegramServer, discord: FakeDiscord, model: ScriptedServer) -> dict[str, str]:
    """Both platforms on their fakes (Discord: no wait for servers, no command sync), the model on ``model``, no
    web chat."""
    return {
        "TELEGRAM_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.api_url,
        "TELEGRAM_POLL_TIMEOUT": "1",
        "DISCORD_TOKEN": "fake-token",
        "DISCORD_API_URL": discord.api_url,
        "DISCORD_GATEWAY_URL": discord.gateway_url,
        "DISCORD_GUILD_READY_TIMEOUT": "0.05",
        "DISCORD_SYNC_COMMANDS": "false",
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": model.url,
        "LLM_API_KEY": "sk-test",
        "LLM_MODEL": "fake-model",
        "WEB_PORT": "0",
    }


def app_of(conversation: Conversation, folder: Path) -> str:
    """The path ``bots`` is given for the conversation's APP."""
    if conversation.app != "README":
        return str(ROOT / conversation.app)
    written = readme_bot(folder)
    if written is None:
        pytest.skip("README.md shows no bot (a python block with `bot = Bot(...)`) to run as an APP")
    return str(written)


async def converse(
    conversation: Conversation, user: TelegramUser | DiscordUser, model: ScriptedServer, platform: str
) -> None:
    """The two turns, each once the bot answered the one before and the model was asked for its last step."""
    asked = 0
    for turn in (conversation.first, conversation.second):
        said = user.says(turn.says)
        if said is not None:
            await said
        await user.sees(turn.sees)
        asked += len(turn.answers)
        async with asyncio.timeout(DEADLINE):
            while len(model.prompts(platform)) < asked:
                await asyncio.sleep(0.05)


def with_text(prompts: list[str], text: str) -> str:
    """The first of ``prompts`` holding ``text``."""
    found = [p for p in prompts if text in p]
    assert found, f"no prompt holds {text!r}: {prompts}"
    return found[0]


def check(conversation: Conversation, model: ScriptedServer, platform: str) -> None:
    """The action was called (its result is in the step after), what it saved is in the first prompt of the
    second turn and not in the first turn's, and the model was offered the author's output."""
    prompts = model.prompts(platform)
    first, second = with_text(prompts, conversation.first.says), with_text(prompts, conversation.second.says)
    for saved in conversation.saved:
        assert saved not in first, f"{saved!r} was in the prompt before the action saved it"
        assert saved in second, f"{platform}: {saved!r} is not in the next turn's prompt:\n{second}"
    assert any(f'<action_result name="{conversation.action}"' in p for p in prompts), prompts
    if conversation.output is not None:
        assert f'type="{conversation.output}"' in first


async def talk_on_both(
    conversation: Conversation, model: ScriptedServer, telegram: FakeTelegramServer, discord: FakeDiscord
) -> None:
    """The conversation on Telegram and on Discord at once (the model's scripts are per platform)."""
    await discord.wait_until(lambda: discord.shards_connected() == {0}, timeout=DEADLINE)
    async with asyncio.TaskGroup() as tg:
        tg.create_task(converse(conversation, TelegramUser(telegram, 4242), model, "telegram"))
        tg.create_task(converse(conversation, DiscordUser(discord, "ada"), model, "discord"))


@pytest.mark.parametrize("name", list(CONVERSATIONS))
async def test_an_app_runs_in_one_process_on_telegram_and_discord(
    name: str, tmp_path: Path, processes: list[Process]
) -> None:
    conversation = CONVERSATIONS[name]
    app = app_of(conversation, tmp_path)
    async with ScriptedServer(conversation) as model, FakeTelegramServer() as telegram, FakeDiscord() as discord:
        bot = Process("run", env_for(tmp_path, **platform_settings(telegram, discord, model)), tmp_path, app=app)
        processes.append(bot)
        await bot.start()
        await bot.wait_for("ready with discord, telegram")
        await talk_on_both(conversation, model, telegram, discord)
        assert await bot.terminate() == 0, bot.lines[-5:]
        assert telegram.unknown_calls == [] and discord.unhandled == []
    for platform in PLATFORMS:
        check(conversation, model, platform)
    assert not [line for line in bot.lines if line.get("level") in ("ERROR", "CRITICAL")], bot.lines


FLEET = ("notebook",)
"""The conversations that also run through a fleet (each costs a gateway and two workers): the notebook's own
context laid over each platform's chat, its state and memory read back from Redis by whichever worker takes the next
turn."""


@pytest.mark.parametrize("name", FLEET)
async def test_an_app_runs_on_a_gateway_and_two_workers_on_telegram_and_discord(
    name: str, tmp_path: Path, redis_server: RedisServer, processes: list[Process]
) -> None:
    conversation = CONVERSATIONS[name]
    app = app_of(conversation, tmp_path)
    async with ScriptedServer(conversation) as model, FakeTelegramServer() as telegram, FakeDiscord() as discord:
        settings = {**platform_settings(telegram, discord, model), "REDIS_URL": redis_server.url}
        gateway, workers = await start_fleet(tmp_path, settings, processes, workers=2, app=app)
        await talk_on_both(conversation, model, telegram, discord)
        await stop_all(gateway, *workers)
        assert telegram.unknown_calls == [] and discord.unhandled == []
    for platform in PLATFORMS:
        check(conversation, model, platform)
    for process in (gateway, *workers):
        assert not [line for line in process.lines if line.get("level") in ("ERROR", "CRITICAL")], process.lines


async def test_a_worker_running_another_bot_leaves_the_batch_to_one_running_the_gateways(
    tmp_path: Path, redis_server: RedisServer, redis_client: Any, processes: list[Process]
) -> None:
    notebook = CONVERSATIONS["notebook"]
    async with ScriptedServer(notebook, platforms=("telegram",)) as model, FakeTelegramServer() as telegram:
        settings = {
            "REDIS_URL": redis_server.url,
            "TELEGRAM_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.api_url,
            "TELEGRAM_POLL_TIMEOUT": "1",
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": model.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "fake-model",
            "WEB_PORT": "0",
        }
        gateway = Process("gateway", env_for(tmp_path, **settings, BOT_APP=str(ROOT / notebook.app)), tmp_path)
        other = Process("worker", env_for(tmp_path, **settings), tmp_path, app=str(ROOT / CONVERSATIONS["tools"].app))
        processes.extend([gateway, other])
        for process in (gateway, other):
            await process.start()
        await gateway.wait_for("gateway listening")
        await other.wait_for("worker ready")
        user = TelegramUser(telegram, 4243)
        user.says(notebook.first.says)
        refused = await other.wait_for("stored by a gateway running the bot 'notebook'")
        assert refused["level"] == "ERROR"
        assert "this worker runs 'tools'" in refused["message"] and "same APP" in refused["message"], refused
        assert model.requests == [] and user.seen() == []  # not run by the wrong bot
        same = Process("worker", env_for(tmp_path, **settings), tmp_path, app=str(ROOT / notebook.app))
        processes.append(same)
        await same.start()
        await user.sees(notebook.first.sees)
        await stop_all(gateway, other, same)
    assert user.seen() == ["Noted."]  # answered once, by the notebook
    assert await redis_client.zcard("bots:queue") == 0 and not await redis_client.keys("bots:{*}:inbox")
    assert f'<action_result name="{notebook.action}"' in model.prompts("telegram")[-1]


BROKEN = {
    "a syntax error": ("from core import Bot\n\nbot = Bot(name='broken'\n", 3, "SyntaxError"),
    "a definition error": (
        "from core import Bot, action\n\nbad = action(name='not a name!', handler=lambda a, c, h: None)\nbot = Bot()\n",
        3,
        "DefinitionError",
    ),
    "an import error": ("from core import Bot\nimport no_such_module_here\n\nbot = Bot()\n", 2, "ModuleNotFoundError"),
}


BUILT = (
    "from core import Bot, action\n\nfirst = action(name='same', handler=lambda a, c, h: 1)\n"
    "second = action(name='same', handler=lambda a, c, h: 2)\nbot = Bot(actions=[first, second])\n"
)
"""A definition error found only when the agent is built (two actions of one name), after the file imported."""


@pytest.mark.parametrize(
    "mistake",
    [
        *BROKEN,
        "found when the agent is built",
    ],
)
def test_run_of_a_bot_file_with_a_mistake_exits_2_naming_the_file_and_line(mistake: str, tmp_path: Path) -> None:
    source, line, error = BROKEN.get(mistake, (BUILT, 5, "DefinitionError"))
    broken = tmp_path / "broken.py"
    broken.write_text(source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "bots.cli", "run", "broken.py"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_for(tmp_path, WEB_PORT="0"),
        timeout=DEADLINE,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{broken}:{line}: {error}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
