"""A real redis-server per test, and ``bots gateway`` / ``bots worker`` as processes on it: what the fleet tests
of several packages (ops, mcp, trust, approvals, schedules, telegram, fleet, tracing) share.

tests/conftest.py loads this module as a plugin: its fixtures (``redis_server``, ``redis_client``, ``telegram``,
``processes``, ``settings_env``) serve every test that names them and has none of its own by that name. It imports ``bots`` and
``redis`` only when used (importing ``bots.cli`` takes seconds; most tests never start a process).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer, free_port
from tests.fork_server import ForkedProcess, spawn_async

if TYPE_CHECKING:
    import aiohttp

__all__ = (
    "DEADLINE",
    "Process",
    "env_for",
    "model_settings",
    "processes",
    "redis_client",
    "redis_server",
    "setting_prefixes",
    "settings_env",
    "start_fleet",
    "stop_all",
    "telegram",
)

DEADLINE = 60.0
"""Seconds the test waits for an event before it gives up (a bound, not a timing assertion)."""


def setting_prefixes() -> tuple[str, ...]:
    """The prefixes of the bot's settings in the environment (``BOT_``, ``TELEGRAM_``, ...)."""
    from bots.settings import Settings

    return tuple(f"{name.upper()}_" for name in Settings.model_fields)


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No bot setting from the machine running the tests, and no ``.env`` but the test's own (the working folder
    is ``tmp_path``)."""
    prefixes = setting_prefixes()
    for var in list(os.environ):
        if var.upper().startswith(prefixes):
            monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A started redis-server (AOF, ``appendfsync always``) in ``tmp_path/redis``, killed after the test."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop(sig=signal.SIGKILL)


@pytest.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[Any]:
    """A client of ``redis_server`` that decodes what it reads."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    """A started fake Bot API."""
    async with FakeTelegramServer() as fake:
        yield fake


class Process:
    """``bots <command> [APP]`` as an asyncio subprocess (``python -m bots.cli``, forked from the fork server of
    tests/fork_server.py unless ``TESTS_FORK_SERVER=0``): its JSON log lines are read as they come."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path, *, app: str | None = None) -> None:
        self.command, self.env, self.cwd, self.app = command, env, cwd, app
        self.port = int(env["HTTP_PORT"])
        self.proc: asyncio.subprocess.Process | ForkedProcess | None = None
        self.lines: list[dict[str, Any]] = []

    async def start(self) -> None:
        self.proc = await spawn_async(  # python -m bots.cli ..., forked from the fork server (tests/fork_server.py)
            "bots.cli",
            self.command,
            *([self.app] if self.app is not None else []),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
        )

    async def wait_for(self, text: str) -> dict[str, Any]:
        """The first log line (seen before or from now on) whose message contains ``text``."""
        for line in self.lines:
            if text in line.get("message", ""):
                return line
        assert self.proc is not None and self.proc.stderr is not None
        async with asyncio.timeout(DEADLINE):
            while True:
                raw = await self.proc.stderr.readline()
                if not raw:
                    raise AssertionError(f"bots {self.command} ended without logging {text!r}: {self.lines}")
                decoded = raw.decode(errors="replace").strip()
                line = json.loads(decoded) if decoded.startswith("{") else {"message": decoded}
                self.lines.append(line)
                if text in line.get("message", ""):
                    return line

    async def get(self, http: aiohttp.ClientSession, path: str) -> tuple[int, str]:
        async with http.get(f"http://127.0.0.1:{self.port}{path}") as response:
            return response.status, await response.text()

    async def terminate(self) -> int:
        from bots.cli import stop_bound
        from bots.settings import Settings

        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        bound = stop_bound(Settings(_env_file=None), self.command)  # type: ignore[call-arg]
        async with asyncio.timeout(bound + DEADLINE):
            assert self.proc.stderr is not None
            async for raw in self.proc.stderr:
                decoded = raw.decode(errors="replace").strip()
                self.lines.append(json.loads(decoded) if decoded.startswith("{") else {"message": decoded})
            return await self.proc.wait()


@pytest.fixture
async def processes() -> AsyncIterator[list[Process]]:
    """The ``Process`` es a test started: those still running after it are killed."""
    started: list[Process] = []
    yield started
    for p in started:
        if p.proc is not None and p.proc.returncode is None:
            p.proc.kill()
            await p.proc.wait()


def env_for(tmp_path: Path, **settings: str) -> dict[str, str]:
    """This process's environment without the bot's settings, the defaults of a test process (scripted model,
    JSON logs, data in ``tmp_path``, short stop bounds, an endpoint port of its own), then ``settings``."""
    prefixes = setting_prefixes()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(prefixes)}
    env.update(
        LLM_PROVIDER="scripted",
        LOG_FORMAT="json",
        BOT_DATA_DIR=str(tmp_path / "data"),
        BOT_STOP_TIMEOUT="5",
        REDIS_STOP_TIMEOUT="5",
        PYTHONUNBUFFERED="1",
        HTTP_PORT=str(free_port()),
        BOT_QUIET_MS="0",  # (no test of a process measures bursts: answered at once, the suite no slower)
    )
    env.update(settings)
    return env


def model_settings(
    redis_server: RedisServer, telegram: FakeTelegramServer, model_url: str, **more: str
) -> dict[str, str]:
    """The settings a gateway and its workers share: ``redis_server``, the fake Bot API, the model behind the
    fake OpenAI server at ``model_url``; then ``more``."""
    return {
        "REDIS_URL": redis_server.url,
        "TELEGRAM_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.api_url,
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": model_url,
        "LLM_API_KEY": "sk-test",
        "LLM_MODEL": "fake-model",
        **more,
    }


async def start_fleet(
    tmp_path: Path, settings: dict[str, str], processes: list[Process], *, workers: int = 1, app: str | None = None
) -> tuple[Process, list[Process]]:
    """``bots gateway [APP]`` and ``workers`` ``bots worker [APP]`` with ``settings`` (each with ``env_for``), added
    to ``processes`` and started; returns once the gateway listens and every worker is ready."""
    gateway = Process("gateway", env_for(tmp_path, **settings), tmp_path, app=app)
    started = [Process("worker", env_for(tmp_path, **settings), tmp_path, app=app) for _ in range(workers)]
    processes.extend([gateway, *started])
    for process in (gateway, *started):
        await process.start()
    await gateway.wait_for("gateway listening")
    for worker in started:
        await worker.wait_for("worker ready")
    return gateway, started


async def stop_all(*running: Process) -> None:
    """SIGTERM to each of ``running`` at once; fails unless every one exits with 0 (their last lines quoted)."""
    async with asyncio.TaskGroup() as tg:
        stopped = [tg.create_task(process.terminate()) for process in running]
    assert [task.result() for task in stopped] == [0] * len(running), [p.lines[-3:] for p in running]
