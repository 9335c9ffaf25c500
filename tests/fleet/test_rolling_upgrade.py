"""A rolling upgrade: a worker of the running version and one of the next share one Redis while gateways of both
versions store messages. The next version is a test double: its gateway writes inbox entries of format
``ENTRY_FORMAT + 1`` (an extra field the running version does not know), its worker reads them. Each batch is run
by a worker that reads it, nothing goes to the dead-letter list, nothing is lost or answered twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from core import Agent, ScriptedModel, create_agent
from core.entries import InputRef
from core.fleet import QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from core.fleet.dispatcher import encode_entry
from core.fleet.entry_format import ENTRY_FORMAT, newest_format
from core.models.base import ModelRequest

from .conftest import queue_config, send, wait_until
from .probe import ChatArgs, answer, chat, probe_extension, replies
from .server import RedisServer

NEXT = ENTRY_FORMAT + 1


def signed(name: str) -> Any:
    """The probe's answer, each text marked with the worker that answered it (``old:c0-1``)."""

    def reply(request: ModelRequest) -> str:
        text = answer(request)
        return text.replace('type="probe:reply">', f'type="probe:reply">{name}:').replace("|", f"|{name}:")

    return ScriptedModel(reply)


@contextlib.asynccontextmanager
async def worker_of(server: RedisServer, name: str, *, reads: int) -> AsyncIterator[QueueWorker]:
    """A worker reading entry formats up to ``reads``, one conversation at a time."""
    backend = RedisBackend(queue_config(server, concurrency=1, batch_size=5))
    agent = create_agent(
        model=signed(name),
        extensions=[probe_extension(server.url)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    worker = QueueWorker(agent, backend)
    worker.drainer.entry_format = reads
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(worker.run(handle_signals=False))
        try:
            yield worker
        finally:
            worker.stop()
            await task
    await backend.close()


async def send_next(gateway: Agent, chat_key: str, text: str) -> None:
    """What a gateway of the next version stores: an entry of format ``NEXT``, with a field this version lacks."""
    dispatcher = gateway.dispatcher
    assert isinstance(dispatcher, RedisDispatcher)
    args = ChatArgs(chat=chat_key)
    ref = InputRef(type="probe:message", data=text)
    entry = json.loads(encode_entry(chat, args, ref))
    entry.update(v=NEXT, x={"new": "a field the running version does not know"})
    result = await dispatcher.ingest(gateway.context_id(chat, args), json.dumps(entry), dedupe_key=f"next/{text}")
    assert result in ("scheduled", "queued")


async def test_old_and_new_workers_share_the_queue_during_a_rolling_upgrade(
    redis_server: RedisServer, gateway: Agent, client: Any
) -> None:
    async with worker_of(redis_server, "old", reads=ENTRY_FORMAT) as old:
        for i in range(3):
            await send_next(gateway, "upgraded", f"upgraded-{i}")
        await wait_until(  # more often than REDIS_MAX_ATTEMPTS: a batch handed back counts no attempt
            lambda: old.stats.handed_back > old.backend.config.max_attempts,
            what="the old worker leaving a batch of the next format, again and again",
        )
        assert await replies(client, "upgraded") == []  # left waiting, not run, not dead
        async with worker_of(redis_server, "new", reads=NEXT) as new:
            for i in range(3, 6):
                await send_next(gateway, "upgraded", f"upgraded-{i}")
            for i in range(6):
                await send(gateway, "running", f"running-{i}", dedupe=f"running/{i}")
                await send(gateway, "mixed", f"mixed-{i}", dedupe=f"mixed/{i}")
                await send_next(gateway, "mixed", f"mixed-next-{i}")

            async def all_answered() -> bool:
                counts = [len(await replies(client, c)) for c in ("upgraded", "running", "mixed")]
                return counts == [6, 6, 12]

            await wait_until(all_answered, timeout=60, what="every message answered")
    upgraded = await replies(client, "upgraded")
    assert upgraded == [f"new:upgraded-{i}" for i in range(6)], upgraded  # only the new worker reads them, in order
    running = await replies(client, "running")
    assert [text.partition(":")[2] for text in running] == [f"running-{i}" for i in range(6)]
    mixed = await replies(client, "mixed")
    assert sorted(text.partition(":")[2] for text in mixed) == sorted(
        [f"mixed-{i}" for i in range(6)] + [f"mixed-next-{i}" for i in range(6)]
    )
    assert all(text.startswith("new:") for text in mixed if "-next-" in text)  # a batch holding one: the new worker
    assert await client.llen("bots:dead") == 0
    assert old.stats.dead == new.stats.dead == 0 and old.stats.failed == new.stats.failed == 0
    assert old.stats.handed_back > old.backend.config.max_attempts
    assert await client.zcard("bots:active") == 0 and not await client.keys("bots:{*}:inbox")


def test_an_entry_without_a_version_is_format_1_and_one_not_understood_is_newer_than_any() -> None:
    assert newest_format([{"c": "probe:chat"}, {"v": 1}]) == 1  # written before entries had a version
    assert newest_format([{"v": 1}, {"v": NEXT}]) == NEXT
    assert newest_format([{"v": "2"}]) > 1_000 and newest_format([{"v": True}]) > 1_000
