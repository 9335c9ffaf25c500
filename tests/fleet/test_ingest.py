"""Ingest: dedupe, backpressure, one drain job per context, errors naming REDIS_URL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core import BackpressureError, DispatchError, ScriptedModel, create_agent
from core.fleet import QueueConfig, RedisBackend, RedisDispatcher

from .conftest import queue_config, send
from .probe import ChatArgs, answer, chat, probe_extension
from .server import RedisServer, free_port


async def test_duplicate_platform_deliveries_are_dropped(gateway: Any, client: Any) -> None:
    for _ in range(3):
        await send(gateway, "c1", "hello", dedupe="update-1")
    await send(gateway, "c1", "again", dedupe="update-2")
    inbox = await client.lrange("bots:{probe:chat:c1}:inbox", 0, -1)
    assert [json.loads(e)["i"]["data"] for e in inbox] == ["hello", "again"]
    assert 0 < await client.pttl("bots:{probe:chat:c1}:dd:update-1") <= 86_400_000


async def test_one_drain_job_per_context_however_many_inputs(gateway: Any, client: Any) -> None:
    for i in range(20):
        await send(gateway, "c1", f"m{i}")
        await send(gateway, "c2", f"m{i}")
    jobs = await client.zrange("bots:queue", 0, -1)
    assert len(jobs) == 2
    assert {await client.hget(f"bots:{{probe:chat:{c}}}:meta", "sched") for c in ("c1", "c2")} == set(jobs)
    payload = json.loads(await client.get(f"arq:job:{jobs[0]}"))
    assert payload["f"] == "drain" and payload["a"][0].startswith("probe:chat:c")


async def test_full_inbox_refuses_with_backpressure_and_loses_nothing_accepted(
    redis_server: RedisServer, client: Any
) -> None:
    backend = RedisBackend(queue_config(redis_server, inbox_cap=3))
    agent = create_agent(
        model=ScriptedModel(answer), extensions=[probe_extension(redis_server.url)], dispatcher=RedisDispatcher(backend)
    )
    async with agent:
        for i in range(3):
            await send(agent, "c1", f"m{i}", dedupe=f"u{i}")
        with pytest.raises(BackpressureError, match="REDIS_INBOX_CAP") as refused:
            await send(agent, "c1", "m3", dedupe="u3")
        assert "nothing was stored" in str(refused.value)
        inbox = await client.lrange("bots:{probe:chat:c1}:inbox", 0, -1)
        assert [json.loads(e)["i"]["data"] for e in inbox] == ["m0", "m1", "m2"]
        # the refused delivery did not burn its dedupe key: once there is room, the retry is accepted
        await client.lpop("bots:{probe:chat:c1}:inbox")
        await send(agent, "c1", "m3", dedupe="u3")
        inbox = await client.lrange("bots:{probe:chat:c1}:inbox", 0, -1)
        assert [json.loads(e)["i"]["data"] for e in inbox] == ["m1", "m2", "m3"]
    await backend.close()


async def test_unreachable_redis_is_a_dispatch_error_naming_redis_url() -> None:
    config = QueueConfig(url=f"redis://user:s3cret@127.0.0.1:{free_port()}/0", retry_seconds=0.2, connect_timeout=0.5)
    dispatcher = RedisDispatcher(config)
    agent = create_agent(model=ScriptedModel(answer), contexts=[chat], dispatcher=dispatcher)
    with pytest.raises(DispatchError, match="REDIS_URL") as failed:
        await agent.start()
    assert "s3cret" not in str(failed.value) and "user:***@127.0.0.1" in str(failed.value)
    with pytest.raises(DispatchError, match="REDIS_URL") as failed:
        await agent.send(chat, ChatArgs(chat="c1"), {"type": "probe:message", "data": "hi"})
    assert "s3cret" not in str(failed.value)
    await dispatcher.stop()


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="REDIS_INBOX_CAP"):
        QueueConfig(inbox_cap=0)
    with pytest.raises(ValueError, match="REDIS_LEASE_SECONDS"):
        QueueConfig(lease_seconds=0)
