"""Ingest: dedupe, backpressure, one drain job per context, errors naming REDIS_URL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core import BackpressureError, DispatchError, ScriptedModel, create_agent
from core.fleet import QueueConfig, RedisBackend, RedisDispatcher
from core.fleet.dispatcher import DEDUPE_TRIM_AT
from core.fleet.keys import Keys
from extensions.platforms import ordered_dedupe

from .conftest import queue_config, send
from .probe import ChatArgs, answer, chat, probe_extension
from .server import RedisServer, free_port


async def test_duplicate_platform_deliveries_are_dropped(gateway: Any, client: Any) -> None:
    for _ in range(3):
        await send(gateway, "c1", "hello", dedupe="update-1")
    await send(gateway, "c1", "again", dedupe="update-2")
    inbox = await client.lrange("bots:{probe:chat:c1}:inbox", 0, -1)
    assert [json.loads(e)["i"]["data"] for e in inbox] == ["hello", "again"]
    meta = await client.hgetall("bots:{probe:chat:c1}:meta")
    assert {"d:update-1", "d:update-2"} <= set(meta)  # no key per message: fields of the conversation's hash


async def test_dedupe_is_bounded_per_conversation_and_ordered_ids_stay_deduped(
    redis_server: RedisServer, client: Any
) -> None:
    """The memory of dedupe does not grow with messages: a conversation keeps the newest ids (those younger than
    REDIS_DEDUPE_TTL at least) and, for Telegram and Discord ids, the highest one dropped from them; a redelivery
    of any older id is still dropped, long after its own entry is gone."""
    ordered = ("schedule:", *ordered_dedupe())  # what bots gives the queue: Telegram and Discord declare theirs
    backend = RedisBackend(queue_config(redis_server, dedupe_ttl=0.001, ordered_dedupe=ordered))
    dispatcher = RedisDispatcher(backend)
    try:
        counts = []
        for n in range(1, 401):
            assert await dispatcher.ingest("t:1", f'"m{n}"', dedupe_key=f"telegram:{1000 + n}") != "dup"
            await dispatcher.ingest("t:1", f'"w{n}"', dedupe_key=f"web:{n:04x}a")
            if n % 100 == 0:
                counts.append((await client.dbsize(), await client.hlen("bots:{t:1}:meta")))
        assert len({keys for keys, _ in counts}) == 1, counts  # as many keys after 400 messages as after 100
        assert all(fields <= DEDUPE_TRIM_AT + 1 for _, fields in counts), counts  # and a bounded hash
        for n in (1, 7, 250, 399, 400):  # redeliveries, old and new
            assert await dispatcher.ingest("t:1", '"again"', dedupe_key=f"telegram:{1000 + n}") == "dup"
        assert await dispatcher.ingest("t:1", '"again"', dedupe_key="web:018fa") == "dup"  # among the newest
        assert await dispatcher.ingest("t:1", '"next"', dedupe_key="telegram:1401") in ("queued", "scheduled")
        assert await client.llen("bots:{t:1}:inbox") == 801
        # another conversation, and another source, have their own marks
        assert await dispatcher.ingest("t:2", '"x"', dedupe_key="telegram:1005") != "dup"
        assert await dispatcher.ingest("t:1", '"y"', dedupe_key="discord:5") != "dup"
    finally:
        await backend.close()


async def test_one_drain_job_per_context_however_many_inputs(gateway: Any, client: Any) -> None:
    for i in range(20):
        await send(gateway, "c1", f"m{i}")
        await send(gateway, "c2", f"m{i}")
    jobs = await client.zrange("bots:queue", 0, -1)
    assert len(jobs) == 2
    assert {await client.hget(f"bots:{{probe:chat:{c}}}:meta", "sched") for c in ("c1", "c2")} == set(jobs)
    assert {Keys().cid_of_job(job) for job in jobs} == {"probe:chat:c1", "probe:chat:c2"}
    assert await client.keys("arq:*") == []  # a job is its id: no payload stored


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


def test_the_queue_bots_builds_keeps_a_mark_for_the_platforms_that_declare_one() -> None:
    """Core names no platform: a platform declares that its ids grow (``Platform.ordered_dedupe``) and the queue
    configuration ``bots`` builds carries it to the dispatcher; a schedule's occurrences are core's own."""
    from bots.queue_settings import RedisSettings
    from core.fleet.dispatcher import dedupe_fields

    ordered = RedisSettings().to_config().ordered_dedupe
    assert set(ordered) == {"schedule:", "telegram:", "discord:"}
    assert dedupe_fields("telegram:0042", ordered) == ("d:telegram:0042", "f:telegram", "42")
    assert dedupe_fields("web:0042", ordered) == ("d:web:0042", "", "")  # the web chat's ids are random
    assert dedupe_fields("telegram:42") == ("d:telegram:42", "", "")  # a queue told of no order keeps none
