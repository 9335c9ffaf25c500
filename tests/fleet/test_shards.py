"""Shard leases between gateways, in one process with a real redis-server: a fair share each, a shard
connected by one holder at a time, a lease taken away (its token changed) closes the shard at once, a holder
that stops gives its shards back to the others; identify slots are handed out one per bucket at a time."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from core.fleet import IdentifySlots, RedisBackend, ShardLeases

from .conftest import queue_config, wait_until
from .server import RedisServer


class Shards:
    """What a gateway connects, checked for a shard connected twice across every holder."""

    connected: ClassVar[dict[int, str]] = {}
    twice: ClassVar[list[int]] = []

    def __init__(self, name: str) -> None:
        self.name = name

    async def connect(self, shard: int) -> None:
        if shard in Shards.connected:
            Shards.twice.append(shard)
        Shards.connected[shard] = self.name
        await asyncio.sleep(0.01)

    async def disconnect(self, shard: int) -> None:
        await asyncio.sleep(0.01)
        del Shards.connected[shard]

    def mine(self) -> list[int]:
        return sorted(s for s, name in Shards.connected.items() if name == self.name)


async def test_shards_are_shared_fairly_and_never_held_twice(redis_server: RedisServer, client: Any) -> None:
    Shards.connected, Shards.twice = {}, []
    backend = RedisBackend(queue_config(redis_server, retry_seconds=1.0))
    gateways = [Shards(n) for n in ("a", "b", "c")]

    def leases(g: Shards) -> ShardLeases:
        return ShardLeases(backend, "discord:test:6", count=6, ttl=0.6, connect=g.connect, disconnect=g.disconnect)

    a, b = leases(gateways[0]), leases(gateways[1])
    runs = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    try:
        await wait_until(lambda: len(a.held) == len(b.held) == 3, timeout=10, what="three shards each")
        assert gateways[0].mine() == a.held and gateways[1].mine() == b.held
        c = leases(gateways[2])
        runs.append(asyncio.create_task(c.run()))
        await wait_until(lambda: len(a.held) == len(b.held) == len(c.held) == 2, timeout=10, what="the rebalance")
        stolen = a.held[0]
        await client.set(a.lease_key(stolen), "99|someone-else", px=60_000)  # as if another holder had it
        await wait_until(lambda: stolen not in Shards.connected, timeout=10, what="the stolen shard to be closed")
        assert stolen not in a.held
        await client.delete(a.lease_key(stolen))
        runs[1].cancel()  # b stops: its shards go back, a and c take them
        await asyncio.gather(runs[1], return_exceptions=True)
        assert gateways[1].mine() == [] and not b.held
        await wait_until(lambda: sorted(a.held + c.held) == list(range(6)), timeout=10, what="the takeover")
        assert len(a.held) == len(c.held) == 3
        assert sorted(Shards.connected) == list(range(6))
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
    assert Shards.twice == [] and Shards.connected == {}
    assert not await client.keys("bots:shards:discord:test:6:lease:*")
    await backend.close()


async def test_identify_slots_admit_one_shard_per_bucket_at_a_time(redis_server: RedisServer, client: Any) -> None:
    backend = RedisBackend(queue_config(redis_server))
    slots = IdentifySlots(backend, "discord:test", max_concurrency=2, interval=2)
    await slots.wait(0)
    await slots.wait(1)  # the other bucket: at once
    waiting = asyncio.create_task(slots.wait(2))  # bucket 0 again: waits for the slot to expire
    await asyncio.sleep(0.2)
    assert not waiting.done()
    assert 0 < await client.pttl("bots:shards:discord:test:identify:0") <= 2000
    await asyncio.wait_for(waiting, 10)  # once the slot expired
    assert await client.get("bots:shards:discord:test:identify:0") == slots._value
    await backend.close()
