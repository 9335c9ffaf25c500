"""Each take of a batch has a token of its own (``core.fleet.scripts``): a failover that lost a take (the promoted
replica lacks it, or the old primary came back with its own data) hands the batch id out again, to another take with
other inputs, and the earlier take's writes must not count for it. Before, the earlier attempt's posted marks landed
in the new take's ledger (``MARK_POSTED`` and ``BEGIN_REPLY``'s lost-lease path were not checked against the take):
the new take found its reply delivered, with the earlier answer (tests/fleet/test_e2e_primary_back.py lost answers
so); and the acknowledgement of a take that was lost while the lease was kept took the batch's inputs again, under
the same id, as if acknowledged: they were answered twice, no lease given up."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from core.errors import DispatchError
from core.fleet.reply_ledger import LeaseLostError, RedisReplyLedger
from core.fleet.scope import Lease, RunScope

from .conftest import send
from .server import RedisServer
from .test_drain import CID, K, Rig

CONTEXT_KEYS = [K + "batch", K + "inbox", K + "meta", K + "lease", K + "ledger:1", "bots:active", "bots:queue"]


@pytest.fixture
async def rig(redis_server: RedisServer) -> AsyncIterator[Rig]:
    r = Rig(redis_server)
    async with r.agent:
        yield r
    await r.backend.close()


@pytest.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[Any]:
    """A client without decoding, for ``DUMP`` and ``RESTORE``."""
    client = aioredis.Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


async def snapshot(raw: Any, keys: list[str] = CONTEXT_KEYS) -> Callable[[], Awaitable[None]]:
    """The keys as they are now; the function returned puts them back so (what a failover that lost the writes
    since does: the promoted replica, or a primary back with its own data, lacks them)."""
    dumps = {key: await raw.dump(key) for key in keys}
    ttls = {key: await raw.pttl(key) for key in keys}

    async def restore() -> None:
        for key, dumped in dumps.items():
            await raw.delete(key)
            if dumped is not None:
                await raw.restore(key, max(0, ttls[key]), dumped)

    return restore


def texts(result: list[Any]) -> list[str]:
    return [e["i"]["data"] for e in json.loads(result[4])]


async def claim(rig: Rig, worker: str) -> tuple[Lease, list[Any]]:
    """``Rig.claim`` by a drain job of ``worker`` (each claim its own owner, as each job's nonce makes it)."""
    job = await rig.sched()
    await rig.backend.client.zrem("bots:queue", job)
    lease = Lease(cid=CID, token="", job_id=job, owner=f"{job}#{worker}", seconds=rig.backend.config.lease_seconds)
    result = await rig.drainer.claim(lease)
    assert result[0] == "batch", result
    return lease, result


async def test_a_take_a_failover_lost_cannot_mark_its_posts_in_the_new_take_under_the_same_batch_id(
    rig: Rig, gateway: Any, client: Any, raw: Any
) -> None:
    await send(gateway, "c1", "m0")
    failover = await snapshot(raw)
    old, first = await claim(rig, "a")
    assert first[2] == "1" and texts(first) == ["m0"]
    earlier = rig.scope(old, first)
    [posted] = await RedisReplyLedger(earlier).begin_many("probe:reply", ["the answer to m0"], intent="the answer")

    await failover()  # the take is lost: batch 1 is handed out again, with what came meanwhile
    await send(gateway, "c1", "m1")
    new, second = await claim(rig, "b")
    assert second[2] == first[2] and texts(second) == ["m0", "m1"]
    now = rig.scope(new, second)
    [slot] = await RedisReplyLedger(now).begin_many("probe:reply", ["the answer to m0 and m1"], intent="the answer")
    assert not slot.done and slot.content == "the answer to m0 and m1"

    # the earlier attempt's post comes back and is recorded (unfenced: a mark records a fact)
    await RedisReplyLedger(earlier).posted(posted, "41", done=True)
    stored = json.loads(await client.hget(K + "ledger:1", "r0.0"))
    assert stored["content"] == "the answer to m0 and m1" and not stored["done"] and stored["ids"] == []
    assert old.lost  # it learns that its take is gone: the run is given up, it posts no more
    with pytest.raises(LeaseLostError):
        await RedisReplyLedger(earlier).begin("probe:reply", "more")

    # the new take's reply, begun again (its worker died, another runs the take again), is its own, not delivered
    again = RunScope(
        backend=rig.backend, keys=now.keys, lease=new, batch_id=now.batch_id, attempt=2, take=now.take
    )  # (the same lease: its holder renews it)
    [slot] = await RedisReplyLedger(again).begin_many("probe:reply", ["the answer to m0 and m1"])
    assert not slot.done and slot.message_ids == []


async def test_marks_of_an_attempt_at_the_same_take_still_count(rig: Rig, gateway: Any, client: Any) -> None:
    """A worker that lost its lease and posted meanwhile: its mark records a fact the next attempt at the same take
    needs (nothing is posted twice); the take's token is the same on every redelivery."""
    await send(gateway, "c1", "m0")
    old, first = await rig.claim()
    assert old is not None
    earlier = rig.scope(old, first)
    [posted] = await RedisReplyLedger(earlier).begin_many("probe:reply", ["hello"], intent="hello")
    await rig.expire(old)
    assert await rig.worker.sweep_once() == 1
    new, second = await rig.claim()
    assert new is not None and second[6] == "1" and second[9] == first[9] and second[2] == first[2]
    await RedisReplyLedger(earlier).posted(posted, "41", done=True)
    assert not old.lost  # (lost by its renewals, not by this: the mark was taken)
    [slot] = await RedisReplyLedger(rig.scope(new, second)).begin_many("probe:reply", ["hello"])
    assert slot.done and slot.message_ids == ["41"]


async def test_the_acknowledgement_of_a_take_a_failover_lost_is_refused(
    rig: Rig, gateway: Any, client: Any, raw: Any
) -> None:
    """The lease survived and the take did not (taken after a quiet wait, with the lease kept): the batch is gone and
    its inputs wait again. Before, the acknowledgement found no batch, went on as if done and took them again under
    the same batch id (dropping the run's memory writes): answered twice, no lease given up."""
    await send(gateway, "c1", "m0")
    lease, first = await rig.claim()
    assert lease is not None
    scope = rig.scope(lease, first)
    # the state a failover leaves: the claim is there, the take is not (the inbox and the counter as before it)
    await client.delete(K + "batch")
    for entry in reversed(json.loads(first[4])):
        await client.lpush(K + "inbox", json.dumps(entry))
    await client.hincrby(K + "meta", "seq", -1)
    scope.staged[K + "mem:context"] = json.dumps({"from": "the lost take"})

    result = await rig.step(lease, scope)
    assert result[0] == "stale"
    assert result == ["stale", "take"]
    assert await client.get(K + "mem:context") is None
    assert await client.llen(K + "inbox") == 1 and not await client.exists(K + "batch")
    assert not await client.exists(K + "lease")  # freed: the sweep hands the context out again at once
    assert await rig.worker.sweep_once() == 1
    again, taken = await rig.claim()
    assert again is not None and taken[2] == first[2] and texts(taken) == ["m0"] and taken[9] != first[9]


async def test_a_batch_an_older_worker_took_runs_as_before(rig: Rig, gateway: Any, client: Any) -> None:
    """A rolling upgrade: a batch taken by a worker of the version before has no token (nor has its ledger); a
    worker of this version runs it with the token '' and every write is taken as before."""
    await send(gateway, "c1", "m0")
    lease, _ = await rig.claim()
    assert lease is not None
    await client.hdel(K + "batch", "take")  # (what the older version's take stores)
    await client.hset(K + "ledger:1", "m0", "<response>")  # (and its ledger, written by the older worker)
    await rig.expire(lease)
    await rig.worker.sweep_once()
    new, again = await rig.claim()
    assert new is not None and again[9] == "" and again[6] == "1"
    scope = rig.scope(new, again)
    assert scope.take == ""
    [slot] = await RedisReplyLedger(scope).begin_many("probe:reply", ["hello"], intent="hello")
    await RedisReplyLedger(scope).posted(slot, "41", done=True)
    assert json.loads(await client.hget(K + "ledger:1", "r0.0"))["ids"] == ["41"]
    assert not await client.hexists(K + "ledger:1", "take") and not new.lost
    assert (await rig.step(new, scope))[0] == "released"


async def test_a_worker_knows_its_take_when_it_confirms_an_acknowledgement(rig: Rig, gateway: Any, client: Any) -> None:
    """``CONFIRM_ACK`` after an acknowledgement too few replicas confirmed: it is on this primary when the take
    acknowledged is the one noted; a take a failover lost is not, whichever batch is held under its id."""
    await send(gateway, "c1", "m0")
    lease, first = await rig.claim()
    assert lease is not None
    scope = rig.scope(lease, first)
    assert (await rig.step(lease, scope))[0] == "released"
    await rig.drainer._confirm_ack(lease, scope)  # there: no error
    lost = RunScope(backend=rig.backend, keys=scope.keys, lease=lease, batch_id=scope.batch_id, attempt=1, take="x")
    with pytest.raises(DispatchError, match="lost in a Redis failover"):
        await rig.drainer._confirm_ack(lease, lost)
