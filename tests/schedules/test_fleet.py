"""Schedules in a fleet, on a real redis-server with worker processes of the probe bot (``fleet_worker``): every
occurrence reaches its chat exactly once, across several workers, a worker killed with SIGKILL while firing,
and a Redis restart (AOF) between creation and firing.

What the users see is checked: each schedule's text (``s<n>``) appears in exactly one reply of its chat.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.fleet import QueueConfig, RedisBackend, RedisScheduleStore, ServerClock
from core.schedules import Schedule, ScheduleKind, ScheduleLimitError, SyncedClock
from tests.fleet.server import RedisServer
from tests.fleet.worker_process import Spawned

ROOT = Path(__file__).resolve().parents[2]
CHATS = 50
_SAID = re.compile(r"\bs(\d+)\b")


@pytest.fixture
async def store(redis_server: RedisServer) -> AsyncIterator[RedisScheduleStore]:
    backend = RedisBackend(QueueConfig(url=redis_server.url, retry_seconds=30.0))
    try:
        yield RedisScheduleStore(backend)
    finally:
        await backend.close()


class Workers(Spawned):
    """Worker processes of ``tests.schedules.fleet_worker`` on ``server``, their logs in ``folder``."""

    def __init__(self, server: RedisServer, folder: Path) -> None:
        super().__init__(folder)
        self.server = server

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        return self.spawn(
            "worker", [sys.executable, "-m", "tests.schedules.fleet_worker", "--url", self.server.url, *extra]
        )

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.folder.glob("worker-*.log")))


@pytest.fixture
def workers(redis_server: RedisServer, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(redis_server, tmp_path)
    try:
        yield w
    finally:
        w.stop_all()


async def create(store: RedisScheduleStore, count: int, *, at: datetime) -> None:
    """``count`` one-off schedules in ``CHATS`` chats, due within the same second from ``at``: half prompts (the
    probe model repeats the input, so its text ends the reply), half texts posted as written."""
    for i in range(count):
        chat = f"c{i % CHATS}"
        await store.add(
            Schedule.once(
                at=at + timedelta(milliseconds=i * 1000 // count),
                text=f"s{i}",
                kind=ScheduleKind.TEXT if i % 2 else ScheduleKind.PROMPT,
                conversation=f"probe:chat:{chat}",
                context="probe:chat",
                args={"chat": chat},
            )
        )


async def seen(client: Any) -> Counter[int]:
    """How many times each schedule's text reached its chat."""
    counts: Counter[int] = Counter()
    for i in range(CHATS):
        for reply in await client.lrange(f"probe:replies:c{i}", 0, -1):
            counts.update(int(n) for n in _SAID.findall(reply))
    return counts


async def all_fired(client: Any, store: RedisScheduleStore, count: int, *, timeout: float, workers: Workers) -> None:
    deadline = time.monotonic() + timeout
    while True:
        counts = await seen(client)
        if len(counts) >= count and await store.pending() == 0:
            break
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{len(counts)} of {count} schedules fired, {await store.pending()} pending\n{workers.logs()[-3000:]}"
            )
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.5)  # a double would show up now


async def test_200_schedules_due_in_the_same_second_fire_once_each_across_3_workers(
    redis_client: Any, store: RedisScheduleStore, workers: Workers
) -> None:
    await create(store, 200, at=datetime.now(UTC) + timedelta(seconds=3))
    # looked at before the workers start: nothing fires meanwhile, however long the creation took
    assert [s.text for s in await store.upcoming(3)] == ["s0", "s1", "s2"]
    assert await store.cancel("conv:probe:chat:c1") is None  # an id typed by someone never names another key
    assert await store.get("../x") is None
    assert [s.text for s in await store.by_conversation("probe:chat:c1")] == ["s1", "s51", "s101", "s151"]
    for _ in range(3):
        workers.start()
    await all_fired(redis_client, store, 200, timeout=60, workers=workers)
    counts = await seen(redis_client)
    assert sorted(counts) == list(range(200))
    assert [n for n, times in counts.items() if times != 1] == []
    assert await redis_client.zcard("bots:sched:due") == 0
    assert await redis_client.keys("bots:sched:*") == []  # nothing left behind


async def test_a_worker_killed_while_firing_loses_none_and_doubles_none(
    redis_client: Any, store: RedisScheduleStore, workers: Workers
) -> None:
    crashing = workers.start("--crash-after", "40")
    await create(store, 200, at=datetime.now(UTC) + timedelta(seconds=3))
    deadline = time.monotonic() + 30
    while crashing.poll() is None:
        assert time.monotonic() < deadline, "the crashing worker never fired 40 schedules"
        await asyncio.sleep(0.05)
    assert crashing.returncode == -signal.SIGKILL
    for _ in range(2):
        workers.start()
    await all_fired(redis_client, store, 200, timeout=60, workers=workers)
    counts = await seen(redis_client)
    assert sorted(counts) == list(range(200))
    assert [n for n, times in counts.items() if times != 1] == []


async def test_redis_restarted_between_creation_and_firing_loses_none(
    redis_client: Any, store: RedisScheduleStore, workers: Workers, redis_server: RedisServer
) -> None:
    for _ in range(2):
        workers.start()
    await create(store, 100, at=datetime.now(UTC) + timedelta(seconds=4))
    redis_server.stop(sig=signal.SIGKILL)  # appendfsync always: every acknowledged write is in the AOF
    redis_server.start()
    await all_fired(redis_client, store, 100, timeout=60, workers=workers)
    counts = await seen(redis_client)
    assert sorted(counts) == list(range(100))
    assert [n for n, times in counts.items() if times != 1] == []


async def test_a_recurring_schedule_fires_each_occurrence_once_across_3_workers(
    redis_client: Any, store: RedisScheduleStore, workers: Workers
) -> None:
    for _ in range(3):
        workers.start()
    start = datetime.now(UTC) + timedelta(seconds=2)
    every = Schedule.interval(
        1.0,
        text="tick",
        kind=ScheduleKind.TEXT,
        now=start,
        start=start,
        conversation="probe:chat:r",
        context="probe:chat",
        args={"chat": "r"},
        creator="probe:7",
    )
    await store.add(every, per_creator=1, per_conversation=1)
    assert [s.id for s in await store.by_creator("probe:7")] == [every.id]
    deadline = time.monotonic() + 30
    while len(await redis_client.lrange("probe:replies:r", 0, -1)) < 5:
        assert time.monotonic() < deadline, workers.logs()[-3000:]
        await asyncio.sleep(0.05)
    cancelled = await store.cancel(every.id)
    assert cancelled is not None
    # every occurrence that advanced is posted (a text schedule's ticks are posted one by one, even when several
    # are taken in one batch): waited for, then a while more for a firing in flight when it was cancelled, or a double
    deadline = time.monotonic() + 30
    while len(await redis_client.lrange("probe:replies:r", 0, -1)) < cancelled.fired:
        assert time.monotonic() < deadline, workers.logs()[-3000:]
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)
    assert (
        await redis_client.keys("bots:sched:*") == []
    )  # its key, its place in due, in its chat's and its creator's sets
    ticks = await redis_client.lrange("probe:replies:r", 0, -1)
    assert set(ticks) == {"tick"}
    # each occurrence that advanced was answered once (one more if the cancel came between a send and its advance)
    assert cancelled.fired <= len(ticks) <= cancelled.fired + 1


async def test_the_limits_hold_in_redis_however_many_add_at_once(redis_client: Any, store: RedisScheduleStore) -> None:
    """The count and the add are one script: 10 reminders set at once in a chat that takes 3 leave 3; the
    creator's limit counts across chats; setting a stored schedule again takes no place; a cancel frees one."""
    at = datetime.now(UTC) + timedelta(hours=1)

    def reminder(chat: str, creator: str, text: str) -> Schedule:
        return Schedule.once(
            at=at,
            text=text,
            conversation=f"probe:chat:{chat}",
            context="probe:chat",
            args={"chat": chat},
            creator=creator,
        )

    tried = await asyncio.gather(
        *(store.add(reminder("full", f"probe:{i}", f"t{i}"), per_conversation=3) for i in range(10)),
        return_exceptions=True,
    )
    refused = [r for r in tried if isinstance(r, ScheduleLimitError)]
    assert len(refused) == 7 and all(r is None or isinstance(r, ScheduleLimitError) for r in tried)
    assert "probe:chat:full already has 3 active schedules (at most 3): cancel one first" in str(refused[0])
    kept = await store.by_conversation("probe:chat:full")
    assert len(kept) == 3
    await store.add(kept[0].model_copy(update={"text": "edited"}), per_conversation=3)  # the same id: no new place
    assert sorted(s.text for s in await store.by_conversation("probe:chat:full"))[0] == "edited"

    await store.add(reminder("a", "probe:ann", "one"), per_creator=2)
    await store.add(reminder("b", "probe:ann", "two"), per_creator=2)
    with pytest.raises(ScheduleLimitError, match=r"you already have 2 active schedules \(at most 2\)"):
        await store.add(reminder("c", "probe:ann", "three"), per_creator=2)
    [first] = [s for s in await store.by_creator("probe:ann") if s.text == "one"]
    assert await store.cancel(first.id) is not None
    await store.add(reminder("c", "probe:ann", "three"), per_creator=2)
    assert sorted(s.text for s in await store.by_creator("probe:ann")) == ["three", "two"]
    assert await store.pending() == 5


async def test_a_worker_whose_clock_is_ahead_fires_by_the_primary_s(store: RedisScheduleStore) -> None:
    """A worker's machine 5 minutes ahead: its schedules read Redis's clock (``ServerClock``, as ``bots worker``
    sets it up), so a reminder due in 2 minutes is not fired now, as the machine's own clock would have it."""
    ahead = ServerClock(store.backend, local=lambda: time.time() + 300)
    assert isinstance(ahead, SyncedClock)
    await ahead.sync()
    assert abs(ahead.offset + 300) < 1 and abs((ahead.now() - datetime.now(UTC)).total_seconds()) < 1
    reminder = Schedule.once(
        at=datetime.now(UTC) + timedelta(minutes=2),
        text="s1",
        conversation="probe:chat:c1",
        context="probe:chat",
        args={"chat": "c1"},
    )
    await store.add(reminder)
    assert await store.claim(ahead.now(), limit=10, lease=30) == []
    own = datetime.fromtimestamp(time.time() + 300, UTC)  # what the machine's clock says
    assert [s.id for s in await store.claim(own, limit=10, lease=30)] == [reminder.id]

    class Fails:  # Redis down while measuring: the last offset is kept, measured again after ``every``
        async def run(self, fn: Any, *, what: str) -> Any:
            raise ConnectionError("down")

        client = store.backend.client

    failing = ServerClock(Fails(), local=ahead.local, every=0.0)  # type: ignore[arg-type]
    failing.offset = ahead.offset
    with pytest.raises(ConnectionError):
        await failing.sync()
    assert failing.offset == ahead.offset

    # a first measure that fails (Redis not up yet) is made again at the next look, not a minute later: meanwhile
    # the scheduler fires nothing, and after it this machine's clock 5 minutes ahead is not taken for Redis's
    starting = ServerClock(Fails(), local=ahead.local)  # type: ignore[arg-type]
    with pytest.raises(ConnectionError):
        await starting.sync()
    starting.backend = store.backend
    await starting.sync()
    assert abs(starting.offset + 300) < 1


async def test_the_scheduler_measures_its_server_clock_as_it_runs(store: RedisScheduleStore) -> None:
    from core import ScriptedModel, context, create_agent
    from core.schedules import Schedules

    chat = context(type="probe:chat", schema=dict, key=lambda args: str(args["chat"]))
    agent = create_agent(model=ScriptedModel(["<response></response>"]), contexts=[chat])
    clock = ServerClock(store.backend, local=lambda: time.time() - 120)
    Schedules.attach(agent, store, clock=clock, poll=0.05)
    await agent.start()
    try:
        deadline = time.monotonic() + 30
        while abs(clock.offset - 120) > 1:
            assert time.monotonic() < deadline, "the scheduler never measured the primary's clock"
            await asyncio.sleep(0.02)
    finally:
        await agent.stop()
