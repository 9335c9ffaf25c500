"""Fixtures of the queue tests: a real redis-server per test, worker processes, the probe bot, the fake
Telegram Bot API and the fake Discord."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core import Agent, ScriptedModel, create_agent
from core.fleet import QueueConfig, RedisBackend, RedisDispatcher, RedisMemoryStore
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fork_server import ForkedPopen, spawn_popen

from .logs import assert_nothing_left_behind
from .probe import ChatArgs, answer, chat, probe_extension
from .server import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "netfaults: the fleet through network faults on hosts of its own (network namespaces; root)"
    )


@pytest.fixture
def client(redis_client: Any) -> Any:
    """``redis_client`` (tests/bots_fleet.py: a client of the test's ``redis_server``) by its name here."""
    return redis_client


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    """A started fake Bot API; the test fails if a bot called a method the fake does not know."""
    async with FakeTelegramServer() as fake:
        yield fake
    assert fake.unknown_calls == [], [c.method for c in fake.unknown_calls]


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    """A started fake Discord; the test fails if a bot called a route the fake does not know."""
    async with FakeDiscord() as fake:
        yield fake
    assert fake.unhandled == [], fake.unhandled


def queue_config(server: RedisServer, **overrides: Any) -> QueueConfig:
    base: dict[str, Any] = {"url": server.url, "lease_seconds": 1.0, "retry_seconds": 15.0}
    base.update(overrides)
    return QueueConfig(**base)


@pytest.fixture
async def gateway(redis_server: RedisServer) -> AsyncIterator[Agent]:
    """An agent that only ingests (what ``bots gateway`` is): sends go to Redis."""
    backend = RedisBackend(queue_config(redis_server, inbox_cap=100_000))
    agent = create_agent(
        model=ScriptedModel(answer),
        extensions=[probe_extension(redis_server.url)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    async with agent:
        yield agent
    await backend.close()


async def send(agent: Agent, chat_key: str, text: str, *, dedupe: str | None = None) -> None:
    await agent.send(chat, ChatArgs(chat=chat_key), {"type": "probe:message", "data": text}, dedupe_key=dedupe)


class Workers:
    """Worker processes (``tests.fleet.worker_main``) started by a test and cleaned up after it."""

    def __init__(self, server: RedisServer, folder: Path) -> None:
        self.server = server
        self.folder = folder
        self.procs: list[subprocess.Popen[bytes] | ForkedPopen] = []

    def start(self, *extra: str, marks: Path | None = None) -> subprocess.Popen[bytes] | ForkedPopen:
        """``python -m tests.fleet.worker_main --url ... EXTRA``, forked from the fork server (tests/fork_server.py)."""
        args = ["--url", self.server.url, *extra]
        if marks is not None:
            args += ["--marks", str(marks)]
        log = (self.folder / f"worker-{len(self.procs)}.log").open("wb")
        proc = spawn_popen(
            "tests.fleet.worker_main", *args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ}
        )
        log.close()
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.folder.glob("worker-*.log")))

    def stop_all(self, *, timeout: float = 20.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGUSR1)  # the worker prints its tasks' stacks into its log
                time.sleep(0.5)
                p.kill()
                p.wait()


@pytest.fixture
def workers(redis_server: RedisServer, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(redis_server, tmp_path)
    try:
        yield w
    finally:
        w.stop_all()
    assert_nothing_left_behind(sorted(tmp_path.glob("worker-*.log")))


async def wait_until(predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` (sync or async) until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
