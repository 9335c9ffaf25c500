"""A run whose lease was lost, by whatever path, never acknowledges its batch: the next holder runs the batch again
whole and answers it once (issue 28: after a second failover a batch was acknowledged with the model's empty answer
that followed a "lease lost: reply not posted" error, and its messages were never answered)."""

from __future__ import annotations

import json
from typing import Any

import redis

from core import ScriptedModel, create_agent
from core.fleet import Drainer, RedisDispatcher, RedisMemoryStore, ReplayModel
from core.models.base import ModelRequest

from .conftest import send
from .probe import answer, probe_extension
from .server import RedisServer
from .test_drain import CID, K, Rig


class Scripted(Rig):
    """A rig whose model calls ``before`` (with the rig) first: its answer if it gives one, else the probe bot's."""

    def __init__(self, server: RedisServer, before: Any) -> None:
        super().__init__(server)
        self.asked = 0

        def script(request: ModelRequest) -> str:
            self.asked += 1
            return before(self) or answer(request)

        self.agent = create_agent(
            model=ReplayModel(ScriptedModel(script)),
            extensions=[probe_extension(server.url)],
            dispatcher=RedisDispatcher(self.backend),
            memory=RedisMemoryStore(self.backend),
        )
        self.drainer = Drainer(self.agent, self.backend)


async def _answered_once_after(rig: Scripted, client: Any, first_batch: str) -> None:
    """The batch is still there, unacknowledged and unanswered; the next holder runs it whole and answers it once."""
    assert await client.hget(K + "batch", "id") == first_batch
    assert await client.lrange("probe:replies:c1", 0, -1) == []
    assert await client.get(K + "mem:working") is None  # nothing of the lost run was written
    await rig.backend.client.delete(K + "lease")  # what time does to it
    await rig.backend.client.zadd("bots:active", {CID: 0})
    assert await rig.worker.sweep_once() == 1
    job = await rig.sched()
    await client.zrem("bots:queue", job)
    assert await rig.drainer.drain({"job_id": job}, CID) == "released"
    assert await client.lrange("probe:replies:c1", 0, -1) == ["m0|m1"]
    working = json.loads(await client.get(K + "mem:working"))
    assert [e["data"] for e in working if e["kind"] == "input"] == ["m0", "m1"]
    assert not [e for e in working if e["kind"] == "error"]


async def test_a_stale_reply_ends_the_run_and_its_batch_is_run_again_whole(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    """Another worker holds the context by the time the reply is stored (a failover handed the claim out again):
    the stale answer gives the context up at once (the run is cancelled, the model not asked again)."""
    thief = redis.Redis.from_url(redis_server.url, decode_responses=True)

    def steal(rig: Scripted) -> str | None:
        if rig.asked == 1:
            thief.set(K + "lease", "99|someone-else", px=60_000)
        return None

    rig = Scripted(redis_server, steal)
    try:
        async with rig.agent:
            await send(gateway, "c1", "m0")
            await send(gateway, "c1", "m1")
            job = await rig.sched()
            await client.zrem("bots:queue", job)  # popped, as a worker's BZMPOP does
            assert await rig.drainer.drain({"job_id": job}, CID) == "lost"
            assert rig.asked == 1  # not asked again with the batch's messages taken as answered
            assert rig.drainer.stats.lost == 1 and rig.drainer.stats.batches == 0
            batch = await client.hget(K + "batch", "id")
            assert batch is not None
            await _answered_once_after(rig, client, batch)
    finally:
        thief.close()
        await rig.backend.close()


async def test_a_lease_whose_deadline_passed_during_the_run_is_never_acknowledged(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    """The worker was starved of its renewals while the run went on (no reply to store, so nothing checked the
    lease): the run ends, and its batch is not acknowledged, though the lease may still be in Redis."""

    def starve(rig: Scripted) -> str | None:
        if rig.asked != 1:
            return None
        for _, lease in rig.drainer._local.values():
            lease.deadline = 0.0
        return "<response></response>"  # nothing to post: the answer the batch would be acknowledged with

    rig = Scripted(redis_server, starve)
    try:
        async with rig.agent:
            await send(gateway, "c1", "m0")
            await send(gateway, "c1", "m1")
            job = await rig.sched()
            await client.zrem("bots:queue", job)
            assert await rig.drainer.drain({"job_id": job}, CID) == "lost"
            assert rig.drainer.stats.batches == 0
            batch = await client.hget(K + "batch", "id")
            assert batch is not None
            await _answered_once_after(rig, client, batch)
    finally:
        await rig.backend.close()
