"""End to end: ``bots gateway`` + two ``bots worker`` processes, the real python-telegram-bot client in
each, the fake Telegram Bot API on 127.0.0.1 and a real redis-server: users' messages are answered
through Redis, by the workers, each exactly once; a second gateway on the same token stands by and
takes over when the first dies; updates a gateway fetched are lost neither when Redis is down nor when
the gateway is killed before storing them (Telegram hands them out again: the offset had not moved)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.fleet.keys import Keys
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer

SCRIPTED = "Hello! I am up and running"


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


async def test_gateway_and_two_workers_answer_every_user_once(
    deployment: Processes, telegram: FakeTelegramServer, client: Any
) -> None:
    workers = [await deployment.start("worker"), await deployment.start("worker")]
    gateway = await deployment.start("gateway")
    users = range(3000, 3010)
    asked = [telegram.user_says(f"hello {u}", user_id=u) for u in users]
    await telegram.wait_replies(len(asked), timeout=60)
    asked += [telegram.user_says(f"and again {u}", user_id=u) for u in users]
    await telegram.wait_replies(len(asked), timeout=60)
    await deployment.stop_all()  # anything still on its way would be posted before they exit
    replies = telegram.sent
    assert sorted((r.chat_id, r.reply_to) for r in replies) == sorted(
        (u["message"]["chat"]["id"], u["message"]["message_id"]) for u in asked
    )
    assert all(r.text.startswith(SCRIPTED) for r in replies)
    for worker in workers:
        assert worker.returncode == 0 and "worker stopped" in deployment.log_of(worker)
    assert gateway.returncode == 0
    assert "gateway listening" in deployment.log_of(gateway)
    assert await client.zcard("bots:queue") == 0 and not await client.keys("bots:{*}:inbox")


async def test_a_second_gateway_on_the_same_token_stands_by_and_takes_over(
    deployment: Processes, telegram: FakeTelegramServer, client: Any
) -> None:
    await deployment.start("worker")
    first = await deployment.start("gateway")
    await wait_until(lambda: client.keys("bots:lock:telegram:*"), timeout=60, what="the first gateway's lease")
    second = await deployment.start("gateway")
    telegram.user_says("who is there?", user_id=4000)
    await telegram.wait_replies(1, timeout=60)
    await wait_until(lambda: "standing by" in deployment.log_of(second), timeout=60, what="the standby")
    assert "gateway listening" not in deployment.log_of(second)  # it never polled
    first.send_signal(signal.SIGKILL)
    await first.wait()
    telegram.user_says("still there?", user_id=4001)
    [_, reply] = await telegram.wait_replies(2, timeout=60)
    assert reply.chat_id == 4001 and reply.text.startswith(SCRIPTED)
    assert "gateway listening" in deployment.log_of(second)
    with contextlib.suppress(ProcessLookupError):
        second.send_signal(signal.SIGTERM)


def offsets(telegram: FakeTelegramServer) -> list[int]:
    """The offset of every getUpdates so far (0: none given)."""
    return [int(c.params.get("offset") or 0) for c in telegram.calls_of("getUpdates")]


async def settled(client: Any, chat_id: int) -> bool:
    """The chat's run is over: its batch acknowledged and its lease released."""
    keys = Keys("bots:").context(f"telegram:chat:{chat_id}")
    return not await client.exists(keys.batch, keys.lease)


def answered_once(telegram: FakeTelegramServer, asked: list[dict[str, Any]]) -> None:
    replies = sorted((r.chat_id, r.reply_to) for r in telegram.sent)
    assert replies == sorted((u["message"]["chat"]["id"], u["message"]["message_id"]) for u in asked)
    assert all(r.text.startswith(SCRIPTED) for r in telegram.sent)


async def test_messages_sent_while_redis_is_down_are_answered_once_it_is_back(
    deployment: Processes, telegram: FakeTelegramServer, client: Any, redis_server: RedisServer
) -> None:
    deployment.env.update(REDIS_RETRY_SECONDS="0.5", BOT_STOP_TIMEOUT="1")
    await deployment.start("worker")
    gateway = await deployment.start("gateway")
    asked = [telegram.user_says("are you up?", user_id=5000)]
    await telegram.wait_replies(1, timeout=60)
    # that answer marked as posted (Telegram has no idempotency key: a post whose mark Redis lost is redone)
    await wait_until(lambda: settled(client, 5000), timeout=60, what="the first run to finish")
    await client.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")  # nothing is stored from here on
    asked += [telegram.user_says(f"hello {u}", user_id=u) for u in range(5001, 5006)]
    ids = [u["update_id"] for u in asked[1:]]
    await telegram.wait_for(lambda: all(i in telegram.served for i in ids), timeout=60)  # the gateway has them
    redis_server.stop()  # ... and Redis goes down before they are stored
    # the gateway keeps them, loses its lease, stops listening and stands by until Redis answers again
    await wait_until(lambda: "standing by until Redis answers" in deployment.log_of(gateway), timeout=60)
    assert gateway.returncode is None
    assert max(offsets(telegram)) <= ids[0]  # none of them confirmed
    redis_server.start()
    await telegram.wait_replies(len(asked), timeout=60)
    await telegram.wait_for(lambda: max(offsets(telegram)) == ids[-1] + 1, timeout=60)
    await deployment.stop_all()
    answered_once(telegram, asked)
    assert gateway.returncode == 0


async def test_a_gateway_killed_after_fetching_a_batch_loses_none_of_it(
    deployment: Processes, telegram: FakeTelegramServer, client: Any
) -> None:
    await deployment.start("worker")
    first = await deployment.start("gateway")
    asked = [telegram.user_says("are you up?", user_id=6000)]
    await telegram.wait_replies(1, timeout=60)
    await client.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")  # the gateway cannot store them yet
    asked += [telegram.user_says(f"hello {u}", user_id=u) for u in range(6001, 6006)]
    ids = [u["update_id"] for u in asked[1:]]
    await telegram.wait_for(lambda: all(i in telegram.served for i in ids), timeout=60)
    received = "chat 6001: answer from user 6001"  # logged as the first of them is about to be stored
    await wait_until(lambda: received in deployment.log_of(first), timeout=60, what="the gateway to have them")
    first.send_signal(signal.SIGKILL)  # fetched, not stored
    await first.wait()
    assert max(offsets(telegram)) <= ids[0]
    await client.execute_command("CLIENT", "UNPAUSE")
    second = await deployment.start("gateway")
    await telegram.wait_replies(len(asked), timeout=60)
    await telegram.wait_for(lambda: max(offsets(telegram)) == ids[-1] + 1, timeout=60)
    await deployment.stop_all()
    answered_once(telegram, asked)
    assert all(telegram.served[i] == 2 for i in ids)  # handed out again to the second gateway
    assert second.returncode == 0
