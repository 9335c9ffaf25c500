"""Discord and the operator: /readyz follows the gateway, /metrics counts what the adapter saw, every log
line about a message carries ``discord:<message id>``, and a gateway lost for good is reported to the agent."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

import core
from bots.logs import configure_logging
from bots.ops import Ops, serve
from bots.settings import LogSettings
from core.errors import ConfigError, PlatformError
from extensions.discord import discord_extension

from .conftest import StartBot, World, answers, barrier, runtime_of, settings_for

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


async def test_readyz_follows_the_gateway_from_connecting_to_a_fatal_close(
    world: World, http: aiohttp.ClientSession
) -> None:
    ops = Ops()
    agent = core.create_agent(
        model=answers(), extensions=[discord_extension(settings_for(world.fake))], memory=core.InMemoryStore()
    )
    ops.attach(agent)
    world.fake.hold_ready = asyncio.Event()
    async with serve(ops, host="127.0.0.1", port=0) as port:
        status, body = await readyz(http, port)
        assert status == 503 and "not running" in body["checks"]["agent"]

        starting = asyncio.create_task(agent.start())
        await world.fake.wait_until(lambda: world.fake.identifies)
        status, body = await readyz(http, port)
        assert status == 503
        assert body["checks"]["discord"] == "gateway connecting"

        world.fake.hold_ready.set()
        await starting
        status, body = await readyz(http, port)
        assert status == 200, body
        assert body["checks"]["discord"] == "ok"

        await world.fake.drop_gateway(code=4014)  # the intent was turned off while connected
        failure = await agent.failed()
        assert isinstance(failure, ConfigError) and "Message Content Intent" in str(failure)
        status, body = await readyz(http, port)
        assert status == 503
        assert body["checks"]["discord"].startswith("failed: ")
        assert "close code 4014" in body["checks"]["agent"]

        await agent.stop()
        status, body = await readyz(http, port)
        assert status == 503
        assert body["checks"]["discord"].startswith("failed: ")


async def test_readyz_is_503_again_once_stopped(world: World, http: aiohttp.ClientSession) -> None:
    ops = Ops()
    agent = core.create_agent(
        model=answers(), extensions=[discord_extension(settings_for(world.fake))], memory=core.InMemoryStore()
    )
    ops.attach(agent)
    async with serve(ops, host="127.0.0.1", port=0) as port:
        async with agent:
            assert (await readyz(http, port))[0] == 200
        status, body = await readyz(http, port)
        assert status == 503
        assert body["checks"]["discord"] == "not connected"
        assert "not running" in body["checks"]["agent"]


async def test_a_rest_only_worker_is_ready_once_logged_in(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers(), listen=False)
    assert agent.readiness["discord"]() is True
    assert world.fake.identifies == []


async def test_a_revoked_token_on_the_gateway_is_a_fatal_config_error(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers())
    await world.fake.drop_gateway(code=4004)
    failure = await agent.failed()
    assert isinstance(failure, ConfigError)
    assert "DISCORD_TOKEN" in str(failure) and "4004" in str(failure)
    assert "fake-token" not in str(failure)


async def test_other_fatal_close_codes_are_reported_with_what_to_do(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers())
    await world.fake.drop_gateway(code=4011)
    failure = await agent.failed()
    assert isinstance(failure, PlatformError)
    assert "4011" in str(failure) and "sharding" in str(failure)


async def test_a_dropped_connection_is_not_a_failure(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers("back"))
    await world.fake.drop_gateway()  # 4000: discord.py resumes
    await barrier(world)
    assert agent.failure is None
    assert agent.readiness["discord"]() is True


async def test_metrics_count_messages_received_ignored_and_429s(
    world: World, start_bot: StartBot, http: aiohttp.ClientSession
) -> None:
    ops = Ops()
    agent = await start_bot(answers("hi"), allowed_users=[int(world.alice["id"]), int(world.other_bot["id"])])
    ops.attach(agent)
    async with serve(ops, host="127.0.0.1", port=0) as port:
        before = await scrape(http, port)
        await world.fake.say(world.general, "no mention", author=world.alice)  # policy
        await world.fake.say(world.general, "beep", author=world.other_bot, mention_bot=True)  # bot
        await world.fake.say(world.general, "let me in", author=world.bob, mention_bot=True)  # allowlist
        asked = await world.fake.say(world.dm, "hello", author=world.alice)  # answered
        await world.fake.dispatch("MESSAGE_CREATE", asked)  # the gateway delivers it again: duplicate
        world.fake.rate_limit("POST", r"/channels/\d+/messages", retry_after=0.01)
        await world.fake.wait_posted(world.dm)
        await barrier(world)  # everything above decided; the first reply came back as the bot's own message
        await runtime_of(agent).wait_idle()
        after = await scrape(http, port)

    def ignored(reason: str) -> float:
        return delta(before, after, "bots_messages_ignored_total", platform="discord", reason=reason)

    assert ignored("policy") == 1
    assert ignored("bot") == 1
    assert ignored("allowlist") == 1
    assert ignored("duplicate") == 1
    assert ignored("own") >= 1
    assert len(world.fake.posted_in(world.dm)) == 2  # the duplicate was not answered
    answered_inputs = 2  # the DM and the barrier
    ignored_total = sum(
        value - before.get(key, 0.0)
        for key, value in after.items()
        if key[0] == "bots_messages_ignored_total" and ("platform", "discord") in key[1]
    )
    assert delta(before, after, "bots_messages_received_total", platform="discord") == answered_inputs + ignored_total
    assert delta(before, after, "bots_platform_rate_limited_total", platform="discord") == 1
    assert delta(before, after, "bots_messages_answered_total", platform="discord") == 2


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    content_level = logging.getLogger("content").level
    stream = io.StringIO()
    configure_logging(LogSettings(format="json", level="INFO", content=True), stream=stream)
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("content").setLevel(content_level)


async def test_the_reply_log_line_carries_the_message_id(
    world: World, start_bot: StartBot, json_logs: io.StringIO
) -> None:
    agent = await start_bot(answers("traced"))
    asked = await world.fake.say(world.dm, "trace me", author=world.alice)
    await world.fake.wait_posted(world.dm)
    await runtime_of(agent).wait_idle()
    entries = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    expected = f"discord:{asked['id']}"
    replied = [e for e in entries if e["logger"] == "extensions.discord" and "replied to message" in e["message"]]
    assert [e.get("correlation_id") for e in replied] == [expected]
    assert "trace me" not in replied[0]["message"] and "traced" not in replied[0]["message"]
    content = [e for e in entries if e["logger"] == "content.discord"]
    assert [e.get("correlation_id") for e in content] == [expected, expected]  # the message and the reply
    stored = await agent.memory.get(f"working:discord:channel:{world.dm}")
    assert stored is not None
    assert [e["correlation_id"] for e in stored if e["kind"] == "input"] == [expected]
