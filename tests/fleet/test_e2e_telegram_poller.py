"""The Telegram listener in front of the Redis queue, in this process: the real python-telegram-bot client
against the fake Bot API, a real redis-server, and a queue worker posting the answers.

What is checked each time is what Telegram sees: the offset of every ``getUpdates`` (an update is
confirmed, and forgotten by Telegram, once an offset past it was sent), how often each update was
handed out, and the bot's messages: each user's message answered exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import SecretStr

from core import Agent, AgentOptions, ScriptedModel, create_agent
from core.errors import ConfigError
from core.fleet import QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from core.fleet.keys import Keys
from extensions.telegram import TelegramSettings, telegram_extension
from extensions.telegram.definitions import MESSAGE
from extensions.telegram.runtime import BUSY, TelegramRuntime
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import queue_config, wait_until
from .server import RedisServer

GROUP = -100500600
KEPT = "is kept unconfirmed"
"""What the listener logs when it cannot store an update yet."""

Start = Callable[..., Any]


def answer(request: Any) -> str:
    return f'<response><output type="{MESSAGE}">answered</output></response>'


def offsets(telegram: FakeTelegramServer) -> list[int]:
    """The offset of every getUpdates so far (0: none given)."""
    return [int(c.params.get("offset") or 0) for c in telegram.calls_of("getUpdates")]


async def storing(client: Any) -> bool:
    """A script of the gateway's (storing an update) waits in Redis, held by ``CLIENT PAUSE``."""
    return any(
        c.get("name") == "gateway" and "b" in c.get("flags", "") and c.get("cmd") == "evalsha"
        for c in await client.client_list()
    )


def runtime_of(agent: Agent) -> TelegramRuntime:
    runtime = agent.readiness["telegram"].__self__  # type: ignore[attr-defined]
    assert isinstance(runtime, TelegramRuntime)
    return runtime


def settings_for(telegram: FakeTelegramServer, **overrides: Any) -> TelegramSettings:
    values: dict[str, Any] = {
        "token": SecretStr(telegram.token),
        "api_url": telegram.api_url,
        "poll_timeout": 10,
        "stream_replies": False,
    }
    values.update(overrides)
    return TelegramSettings(**values)


@pytest.fixture
async def start_gateway(redis_server: RedisServer, telegram: FakeTelegramServer) -> AsyncIterator[Start]:
    """``await start_gateway(**queue_config)``: an agent that listens to Telegram and stores in Redis."""
    started: list[tuple[Agent, RedisBackend]] = []

    async def start(**config: Any) -> Agent:
        backend = RedisBackend(queue_config(redis_server, retry_seconds=0.2, **config), client_name="gateway")
        agent = create_agent(
            model=ScriptedModel(answer),
            extensions=[telegram_extension(settings_for(telegram))],
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


@contextlib.asynccontextmanager
async def running_worker(server: RedisServer, telegram: FakeTelegramServer) -> AsyncIterator[QueueWorker]:
    """A queue worker that answers through the fake Bot API (what ``bots worker`` is)."""
    backend = RedisBackend(queue_config(server), client_name="worker")
    agent = create_agent(
        model=ScriptedModel(answer),
        extensions=[telegram_extension(settings_for(telegram), listen=False)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    worker = QueueWorker(agent, backend)
    try:
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(worker.run(handle_signals=False))
            try:
                yield worker
            finally:
                worker.stop()
                await task
    finally:
        await backend.close()


def answered_once(telegram: FakeTelegramServer, asked: list[dict[str, Any]]) -> None:
    """Every message of ``asked`` got exactly one answer, and nothing else was posted."""
    replies = sorted((m.chat_id, m.reply_to) for m in telegram.sent)
    assert replies == sorted((u["message"]["chat"]["id"], u["message"]["message_id"]) for u in asked)


@pytest.fixture
def kept(caplog: pytest.LogCaptureFixture) -> Callable[[], int]:
    """How many times the listener has logged that it keeps an update until it can store it."""
    caplog.set_level(logging.WARNING, logger="extensions.telegram")
    return lambda: sum(KEPT in r.getMessage() for r in caplog.records)


async def test_updates_fetched_while_redis_is_down_are_stored_when_it_is_back_and_only_then_confirmed(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, kept: Callable[[], int]
) -> None:
    async with running_worker(redis_server, telegram):
        await start_gateway()
        asked = [telegram.user_says("are you up?", user_id=100)]
        await telegram.wait_replies(1, timeout=30)
        redis_server.stop()
        asked += [telegram.user_says(f"hello from {u}", user_id=u) for u in (101, 102, 103)]
        ids = [u["update_id"] for u in asked[1:]]
        await telegram.wait_for(lambda: all(i in telegram.served for i in ids), timeout=30)  # fetched
        await wait_until(lambda: kept() >= 1, what="a failed attempt to store")
        assert max(offsets(telegram)) <= ids[0]  # nothing fetched since Redis went down is confirmed
        redis_server.start()
        await telegram.wait_replies(4, timeout=30)
        await telegram.wait_for(lambda: max(offsets(telegram)) == ids[-1] + 1, timeout=30)
    assert all(telegram.served[i] == 1 for i in ids)  # kept in hand, not fetched again
    answered_once(telegram, asked)


async def test_a_message_for_a_full_inbox_waits_for_room_while_other_chats_go_on(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, client: Any
) -> None:
    gateway = await start_gateway(inbox_cap=1)  # REDIS_INBOX_FULL=wait (the default), REDIS_INBOX_WAIT=30
    runtime = runtime_of(gateway)
    inbox = Keys("bots:").context("telegram:chat:200").inbox
    first = telegram.user_says("one", user_id=200)
    await wait_until(lambda: client.llen(inbox), what="the first message stored")
    second = telegram.user_says("two", user_id=200)
    await wait_until(lambda: runtime.backpressure.waiting((200, None)) == 1, what="the second message kept")
    third = telegram.user_says("three", user_id=200)  # behind the second, in order
    other = telegram.user_says("meanwhile", user_id=201)  # another chat is not held up
    others = Keys("bots:").context("telegram:chat:201").inbox
    await wait_until(lambda: client.llen(others), what="the other chat's message stored")
    assert await client.llen(inbox) == 1
    await telegram.wait_for(lambda: max(offsets(telegram)) > other["update_id"], timeout=30)  # all confirmed
    ids = [u["message"]["message_id"] for u in (first, second, third)]

    def mine() -> list[int | None]:
        return [r.reply_to for r in telegram.sent if r.chat_id == 200]

    async with running_worker(redis_server, telegram):
        await telegram.wait_for(lambda: ids[2] in mine() and any(r.chat_id == 201 for r in telegram.sent), timeout=30)
        await runtime.wait_idle()
        await telegram.wait_for(lambda: max(offsets(telegram)) > other["update_id"], timeout=30)
    assert mine()[0] == ids[0] and mine()[-1] == ids[2] and mine() == sorted(mine())  # in order (maybe batched)
    assert all(BUSY not in r.text for r in telegram.sent)
    assert telegram.served[other["update_id"]] >= 1


async def test_with_drop_a_full_inbox_drops_at_once_and_tells_the_chat_once(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, client: Any
) -> None:
    gateway = await start_gateway(inbox_cap=1, inbox_full="drop")
    inbox = Keys("bots:").context("telegram:chat:210").inbox
    first = telegram.user_says("one", user_id=210)
    await wait_until(lambda: client.llen(inbox), what="the first message stored")
    flood = [telegram.user_says(f"more {i}", user_id=210) for i in range(3)]
    other = telegram.user_says("meanwhile", user_id=211)
    await telegram.wait_for(lambda: max(offsets(telegram)) > other["update_id"], timeout=30)  # all confirmed
    [busy] = await telegram.wait_replies(1, timeout=30)
    assert busy.chat_id == 210 and busy.text == BUSY and busy.reply_to == flood[0]["message"]["message_id"]
    async with running_worker(redis_server, telegram):
        await telegram.wait_replies(3, timeout=30)
        await runtime_of(gateway).wait_idle()
    answered = sorted((r.chat_id, r.reply_to) for r in telegram.sent if r.text != BUSY)
    assert answered == [(210, first["message"]["message_id"]), (211, other["message"]["message_id"])]


async def test_a_message_kept_past_redis_inbox_wait_is_dropped_with_the_notice(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, client: Any
) -> None:
    gateway = await start_gateway(inbox_cap=1, inbox_wait=0.3)
    inbox = Keys("bots:").context("telegram:chat:220").inbox
    telegram.user_says("one", user_id=220)
    await wait_until(lambda: client.llen(inbox), what="the first message stored")
    second = telegram.user_says("two", user_id=220)
    [busy] = await telegram.wait_replies(1, timeout=30)
    assert busy.text == BUSY and busy.reply_to == second["message"]["message_id"]
    await runtime_of(gateway).wait_idle()
    await telegram.wait_for(lambda: max(offsets(telegram)) > second["update_id"], timeout=30)
    assert await client.llen(inbox) == 1


async def test_a_stop_while_storing_finishes_the_batch_and_confirms_it(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, client: Any
) -> None:
    gateway = await start_gateway()
    await client.execute_command("CLIENT", "PAUSE", 30_000, "WRITE")  # the gateway's stores wait
    update = telegram.user_says("hold on", user_id=300)
    await wait_until(lambda: storing(client), what="the gateway storing the update")
    stopping = asyncio.create_task(gateway.stop())
    await wait_until(lambda: not gateway.running, what="the stop to begin")
    assert max(offsets(telegram)) <= update["update_id"]
    await client.execute_command("CLIENT", "UNPAUSE")
    await stopping
    inbox = Keys("bots:").context("telegram:chat:300").inbox
    assert await client.llen(inbox) == 1
    last = telegram.calls_of("getUpdates")[-1]
    assert int(last.params["offset"]) == update["update_id"] + 1 and not last.params.get("timeout")
    assert telegram.pending == []
    before = len(telegram.calls_of("getUpdates"))
    await start_gateway()  # a restart: nothing comes twice
    await telegram.wait_for(lambda: len(telegram.calls_of("getUpdates")) > before, timeout=30)
    assert telegram.served[update["update_id"]] == 1


async def test_filters_commands_and_duplicates_move_the_offset(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, client: Any
) -> None:
    gateway = await start_gateway()
    assert runtime_of(gateway).ready() is True
    chatter = telegram.user_says("just chatting", user_id=400, chat_id=GROUP, kind="supergroup")
    helped = telegram.user_says("/help", user_id=401)
    telegram.push(helped)  # Telegram delivers it twice
    await telegram.wait_replies(1, timeout=30)
    last = max(chatter["update_id"], helped["update_id"])
    await telegram.wait_for(lambda: max(offsets(telegram)) == last + 1, timeout=30)
    await runtime_of(gateway).wait_idle()
    [reply] = telegram.sent
    assert reply.chat_id == 401 and "/reset" in reply.text
    assert not await client.keys("bots:{telegram:*}:inbox")  # neither stored: one ignored, one answered here


async def test_a_token_revoked_while_polling_is_reported(telegram: FakeTelegramServer, start_gateway: Start) -> None:
    gateway = await start_gateway()
    telegram.token = "123456:a-new-token-from-botfather"
    telegram.user_says("are you there?")  # ends the long poll in progress; the next one gets 401
    failure = await asyncio.wait_for(gateway.failed(), 30)
    assert isinstance(failure, ConfigError) and "TELEGRAM_TOKEN" in str(failure)
    assert "TEST-token" not in str(failure)
    assert isinstance(runtime_of(gateway).ready(), str)


async def test_a_refused_get_updates_is_tried_again_and_loses_nothing(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    start_gateway: Start,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="extensions.telegram")
    telegram.fail("getUpdates", status=409, description="Conflict: terminated by other getUpdates request")
    asked = [telegram.user_says("anyone?", user_id=500)]
    async with running_worker(redis_server, telegram):
        await start_gateway()
        await telegram.wait_replies(1, timeout=30)
    assert [c.status for c in telegram.calls_of("getUpdates")][:2] == [409, 200]
    assert "another process polls this TELEGRAM_TOKEN" in caplog.text
    answered_once(telegram, asked)


@pytest.mark.parametrize("rule", ["wait", "drop"])
async def test_one_chat_flooding_past_the_cap_loses_nothing_of_ten_others(
    redis_server: RedisServer, telegram: FakeTelegramServer, start_gateway: Start, rule: str
) -> None:
    await start_gateway(inbox_cap=3, inbox_full=rule, inbox_wait=1.0)
    flood = [telegram.user_says(f"flood {i}", user_id=300) for i in range(120)]  # past Telegram's 100 a fetch
    asked = []
    async with running_worker(redis_server, telegram):
        for round_ in range(3):
            asked += [telegram.user_says(f"hi {round_}", user_id=310 + c) for c in range(10)]
            await asyncio.sleep(0.05)

        def others() -> list[tuple[int, int | None]]:
            return sorted((r.chat_id, r.reply_to) for r in telegram.sent if r.chat_id != 300)

        expected = sorted((u["message"]["chat"]["id"], u["message"]["message_id"]) for u in asked)
        await telegram.wait_for(lambda: {r for r in others()} >= {(c, m) for c, m in expected[2::3]}, timeout=60)
        await telegram.wait_for(lambda: not telegram.pending, timeout=60)
    mine = [r for r in telegram.sent if r.chat_id == 300]
    assert sum(r.text == BUSY for r in mine) == 1  # told once
    assert len(mine) - 1 < len(flood)  # some of the flood was dropped
    for chat in range(310, 320):  # every message of the others answered, once, in order (maybe batched)
        replies = [r.reply_to for r in telegram.sent if r.chat_id == chat]
        ids = [m for c, m in expected if c == chat]
        assert replies == sorted(replies) and replies[-1] == ids[-1] and set(replies) <= set(ids)
