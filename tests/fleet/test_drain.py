"""Claim, take, fenced ack, release, hand-off, redelivery, dead letters and the sweeper, step by step."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from core import ScriptedModel, action, create_agent
from core.fleet import Drainer, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore, ReplayModel, arq_worker
from core.fleet.scope import Lease, RunScope
from core.models.base import ModelRequest

from .conftest import queue_config, send, wait_until
from .probe import answer, probe_extension
from .server import RedisServer

CID = "probe:chat:c1"
K = "bots:{probe:chat:c1}:"


class Rig:
    """A worker's parts driven by hand: claim, step, run, sweep."""

    def __init__(self, server: RedisServer, model: Any = None, **config: Any) -> None:
        self.backend = RedisBackend(queue_config(server, **config))
        self.model = model or ScriptedModel(answer)
        self.agent = create_agent(
            model=ReplayModel(self.model),
            extensions=[probe_extension(server.url)],
            dispatcher=RedisDispatcher(self.backend),
            memory=RedisMemoryStore(self.backend),
        )
        self.drainer = Drainer(self.agent, self.backend)
        self.worker = QueueWorker(self.agent, self.backend)

    async def sched(self) -> str:
        job: str = await self.backend.client.hget(K + "meta", "sched")
        return job

    async def claim(self, job: str | None = None) -> tuple[Lease | None, list[Any]]:
        """Pop ``job`` (default: the scheduled one) off the queue, as a worker's BZMPOP does, then claim the context
        for it and take the first batch."""
        job = job or await self.sched()
        await self.backend.client.zrem("bots:queue", job)
        lease = Lease(cid=CID, token="", job_id=job, owner=f"{job}#test", seconds=self.backend.config.lease_seconds)
        result = await self.drainer.claim(lease)
        return (None if result[0] in ("stale", "held") else lease), result

    async def batch(self) -> tuple[Lease, RunScope, list[Any]]:
        """Claim the scheduled job and take its first batch, ready to run: the lease, the run's scope and the
        batch's entries (for ``drainer._run``)."""
        lease, result = await self.claim()
        assert lease is not None, result
        return lease, self.scope(lease, result), json.loads(result[4])

    async def step(self, lease: Lease, acked: RunScope | None = None, mode: str = "take") -> list[Any]:
        return await self.drainer._step(lease, acked, mode)

    def scope(self, lease: Lease, result: list[Any]) -> RunScope:
        return RunScope(
            backend=self.backend,
            keys=self.backend.keys.context(CID),
            lease=lease,
            batch_id=str(result[2]),
            attempt=int(result[3]),
            take=str(result[9]),
        )

    async def expire(self, lease: Lease) -> None:
        """What time does to a crashed worker's lease."""
        await self.backend.client.delete(K + "lease")
        await self.backend.client.zadd("bots:active", {CID: 0})


@pytest.fixture
async def rig(redis_server: RedisServer) -> AsyncIterator[Rig]:
    r = Rig(redis_server)
    async with r.agent:
        yield r
    await r.backend.close()


def texts(result: list[Any]) -> list[str]:
    return [e["i"]["data"] for e in json.loads(result[4])]


async def test_a_sweeper_whose_clock_is_a_minute_behind_finds_an_overdue_lease_at_once(
    rig: Rig, gateway: Any, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overdue is by Redis's clock (``TIME`` in the script), not the sweeping machine's: a worker a minute behind
    found a dead worker's conversations a minute late (tests/fleet/netfaults.py, clock-off-schedules)."""
    await send(gateway, "c1", "m0")
    lease, _ = await rig.claim()
    assert lease is not None
    seconds, micros = await client.time()
    await client.delete(K + "lease")  # its holder died; its lease ran out a second ago
    await client.zadd("bots:active", {CID: int(seconds) * 1000 + int(micros) // 1000 - 1000})
    behind = time.time() - 60
    monkeypatch.setattr(arq_worker, "time", SimpleNamespace(time=lambda: behind, monotonic=time.monotonic))
    assert await rig.worker.sweep_once() == 1


async def test_a_stale_holder_is_fenced_off_and_the_batch_is_redelivered(rig: Rig, gateway: Any, client: Any) -> None:
    await send(gateway, "c1", "m0")
    await send(gateway, "c1", "m1")
    old_job = await rig.sched()
    old, first = await rig.claim()
    assert old is not None and await client.zcard("bots:queue") == 0  # claimed jobs leave arq's queue
    assert first[0] == "batch" and texts(first) == ["m0", "m1"] and first[3] == 1
    scope = rig.scope(old, first)
    scope.staged[K + "mem:context"] = json.dumps({"from": "stale"})

    await rig.expire(old)
    assert await rig.worker.sweep_once() == 1
    new_job = await rig.sched()
    assert new_job != old_job and await client.zrange("bots:queue", 0, -1) == [new_job]
    assert (await rig.claim(old_job))[1] == ["stale"]  # the old job cannot come back

    new, again = await rig.claim(new_job)
    assert new is not None and int(new.token) > int(old.token)
    assert again[0] == "batch" and again[2] == first[2] and again[3] == 2 and texts(again) == ["m0", "m1"]
    assert again[6] == "1"  # a redelivery

    assert (await rig.step(old, scope))[0] == "stale"  # the stale worker's ack and writes are refused
    assert await client.get(K + "mem:context") is None
    assert await client.hget(K + "batch", "id") == first[2]

    fresh = rig.scope(new, again)
    fresh.staged[K + "mem:context"] = json.dumps({"from": "holder"})
    assert (await rig.step(new, fresh))[0] == "released"
    assert json.loads(await client.get(K + "mem:context")) == {"from": "holder"}
    assert not await client.exists(K + "batch", K + "lease")
    assert await client.hget(K + "meta", "sched") is None and await client.zscore("bots:active", CID) is None


async def test_release_only_when_the_inbox_is_empty(rig: Rig, gateway: Any, client: Any) -> None:
    await send(gateway, "c1", "m0")
    lease, first = await rig.claim()
    assert lease is not None
    await send(gateway, "c1", "m1")  # arrives during the run: joins the next batch, no second job
    assert await client.zcard("bots:queue") == 0
    second = await rig.step(lease, rig.scope(lease, first))
    assert second[0] == "batch" and texts(second) == ["m1"]
    assert (await rig.step(lease, rig.scope(lease, second)))[0] == "released"
    await send(gateway, "c1", "m2")  # the context is free again: a fresh drain job
    assert await client.zcard("bots:queue") == 1


async def test_busy_context_is_handed_off_after_k_batches(redis_server: RedisServer, gateway: Any, client: Any) -> None:
    r = Rig(redis_server, handoff_batches=2, batch_size=1)
    for i in range(4):
        await send(gateway, "c1", f"m{i}")
    job = await r.sched()
    lease, first = await r.claim()
    assert lease is not None
    second = await r.step(lease, r.scope(lease, first))
    assert texts(second) == ["m1"]
    result = await r.step(lease, r.scope(lease, second), "handoff")
    assert result[0] == "handed_off"
    assert not await client.exists(K + "lease")
    new_job = await r.sched()
    assert new_job != job and await client.zrange("bots:queue", 0, -1) == [new_job]
    assert await client.llen(K + "inbox") == 2
    await r.backend.close()


async def test_a_batch_that_keeps_failing_goes_to_the_dead_letter_list(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    r = Rig(redis_server, max_attempts=2)
    await send(gateway, "c1", "poison")
    lease, first = await r.claim()
    assert lease is not None and first[3] == 1
    assert (await r.step(lease))[3] == 2
    assert (await r.step(lease))[:6] == ["released", lease.token, "", 0, "", "1"]
    dead = [json.loads(x) for x in await client.lrange("bots:dead", 0, -1)]
    assert dead[0]["cid"] == CID and [e["i"]["data"] for e in dead[0]["entries"]] == ["poison"]
    await r.backend.close()


async def test_sweeper_leaves_live_and_waiting_contexts_alone(rig: Rig, gateway: Any, client: Any) -> None:
    await send(gateway, "c1", "m0")
    await client.zadd("bots:active", {CID: 0})
    assert await rig.worker.sweep_once() == 0  # its job is waiting in the queue: not lost
    assert await client.zscore("bots:active", CID) > 0
    lease, _ = await rig.claim()
    assert lease is not None
    await client.zadd("bots:active", {CID: 0})
    assert await rig.worker.sweep_once() == 0  # the holder's lease is alive
    await client.zrem("bots:queue", await rig.sched())
    await rig.expire(lease)
    assert await rig.worker.sweep_once() == 1


async def test_memory_writes_wait_for_the_fenced_ack(rig: Rig, gateway: Any, client: Any) -> None:
    await client.set(K + "mem:context", json.dumps({"n": 0}))
    await send(gateway, "c1", "m0")
    lease, result = await rig.claim()
    assert lease is not None
    assert json.loads(result[10]) == {"n": 0} and result[11] is None  # memory comes with the batch
    scope = rig.scope(lease, result)
    store = rig.agent.memory
    token = scope.enter()
    try:
        await store.set(f"context:{CID}", {"n": 1})
        assert await store.get(f"context:{CID}") == {"n": 1}  # the run reads its own writes
        await store.delete(f"working:{CID}")
    finally:
        RunScope.exit(token)
    assert json.loads(await client.get(K + "mem:context")) == {"n": 0}
    assert await store.get(f"context:{CID}") == {"n": 0}
    await rig.step(lease, scope)
    assert await store.get(f"context:{CID}") == {"n": 1}
    await store.set("other", [1, 2])  # outside a run: written at once
    assert json.loads(await client.get("bots:mem:other")) == [1, 2]


async def test_a_redelivered_batch_replays_the_model_and_posts_nothing_twice(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    calls: list[str] = []

    def lookup(args: Any, ctx: Any, agent: Any) -> dict[str, int]:
        calls.append("lookup")
        return {"answer": 42}

    def script(request: ModelRequest) -> str:
        calls.append("model")
        if "action_result" not in request.prompt:
            return '<response><action_call name="lookup">{}</action_call></response>'
        return '<response><output type="probe:reply">the answer is 42</output><reasoning>done'

    r = Rig(redis_server, model=ScriptedModel(script))
    r.agent = create_agent(
        model=ReplayModel(ScriptedModel(script)),
        extensions=[probe_extension(redis_server.url)],
        actions=[action(name="lookup", handler=lookup)],
        dispatcher=RedisDispatcher(r.backend),
        memory=RedisMemoryStore(r.backend),
    )
    r.drainer = Drainer(r.agent, r.backend)
    async with r.agent:
        await send(gateway, "c1", "what is the answer?")
        lease, scope, entries = await r.batch()
        assert await r.drainer._run(scope, entries)
        await scope.close(acknowledged=False)  # the posted mark is written; then the worker dies
        assert calls == ["model", "lookup", "model"]
        assert await client.lrange("probe:replies:c1", 0, -1) == ["the answer is 42"]

        await r.expire(lease)
        assert await r.worker.sweep_once() == 1
        assert await r.drainer.drain({"job_id": await r.sched()}, CID) == "released"
        assert calls == ["model", "lookup", "model", "lookup"]  # no model call; the action ran again
        assert await client.lrange("probe:replies:c1", 0, -1) == ["the answer is 42"]
        assert await client.llen("probe:attempts") == 1  # not even attempted twice
        assert r.drainer.stats.redelivered == 1
        working = json.loads(await client.get(K + "mem:working"))
        assert [e["kind"] for e in working].count("input") == 1
        assert not await client.exists(K + "ledger:1")  # the ack dropped the ledger with the batch
    await r.backend.close()


async def test_a_posted_mark_is_written_soon_even_while_the_run_goes_on(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    release = asyncio.Event()

    async def slow(args: Any, ctx: Any, agent: Any) -> str:
        await release.wait()
        return "done"

    def script(request: ModelRequest) -> str:
        if "action_result" in request.prompt:
            return "<response></response>"
        return '<response><output type="probe:reply">on it</output><action_call name="slow">{}</action_call></response>'

    r = Rig(redis_server)
    r.agent = create_agent(
        model=ReplayModel(ScriptedModel(script)),
        extensions=[probe_extension(redis_server.url)],
        actions=[action(name="slow", handler=slow)],
        dispatcher=RedisDispatcher(r.backend),
        memory=RedisMemoryStore(r.backend),
    )
    r.drainer = Drainer(r.agent, r.backend)
    async with r.agent:
        await send(gateway, "c1", "do it")
        _, scope, entries = await r.batch()
        running = asyncio.create_task(r.drainer._run(scope, entries))

        async def marked() -> bool:
            stored = await client.hget(K + "ledger:1", "r1.0")
            return stored is not None and json.loads(stored)["done"]

        await wait_until(marked, timeout=10, what="the posted mark")  # while the action still runs
        assert not running.done()
        release.set()
        assert await running
        await scope.close(acknowledged=True)
    await r.backend.close()


async def test_a_reply_posted_but_not_yet_marked_is_posted_again_with_the_same_nonce(
    rig: Rig, gateway: Any, client: Any
) -> None:
    await send(gateway, "c1", "hello")
    lease, scope, entries = await rig.batch()
    assert await rig.drainer._run(scope, entries)
    await scope.close(acknowledged=False)
    stored = json.loads(await client.hget(K + "ledger:1", "r1.0"))  # the mark is written the moment it is known:
    stored.update(ids=[], done=False)  # put the entry back as it was before, as if the worker died just then
    await client.hset(K + "ledger:1", "r1.0", json.dumps(stored))
    await rig.expire(lease)
    await rig.worker.sweep_once()
    assert await rig.drainer.drain({"job_id": await rig.sched()}, CID) == "released"
    attempts = [json.loads(a) for a in await client.lrange("probe:attempts", 0, -1)]
    assert len(attempts) == 2 and attempts[0]["nonce"] == attempts[1]["nonce"]  # the platform sees one
    assert await client.lrange("probe:replies:c1", 0, -1) == ["hello"]


async def test_closing_the_replay_models_stream_closes_the_inner_models_at_once() -> None:
    """A run cancelled between two chunks closes its model stream: the real model's stream is closed with it, not
    left suspended for the garbage collector (which at shutdown fails with "aclose(): ... already running")."""
    closed: list[bool] = []

    class Chunks:
        name = "chunks"
        model = ""
        vision = False
        last_usage = None

        async def stream(self, request: ModelRequest) -> Any:
            try:
                for chunk in ("<response>", "<output>", "</output></response>"):
                    yield chunk
            finally:
                closed.append(True)

    stream = ReplayModel(Chunks()).stream(ModelRequest(system="", prompt="hi"))
    assert await anext(stream) == "<response>"
    await stream.aclose()  # type: ignore[attr-defined]
    assert closed == [True]


async def test_a_renewal_cancelled_while_its_scripts_are_checked_gives_its_connection_back(
    rig: Rig, gateway: Any, client: Any
) -> None:
    """The renewal's pipeline carries a script, so it asks ``SCRIPT EXISTS`` on a connection of its own before it
    sends anything; cancelled there (a worker stopping, a run ending), that connection was never given back to the
    pool: one leaked per cancel, and a ResourceWarning when the pipeline was collected (two failed runs of
    tests/fleet/test_e2e_telegram_poller.py)."""
    await send(gateway, "c1", "m0")
    lease, _ = await rig.claim()
    assert lease is not None
    me = asyncio.current_task()
    assert me is not None
    rig.drainer._local[CID] = (me, lease)  # (as ``drain`` does while it runs the batch)
    pool = rig.backend.client.connection_pool
    await client.execute_command("CLIENT", "PAUSE", "2000", "ALL")  # the renewal's first question waits in Redis
    renewing = asyncio.create_task(rig.drainer.renew_once())
    await wait_until(lambda: pool._in_use_connections, what="the renewal asking Redis")
    renewing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await renewing
    del rig.drainer._local[CID]
    assert not pool._in_use_connections
