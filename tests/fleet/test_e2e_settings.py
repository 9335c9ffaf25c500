"""Settings from the chat across a fleet: ``bots gateway`` serves /model, /persona and /stats (the real
python-telegram-bot client against the fake Bot API), ``bots worker`` processes answer through the real OpenAI
client against the fake model server, all sharing a real redis-server. A change made through the gateway is
used by the very next run, whichever worker takes it, and /stats adds up what the model reported."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer, SentMessage
from tests.telegram.conftest import answer

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer
from .test_e2e_telegram import settled

GROUP = -100777
ANN = 1001


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(default=Reply(chunks=(answer("Arr."),), usage=(120, 30))) as server:
        yield server


@pytest.fixture
async def deployment(
    redis_server: RedisServer, telegram: FakeTelegramServer, llm: FakeOpenAIServer, tmp_path: Path
) -> AsyncIterator[Processes]:
    env = deployment_env(
        redis_server,
        tmp_path,
        telegram=telegram,
        REDIS_LEASE_SECONDS="5",
        TELEGRAM_POLL_TIMEOUT="1",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=llm.url,
        LLM_MODEL="base-model",
        LLM_RETRIES="0",
        LLM_ALLOWED_MODELS="small-model,large-model",
        LLM_PRICES="large-model=1000/2000",
    )
    async with Processes(tmp_path, env) as procs:
        yield procs


async def said(telegram: FakeTelegramServer, text: str) -> SentMessage:
    """Ann writes ``text`` in the group; returns the bot's answer to it."""
    before = len(telegram.sent)
    telegram.user_says(text, user_id=ANN, chat_id=GROUP)
    replies = await telegram.wait_replies(before + 1, timeout=60)
    return replies[-1]


async def test_a_change_made_through_the_gateway_is_used_by_the_next_run_on_any_worker(
    deployment: Processes, telegram: FakeTelegramServer, llm: FakeOpenAIServer, client: Any
) -> None:
    telegram.chat(GROUP, kind="supergroup", title="Crew")
    telegram.admins[GROUP] = {ANN}
    first = await deployment.start("worker")
    await deployment.start("gateway")

    assert (await said(telegram, "@daydream_test_bot hi")).text == "Arr."
    await wait_until(lambda: settled(client, GROUP), timeout=60, what="the first run to finish")
    before = len(llm.requests)
    assert {r.body["model"] for r in llm.requests} == {"base-model"}
    assert (await said(telegram, "/model large-model")).text == "Done: this chat now uses large-model."
    assert await client.get(f"bots:{{telegram:chat:{GROUP}}}:mem:settings") == '{"model":"large-model"}'
    assert (await said(telegram, "@daydream_test_bot again")).text == "Arr."  # the same worker, warm
    assert {r.body["model"] for r in llm.requests[before:]} == {"large-model"}

    second = await deployment.start("worker")
    first.terminate()
    async with asyncio.timeout(30):
        await first.wait()
    done = await said(telegram, "/persona set You are a pirate. <b>Arr</b>")
    assert done.text.startswith("Done: this chat has a new persona")
    assert (await said(telegram, "@daydream_test_bot and now?")).text == "Arr."  # only the second worker is left
    last = llm.requests[-1].body
    assert last["model"] == "large-model"
    assert "You are a pirate. &lt;b&gt;Arr&lt;/b&gt;" in last["messages"][0]["content"]
    assert second.returncode is None and "worker stopped" in deployment.log_of(first)

    # the reply is posted as its output closes; the usage is counted when the model's stream ends, just after
    await wait_until(lambda: settled(client, GROUP), timeout=60, what="the last run to finish")
    stats = (await said(telegram, "/stats")).text
    # three runs, each one model call of 120 + 30 tokens, two on large-model at $1,000 / $2,000 per million tokens.
    # (On a starved machine a worker may lose its lease mid-run: the batch is run again and its calls are charged
    # once per step, so the figures stay whole calls that the fake model reported.)
    lines = re.findall(r"(\d+) (?:tokens )?in, (\d+) out", stats)  # the user's and the chat's, today and 30 days
    calls = int(lines[0][0]) // 120
    assert lines == [(str(120 * calls), str(30 * calls))] * 4 and 3 <= calls <= len(llm.requests)
    if calls == 3:
        assert "Your usage today: 360 tokens in, 90 out, about $0.3600" in stats

    # the gateway reads the group's reply policy from Redis at each message: a change applies at once
    assert (await said(telegram, "/reply always")).text == "Done: in this chat I now answer every message."
    assert (await said(telegram, "no mention needed now")).text == "Arr."
