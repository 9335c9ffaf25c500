"""End to end on Discord: ``bots gateway`` (the real discord.py client on the fake gateway) and two
``bots worker`` processes (REST only) answer direct messages through Redis, each exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.discord_server import FakeDiscord

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer
from .test_e2e_telegram import SCRIPTED


async def test_gateway_and_two_workers_answer_direct_messages_once(
    redis_server: RedisServer, discord: FakeDiscord, tmp_path: Path, client: Any
) -> None:
    env = deployment_env(redis_server, tmp_path, discord=discord, LLM_PROVIDER="scripted")
    async with Processes(tmp_path, env) as deployment:
        await deployment.start("worker")
        await deployment.start("worker")
        gateway = await deployment.start("gateway")
        users = [discord.user(f"user{i}") for i in range(5)]
        dms = [discord.dm_channel(u) for u in users]
        await wait_until(lambda: "gateway listening" in deployment.log_of(gateway), timeout=60, what="the gateway")
        await discord.wait_until(lambda: discord.shards_connected() == {0}, timeout=60)  # its one shard
        for round_ in range(2):
            for dm, user in zip(dms, users, strict=True):
                await discord.say(dm, f"hello {round_}", author=user)
            for dm in dms:
                await discord.wait_posted(dm, round_ + 1, timeout=60)
    for dm in dms:
        posted = discord.posted_in(dm)
        assert len(posted) == 2 and all(m["content"].startswith(SCRIPTED) for m in posted)
    assert await client.zcard("bots:queue") == 0
