"""End to end: ``bots gateway`` + two ``bots worker`` processes, the real python-telegram-bot client in
each, the fake Telegram Bot API on 127.0.0.1 and a real redis-server: users' messages are answered
through Redis, by the workers, each exactly once; a second gateway on the same token stands by and
takes over when the first dies."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .server import RedisServer

SCRIPTED = "Hello! I am up and running"


class Processes:
    """``bots <role>`` processes with the environment of one deployment."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.procs: list[tuple[str, asyncio.subprocess.Process]] = []

    async def start(self, role: str) -> asyncio.subprocess.Process:
        log = self.folder / f"{role}-{len(self.procs)}.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bots.cli", role, cwd=self.folder, env=self.env, stdout=out, stderr=out
            )
        self.procs.append((str(log), proc))
        return proc

    def log_of(self, proc: asyncio.subprocess.Process) -> str:
        return next(Path(log).read_text() for log, p in self.procs if p is proc)

    async def stop_all(self) -> None:
        for _, proc in self.procs:
            if proc.returncode is None:
                proc.terminate()
        for _, proc in self.procs:
            try:
                async with asyncio.timeout(30):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    fake = FakeTelegramServer()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
async def deployment(
    redis_server: RedisServer, telegram: FakeTelegramServer, tmp_path: Path
) -> AsyncIterator[Processes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_", "BOT_"))}
    env.update(
        REDIS_URL=redis_server.url,
        REDIS_LEASE_SECONDS="1",
        TELEGRAM_TOKEN=telegram.token,
        TELEGRAM_API_URL=telegram.api_url,
        TELEGRAM_POLL_TIMEOUT="1",
        LLM_PROVIDER="scripted",
        BOT_DATA_DIR=str(tmp_path / "data"),
        LOG_LEVEL="INFO",
        HTTP_PORT="0",
    )
    procs = Processes(tmp_path, env)
    try:
        yield procs
    finally:
        await procs.stop_all()
    assert telegram.unknown_calls == [], [c.method for c in telegram.unknown_calls]


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
