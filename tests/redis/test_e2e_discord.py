"""End to end on Discord: ``bots gateway`` (the real discord.py client on the fake gateway) and two
``bots worker`` processes (REST only) answer direct messages through Redis, each exactly once."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.discord_server import FakeDiscord

from .conftest import wait_until
from .server import RedisServer
from .test_e2e_telegram import SCRIPTED, Processes


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()
    assert fake.unhandled == [], fake.unhandled


async def test_gateway_and_two_workers_answer_direct_messages_once(
    redis_server: RedisServer, discord: FakeDiscord, tmp_path: Path, client: Any
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_", "BOT_"))}
    env.update(
        REDIS_URL=redis_server.url,
        DISCORD_TOKEN="fake-token",
        DISCORD_API_URL=discord.api_url,
        DISCORD_GATEWAY_URL=discord.gateway_url,
        DISCORD_GUILD_READY_TIMEOUT="0.05",
        DISCORD_SYNC_COMMANDS="false",
        LLM_PROVIDER="scripted",
        BOT_DATA_DIR=str(tmp_path / "data"),
        LOG_LEVEL="INFO",
        HTTP_PORT="0",
    )
    deployment = Processes(tmp_path, env)
    try:
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
    finally:
        await deployment.stop_all()
    for dm in dms:
        posted = discord.posted_in(dm)
        assert len(posted) == 2 and all(m["content"].startswith(SCRIPTED) for m in posted)
    assert await client.zcard("bots:queue") == 0
