"""The backlog every worker reports (``core.fleet.backlog``): the waiting inputs are counted by one worker at a time
and read by the others, the drain jobs waiting and the dead batches by each; the measurer's key passes on when it
expires."""

from __future__ import annotations

from typing import Any

from core.fleet import RedisBackend, measure_backlog
from core.fleet.backlog import shared_backlog

from .conftest import queue_config
from .server import RedisServer


async def test_one_worker_counts_the_inboxes_the_others_read_its_count(redis_server: RedisServer, client: Any) -> None:
    for n, cid in enumerate(("telegram:chat:1", "telegram:chat:2", "web:chat:v")):
        await client.zadd("bots:active", {cid: 1})
        await client.rpush(f"bots:{{{cid}}}:inbox", *[f"entry {i}" for i in range(n + 1)])
    await client.zadd("bots:queue", {"bots:drain:telegram:chat:2:x": 1})
    first, second = RedisBackend(queue_config(redis_server)), RedisBackend(queue_config(redis_server))
    try:
        counted = await shared_backlog(first, owner="first", every=5.0)
        assert counted.depths() == {"inbox": 6, "jobs": 1, "dead": 0}
        assert await client.get("bots:backlog:measurer") == "first"

        await client.rpush("bots:{telegram:chat:1}:inbox", "one more")
        await client.rpush("bots:dead", "{}")
        read = await shared_backlog(second, owner="second", every=5.0)
        assert read.depths() == {"inbox": 6, "jobs": 1, "dead": 1}  # the first's count; the rest read now
        assert (await measure_backlog(second)).inbox == 7
        assert (await shared_backlog(first, owner="first", every=5.0)).inbox == 7  # the measurer counts again

        await client.delete("bots:backlog:measurer")  # the first worker stopped: its key expired
        assert (await shared_backlog(second, owner="second", every=5.0)).inbox == 7
        assert await client.get("bots:backlog:measurer") == "second"
    finally:
        await first.close()
        await second.close()
