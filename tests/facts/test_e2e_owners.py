"""Memory has an owner (issue 35), through the real python-telegram-bot and discord.py clients on the fake platforms
and the built-in assistant behind a scripted model (a fake OpenAI-compatible server), in one process (``bots run``)
and in a fleet (``bots gateway`` and two ``bots worker`` on a real Redis), Telegram and Discord at once.

In a Telegram group and a Discord channel, Alice asks the bot to keep her locker code (hers alone) and the party's
day (for everyone); Bob asks for her code and ``recall`` gives him the party only, while Alice's ``recall`` gives
her both. ``/memory`` lists what the bot keeps about the caller to them alone (Telegram: in their private chat, a
group only told so; Discord: an ephemeral answer), ``/memory delete 2`` deletes one item and ``/memory delete all``
the rest; on Discord, Alice deleting the message a fact came from drops that fact.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from extensions.chat.i18n import say
from tests.apps.support import IDLE, prompt_of
from tests.bots_fleet import Process, env_for, start_fleet, stop_all
from tests.facts.shown import results
from tests.fakes.discord_server import FakeDiscord, Json
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer

DEADLINE = 60.0
"""Seconds a step may take at most (a bound, not a timing assertion)."""
CODE = "Alice's locker code is 4711"
PARTY = "The party is on Friday"
ALICE_TG, BOB_TG, GROUP_TG = 5101, 5102, -100510


def _call(name: str, args: dict[str, Any]) -> str:
    return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'


def _reply(text: str) -> str:
    return f'<response><output type="{{reply}}">{text}</output></response>'


TURNS: Sequence[tuple[str, str, Sequence[str], str]] = (
    (
        "alice",
        "remember my locker code 4711, it is for me",
        (_call("remember", {"fact": CODE}), _reply("Kept.")),
        "Kept.",
    ),
    (
        "alice",
        "remember for everyone: the party is on Friday",
        (_call("remember", {"fact": PARTY, "for_everyone": True}), _reply("Kept for all.")),
        "Kept for all.",
    ),
    ("bob", "what is Alice's locker code?", (_call("recall", {}), _reply("Not for me to say.")), "Not for me to say."),
    ("alice", "what is my locker code?", (_call("recall", {}), _reply("Here it is.")), "Here it is."),
)
"""Who says what, the model's answers (one per step: the action, then the reply), and the reply seen."""
TURN_PAUSE = 1.0
"""Seconds between one turn's answer and the next message (see ``converse``)."""


class Model(FakeOpenAIServer):
    """The model answering each platform from its own script (told apart by the reply output its prompt offers)."""

    def __init__(self) -> None:
        super().__init__(default=Reply(chunks=(IDLE,)))
        self.scripts = {
            p: deque(a.replace("{reply}", f"{p}:message") for _, _, answers, _ in TURNS for a in answers)
            for p in ("telegram", "discord")
        }

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        script = self.scripts.get(self.platform_of(prompt_of(body)) or "")
        if script:
            reply = Reply(chunks=(script.popleft(),))
        await super().stream(response, reply, body)

    @staticmethod
    def platform_of(prompt: str) -> str | None:
        found = [p for p in ("telegram", "discord") if f"{p}:message" in prompt]
        return found[0] if len(found) == 1 else None

    def prompts(self, platform: str) -> list[str]:
        prompts = (prompt_of(r.body) for r in self.requests if r.path.endswith("/chat/completions"))
        return [p for p in prompts if self.platform_of(p) == platform]


def recalled(prompt: str) -> str:
    """What the newest ``recall`` result in ``prompt`` gave."""
    found = results(prompt, "recall")
    assert found, prompt[-3000:]
    return found[-1]


async def until(check: Callable[[], Any], what: str) -> Any:
    """What ``check`` gives once it is true; fails naming ``what`` after ``DEADLINE``."""
    try:
        async with asyncio.timeout(DEADLINE):
            while not (found := check()):
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"waited {DEADLINE:g}s for {what}") from None
    return found


async def converse(
    model: Model, platform: str, say_as: Callable[[str, str], Awaitable[None]], seen: Callable[[], list[str]]
) -> None:
    """The four turns in order, each once the one before was answered and its last model step was asked, and a
    moment after, as people write: a message that comes while the run answering the one before is still finishing
    (its usage counted, its memory saved) joins that run, and a run that has read two people's messages recalls for
    both what both may see, the group's facts only (issue 49's rule), so Alice would not get her own code back."""
    asked = 0
    for who, text, answers, reply in TURNS:
        before = seen().count(reply)
        await say_as(who, text)
        await until(lambda r=reply, b=before: seen().count(r) > b, f"{platform}: {reply!r}")
        asked += len(answers)
        await until(lambda n=asked: len(model.prompts(platform)) >= n, f"{platform}: {asked} prompts")
        await asyncio.sleep(TURN_PAUSE)


def after_recall(prompts: Sequence[str], asked: str) -> str:
    """The first prompt showing the result of a ``recall`` made after ``asked`` was said: the step after it (found by
    what it shows, not by its number: a model call started again, issue 51, is one more request)."""
    for prompt in prompts:
        at = prompt.rfind(asked)
        if at >= 0 and '<action_result name="recall"' in prompt[at:]:
            return prompt
    raise AssertionError(f"no prompt shows a recall after {asked!r}")


def check_recalls(model: Model, platform: str) -> None:
    prompts = model.prompts(platform)
    bobs, alices = after_recall(prompts, "what is Alice"), after_recall(prompts, "what is my locker code")
    assert recalled(bobs) == f"{PARTY}.", f"{platform}: Bob recalled {recalled(bobs)}"
    assert recalled(alices) == f"{CODE}. {PARTY}."
    shown = bobs[bobs.index("<facts>") : bobs.index("</facts>")]
    assert PARTY in shown and "4711" not in shown  # nor does his prompt show her code as a kept fact


# -- Telegram ---------------------------------------------------------------------------------------------------


async def telegram_side(telegram: FakeTelegramServer, model: Model) -> None:
    telegram.chat(GROUP_TG, kind="group", title="Friends")
    telegram.chat(ALICE_TG)  # Alice once started a private chat with the bot; Bob never did
    users = {"alice": (ALICE_TG, "Alice"), "bob": (BOB_TG, "Bob")}

    async def say_as(who: str, text: str) -> None:
        user_id, name = users[who]
        telegram.user_says(text, user_id=user_id, first_name=name, username=who, chat_id=GROUP_TG)

    def in_chat(chat_id: int) -> list[str]:
        return [m.text for m in telegram.sent if m.chat_id == chat_id]

    await converse(model, "telegram", say_as, lambda: in_chat(GROUP_TG))
    check_recalls(model, "telegram")

    async def command(who: str, text: str, *, answer_in: int) -> str:
        before = len(in_chat(answer_in))
        await say_as(who, text)
        await until(lambda: len(in_chat(answer_in)) > before, f"telegram: {text}")
        return in_chat(answer_in)[before]

    listed = await command("alice", "/memory", answer_in=ALICE_TG)
    assert (
        "1. Fact (here, only for you): " + CODE in listed and "2. Fact (here, for everyone there): " + PARTY in listed
    )
    await until(lambda: say("memory_sent_privately") in in_chat(GROUP_TG), "the group told")
    refused = await command("bob", "/memory", answer_in=GROUP_TG)
    assert refused == say("memory_private_only")
    deleted = await command("alice", "/memory delete 2", answer_in=ALICE_TG)
    assert deleted.startswith("Deleted: 2. Fact") and PARTY in deleted
    listed = await command("alice", "/memory", answer_in=ALICE_TG)
    assert CODE in listed and PARTY not in listed
    gone = await command("alice", "/memory delete all", answer_in=ALICE_TG)
    assert gone == say("memory_deleted_all", facts=1, reminders=0)
    assert (await command("alice", "/memory", answer_in=ALICE_TG)).startswith(say("memory_none"))
    assert not [text for text in in_chat(GROUP_TG) if "4711" in text]  # nothing the bot posted in the group shows it


# -- Discord ----------------------------------------------------------------------------------------------------


class DiscordGroup:
    """A server channel where Alice and Bob talk to the bot."""

    def __init__(self, discord: FakeDiscord) -> None:
        self.discord = discord
        self.guild = discord.guild()
        self.channel = discord.text_channel(self.guild)
        self.users = {"alice": discord.user("alice"), "bob": discord.user("bob")}
        self.said: dict[str, Json] = {}
        """Each text said, as the message Discord made of it."""

    async def say_as(self, who: str, text: str) -> None:
        self.said[text] = await self.discord.say(self.channel, text, author=self.users[who])

    def seen(self) -> list[str]:
        return [str(m["content"]) for m in self.discord.visible_in(self.channel)]

    async def memory(self, who: str, delete: str | None = None) -> str:
        options = [{"type": 3, "name": "delete", "value": delete}] if delete is not None else []
        iid = await self.discord.slash("memory", self.channel, user=self.users[who], options=options)
        await self.discord.wait_until(lambda: iid in self.discord.interaction_responses, timeout=DEADLINE)
        data = self.discord.interaction_responses[iid]["data"]
        assert data["flags"] & 64, data  # ephemeral: only the caller sees it
        return str(data["content"])


async def discord_side(discord: FakeDiscord, group: DiscordGroup, model: Model) -> None:
    await discord.wait_until(lambda: discord.shards_connected() == {0}, timeout=DEADLINE)
    await discord.wait_until(lambda: any(c["name"] == "memory" for c in discord.commands), timeout=DEADLINE)
    await converse(model, "discord", group.say_as, group.seen)
    check_recalls(model, "discord")
    listed = await group.memory("alice")
    assert (
        "1. Fact (here, only for you): " + CODE in listed and "2. Fact (here, for everyone there): " + PARTY in listed
    )
    assert (await group.memory("bob")).startswith(say("memory_none"))
    deleted = await group.memory("alice", "2")
    assert deleted.startswith("Deleted: 2. Fact") and PARTY in deleted
    first = group.said[TURNS[0][1]]
    await discord.dispatch(
        "MESSAGE_DELETE", {"id": first["id"], "channel_id": str(group.channel), "guild_id": str(group.guild)}
    )
    async with asyncio.timeout(DEADLINE):  # the gateway drops the fact that came from it
        while not (await group.memory("alice")).startswith(say("memory_none")):
            await asyncio.sleep(0.1)
    assert not [text for text in group.seen() if "4711" in text]


# -- the two deployments ----------------------------------------------------------------------------------------


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
    }


@pytest.mark.parametrize("deployment", ["one process", "fleet"])
async def test_group_members_keep_their_own_facts_and_see_and_delete_them(
    deployment: str, tmp_path: Path, request: pytest.FixtureRequest, processes: list[Process]
) -> None:
    async with Model() as model, FakeTelegramServer() as telegram, FakeDiscord() as discord:
        group = DiscordGroup(discord)
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
            tg.create_task(discord_side(discord, group, model))
        await stop_all(*running)
        assert telegram.unknown_calls == [] and discord.unhandled == []
    for process in running:
        assert not [line for line in process.lines if line.get("level") in ("ERROR", "CRITICAL")], process.lines
