"""Redis Sentinel and writes confirmed on replicas, on a real topology (a primary, a replica, three sentinels):
the queue follows a failover with nothing it confirmed lost, an acknowledgement waits for REDIS_MIN_REPLICAS,
readiness says how long Redis has been failing, a claim lost in the failover cannot let its old holder write,
and ``bots config`` names the primary the sentinels found."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from bots.config import load_settings, redis_report
from bots.worker import redis_check
from core.chat_settings import ChatPolicy
from core.errors import DispatchError
from core.fleet import QueueConfig, RedisBackend, RedisDispatcher
from core.fleet.scope import Lease

from .conftest import wait_until
from .sentinel import MASTER, SentinelTopology, ask
from .server import RedisServer

CID = "probe:chat:c1"
INBOX = "bots:{probe:chat:c1}:inbox"


@pytest.fixture
def topology(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SentinelTopology]:
    t = SentinelTopology(tmp_path, password=getattr(request, "param", ""))
    try:
        t.start()
        yield t
    finally:
        t.stop()


def config(topology: SentinelTopology, **overrides: Any) -> QueueConfig:
    base: dict[str, Any] = {
        "url": topology.url,
        "sentinels": tuple(("127.0.0.1", port) for port in topology.sentinel_ports),
        "sentinel_master": MASTER,
        "lease_seconds": 1.0,
        "retry_seconds": 30.0,
    }
    base.update(overrides)
    return QueueConfig(**base)


@pytest.fixture
async def backend(topology: SentinelTopology) -> AsyncIterator[RedisBackend]:
    b = RedisBackend(config(topology, min_replicas=1))
    try:
        yield b
    finally:
        await b.close()


def stored(server: RedisServer) -> list[int]:
    """The inbox as ``server`` holds it (asked directly, not through the sentinels)."""
    answer = ask(server.port, "LRANGE", INBOX, "0", "-1")
    return [json.loads(line)["n"] for line in answer.split("\r\n") if line.startswith("{")]


async def test_the_queue_follows_a_failover_and_keeps_every_input_it_confirmed(
    topology: SentinelTopology, backend: RedisBackend
) -> None:
    dispatcher = RedisDispatcher(backend)
    ready = redis_check(backend)
    assert await ready() is True
    first = topology.primary
    assert await dispatcher.ingest(CID, json.dumps({"n": 0}), dedupe_key="u0") == "scheduled"
    assert backend.primary == f"127.0.0.1:{first.port}"

    confirmed: list[int] = [0]
    seen_degraded: list[str] = []

    async def ingest() -> None:
        for n in range(1, 120):
            await dispatcher.ingest(CID, json.dumps({"n": n}), dedupe_key=f"u{n}")
            confirmed.append(n)  # what a platform would now be told was stored
            await asyncio.sleep(0.01)

    async def failover() -> None:
        await asyncio.sleep(0.3)
        victim, _ = await asyncio.to_thread(topology.kill_primary)
        while backend.failing_since is None:
            await asyncio.sleep(0.01)
        seen_degraded.append(str(await ready()))
        await asyncio.to_thread(topology.wait_promoted, victim)
        await asyncio.to_thread(topology.rejoin, victim)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(ingest())
        tg.create_task(failover())

    second = topology.primary  # (the promoted replica; or the victim again: sentinels starved of CPU may take the
    # promoted one for dead once the victim has rejoined as its replica and fail over back, and the queue follows)
    assert backend.primary == f"127.0.0.1:{second.port}"
    assert stored(second) == confirmed == list(range(120))  # every input once, in order, none lost
    assert "degraded for" in seen_degraded[0] and "does not answer" in seen_degraded[0]
    state = backend.state()
    assert state["outages"] >= 1 and state["last_outage_seconds"] > 0 and state["degraded_seconds"] == 0

    async def in_sync() -> bool:  # (after a fail-back, the other replica reconnects to the primary named last)
        return await ready() is True

    await wait_until(in_sync, what="a replica in sync with the primary after the failover")


async def test_a_process_starting_during_a_failover_waits_for_the_new_primary(topology: SentinelTopology) -> None:
    """A gateway or worker whose start (``agent.start``: the dispatcher checks that Redis answers) falls in a
    failover waits for the promoted replica, for ``REDIS_RETRY_SECONDS`` like its other calls. It used to give up
    at the first refused connection and exit: under load, a worker still starting when the primary died left the
    fleet of ``test_e2e_failover`` one worker short (reported as chats never answered)."""
    from core import ScriptedModel, create_agent

    from .probe import answer, chat

    backend = RedisBackend(config(topology))
    agent = create_agent(model=ScriptedModel(answer), contexts=[chat], dispatcher=RedisDispatcher(backend))
    victim, _ = await asyncio.to_thread(topology.kill_primary)
    try:
        await agent.start()
        assert backend.primary not in ("", f"127.0.0.1:{victim.port}")
        assert backend.state()["outages"] == 1  # it failed first, and waited
    finally:
        await agent.stop()
        await backend.close()


async def test_an_acknowledgement_waits_for_a_replica(topology: SentinelTopology, backend: RedisBackend) -> None:
    primary, replica = topology.primary, next(s for s in topology.servers if s is not topology.primary)
    # a WAIT of 0.2 s, tried for 3 s (a loaded machine may take a few tries once the replica is back)
    hurried = RedisBackend(config(topology, min_replicas=1, retry_seconds=3.0, replica_timeout=0.2))
    unconfirmed = RedisBackend(config(topology, min_replicas=0, retry_seconds=0.5))
    try:
        replica.stop(sig=signal.SIGKILL)
        with pytest.raises(DispatchError, match="0 of REDIS_MIN_REPLICAS=1 replicas confirmed"):
            await RedisDispatcher(hurried).ingest(CID, json.dumps({"n": 1}), dedupe_key="u1")
        assert stored(primary) == [1]  # on the primary only: the platform is not told it was stored
        assert hurried.failing_since is not None
        problem = str(await redis_check(hurried)())
        assert (
            "0 replicas in sync (0 connected), REDIS_MIN_REPLICAS=1: acknowledgements are held; degraded for" in problem
        )

        # REDIS_MIN_REPLICAS=0: today's behaviour, no wait
        assert await RedisDispatcher(unconfirmed).ingest(CID, json.dumps({"n": 2}), dedupe_key="u2") == "queued"

        # the replica is back: the platform delivers the update again, it is a duplicate, and confirmed now
        await asyncio.to_thread(topology.rejoin, replica)
        assert await RedisDispatcher(hurried).ingest(CID, json.dumps({"n": 1}), dedupe_key="u1") == "dup"
        assert stored(replica) == [1, 2]
        assert await redis_check(hurried)() is True and hurried.failing_since is None
    finally:
        await hurried.close()
        await unconfirmed.close()


async def test_a_reply_not_stored_in_time_gives_the_context_up(redis_server: RedisServer) -> None:
    """REDIS_MIN_REPLICAS=1 and no replica (the promoted one's replica not back yet, or a second failover): a
    reply's entry is written and never confirmed, while the lease is still renewed (renewals wait for no replica).
    When the wait reaches the lease's deadline the worker gives the context up: its run is cancelled and its batch
    is not acknowledged, so the next holder runs it whole. The failure used to be a failed output only: the run
    asked the model again, with the batch's messages taken as answered, and acknowledged that empty answer."""
    import time

    from core.fleet.reply_ledger import LeaseLostError, RedisReplyLedger
    from core.fleet.scope import RunScope

    backend = RedisBackend(QueueConfig(url=redis_server.url, min_replicas=1, replica_timeout=0.05, lease_seconds=1))
    cancelled: list[str] = []
    try:
        lease = Lease(cid=CID, token="1", job_id="j", owner="j#w", seconds=1.0, on_lost=lambda: cancelled.append(CID))
        await backend.client.set("bots:{probe:chat:c1}:lease", lease.fence, px=60_000)  # held, as renewals keep it
        lease.extended(time.monotonic())
        scope = RunScope(backend=backend, keys=backend.keys.context(CID), lease=lease, batch_id="1", attempt=1)
        with pytest.raises(LeaseLostError, match="not stored in time"):
            await RedisReplyLedger(scope).begin("probe:reply", "the answer")
        assert lease.lost and cancelled == [CID]  # the run is cancelled; the drain job acknowledges nothing
        assert not RedisReplyLedger(scope).valid
    finally:
        await backend.close()


class _ScriptsOnly:
    """The agent of a drainer whose scripts alone a test calls: the operator's defaults (a claim reads them)."""

    chat_policy = ChatPolicy()


async def test_a_claim_lost_in_a_failover_cannot_let_its_old_holder_write(redis_server: RedisServer) -> None:
    """The promoted replica may not have the last claim: the fence counter is handed out again, to another
    worker. The old holder's writes carry its own claim (``<counter>|<owner>``), so they are refused."""
    from core.fleet import Drainer
    from core.fleet.reply_ledger import RedisReplyLedger
    from core.fleet.scope import RunScope

    backend = RedisBackend(QueueConfig(url=redis_server.url, lease_seconds=5.0))
    try:
        await RedisDispatcher(backend).ingest(CID, json.dumps({"c": "probe:chat", "a": {}, "i": {}, "t": 0}))
        client = backend.client
        meta, lease_key = "bots:{probe:chat:c1}:meta", "bots:{probe:chat:c1}:lease"
        job = await client.hget(meta, "sched")
        drainer = Drainer(cast("Any", _ScriptsOnly()), backend)  # only its scripts are used here
        old = Lease(cid=CID, token="", job_id=job, owner=f"{job}#old", seconds=5.0)
        assert (await drainer.claim(old))[0] == "batch"

        # the failover: the promoted replica never got the claim (lease gone, counter back, job scheduled)
        await client.delete(lease_key)
        await client.hincrby(meta, "fence", -1)
        new = Lease(cid=CID, token="", job_id=job, owner=f"{job}#new", seconds=5.0)
        new_result = await drainer.claim(new)
        assert new_result[0] == "batch" and new.token == old.token  # the same counter, another claim

        scope = RunScope(backend=backend, keys=backend.keys.context(CID), lease=old, batch_id="1", attempt=1)
        with pytest.raises(DispatchError, match="lost"):
            await RedisReplyLedger(scope).begin("probe:reply", "from the old holder")
        assert (await drainer._step(old, None, "take"))[0] == "stale"
        assert await client.get(lease_key) == f"{new.token}|{new.owner}"
    finally:
        await backend.close()


@pytest.mark.parametrize("topology", ["hunter2"], indirect=True)
async def test_bots_config_names_the_primary_the_sentinels_found(
    topology: SentinelTopology, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in topology.env(min_replicas=1).items():
        monkeypatch.setenv(name, value)
    first = topology.primary
    lines, problems = await redis_report(load_settings(), role="config", timeout=2.0)
    assert problems == []
    assert lines[0] == f"primary 127.0.0.1:{first.port}, named by 3 of 3 sentinels (REDIS_SENTINEL_MASTER='bots')"
    assert lines[1] == f"redis://:********@127.0.0.1:{first.port}/0: role master, 1 replica connected, 1 in sync"
    assert "hunter2" not in "".join(lines)

    victim, _ = await asyncio.to_thread(topology.kill_primary)
    second = await asyncio.to_thread(topology.wait_promoted, victim)
    lines, problems = await redis_report(load_settings(), role="config", timeout=2.0)
    assert lines[0].startswith(f"primary 127.0.0.1:{second.port}, named by 3 of 3")
    assert problems == [
        "REDIS_MIN_REPLICAS=1 but the primary has 0 replicas in sync (0 connected): every acknowledgement would be "
        "held; add replicas (or wait for them to sync) or lower REDIS_MIN_REPLICAS"
    ]

    lines, problems = await redis_report(load_settings(), role="worker", timeout=2.0)
    assert problems == [] and lines[-1].startswith("REDIS_MIN_REPLICAS=1 but")  # a worker starts, and holds

    monkeypatch.setenv("REDIS_SENTINEL_MASTER", "other")
    _, problems = await redis_report(load_settings(), role="config", timeout=2.0)
    assert problems == [
        "REDIS_SENTINEL_MASTER='other': the sentinels monitor no primary by that name (they monitor: bots)"
    ]


async def test_a_batch_acknowledgement_is_held_until_a_replica_confirms_it(topology: SentinelTopology) -> None:
    from core.fleet import Drainer
    from core.fleet.scope import RunScope

    backend = RedisBackend(config(topology, min_replicas=1, replica_timeout=0.2, lease_seconds=10.0))
    primary, replica = topology.primary, next(s for s in topology.servers if s is not topology.primary)
    try:
        dispatcher = RedisDispatcher(backend)
        entry = json.dumps({"c": "probe:chat", "a": {}, "i": {}, "t": 0})
        await dispatcher.ingest(CID, entry, dedupe_key="u1")
        drainer = Drainer(cast("Any", _ScriptsOnly()), backend)
        job = await backend.client.hget("bots:{probe:chat:c1}:meta", "sched")
        lease = Lease(cid=CID, token="", job_id=job, owner=f"{job}#w", seconds=10.0)
        first = await drainer.claim(lease)
        await dispatcher.ingest(CID, entry, dedupe_key="u2")
        acked = RunScope(
            backend=backend, keys=backend.keys.context(CID), lease=lease, batch_id=first[2], attempt=1, take=first[9]
        )

        replica.stop(sig=signal.SIGKILL)
        step = asyncio.create_task(drainer._step(lease, acked, "take"))
        while backend.failing_since is None:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        assert not step.done()  # acknowledged on the primary, and held there until a replica has it
        assert topology.ask(primary, "HGET", "bots:{probe:chat:c1}:batch", "id").split("\r\n")[1] == "2"
        await asyncio.to_thread(topology.rejoin, replica)
        second = await step
        assert second[0] == "batch" and second[2] == "2"
        assert topology.ask(replica, "HGET", "bots:{probe:chat:c1}:meta", "acked").split("\r\n")[1] == first[2]
        assert backend.failing_since is None

        # a failover lost the acknowledgement (the batch is still the one acknowledged): given up, run again
        stale = RunScope(backend=backend, keys=backend.keys.context(CID), lease=lease, batch_id="2", attempt=1)
        with pytest.raises(DispatchError, match="lost in a Redis failover"):
            await drainer._confirm_ack(lease, stale)
    finally:
        await backend.close()


async def test_a_primary_the_sentinels_replaced_gets_no_more_writes(topology: SentinelTopology) -> None:
    """A primary cut off from the sentinels (here: stopped, then resumed) is replaced; it still takes writes
    until they make it a replica, seconds later. Connections learn the primary only when they open, so the
    backend asks the sentinels every second and closes its connections when the answer changes."""
    from core.fleet.backend import SENTINEL_CHECK

    backend = RedisBackend(config(topology))  # REDIS_MIN_REPLICAS=0: nothing else would notice
    dispatcher = RedisDispatcher(backend)
    try:
        await dispatcher.ingest(CID, json.dumps({"n": 0}), dedupe_key="u0")
        first = topology.primary
        assert first.proc is not None
        first.proc.send_signal(signal.SIGSTOP)
        try:
            second = await asyncio.to_thread(topology.wait_promoted, first)
        finally:
            first.proc.send_signal(signal.SIGCONT)
        await asyncio.sleep(SENTINEL_CHECK + 0.5)
        assert "role:master" in topology.ask(first, "INFO", "replication")  # it still takes writes
        await dispatcher.ingest(CID, json.dumps({"n": 1}), dedupe_key="u1")
        assert stored(second) == [0, 1] and stored(first) == [0]
    finally:
        await backend.close()
