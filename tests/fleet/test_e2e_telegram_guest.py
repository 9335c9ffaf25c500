"""End to end (issue 54): Telegram's guest mode behind a queue. ``bots gateway`` hands the guest request to the
fleet, a ``bots worker`` answers it with answerGuestQuery, and once answered nothing of the request is left in Redis
(no key or value holds its text, its conversation's keys are gone). The fake Bot API, a real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bots.models import SCRIPTED_REPLY
from core.usage import day_of
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer

GROUP = -100777
REQUEST = "what is the capital of France, zebra-4471?"


@pytest.fixture
async def deployment(
    redis_server: RedisServer, telegram: FakeTelegramServer, tmp_path: Path
) -> AsyncIterator[Processes]:
    env = deployment_env(
        redis_server,
        tmp_path,
        telegram=telegram,
        REDIS_LEASE_SECONDS="1",
        TELEGRAM_POLL_TIMEOUT="1",
        TELEGRAM_GUEST_MODE="true",
        LLM_PROVIDER="scripted",
    )
    async with Processes(tmp_path, env) as procs:
        yield procs


async def dump(client: Any) -> dict[str, str]:
    """Every key of the Redis and what it holds, as text."""
    found: dict[str, str] = {}
    async for key in client.scan_iter(count=1000):
        kind = await client.type(key)
        if kind == "string":
            value: Any = await client.get(key)
        elif kind == "hash":
            value = await client.hgetall(key)
        elif kind == "list":
            value = await client.lrange(key, 0, -1)
        elif kind == "zset":
            value = await client.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            value = await client.smembers(key)
        elif kind == "stream":
            value = await client.xrange(key)
        else:
            value = kind
        found[key] = repr(value)
    return found


async def test_a_guest_request_is_answered_by_a_worker_and_leaves_nothing_in_redis(
    deployment: Processes, telegram: FakeTelegramServer, client: Any
) -> None:
    await deployment.start("worker")
    gateway = await deployment.start("gateway")
    update = telegram.user_summons(REQUEST, chat_id=GROUP, user_id=3003)
    query_id = update["guest_message"]["guest_query_id"]
    await telegram.wait_for(lambda: query_id in telegram.guest_answers, timeout=60)
    assert telegram.guest_answers[query_id]["text"].startswith(SCRIPTED_REPLY.split(" (")[0])
    assert not telegram.sent  # the answer went where Telegram says
    cid = f"telegram:guest:{query_id}"

    async def nothing_left() -> bool:
        keys = await dump(client)
        return not [k for k, v in keys.items() if "zebra-4471" in k + v]

    await wait_until(nothing_left, timeout=60, what="the guest request's text to go")
    # what the queue keeps of it (its dedupe key, no text) expires; its usage counts against the summoner
    meta = f"bots:{{{cid}}}:meta"
    await wait_until(lambda: client.ttl(meta), timeout=60, what="the conversation's meta to expire")
    assert 0 < await client.ttl(meta) <= 3600
    assert [k for k in await dump(client) if cid in k and "usage" not in k] == [meta]
    assert int(await client.hget(f"bots:usage:{day_of()}:user:telegram:3003", "in") or 0) > 0
    telegram.user_says("hello", chat_id=GROUP + 1)  # the fleet still answers
    await telegram.wait_replies(1, timeout=60)
    await deployment.stop_all()
    assert gateway.returncode == 0
    left = {k: v for k, v in (await dump(client)).items() if "zebra-4471" in k + v}
    assert left == {}, left
