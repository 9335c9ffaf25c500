"""Two ``bots gateway`` processes serving Discord (two shards) and Telegram long polling together, with a
``bots worker``, the fake platforms and a real redis-server: both gateways hold a Discord shard while only one
polls Telegram (the other stands by for Telegram only), and messages on both platforms are answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer
from .test_e2e_discord_shards import holders
from .test_e2e_telegram import SCRIPTED


async def test_telegram_standby_still_holds_discord_shards(
    redis_server: RedisServer, discord: FakeDiscord, telegram: FakeTelegramServer, tmp_path: Path, client: Any
) -> None:
    channels = [discord.text_channel(discord.guild(f"s{n}", shard=n, shard_count=2)) for n in range(2)]
    alice = discord.user("alice")
    env = deployment_env(
        redis_server,
        tmp_path,
        discord=discord,
        telegram=telegram,
        REDIS_LEASE_SECONDS="3",  # slack for a loaded machine: the processes start their platforms at once
        DISCORD_REPLY_POLICY="always",
        DISCORD_SHARD_COUNT="2",
        DISCORD_IDENTIFY_INTERVAL="0.05",
        TELEGRAM_POLL_TIMEOUT="1",
        LLM_PROVIDER="scripted",
    )
    async with Processes(tmp_path, env) as deployment:
        await deployment.start("worker")
        gateways = [await deployment.start("gateway") for _ in range(2)]

        async def both_hold_a_shard() -> bool:
            return (
                set((await holders(client)).values()) == {g.pid for g in gateways}
                and len(discord.shards_connected()) == 2
            )

        await wait_until(both_hold_a_shard, timeout=60, what="a shard in each gateway")
        polling = [g for g in gateways if "telegram polling" in deployment.log_of(g)]
        assert len(polling) == 1
        standby = next(g for g in gateways if g is not polling[0])
        await wait_until(lambda: "standing by" in deployment.log_of(standby), timeout=60, what="the standby")
        for channel in channels:
            await discord.say(channel, "hello", author=alice)
        telegram.user_says("hello there", user_id=8000)
        for channel in channels:
            await discord.wait_posted(channel, 1, timeout=60)
        [reply] = await telegram.wait_replies(1, timeout=60)
        assert reply.text.startswith(SCRIPTED)
    assert all(discord.posted_in(c)[0]["content"].startswith(SCRIPTED) for c in channels)
    assert discord.overlaps == []
    assert all(proc.returncode == 0 for _, proc in deployment.procs)
