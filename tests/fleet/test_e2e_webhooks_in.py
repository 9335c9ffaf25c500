"""End to end: a signed webhook posted to ``bots gateway``'s HTTP endpoint is answered in a Telegram chat by one of
two ``bots worker`` processes, through a real redis-server and the real python-telegram-bot client talking to the
fake Telegram Bot API, exactly once although it is delivered twice at once and redelivered later."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from core.webhooks import sign
from tests.fakes.telegram_server import FakeTelegramServer
from tests.ports import free_port

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer

SCRIPTED = "Hello! I am up and running"
SECRET = "a-webhook-secret-of-the-ci"
CHAT = -100777


@pytest.fixture
async def deployment(
    redis_server: RedisServer, telegram: FakeTelegramServer, tmp_path: Path
) -> AsyncIterator[Processes]:
    source = {"name": "ci", "secret": SECRET, "channel": f"telegram:{CHAT}", "prompt": "Tell the chat what failed."}
    env = deployment_env(
        redis_server,
        tmp_path,
        telegram=telegram,
        REDIS_LEASE_SECONDS="1",
        TELEGRAM_POLL_TIMEOUT="1",
        LLM_PROVIDER="scripted",
        WEBHOOKS_ENABLED="true",
        WEBHOOKS_SOURCES=json.dumps([source]),
    )
    async with Processes(tmp_path, env) as procs:
        yield procs


class Said(int):
    """An answer's status, which shows its reason when an assertion on it fails."""

    reason: str = ""

    def __repr__(self) -> str:
        return f"{int(self)} ({self.reason})"


async def post(url: str, body: bytes, headers: dict[str, str]) -> Said:
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as response:
        said = Said(response.status)
        said.reason = (await response.json()).get("reason", "")
        return said


async def deliver(url: str, body: bytes, headers: dict[str, str]) -> Said:
    """``post``, sent again while the answer is 503 (as a sender does: the gateway was between two listening periods
    of its platform, its lease renewed late on this busy machine)."""
    for _ in range(100):
        said = await post(url, body, headers)
        if said != 503:
            return said
        await asyncio.sleep(0.2)
    return said


async def test_a_signed_webhook_is_answered_in_the_chat_once(
    deployment: Processes, telegram: FakeTelegramServer, client: Any
) -> None:
    telegram.chat(CHAT, kind="supergroup", title="CI")
    workers = [await deployment.start("worker"), await deployment.start("worker")]
    port = free_port()
    deployment.env["HTTP_PORT"] = str(port)
    gateway = await deployment.start("gateway")
    deployment.env["HTTP_PORT"] = "0"
    await wait_until(lambda: "gateway listening" in deployment.log_of(gateway), timeout=60, what="the gateway")
    url = f"http://127.0.0.1:{port}/hooks/ci"
    assert await deliver(url, b"{}", {}) == 401  # the gateway takes webhooks (an unsigned one is refused)
    body = json.dumps({"pipeline": "main", "status": "failed", "job": "tests"}).encode()
    ts = int(time.time())
    headers = {"X-Webhook-Timestamp": str(ts), "X-Webhook-Signature": sign(SECRET, body, ts), "X-Webhook-Id": "run-1"}
    first, second = await asyncio.gather(deliver(url, body, headers), deliver(url, body, headers))  # delivered twice
    assert sorted((first, second)) == [202, 409]
    [reply] = await telegram.wait_replies(1, timeout=60)
    assert reply.chat_id == CHAT and reply.text.startswith(SCRIPTED)
    later = int(time.time())  # the sender retries: signed anew, the same delivery id
    again = {
        "X-Webhook-Timestamp": str(later),
        "X-Webhook-Signature": sign(SECRET, body, later),
        "X-Webhook-Id": "run-1",
    }
    assert await deliver(url, body, again) == 409
    unsigned = await deliver(url, body, {"X-Webhook-Id": "run-2"})
    assert unsigned == 401
    await asyncio.sleep(1.0)
    await deployment.stop_all()
    assert [(r.chat_id, r.text) for r in telegram.sent] == [(CHAT, reply.text)]
    log = deployment.log_of(gateway)
    assert "webhook ci: delivery" in log and "queued" in log
    assert SECRET not in log and all(SECRET not in deployment.log_of(w) for w in workers)
    assert not re.search(r"run-1", log)  # a delivery id is the sender's: only its digest is logged
    assert await client.zcard("bots:queue") == 0
