"""The privacy matrix's deployed half (issue 49, point 1): two members' messages answered by one model call, through
the real python-telegram-bot and discord.py clients on the fake platforms and the built-in assistant behind a
scripted model (a fake OpenAI-compatible server), in one process (``bots run``) and in a fleet (``bots gateway``
and two ``bots worker`` on a real Redis), Telegram and Discord at once, with the default busy policy (steer) and a
quiet window of 1.5 s: Alice's second message and Bob's are one turn.

Alice keeps a private fact alone first. Then Alice asks the bot to keep another and Bob asks what it knows, read by
one call: the new fact is Alice's (``/memory`` lists it to her, not to him), the facts that call shows are the
group's only (never her locker code), and ``recall`` there gives Bob nothing of hers. The policies one by one, each
with and without a quiet window, are in ``test_batch_privacy`` (one process, every busy policy).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from extensions.chat.i18n import say
from tests.apps.support import IDLE, prompt_of
from tests.bots_fleet import Process, env_for, start_fleet, stop_all
from tests.facts.shown import kept as kept_in
from tests.fakes.discord_server import FakeDiscord, Json
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer

DEADLINE = 60.0
"""Seconds a step may take at most (a bound, not a timing assertion)."""
CODE, BIKE = "Alice's locker code is 4711", "Alice's bike lock code is 9"
KEEP_CODE, KEEP_BIKE, ASK = "remember my locker code 4711", "remember my bike lock code is 9", "what do you know?"
ALICE_TG, BOB_TG, GROUP_TG = 5201, 5202, -100520


def _call(name: str, args: dict[str, Any]) -> str:
    return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'


class Model(FakeOpenAIServer):
    """Decides from the prompt alone (any worker may ask): keeps Alice's code, then her bike code (naming her, as
    a model answering several people must), recalls for Bob, and otherwise answers ``ok``."""

    def __init__(self) -> None:
        super().__init__(default=Reply(chunks=(IDLE,)))

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        prompt = prompt_of(body)
        platform = self.platform_of(prompt)
        kept = kept_in(prompt)
        if platform is None:
            answer = IDLE
        elif KEEP_BIKE in prompt and BIKE not in kept:
            answer = _call("remember", {"fact": BIKE, "said_by": "alice"})
        elif KEEP_CODE in prompt and CODE not in kept:
            answer = _call("remember", {"fact": CODE})
        elif ASK in prompt and '<action_result name="recall"' not in prompt:
            answer = _call("recall", {})
        else:
            answer = f'<response><output type="{platform}:message">ok</output></response>'
        await super().stream(response, Reply(chunks=(answer,)), body)

    @staticmethod
    def platform_of(prompt: str) -> str | None:
        found = [p for p in ("telegram", "discord") if f"{p}:message" in prompt]
        return found[0] if len(found) == 1 else None

    def prompts(self, platform: str) -> list[str]:
        prompts = (prompt_of(r.body) for r in self.requests if r.path.endswith("/chat/completions"))
        return [p for p in prompts if self.platform_of(p) == platform]


async def until(check: Callable[[], Any], what: str) -> Any:
    try:
        async with asyncio.timeout(DEADLINE):
            while not (found := check()):
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"waited {DEADLINE:g}s for {what}") from None
    return found


def check_prompts(model: Model, platform: str) -> None:
    """No call that read Bob's question showed Alice's private facts; his recall gave him none of hers."""
    joint = [p for p in model.prompts(platform) if ASK in p]
    assert joint, f"{platform}: Bob's question reached the model"
    for prompt in joint:
        shown = re.search(r"<facts>(.*?)</facts>", prompt, re.S)
        assert shown is None or ("4711" not in shown.group(1) and "bike" not in shown.group(1)), shown
        for result in re.findall(r'<action_result name="recall"[^>]*>(.*?)</action_result>', prompt, re.S):
            assert "4711" not in result and "bike" not in result, result


async def converse(
    platform: str, say_as: Callable[[str, str], Awaitable[None]], seen: Callable[[], list[str]], model: Model
) -> None:
    await say_as("alice", KEEP_CODE)
    await until(lambda: seen().count("ok") >= 1, f"{platform}: the first answer")
    await say_as("alice", KEEP_BIKE)  # and Bob within her quiet window
    await say_as("bob", ASK)
    # Bob's question read with what recall gave him: on a crowded machine his message may come after Alice's quiet
    # window, answered in a run of its own after hers ("ok" twice before his run ends)
    recalled = '<action_result name="recall"'
    await until(
        lambda: seen().count("ok") >= 2 and any(ASK in p and recalled in p for p in model.prompts(platform)),
        f"{platform}: the answer to both",
    )


async def telegram_side(telegram: FakeTelegramServer, model: Model) -> None:
    telegram.chat(GROUP_TG, kind="group", title="Friends")
    for user_id in (ALICE_TG, BOB_TG):
        telegram.chat(user_id)  # both started a private chat with the bot: /memory answers there
    users = {"alice": (ALICE_TG, "Alice"), "bob": (BOB_TG, "Bob")}

    async def say_as(who: str, text: str) -> None:
        user_id, name = users[who]
        telegram.user_says(text, user_id=user_id, first_name=name, username=who, chat_id=GROUP_TG)

    def in_chat(chat_id: int) -> list[str]:
        return [m.text for m in telegram.sent if m.chat_id == chat_id]

    await converse("telegram", say_as, lambda: in_chat(GROUP_TG), model)
    check_prompts(model, "telegram")

    async def memory(who: str) -> str:
        chat = users[who][0]
        before = len(in_chat(chat))
        await say_as(who, "/memory")
        await until(lambda: len(in_chat(chat)) > before, f"telegram: {who}'s /memory")
        return in_chat(chat)[before]

    alices = await memory("alice")
    assert CODE in alices and BIKE in alices
    assert (await memory("bob")).startswith(say("memory_none"))


async def discord_side(discord: FakeDiscord, model: Model) -> None:
    guild = discord.guild()
    channel = discord.text_channel(guild)
    users = {"alice": discord.user("alice"), "bob": discord.user("bob")}
    await discord.wait_until(lambda: discord.shards_connected() == {0}, timeout=DEADLINE)
    await discord.wait_until(lambda: any(c["name"] == "memory" for c in discord.commands), timeout=DEADLINE)

    async def say_as(who: str, text: str) -> None:
        await discord.say(channel, text, author=users[who])

    def seen() -> list[str]:
        return [str(m["content"]) for m in discord.visible_in(channel)]

    await converse("discord", say_as, seen, model)
    check_prompts(model, "discord")

    async def memory(who: str) -> str:
        iid = await discord.slash("memory", channel, user=users[who], options=[])
        await discord.wait_until(lambda: iid in discord.interaction_responses, timeout=DEADLINE)
        data: Json = discord.interaction_responses[iid]["data"]
        return str(data["content"])

    alices = await memory("alice")
    assert CODE in alices and BIKE in alices
    assert (await memory("bob")).startswith(say("memory_none"))


def settings_for(telegram: FakeTelegramServer, discord: FakeDiscord, model: Model) -> dict[str, str]:
    return {
        "TELEGRAM_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.api_url,
        "TELEGRAM_POLL_TIMEOUT": "1",
        "TELEGRAM_REPLY_POLICY": "always",
        "DISCORD_TOKEN": "fake-token",
        "DISCORD_API_URL": discord.api_url,
        "DISCORD_GATEWAY_URL": discord.gateway_url,
        "DISCORD_GUILD_READY_TIMEOUT": "0.05",
        "DISCORD_REPLY_POLICY": "always",
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": model.url,
        "LLM_API_KEY": "sk-test",
        "LLM_MODEL": "fake-model",
        "WEB_PORT": "0",
        "BOT_BUSY": "steer",
        "BOT_QUIET_MS": "1500",
    }


@pytest.mark.parametrize("deployment", ["one process", "fleet"])
async def test_two_members_answered_together_keep_their_facts_apart_deployed(
    deployment: str, tmp_path: Path, request: pytest.FixtureRequest, processes: list[Process]
) -> None:
    async with Model() as model, FakeTelegramServer() as telegram, FakeDiscord() as discord:
        settings = settings_for(telegram, discord, model)
        if deployment == "fleet":
            redis: RedisServer = request.getfixturevalue("redis_server")
            gateway, workers = await start_fleet(tmp_path, {**settings, "REDIS_URL": redis.url}, processes, workers=2)
            running = [gateway, *workers]
        else:
            bot = Process("run", env_for(tmp_path, **settings), tmp_path)
            processes.append(bot)
            await bot.start()
            await bot.wait_for("ready with discord, telegram")
            running = [bot]
        async with asyncio.TaskGroup() as tg:
            tg.create_task(telegram_side(telegram, model))
            tg.create_task(discord_side(discord, model))
        await stop_all(*running)
        assert telegram.unknown_calls == [] and discord.unhandled == []
    for process in running:
        assert not [line for line in process.lines if line.get("level") in ("ERROR", "CRITICAL")], process.lines
