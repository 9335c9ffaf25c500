"""Replies through the Redis queue, exactly once: the real discord.py and python-telegram-bot clients against the
fake platforms, a real redis-server, the listener (what ``bots gateway`` runs) and a REST-only queue worker in
this process. Each reply is posted once, streamed or not, and its ledger goes with the acknowledgement;
"typing..." is shown by the worker while the model works. A worker killed with ``kill -9`` is in
``test_e2e_idempotent_kill.py``."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import core
from core import AgentOptions, ScriptedModel, create_agent
from core.busy import BusyPolicy
from core.definitions import Extension
from core.fleet import QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from core.models.base import ModelRequest
from core.testing import updates_of
from extensions.discord import ChannelArgs, DiscordSettings, discord_channel, discord_extension
from extensions.telegram import ChatArgs, TelegramSettings, telegram_chat, telegram_extension
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import queue_config, wait_until
from .server import RedisServer

_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)


def echo(output_type: str, *, padding: str = "") -> Callable[[ModelRequest], str]:
    """A model's answer: ``echo: <the new messages>`` (and ``padding``) as one ``output_type`` output."""

    def reply(request: ModelRequest) -> str:
        found = updates_of(request.prompt)
        texts = _INPUT.findall(found) if found else []
        return f'<response><output type="{output_type}">echo: {" | ".join(texts)}{padding}</output></response>'

    return reply


class Gated(ScriptedModel):
    """Signals ``started`` when asked, answers once ``release`` is set."""

    def __init__(self, reply: Callable[[ModelRequest], str]) -> None:
        super().__init__(reply)
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:  # type: ignore[override]
        self.started.set()
        await self.release.wait()
        async for chunk in super().stream(request):
            yield chunk


@contextlib.asynccontextmanager
async def running_worker(server: RedisServer, extension: Extension, model: core.Model) -> AsyncIterator[QueueWorker]:
    """``bots worker`` in this process: runs conversations from Redis, posts through REST only."""
    backend = RedisBackend(queue_config(server))
    agent = create_agent(
        model=model,
        extensions=[extension],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
        options=AgentOptions(busy=BusyPolicy.COLLECT),  # each round its own batch (steer may join one to the last)
    )
    worker = QueueWorker(agent, backend)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(worker.run(handle_signals=False))
        try:
            yield worker
        finally:
            worker.stop()
            await task
    await backend.close()


@contextlib.asynccontextmanager
async def front(server: RedisServer, extension: Extension) -> AsyncIterator[core.Agent]:
    """The listening side (what ``bots gateway`` runs): messages are stored in Redis, never answered here."""
    backend = RedisBackend(queue_config(server))
    agent = create_agent(
        model=ScriptedModel([]),
        extensions=[extension],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    async with agent:
        yield agent
    await backend.close()


# -- Discord ---------------------------------------------------------------------------------------------


def discord_settings(fake: FakeDiscord, **overrides: Any) -> DiscordSettings:
    values: dict[str, Any] = {
        "token": "fake-token",
        "api_url": fake.api_url,
        "gateway_url": fake.gateway_url,
        "guild_ready_timeout": 0.05,
        "sync_commands": False,
    }
    values.update(overrides)
    return DiscordSettings(**values)


def message_posts(fake: FakeDiscord) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path.endswith("/messages"))


@pytest.mark.parametrize("stream", [False, True], ids=["posted", "streamed"])
async def test_discord_each_reply_is_posted_once(
    redis_server: RedisServer, discord: FakeDiscord, client: Any, stream: bool
) -> None:
    users = [discord.user(f"user{i}") for i in range(3)]
    dms = [discord.dm_channel(u) for u in users]
    padding = " and some more words, written a few characters at a time" if stream else ""
    model = ScriptedModel(echo("discord:message", padding=padding), chunk_size=6, delay=0.005 if stream else 0)
    worker_side = discord_extension(
        discord_settings(discord, stream_replies=stream, stream_interval=0.05), listen=False
    )
    async with (
        front(redis_server, discord_extension(discord_settings(discord))),
        running_worker(redis_server, worker_side, model) as worker,
    ):
        for round_ in range(2):
            for dm, user in zip(dms, users, strict=True):
                await discord.say(dm, f"hello {round_}", author=user)
            for dm in dms:
                await discord.wait_posted(dm, round_ + 1)
        await wait_until(lambda: worker.stats.batches == 6, what="six acknowledged batches")
    for dm in dms:
        assert [m["content"] for m in discord.posted_in(dm)] == [f"echo: hello {r}{padding}" for r in range(2)]
    assert message_posts(discord) == 6  # not one post repeated, not even one Discord deduplicated
    nonces = [m["nonce"] for m in discord.posted]
    # each from its ledger entry's stable key (the first message of the reply), all different
    assert len(set(nonces)) == 6 and all(len(n) == 25 and n.endswith("000") for n in nonces)
    assert discord.unchanged_edits == 0
    if stream:
        assert all(len(discord.versions_of(m)) >= 2 for m in discord.posted), "shown while written"
    assert not await client.keys("bots:{*}:ledger:*")  # dropped with each acknowledgement


async def test_discord_the_worker_shows_typing_while_the_model_works(
    redis_server: RedisServer, discord: FakeDiscord
) -> None:
    alice = discord.user("alice")
    dm = discord.dm_channel(alice)
    model = Gated(echo("discord:message"))
    worker_side = discord_extension(discord_settings(discord, typing_interval=0.05), listen=False)
    async with (
        front(redis_server, discord_extension(discord_settings(discord), listen=False)) as sender,
        running_worker(redis_server, worker_side, model),
    ):
        # stored straight into Redis: no listener anywhere, so every "typing..." comes from the worker
        await sender.send(discord_channel, ChannelArgs(channel_id=dm), {"type": "discord:message", "data": "hi"})
        await model.started.wait()
        await discord.wait_until(lambda: discord.typing.count(dm) >= 3)  # kept alive, not sent once
        assert discord.posted_in(dm) == []
        model.release.set()
        [reply] = await discord.wait_posted(dm)
    assert reply["content"] == "echo: hi"


# -- Telegram --------------------------------------------------------------------------------------------


def telegram_settings(fake: FakeTelegramServer, **overrides: Any) -> TelegramSettings:
    values: dict[str, Any] = {"token": fake.token, "api_url": fake.api_url, "poll_timeout": 1}
    values.update(overrides)
    return TelegramSettings(**values)


@pytest.mark.parametrize("stream", [False, True], ids=["posted", "streamed"])
async def test_telegram_each_reply_is_posted_once(
    redis_server: RedisServer, telegram: FakeTelegramServer, client: Any, stream: bool
) -> None:
    padding = " and some more words, written a few characters at a time" if stream else ""
    model = ScriptedModel(echo("telegram:message", padding=padding), chunk_size=6, delay=0.005 if stream else 0)
    worker_side = telegram_extension(
        telegram_settings(telegram, stream_replies=stream, stream_interval=0.05), listen=False
    )
    users = range(5001, 5004)
    async with (
        front(redis_server, telegram_extension(telegram_settings(telegram))),
        running_worker(redis_server, worker_side, model) as worker,
    ):
        for round_ in range(2):
            for user in users:
                telegram.user_says(f"hello {round_}", user_id=user)
            await telegram.wait_replies(3 * (round_ + 1))
        await wait_until(lambda: worker.stats.batches == 6, what="six acknowledged batches")
    for user in users:
        sent = [m for m in telegram.sent if m.chat_id == user]
        assert [m.text for m in sent] == [f"echo: hello {r}{padding}" for r in range(2)]
        if stream:
            assert all(m.edits for m in sent), "shown while written"
    assert len(telegram.calls_of("sendMessage")) == 6
    assert not await client.keys("bots:{*}:ledger:*")


async def test_telegram_the_worker_shows_typing_while_the_model_works(
    redis_server: RedisServer, telegram: FakeTelegramServer
) -> None:
    telegram.chat(77)
    model = Gated(echo("telegram:message"))
    worker_side = telegram_extension(telegram_settings(telegram, typing_interval=0.05), listen=False)
    async with (
        front(redis_server, telegram_extension(telegram_settings(telegram), listen=False)) as sender,
        running_worker(redis_server, worker_side, model),
    ):
        await sender.send(
            telegram_chat,
            ChatArgs(chat_id=77),
            {"type": "telegram:message", "data": "hi", "params": {"message_id": "1"}},
        )
        await model.started.wait()
        await telegram.wait_for(lambda: telegram.chat_actions.count((77, "typing", None)) >= 3)
        assert telegram.sent == []
        model.release.set()
        [reply] = await telegram.wait_replies(1)
    assert reply.text == "echo: hi" and reply.reply_to == 1
