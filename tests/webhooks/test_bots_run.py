"""``bots run`` (one process, no Redis) with ``WEBHOOKS_ENABLED``: a signed event posted to its HTTP endpoint is
answered in the Telegram chat its source names (the fake Bot API), once although it is sent twice; the secret is
shown masked by ``bots config`` and never logged."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bots.models import SCRIPTED_REPLY
from core.webhooks import sign
from tests.bots_fleet import Process, env_for
from tests.fakes.telegram_server import FakeTelegramServer

SECRET = "the-ci-webhook-secret-0123"
CHAT = -100321


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    fake = FakeTelegramServer()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


def settings(telegram: FakeTelegramServer) -> dict[str, str]:
    source = {"name": "ci", "secret": SECRET, "channel": f"telegram:{CHAT}", "prompt": "Tell the chat what failed."}
    return {
        "TELEGRAM_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.api_url,
        "TELEGRAM_POLL_TIMEOUT": "1",
        "WEBHOOKS_ENABLED": "true",
        "WEBHOOKS_SOURCES": json.dumps([source]),
        "LOG_LEVEL": "INFO",
    }


async def test_bots_run_answers_a_signed_webhook_in_telegram_once(
    tmp_path: Path, processes: list[Process], telegram: FakeTelegramServer
) -> None:
    telegram.chat(CHAT, kind="supergroup", title="CI")
    bot = Process("run", env_for(tmp_path, **settings(telegram)), tmp_path)
    processes.append(bot)
    await bot.start()
    await bot.wait_for("ready with telegram")
    body = json.dumps({"pipeline": "main", "status": "failed"}).encode()
    ts = int(time.time())
    headers = {"X-Webhook-Timestamp": str(ts), "X-Webhook-Signature": sign(SECRET, body, ts), "X-Webhook-Id": "7"}
    url = f"http://127.0.0.1:{bot.port}/hooks/ci"
    statuses = []
    async with aiohttp.ClientSession() as http:
        for _ in range(2):
            async with http.post(url, data=body, headers=headers) as response:
                statuses.append(response.status)
        async with http.post(url, data=body, headers={}) as response:
            statuses.append(response.status)
    assert statuses == [202, 409, 401]
    [reply] = await telegram.wait_replies(1, timeout=30)
    assert reply.chat_id == CHAT and reply.text == SCRIPTED_REPLY
    assert await bot.terminate() == 0
    assert len(telegram.sent) == 1
    assert not any(SECRET in json.dumps(line) for line in bot.lines)


def test_bots_config_shows_the_sources_with_their_secret_masked(tmp_path: Path) -> None:
    env = env_for(
        tmp_path,
        WEBHOOKS_ENABLED="true",
        WEBHOOKS_SOURCES=json.dumps(
            [{"name": "ci", "secret": SECRET, "channel": "telegram:-100321", "prompt": "Say it."}]
        ),
    )
    done = subprocess.run(
        [sys.executable, "-m", "bots.cli", "config"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert "WEBHOOKS_SOURCES" in done.stdout and '"secret":"**********"' in done.stdout
    assert SECRET not in done.stdout + done.stderr
    bad = dict(env, WEBHOOKS_SOURCES=json.dumps([{"name": "ci", "secret": "short", "channel": "x", "prompt": "p"}]))
    failed = subprocess.run(
        [sys.executable, "-m", "bots.cli", "config"], env=bad, cwd=tmp_path, capture_output=True, text=True
    )
    assert failed.returncode != 0 and "16 characters" in failed.stdout + failed.stderr
    assert "short" not in (failed.stdout + failed.stderr).replace("shorter", "")
