"""Discord shards across gateway processes: three ``bots gateway`` and two ``bots worker`` processes, eight
shards of the fake Discord (a server on each), a real redis-server. The gateways divide the shards through
Redis leases; one killed with ``kill -9`` has its shards taken over by the others; a fourth that starts takes
its fair share from them; every message on every shard is answered exactly once, and the fake never sees a
shard connected twice at the same time."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.discord_server import FakeDiscord, shard_of

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer
from .test_e2e_telegram import SCRIPTED

SHARDS = 8


@pytest.fixture
def discord(discord: FakeDiscord) -> FakeDiscord:
    """The fake Discord recommending ``SHARDS`` shards, two identifies at a time."""
    discord.recommended_shards = SHARDS
    discord.max_concurrency = 2
    return discord


async def holders(client: Any) -> dict[int, int]:
    """Shard -> pid of the gateway holding its lease."""
    found = {}
    for key in await client.keys("bots:shards:discord:*:lease:*"):
        value = await client.get(key)
        if value:
            found[int(key.rsplit(":", 1)[1])] = int(value.split("|", 1)[1].split(":", 1)[0])
    return found


async def settled(discord: FakeDiscord, client: Any, pids: set[int], share: int) -> bool:
    """Every shard leased by one of ``pids`` (each holding at most ``share``) and connected once."""
    held = await holders(client)
    counts = Counter(held.values())
    return (
        set(held) == set(range(SHARDS))
        and set(held.values()) == pids
        and max(counts.values()) <= share
        and discord.shards_connected() == set(range(SHARDS))
        and all(discord.connected(s) == 1 for s in range(SHARDS))
    )


async def test_gateways_share_the_shards_take_over_and_rebalance(
    redis_server: RedisServer, discord: FakeDiscord, tmp_path: Path, client: Any
) -> None:
    channels = [discord.text_channel(discord.guild(f"server {n}", shard=n, shard_count=SHARDS)) for n in range(SHARDS)]
    assert [shard_of(int(discord.channels[c]["guild_id"]), SHARDS) for c in channels] == list(range(SHARDS))
    people = [discord.user(f"user{n}") for n in range(SHARDS)]
    env = deployment_env(
        redis_server,
        tmp_path,
        discord=discord,
        REDIS_LEASE_SECONDS="1",
        DISCORD_REPLY_POLICY="always",
        DISCORD_SHARD_COUNT="auto",
        DISCORD_IDENTIFY_INTERVAL="0.05",
        LLM_PROVIDER="scripted",
    )
    deployment = Processes(tmp_path, env)

    async def ask_everyone(round_: int) -> None:
        for channel, person in zip(channels, people, strict=True):
            await discord.say(channel, f"hello {round_}", author=person)
        for channel in channels:
            await discord.wait_posted(channel, round_, timeout=60)

    async with deployment:
        await deployment.start("worker")
        await deployment.start("worker")
        gateways = [await deployment.start("gateway") for _ in range(3)]
        pids = {g.pid for g in gateways}
        await wait_until(lambda: settled(discord, client, pids, 3), timeout=60, what="three gateways on 8 shards")
        await ask_everyone(1)

        first = (await holders(client))[0]
        victim = next(g for g in gateways if g.pid == first)
        victim.send_signal(signal.SIGKILL)
        await victim.wait()
        pids.discard(victim.pid)
        await wait_until(lambda: settled(discord, client, pids, 4), timeout=60, what="the takeover")
        await ask_everyone(2)

        fourth = await deployment.start("gateway")
        pids.add(fourth.pid)
        await wait_until(lambda: settled(discord, client, pids, 3), timeout=60, what="the rebalance")
        assert fourth.pid in (await holders(client)).values()
        await ask_everyone(3)
    for channel in channels:
        posted = discord.posted_in(channel)
        assert len(posted) == 3 and all(m["content"].startswith(SCRIPTED) for m in posted), posted
    assert discord.overlaps == []  # never one shard on two connections at once
    assert {int(i["shard"][1]) for i in discord.identifies} == {SHARDS}
    assert not await client.keys("bots:shards:discord:*:lease:*")  # every lease given back on SIGTERM
    assert await client.zcard("bots:queue") == 0
    for _, proc in deployment.procs:
        assert proc.returncode in (0, -signal.SIGKILL)
    await asyncio.sleep(0)
