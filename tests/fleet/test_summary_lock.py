"""One summary fold per conversation across workers: RedisSummaryLock against a real redis-server."""

from __future__ import annotations

import asyncio

from core.fleet import RedisBackend, RedisSummaryLock

from .conftest import queue_config, wait_until
from .server import RedisServer


async def test_one_holder_per_conversation_and_a_dead_holder_expires(redis_server: RedisServer) -> None:
    one, two = (RedisBackend(queue_config(redis_server)) for _ in range(2))
    try:
        first, second = RedisSummaryLock(one, ttl=2), RedisSummaryLock(two, ttl=2)
        async with first.hold("chat:a") as a, second.hold("chat:a") as b, second.hold("chat:b") as c:
            assert (a, b, c) == (True, False, True)
        async with second.hold("chat:a") as again:  # released on exit
            assert again
        held = first.hold("chat:a")
        assert await held.__aenter__()  # a worker killed while folding never releases it...
        async with second.hold("chat:a") as meanwhile:
            assert not meanwhile
        await asyncio.sleep(2)  # the ttl
        await wait_until(lambda: _takes(second, "chat:a"), timeout=30, what="the dead holder's hold expired")
        await held.__aexit__(None, None, None)  # a late release only removes its own hold
    finally:
        await one.close()
        await two.close()


async def _takes(lock: RedisSummaryLock, cid: str) -> bool:
    async with lock.hold(cid) as held:  # (released on exit)
        return held
