"""The fake Discord's shards, with the real discord.py ``AutoShardedClient``: ``/gateway/bot`` tells the
recommended count and the identify concurrency, each shard gets READY and the servers of its slice only,
DMs go to shard 0, and a shard connected twice is recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yarl

from extensions.discord._lib import discord
from tests.fakes.discord_server import FakeDiscord, shard_of

COUNT = 4


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    fake.recommended_shards = COUNT
    fake.max_concurrency = 2
    await fake.start()
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_url)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url))
    yield fake
    await fake.close()
    assert fake.unhandled == [], fake.unhandled


class Recorder(discord.AutoShardedClient):
    def __init__(self, **options: Any) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(intents=intents, guild_ready_timeout=0.05, chunk_guilds_at_startup=False, **options)
        self.seen: list[tuple[int | None, str]] = []

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        return None  # the fake has no identify rate limit

    async def on_message(self, message: discord.Message) -> None:
        self.seen.append((message.guild.id if message.guild else None, message.content))


async def started(client: Recorder) -> asyncio.Task[None]:
    await client.login("fake-token")
    task = asyncio.create_task(client.connect())
    async with asyncio.timeout(10):
        await client.wait_until_ready()
    return task


async def test_shards_carry_their_slice_of_the_servers(fake: FakeDiscord) -> None:
    guilds = [fake.guild(f"server {n}", shard=n % COUNT, shard_count=COUNT) for n in range(8)]
    assert [shard_of(g, COUNT) for g in guilds] == [n % COUNT for n in range(8)]
    channels = [fake.text_channel(g) for g in guilds]
    alice = fake.user("alice")
    dm = fake.dm_channel(alice)
    low, high = Recorder(shard_ids=[0, 1], shard_count=COUNT), Recorder(shard_ids=[2, 3], shard_count=COUNT)
    tasks = [await started(low), await started(high)]
    try:
        limits = await low.fetch_session_start_limits()
        assert limits.max_concurrency == 2
        assert {g.id for g in low.guilds} == {g for g in guilds if shard_of(g, COUNT) in (0, 1)}
        assert {g.id for g in high.guilds} == {g for g in guilds if shard_of(g, COUNT) in (2, 3)}
        for channel in channels:
            await fake.say(channel, "hi", author=alice)
        await fake.say(dm, "in private", author=alice)
        async with asyncio.timeout(10):  # the clients' side: nothing the fake can wait on
            while len(low.seen) + len(high.seen) < 9:
                await asyncio.sleep(0.01)
        assert sorted(g for g, _ in high.seen) == sorted(g for g in guilds if shard_of(g, COUNT) >= 2)
        assert (None, "in private") in low.seen
        assert fake.shards_connected() == {0, 1, 2, 3} and fake.overlaps == []
        again = Recorder(shard_ids=[3], shard_count=COUNT)  # shard 3 a second time: recorded
        tasks.append(await started(again))
        assert fake.overlaps == [3] and fake.connected(3) == 2
        await again.close()
        await fake.wait_until(lambda: fake.connected(3) == 1)
        assert [c.closed is not None for c in fake.connections[3]] == [False, True]
    finally:
        for client in (low, high):
            await client.close()
        for task in tasks:
            await asyncio.wait_for(task, 10)
    assert sorted(tuple(i["shard"]) for i in fake.identifies) == [(0, 4), (1, 4), (2, 4), (3, 4), (3, 4)]


async def test_bots_run_connects_every_shard_itself(world: Any, start_bot: Any) -> None:
    """Without a gateway to divide them (``bots run``), ``DISCORD_SHARD_COUNT=auto`` connects every shard the
    fake recommends, one client each, and answers on all of them; /readyz-style readiness covers them all."""
    from core import ScriptedModel

    from .conftest import runtime_of, say

    fake = world.fake
    fake.recommended_shards = 3
    rooms = [fake.text_channel(fake.guild(f"s{n}", shard=n, shard_count=3)) for n in range(3)]
    agent = await start_bot(
        ScriptedModel([say("hi")], repeat_last=True), shard_count="auto", identify_interval=0.05, reply_policy="always"
    )
    runtime = runtime_of(agent)
    assert runtime.shards is not None and runtime.shards.held == [0, 1, 2] and runtime.ready() is True
    for room in rooms:
        await fake.say(room, "hello", author=world.alice)
    for room in rooms:
        await fake.wait_posted(room, 1)
    await fake.say(world.dm, "and here?", author=world.alice)  # DMs arrive on shard 0
    await fake.wait_posted(world.dm, 1)
    assert sorted(tuple(i["shard"]) for i in fake.identifies) == [(0, 3), (1, 3), (2, 3)]
    assert fake.overlaps == []
    registered = [r for r in fake.requests if r.method == "PUT" and r.path.endswith("/commands")]
    assert len(registered) == 1  # the slash commands registered once, by the runtime's REST client
