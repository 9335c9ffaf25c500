"""A queue worker in this process: order, wake-ups instead of polling, lost leases, graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from core import ScriptedModel, create_agent
from core.fleet import QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from core.models.base import ModelRequest

from .conftest import queue_config, send, wait_until
from .probe import answer, probe_extension, replies
from .server import RedisServer


@contextlib.asynccontextmanager
async def running_worker(server: RedisServer, model: Any = None, **config: Any) -> AsyncIterator[QueueWorker]:
    backend = RedisBackend(queue_config(server, **config))
    agent = create_agent(
        model=model or ScriptedModel(answer),
        extensions=[probe_extension(server.url)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    worker = QueueWorker(agent, backend)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(worker.run(handle_signals=False))
        try:
            yield worker
        finally:
            worker.stop()
            await task
    await backend.close()


def gated(
    started: asyncio.Event, release: asyncio.Event, *, shown_first: bool = False
) -> Callable[[ModelRequest], Any]:
    """A model that signals when it is called and answers only once ``release`` is set (``shown_first``: after
    writing its answer's first word, so an input sent meanwhile meets an answer already shown, ``core.busy``)."""

    class Gated(ScriptedModel):
        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:  # type: ignore[override]
            if shown_first:
                text = answer(request)
                cut = text.find('">') + 3
                yield text[:cut]
                started.set()
                await release.wait()
                yield text[cut:]
                return
            started.set()
            await release.wait()
            async for chunk in super().stream(request):
                yield chunk

    return Gated(answer)  # type: ignore[return-value]


async def test_many_contexts_are_answered_in_order_exactly_once(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    chats = [f"c{i}" for i in range(20)]
    # (a 5 s lease: the suite's 1 s one, its renewals starved of CPU at a load of 6, was lost and its batch run again)
    async with running_worker(redis_server, concurrency=4, handoff_batches=2, batch_size=3, lease_seconds=5) as worker:
        for i in range(10):
            async with asyncio.TaskGroup() as tg:
                for c in chats:
                    tg.create_task(send(gateway, c, f"{c}-{i}", dedupe=f"{c}/{i}"))

        async def all_answered() -> bool:
            return sum([len(await replies(client, c)) for c in chats]) >= 200

        await wait_until(all_answered, what="200 answers")
        for c in chats:
            assert await replies(client, c) == [f"{c}-{i}" for i in range(10)]
        assert await client.llen("probe:attempts") == sum([await client.llen(f"probe:replies:{c}") for c in chats])
        assert worker.stats.inputs == 200 and worker.stats.redelivered == 0
    assert await client.zcard("bots:active") == 0 and await client.zcard("bots:queue") == 0
    assert not await client.keys("bots:{*}:lease") and not await client.keys("bots:{*}:batch")


async def test_an_idle_worker_is_woken_instead_of_polling(redis_server: RedisServer, gateway: Any, client: Any) -> None:
    async with running_worker(redis_server, poll_delay=60.0) as worker:
        for i in range(3):
            await send(gateway, f"c{i}", "hello")
            # the poll delay is a minute: only the wake-up can get this answered in time
            await wait_until(lambda i=i: replies(client, f"c{i}"), timeout=10, what="the answer")
        assert worker.describe()["wakeups"] >= 3


async def test_a_run_whose_lease_is_lost_is_cancelled_and_run_again_once(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    async with running_worker(redis_server, model=gated(started, release), lease_seconds=0.4) as worker:
        await send(gateway, "c1", "hello")
        await started.wait()
        await client.delete("bots:{probe:chat:c1}:lease")  # as if this worker had been away too long
        await wait_until(lambda: worker.stats.lost >= 1, what="the lost lease")
        release.set()
        await wait_until(lambda: replies(client, "c1"), what="the answer")
        await wait_until(lambda: worker.rescheduled >= 1, what="the sweeper")
        assert await replies(client, "c1") == ["hello"]
        assert await client.llen("probe:attempts") == 1
    working = json.loads(await client.get("bots:{probe:chat:c1}:mem:working"))
    assert [e["kind"] for e in working] == ["input", "output"]


async def test_stopping_worker_hands_unfinished_runs_back(redis_server: RedisServer, gateway: Any, client: Any) -> None:
    started, never = asyncio.Event(), asyncio.Event()
    async with running_worker(redis_server, model=gated(started, never), stop_timeout=0.1, lease_seconds=30) as slow:
        await send(gateway, "c1", "hello")
        await started.wait()
        slow.stop()  # SIGTERM: the run cannot finish within stop_timeout, so it is handed back at once
    assert await client.hget("bots:{probe:chat:c1}:batch", "attempt") == "0"
    assert not await client.exists("bots:{probe:chat:c1}:lease")
    # a long lease, yet the next worker gets the context at once: nothing waits for an expiry
    async with running_worker(redis_server, lease_seconds=30) as other:
        await wait_until(lambda: replies(client, "c1"), timeout=10, what="the answer")
        assert other.stats.redelivered == 1 and other.rescheduled == 0
    assert await replies(client, "c1") == ["hello"]


async def test_sigterm_lets_a_running_run_finish_within_the_bound(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    model = gated(started, release, shown_first=True)  # (before a word is shown, "second" would join its run)
    async with running_worker(redis_server, model=model, stop_timeout=30) as worker:
        await send(gateway, "c1", "first")
        await started.wait()
        await send(gateway, "c1", "second")  # waits in the inbox: handed off, not run by a stopping worker
        worker.stop()
        await asyncio.sleep(0.05)
        release.set()
    assert await replies(client, "c1") == ["first"]
    assert await client.llen("bots:{probe:chat:c1}:inbox") == 1
    assert await client.zcard("bots:queue") == 1  # a fresh drain job waits for the next worker


async def test_a_run_longer_than_the_lease_keeps_it_by_renewing(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    model = ScriptedModel(answer, first_delay=3.0)
    async with running_worker(redis_server, model=model, lease_seconds=1.5) as worker:
        await send(gateway, "c1", "slow")
        await wait_until(lambda: replies(client, "c1"), timeout=10, what="the answer")
        assert worker.stats.lost == 0 and worker.rescheduled == 0
    assert await replies(client, "c1") == ["slow"]
