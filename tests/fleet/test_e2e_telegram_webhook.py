"""The Telegram gateway in webhook mode, in this process: the fake Bot API posts updates to the gateway's
own webhook server (with the secret header, again and again until it gets a 2xx, as Telegram does), the
real python-telegram-bot client, a real redis-server, and a queue worker posting the answers.

The gateway answers 200 only once an update is stored in Redis (or dropped on purpose); while Redis is
down it answers 503, so Telegram keeps the update and delivers it again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from core import Agent, AgentOptions, ScriptedModel, create_agent
from core.fleet import RedisBackend, RedisDispatcher, RedisMemoryStore
from core.fleet.keys import Keys
from extensions.telegram import telegram_extension
from tests.fakes.telegram_server import FakeTelegramServer
from tests.ports import free_port

from .conftest import queue_config
from .server import RedisServer
from .test_e2e_telegram_poller import answer, answered_once, running_worker, runtime_of, settings_for

SECRET = "gateway_s3cret-for-tests-0123456789abcdef"
Start = Callable[[], Any]


@pytest.fixture
def hook_url() -> str:
    return f"http://127.0.0.1:{free_port()}/telegram/hook"


@pytest.fixture
async def start_gateway(
    redis_server: RedisServer, telegram: FakeTelegramServer, hook_url: str
) -> AsyncIterator[Callable[[], Any]]:
    """``await start_gateway()``: an agent that takes Telegram's webhook requests and stores in Redis."""
    started: list[tuple[Agent, RedisBackend]] = []
    port = int(hook_url.rsplit(":", 1)[1].split("/", 1)[0])

    async def start() -> Agent:
        backend = RedisBackend(queue_config(redis_server, retry_seconds=0.2), client_name="gateway")
        settings = settings_for(
            telegram,
            mode="webhook",
            webhook_url=hook_url,
            webhook_listen="127.0.0.1",
            webhook_port=port,
            webhook_secret=SECRET,
        )
        agent = create_agent(
            model=ScriptedModel(answer),
            extensions=[telegram_extension(settings)],
            dispatcher=RedisDispatcher(backend),
            memory=RedisMemoryStore(backend),
            options=AgentOptions(stop_timeout=10),
        )
        started.append((agent, backend))
        await agent.start()
        return agent

    try:
        yield start
    finally:
        for agent, backend in started:
            await agent.stop()
            await backend.close()


def statuses(telegram: FakeTelegramServer, update: dict[str, Any]) -> list[int]:
    """The HTTP status of every delivery of ``update`` to the webhook."""
    return [status for uid, status in telegram.webhook_deliveries if uid == update["update_id"]]


async def test_a_request_without_the_secret_is_refused(
    telegram: FakeTelegramServer, start_gateway: Start, hook_url: str, client: Any
) -> None:
    gateway = await start_gateway()
    assert (telegram.webhook_url, telegram.webhook_secret) == (hook_url, SECRET)
    assert runtime_of(gateway).ready() is True
    forged = telegram.user_says("forged", user_id=666)
    telegram.pending.remove(forged)  # posted by an impostor below, never by Telegram
    async with aiohttp.ClientSession() as session:
        for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}):
            headers["Content-Type"] = "application/json"
            async with session.post(hook_url, data=json.dumps(forged), headers=headers) as resp:
                assert resp.status == 403
    assert not await client.keys("bots:{telegram:*}:inbox")


async def test_an_update_is_answered_200_once_stored_and_answered_once(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, client: Any
) -> None:
    gateway = await start_gateway()
    update = telegram.user_says("hello over the webhook", user_id=700)
    await telegram.wait_for(lambda: statuses(telegram, update) == [200], timeout=30)
    inbox = Keys("bots:").context("telegram:chat:700").inbox
    assert await client.llen(inbox) == 1  # stored before the 200
    telegram.push(update)  # Telegram delivers it again: dropped as a duplicate, still 200
    await telegram.wait_for(lambda: statuses(telegram, update) == [200, 200], timeout=30)
    await runtime_of(gateway).wait_idle()
    assert await client.llen(inbox) == 1
    async with running_worker(redis_server, telegram):
        await telegram.wait_replies(1, timeout=30)
    answered_once(telegram, [update])
    assert telegram.calls_of("getUpdates") == []


async def test_while_redis_is_down_the_webhook_answers_503_and_the_redelivery_is_answered_once(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start
) -> None:
    async with running_worker(redis_server, telegram):
        await start_gateway()
        asked = [telegram.user_says("are you up?", user_id=800)]
        await telegram.wait_replies(1, timeout=30)
        redis_server.stop()
        down = telegram.user_says("hello while Redis is down", user_id=801)
        asked.append(down)
        await telegram.wait_for(lambda: len(statuses(telegram, down)) >= 2, timeout=30)
        assert all(status >= 500 for status in statuses(telegram, down))  # Telegram keeps it
        assert telegram.pending == [down]
        redis_server.start()
        await telegram.wait_for(lambda: statuses(telegram, down)[-1:] == [200], timeout=30)
        await telegram.wait_replies(2, timeout=30)
    assert statuses(telegram, down).count(200) == 1
    answered_once(telegram, asked)
