"""A batch that inputs joined (``core.busy`` steer) and that its worker did not finish is run again in the same parts
(``core.fleet.joiner``): the answers the first attempt stored are replayed for the inputs they read, and an input
whose answer was never written gets one. Run whole, the first replayed answer stood for every input of the batch,
and a message sent while the bot answered was taken as answered without an answer (issue 37: found with
``tests/fleet/test_e2e_failover.py`` once its workers steered)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio

from core import ScriptedModel
from core.errors import DispatchError
from core.models.base import ModelRequest

from .conftest import send, wait_until
from .probe import answer
from .server import RedisServer
from .test_drain import CID, K, Rig

LEASE = 3.0
"""The rig's lease (``queue_config``'s is 1 s): these tests end a lease by hand (``Rig.expire``), and a run on a
loaded machine kept off the CPU past 1 s lost its lease on its own and was rightly cancelled ('lost', not
'released'; once in a whole-suite run at load 10-16)."""


class Held(ScriptedModel):
    """Answers with the new inputs (``probe.answer``); its first call waits for ``go`` once its first word is
    written (shown: an input joining then is read at the next step; before, the call would start again with it,
    ``core.busy``), and while ``dies`` its second one never ends (the worker dies while writing it)."""

    def __init__(self) -> None:
        super().__init__(answer)
        self.calls = 0
        self.first, self.go, self.second = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.dies = True

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.calls += 1
        if self.calls == 1:
            text = answer(request)
            cut = text.find('">') + 3
            yield text[:cut]
            self.first.set()
            await self.go.wait()
            yield text[cut:]
            return
        if self.calls == 2 and self.dies:
            self.second.set()
            await asyncio.Event().wait()
        async for chunk in super().stream(request):
            yield chunk


async def _batch_holds(client: Any, count: int) -> bool:
    entries = await client.hget(K + "batch", "entries")
    return entries is not None and len(json.loads(entries)) == count


async def test_a_batch_an_input_joined_is_run_again_in_its_parts_and_every_input_is_answered(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    model = Held()
    r = Rig(redis_server, model=model, busy="steer", lease_seconds=LEASE)
    async with r.agent:
        await send(gateway, "c1", "one")
        lease, scope, entries = await r.batch()
        running = asyncio.create_task(r.drainer._run(scope, entries))
        await asyncio.wait_for(model.first.wait(), 10)  # the answer to "one" is being written
        await send(gateway, "c1", "two")
        r.drainer.arrived(CID)  # (what the arrivals channel tells the worker)
        await wait_until(lambda: _batch_holds(client, 2), what="two joined the batch being run")
        model.go.set()
        await asyncio.wait_for(model.second.wait(), 10)  # the run's next step reads "two"; the worker dies now
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        r.agent.cancel_run(CID)
        await scope.close(acknowledged=False)
        assert await client.lrange("probe:replies:c1", 0, -1) == ["one"]
        assert await client.hget(K + "batch", "cuts") == "1"

        model.dies = False
        await r.expire(lease)
        assert await r.worker.sweep_once() == 1
        assert await r.drainer.drain({"job_id": await r.sched()}, CID) == "released"
        assert await client.lrange("probe:replies:c1", 0, -1) == ["one", "two"]  # "one" replayed, "two" answered
        assert model.calls == 3  # the stored answer to "one" was not asked for again
        assert r.drainer.stats.redelivered == 1
        working = json.loads(await client.get(K + "mem:working"))
        assert [e["data"] for e in working if e["kind"] == "output"] == ["one", "two"]
    await r.backend.close()


async def test_a_join_run_again_after_its_reply_was_lost_takes_nothing_more(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    """The join script sent again (its reply lost on the way) hands back what it took the first time: inputs taken
    twice would sit in the batch, acknowledged with it, and never given to the run."""
    r = Rig(redis_server, busy="steer", lease_seconds=LEASE)
    async with r.agent:
        await send(gateway, "c1", "one")
        lease, result = await r.claim()
        assert lease is not None
        await send(gateway, "c1", "two")
        b = r.backend
        ck = b.keys.context(CID)

        async def join(join_id: str) -> list[Any]:
            found: list[Any] = await b.call(
                b.join, [ck.lease, ck.batch, ck.inbox], [lease.fence, result[2], 50, join_id, result[9]], what="joining"
            )
            return found

        first = await join("j1")
        await send(gateway, "c1", "three")
        assert await join("j1") == first  # (sent again: the same inputs, nothing more)
        assert [e["i"]["data"] for e in json.loads(first[1])] == ["two"]
        assert await _batch_holds(client, 2) and await client.llen(K + "inbox") == 1
        second = await join("j2")
        assert [e["i"]["data"] for e in json.loads(second[1])] == ["three"]
        assert await client.hget(K + "batch", "cuts") == "1,2"
    await r.backend.close()


async def test_a_part_one_step_answered_with_the_part_before_it_is_not_answered_again(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    """One step of the model read two parts of a batch (the second joined before the step began) and answered both;
    the worker died before the acknowledgement. Run again in its parts, the first part replays that step's answer,
    and the second is recognised from the reply ledger (the inputs each step read, ``m<step>:in``) as answered:
    recorded in the conversation, not answered again (issue 50: before, it got a second answer the person saw)."""
    model = Held()
    model.go.set()
    model.dies = False
    r = Rig(redis_server, model=model, busy="steer", lease_seconds=LEASE)
    async with r.agent:
        await send(gateway, "c1", "one")
        lease, scope, entries = await r.batch()
        await send(gateway, "c1", "two")
        b, ck = r.backend, r.backend.keys.context(CID)
        joined = await b.call(
            b.join, [ck.lease, ck.batch, ck.inbox], [lease.fence, scope.batch_id, 50, "j1", scope.take], what=""
        )
        assert joined[0] == "joined" and await client.hget(K + "batch", "cuts") == "1"
        assert await r.drainer._run(scope, [*entries, *json.loads(joined[1])])  # one step reads both
        await scope.close(acknowledged=False)  # the worker dies before the acknowledgement
        assert await client.lrange("probe:replies:c1", 0, -1) == ["one|two"]
        assert model.calls == 1

        await r.expire(lease)
        assert await r.worker.sweep_once() == 1
        assert await r.drainer.drain({"job_id": await r.sched()}, CID) == "released"
        assert await client.lrange("probe:replies:c1", 0, -1) == ["one|two"]  # "two" not answered again
        assert model.calls == 1  # nor the model asked
        working = json.loads(await client.get(K + "mem:working"))
        assert [e["data"] for e in working if e["kind"] == "input"] == ["one", "two"]  # both recorded
        assert [e["data"] for e in working if e["kind"] == "output"] == ["one|two"]
    await r.backend.close()


async def test_a_part_a_later_step_answered_is_not_answered_again_after_redis_is_killed_and_restarted(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    """A part joined while the first was being answered, and the run's next step answered it; then Redis was killed
    (``kill -9``) before the acknowledgement, which failed, and started again from its AOF. Run again in its parts,
    each part's answer is replayed from the reply ledger, whichever step of the run wrote it: the second part is not
    answered again, and the model is not asked again (issue 50)."""
    model = Held()
    model.dies = False
    r = Rig(redis_server, model=model, busy="steer", retry_seconds=0.5, lease_seconds=LEASE)
    async with r.agent:
        await send(gateway, "c1", "one")
        lease, scope, entries = await r.batch()
        running = asyncio.create_task(r.drainer._run(scope, entries))
        await asyncio.wait_for(model.first.wait(), 10)  # the answer to "one" is being written
        await send(gateway, "c1", "two")
        r.drainer.arrived(CID)
        await wait_until(lambda: _batch_holds(client, 2), what="two joined the batch being run")
        model.go.set()
        assert await asyncio.wait_for(running, 30)  # the run's next step answered "two"
        assert await client.lrange("probe:replies:c1", 0, -1) == ["one", "two"]
        assert model.calls == 2

        redis_server.stop(sig=signal.SIGKILL)  # Redis dies before the acknowledgement ...
        with pytest.raises(DispatchError):
            await r.step(lease, scope)
        await scope.close(acknowledged=False)
        redis_server.start()  # ... and comes back with its own data
        back = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
        assert await back.hget(K + "batch", "cuts") == "1"

        await r.expire(lease)
        assert await r.worker.sweep_once() == 1
        assert await r.drainer.drain({"job_id": await r.sched()}, CID) == "released"
        assert await back.lrange("probe:replies:c1", 0, -1) == ["one", "two"]  # neither answered again
        assert model.calls == 2  # nor the model asked
        assert r.drainer.stats.redelivered == 1
        working = json.loads(await back.get(K + "mem:working"))
        assert [e["data"] for e in working if e["kind"] == "output"] == ["one", "two"]
        await back.aclose()
    await r.backend.close()


class Restarted(ScriptedModel):
    """Answers with the new inputs (``probe.answer``); its first call opens the reply and writes nothing visible, and
    waits there until it is cancelled (an input joining now starts the call again with it, ``core.busy``)."""

    def __init__(self) -> None:
        super().__init__(answer)
        self.calls = 0
        self.opened = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.calls += 1
        if self.calls == 1:
            yield '<response><output type="probe:reply">'
            self.opened.set()
            await asyncio.Event().wait()
        async for chunk in super().stream(request):
            yield chunk


async def test_a_call_started_again_with_a_part_keeps_its_step_and_its_answer_is_replayed_for_both_parts(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    """A part joined before a word of the answer to the first was shown: the model call started again with both
    (``core.busy``), answered them, and the worker died before the acknowledgement. The call started again is the
    same step in the reply ledger, so the batch run again in its parts replays that answer for the first part and
    takes the second as answered. Before, it took the next step's number: the first part, run alone, found no answer
    at its step and was answered again after the answer to both; on Telegram, with that answer cut off while it was
    streamed, the second part's run edited the message begun for both into its own answer, posted before the
    first part's (primary-lost-two-replicas answered chats out of order)."""
    model = Restarted()
    r = Rig(redis_server, model=model, busy="collect", lease_seconds=LEASE)
    async with r.agent:
        await send(gateway, "c1", "one")
        lease, scope, entries = await r.batch()
        running = asyncio.create_task(r.drainer._run(scope, entries))
        await asyncio.wait_for(model.opened.wait(), 10)  # the answer to "one" begun, nothing of it shown
        await send(gateway, "c1", "two")
        r.drainer.arrived(CID)  # (what the arrivals channel tells the worker)
        assert await asyncio.wait_for(running, 30)  # the call started again with "two" and answered both
        assert await client.hget(K + "batch", "cuts") == "1"
        assert await client.lrange("probe:replies:c1", 0, -1) == ["one|two"]
        assert model.calls == 2
        await scope.close(acknowledged=False)  # the worker dies before the acknowledgement

        await r.expire(lease)
        assert await r.worker.sweep_once() == 1
        assert await r.drainer.drain({"job_id": await r.sched()}, CID) == "released"
        assert await client.lrange("probe:replies:c1", 0, -1) == ["one|two"]  # neither part answered again
        assert model.calls == 2  # nor the model asked
        assert r.drainer.stats.redelivered == 1
        working = json.loads(await client.get(K + "mem:working"))
        assert [e["data"] for e in working if e["kind"] == "input"] == ["one", "two"]
        assert [e["data"] for e in working if e["kind"] == "output"] == ["one|two"]
    await r.backend.close()
