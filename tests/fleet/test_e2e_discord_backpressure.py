"""A message for a full inbox on Discord behaves as on Telegram (``extensions.chat.backpressure``): the real
discord.py client on the fake Discord in front of a real redis-server (what ``bots gateway`` runs), and a queue
worker in this process. With ``REDIS_INBOX_FULL=wait`` the message waits for room, behind nothing of the other
channels, and is answered; dropped (``drop``, or kept past ``REDIS_INBOX_WAIT``), the user is told the bot is busy,
in the channel's language, once a minute: nothing is dropped in silence."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from core import Agent, AgentOptions, ScriptedModel, create_agent
from core.fleet import RedisBackend, RedisDispatcher, RedisMemoryStore
from core.fleet.keys import Keys
from extensions.chat.i18n import say as notice
from extensions.discord import discord_extension, get_runtime
from extensions.discord.runtime import DiscordRuntime
from tests.fakes.discord_server import FakeDiscord, Json

from .conftest import queue_config, wait_until
from .server import RedisServer
from .test_e2e_idempotent import discord_settings, echo, running_worker

BUSY = notice("busy")


def inbox(channel: int) -> str:
    return Keys("bots:").context(f"discord:channel:{channel}").inbox


@contextlib.asynccontextmanager
async def gateway(server: RedisServer, fake: FakeDiscord, **config: Any) -> AsyncIterator[Agent]:
    """The listening side (``bots gateway``), with the queue options ``config`` (``inbox_cap``...)."""
    backend = RedisBackend(queue_config(server, retry_seconds=0.2, **config), client_name="gateway")
    agent = create_agent(
        model=ScriptedModel([]),
        extensions=[discord_extension(discord_settings(fake, sync_commands=True))],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
        options=AgentOptions(stop_timeout=10),
    )
    try:
        async with agent:
            yield agent
    finally:
        await backend.close()


def runtime_of(agent: Agent) -> DiscordRuntime:
    runtime = get_runtime(agent)
    assert isinstance(runtime, DiscordRuntime)
    return runtime


def worker_side(fake: FakeDiscord) -> Any:
    return discord_extension(discord_settings(fake), listen=False)


def replies_to(fake: FakeDiscord, channel: int) -> list[int]:
    return [int(m["message_reference"]["message_id"]) for m in fake.posted_in(channel) if m.get("message_reference")]


async def test_a_message_for_a_full_inbox_waits_for_room_and_is_answered_in_order(
    redis_server: RedisServer, discord: FakeDiscord, client: Any
) -> None:
    alice, bob = discord.user("alice"), discord.user("bob")
    dm, other = discord.dm_channel(alice), discord.dm_channel(bob)
    async with gateway(redis_server, discord, inbox_cap=1) as agent:  # REDIS_INBOX_FULL=wait, REDIS_INBOX_WAIT=30
        runtime = runtime_of(agent)
        first = await discord.say(dm, "one", author=alice)
        await wait_until(lambda: client.llen(inbox(dm)), what="the first message stored")
        second = await discord.say(dm, "two", author=alice)
        await wait_until(lambda: runtime.backpressure.waiting(dm) == 1, what="the second message kept")
        third = await discord.say(dm, "three", author=alice)  # behind the second, in order
        meanwhile = await discord.say(other, "meanwhile", author=bob)  # another channel is not held up
        await wait_until(lambda: client.llen(inbox(other)), what="the other channel's message stored")
        assert await client.llen(inbox(dm)) == 1 and runtime.backpressure.waiting(dm) == 2
        assert discord.posted == []  # nobody told anything: the messages wait
        ids = [int(m["id"]) for m in (first, second, third)]
        async with running_worker(redis_server, worker_side(discord), ScriptedModel(echo("discord:message"))):
            await discord.wait_until(lambda: ids[2] in replies_to(discord, dm), timeout=30)
            await discord.wait_posted(other, timeout=30)
            await runtime.wait_idle()
    mine = replies_to(discord, dm)
    assert mine[0] == ids[0] and mine[-1] == ids[2] and mine == sorted(mine)  # in order (maybe batched)
    said = " | ".join(m["content"] for m in discord.posted_in(dm))
    assert said.index("one") < said.index("two") < said.index("three")  # every message reached the model
    assert all(m["content"] != BUSY for m in discord.posted)
    assert replies_to(discord, other) == [int(meanwhile["id"])]


async def test_with_drop_a_full_inbox_tells_the_channel_once_in_its_language(
    redis_server: RedisServer, discord: FakeDiscord, client: Any
) -> None:
    alice, bob = discord.user("alice"), discord.user("bob")
    dm, other = discord.dm_channel(alice), discord.dm_channel(bob)
    async with gateway(redis_server, discord, inbox_cap=1, inbox_full="drop") as agent:
        counts: collections.Counter[str] = collections.Counter()
        agent.add_observer(lambda kind, cid, value: counts.update({kind: int(value)}))
        iid = await discord.slash("language", dm, user=alice, options=[{"type": 3, "name": "code", "value": "fr"}])
        await discord.wait_until(lambda: iid in discord.interaction_responses)
        first = await discord.say(dm, "one", author=alice)
        await wait_until(lambda: client.llen(inbox(dm)), what="the first message stored")
        flood: list[Json] = [await discord.say(dm, f"more {i}", author=alice) for i in range(3)]
        [busy] = await discord.wait_posted(dm, timeout=30)
        assert busy["content"] == notice("busy", "fr") != BUSY  # the channel's language
        assert int(busy["message_reference"]["message_id"]) == int(flood[0]["id"])
        meanwhile = await discord.say(other, "meanwhile", author=bob)
        await wait_until(lambda: client.llen(inbox(other)), what="the other channel's message stored")
        await runtime_of(agent).wait_idle()
        assert counts["message_ignored:busy"] == 3  # every dropped message counted, the channel told once
        async with running_worker(redis_server, worker_side(discord), ScriptedModel(echo("discord:message"))):
            await discord.wait_posted(dm, 2, timeout=30)
            await discord.wait_posted(other, timeout=30)
    assert replies_to(discord, dm) == [int(flood[0]["id"]), int(first["id"])]
    assert replies_to(discord, other) == [int(meanwhile["id"])]
    assert discord.posted_in(dm)[1]["content"] == "echo: one"


async def test_a_message_kept_past_redis_inbox_wait_is_dropped_with_the_notice(
    redis_server: RedisServer, discord: FakeDiscord, client: Any
) -> None:
    alice = discord.user("alice")
    dm = discord.dm_channel(alice)
    async with gateway(redis_server, discord, inbox_cap=1, inbox_wait=0.3) as agent:
        await discord.say(dm, "one", author=alice)
        await wait_until(lambda: client.llen(inbox(dm)), what="the first message stored")
        second = await discord.say(dm, "two", author=alice)
        [busy] = await discord.wait_posted(dm, timeout=30)
        assert busy["content"] == BUSY and int(busy["message_reference"]["message_id"]) == int(second["id"])
        await runtime_of(agent).wait_idle()
        assert await client.llen(inbox(dm)) == 1
