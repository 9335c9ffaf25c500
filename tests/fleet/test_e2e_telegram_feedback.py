"""End to end (issue 54): a reaction on an answer counts as feedback in a fleet. A worker posts the answer, the
gateway receives the reaction (Telegram's update does not say whose the message is): the answer is noted in Redis
(``core.fleet.RedisAnswerBook``) where the gateway finds it. ``bots gateway`` + two ``bots worker`` processes, the
fake Telegram Bot API and a real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.usage import day_of
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer


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
        LLM_PROVIDER="scripted",
    )
    async with Processes(tmp_path, env) as procs:
        yield procs


async def test_a_reaction_on_an_answer_a_worker_posted_is_counted_by_the_gateway(
    deployment: Processes, telegram: FakeTelegramServer, client: Any
) -> None:
    workers = [await deployment.start("worker"), await deployment.start("worker")]
    gateway = await deployment.start("gateway")
    asked = telegram.user_says("capital of France?", user_id=5100)
    [reply] = await telegram.wait_replies(1, timeout=60)
    chat = asked["message"]["chat"]["id"]
    noted = f"bots:answer:telegram:{chat}:{reply.message_id}"
    await wait_until(lambda: client.get(noted), timeout=60, what="the worker noting its answer (after posting it)")
    assert await client.get(noted) == f"telegram:chat:{chat}"
    assert 0 < await client.ttl(noted) <= 7 * 86_400
    day = day_of()
    down = f"bots:usage:{day}:feedback:down:chat:telegram:chat:{chat}"
    up = f"bots:usage:{day}:feedback:up:chat:telegram:chat:{chat}"
    telegram.user_reacts(chat, asked["message"]["message_id"], "👎", user_id=5100)  # the person's own: not counted
    telegram.user_reacts(chat, reply.message_id, "👎", user_id=5100)
    telegram.user_reacts(chat, reply.message_id, "👎", user_id=5100)  # delivered again: counted once
    telegram.user_reacts(chat, reply.message_id, "👍", user_id=5101, first_name="Bob")
    await wait_until(lambda: client.hget(up, "out"), timeout=60, what="the 👍 counted")
    assert await client.hget(down, "out") == "1"
    assert await client.hget(up, "out") == "1"
    assert await client.hget(f"bots:usage:{day}:feedback:down:user:telegram:5100", "out") == "1"
    await deployment.stop_all()
    assert len(telegram.sent) == 1  # the reactions were never answered
    assert "a down reaction on answer" in deployment.log_of(gateway)
    for worker in workers:
        assert worker.returncode == 0
