"""Telegram and the operator: /readyz follows polling and the webhook server, /metrics counts what the
adapter saw (received, ignored by reason, 429s), and a token revoked while running is reported to the agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from bots.ops import Ops, serve
from core import ConfigError, InMemoryStore, create_agent
from extensions.telegram import TelegramSettings, telegram_extension
from extensions.telegram.runtime import TelegramRuntime
from tests.fakes.telegram_server import FakeTelegramServer
from tests.ports import free_port

from .conftest import StartBot, scripted

GROUP = -100200300
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def readyz(http: aiohttp.ClientSession, port: int) -> tuple[int, dict[str, Any]]:
    async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
        return response.status, await response.json()


async def scrape(http: aiohttp.ClientSession, port: int) -> Samples:
    """Every sample /metrics shows, by name and labels."""
    async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def runtime_of(agent: Any) -> TelegramRuntime:
    [check] = [c for name, c in agent.readiness.items() if name == "telegram"]
    runtime = check.__self__
    assert isinstance(runtime, TelegramRuntime)
    return runtime


async def test_readyz_follows_polling_until_the_token_is_revoked(
    server: FakeTelegramServer, http: aiohttp.ClientSession
) -> None:
    ops = Ops()
    settings = TelegramSettings(token=SecretStr(server.token), api_url=server.api_url, poll_timeout=10)
    agent = create_agent(model=scripted("hi"), extensions=[telegram_extension(settings)], memory=InMemoryStore())
    ops.attach(agent)
    async with serve(ops, host="127.0.0.1", port=0) as port:
        status, body = await readyz(http, port)
        assert status == 503 and "not running" in body["checks"]["agent"]
        try:
            await agent.start()
            status, body = await readyz(http, port)
            assert status == 200, body
            assert body["checks"]["telegram"] == "ok"

            server.token = "123456:a-new-token-from-botfather"  # the old one was revoked
            server.user_says("are you there?")  # ends the long poll in progress; the next one gets 401
            failure = await agent.failed()
            assert isinstance(failure, ConfigError)
            assert "TELEGRAM_TOKEN" in str(failure) and "401" in str(failure)
            assert "TEST-token" not in str(failure)
            status, body = await readyz(http, port)
            assert status == 503
            assert body["checks"]["telegram"].startswith("failed: Telegram stopped accepting TELEGRAM_TOKEN")
        finally:
            await agent.stop()
        status, body = await readyz(http, port)
        assert status == 503


async def test_readyz_is_503_again_once_stopped(server: FakeTelegramServer, http: aiohttp.ClientSession) -> None:
    ops = Ops()
    settings = TelegramSettings(token=SecretStr(server.token), api_url=server.api_url, poll_timeout=10)
    agent = create_agent(model=scripted("hi"), extensions=[telegram_extension(settings)], memory=InMemoryStore())
    ops.attach(agent)
    async with serve(ops, host="127.0.0.1", port=0) as port:
        async with agent:
            assert (await readyz(http, port))[0] == 200
        status, body = await readyz(http, port)
        assert status == 503
        assert body["checks"]["telegram"] == "not connected"


async def test_webhook_mode_is_ready_once_the_server_listens(server: FakeTelegramServer, start_bot: StartBot) -> None:
    port = free_port()
    agent = await start_bot(
        ["ok"],
        mode="webhook",
        webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
        webhook_listen="127.0.0.1",
        webhook_port=port,
        webhook_secret="s3cret_Token-for-tests-0123456789abcdef",
    )
    assert agent.readiness["telegram"]() is True
    server.user_says("hello")
    await server.wait_replies(1)


async def test_a_sending_worker_is_ready_once_initialised(server: FakeTelegramServer, start_bot: StartBot) -> None:
    agent = await start_bot(["ok"], listen=False)
    assert agent.readiness["telegram"]() is True
    assert server.calls_of("getUpdates") == []


async def test_metrics_count_messages_received_ignored_and_429s(
    server: FakeTelegramServer, start_bot: StartBot, http: aiohttp.ClientSession
) -> None:
    ops = Ops()
    agent = await start_bot(["hi"], allowed_users=[1001, 5])
    ops.attach(agent)
    async with serve(ops, host="127.0.0.1", port=0) as port:
        before = await scrape(http, port)
        server.user_says("just chatting", chat_id=GROUP, kind="supergroup")  # policy
        server.user_says("beep", user_id=5, is_bot=True, username="beep_bot")  # bot
        server.user_says("let me in", user_id=2002)  # allowlist
        server.user_says("")  # empty
        update = server.user_says("hello")  # answered
        server.push(update)  # Telegram delivers it again: duplicate
        server.fail("sendMessage", status=429, retry_after=1)
        await server.wait_replies(1)
        await runtime_of(agent).wait_idle()
        after = await scrape(http, port)

    def ignored(reason: str) -> float:
        return delta(before, after, "bots_messages_ignored_total", platform="telegram", reason=reason)

    assert [ignored(r) for r in ("policy", "bot", "allowlist", "empty", "duplicate")] == [1, 1, 1, 1, 1]
    assert delta(before, after, "bots_messages_received_total", platform="telegram") == 6
    assert delta(before, after, "bots_platform_rate_limited_total", platform="telegram") == 1
    assert delta(before, after, "bots_messages_answered_total", platform="telegram") == 1
    assert len(server.sent) == 1


async def test_a_token_refused_between_getme_and_polling_names_the_setting(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.fail("deleteWebhook", status=401, description="Unauthorized")  # revoked right after getMe
    with pytest.raises(ConfigError, match="Telegram stopped accepting TELEGRAM_TOKEN"):
        await start_bot(["ok"])
