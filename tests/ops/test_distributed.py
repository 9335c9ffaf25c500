"""``bots gateway`` and ``bots worker`` as real processes, with a real redis-server and the fake Telegram
Bot API: a message goes through the queue and is answered, each process serves its endpoints, the reply's
log line in the worker carries the id of the incoming update, and SIGTERM stops both cleanly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bots.cli import stop_bound
from bots.models import SCRIPTED_REPLY
from bots.settings import Settings
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer, free_port

GROUPS = tuple(f"{name.upper()}_" for name in Settings.model_fields)
DEADLINE = 60.0
"""Seconds the test waits for an event before it gives up (a bound, not a timing assertion)."""


class Process:
    """``bots <command>`` as an asyncio subprocess: its JSON log lines are read as they come."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path) -> None:
        self.command, self.env, self.cwd = command, env, cwd
        self.port = int(env["HTTP_PORT"])
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[dict[str, Any]] = []

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bots.cli",
            self.command,
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
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer() as fake:
        yield fake


@pytest.fixture
def redis_server(tmp_path: Path) -> Any:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop(sig=signal.SIGKILL)


@pytest.fixture
async def processes() -> AsyncIterator[list[Process]]:
    started: list[Process] = []
    yield started
    for p in started:
        if p.proc is not None and p.proc.returncode is None:
            p.proc.kill()
            await p.proc.wait()


def env_for(tmp_path: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(GROUPS)}
    env.update(
        LLM_PROVIDER="scripted",
        LOG_FORMAT="json",
        BOT_DATA_DIR=str(tmp_path / "data"),
        BOT_STOP_TIMEOUT="5",
        REDIS_STOP_TIMEOUT="5",
        PYTHONUNBUFFERED="1",
        HTTP_PORT=str(free_port()),
    )
    env.update(settings)
    return env


async def test_gateway_and_worker_answer_through_redis_and_stop_on_sigterm(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    shared = {
        "REDIS_URL": redis_server.url,
        "TELEGRAM_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.api_url,
        "LOG_CONTENT": "true",
    }
    gateway = Process("gateway", env_for(tmp_path, **shared), tmp_path)
    worker = Process("worker", env_for(tmp_path, **shared), tmp_path)
    processes.extend([gateway, worker])
    await gateway.start()
    await worker.start()
    await gateway.wait_for("gateway listening")
    await worker.wait_for("worker ready")

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        for process, expected in ((gateway, {"agent", "redis"}), (worker, {"agent", "model", "redis"})):
            status, body = await process.get(http, "/readyz")
            assert status == 200, (process.command, body)
            checks = json.loads(body)["checks"]
            assert expected <= set(checks), checks
            assert all(v == "ok" for v in checks.values()), checks
            assert (await process.get(http, "/healthz"))[0] == 200

        update = telegram.user_says("hello through the queue")
        replies = await telegram.wait_replies(1, timeout=DEADLINE)
        assert replies[0].text == SCRIPTED_REPLY

        posted = await worker.wait_for("reply:")  # the worker's content log of the reply it posted
        assert posted["correlation_id"] == f"telegram:{update['update_id']}"

        # the run is counted when it ends (memory saved), a moment after the reply was posted; nothing in
        # another process can be awaited for that, so read /metrics until it shows (bounded)
        answered = 'bots_messages_answered_total{platform="telegram"} 1.0'
        async with asyncio.timeout(DEADLINE):
            while answered not in (metrics := (await worker.get(http, "/metrics"))[1]):
                await asyncio.sleep(0.02)
        assert 'bots_reply_seconds_count{platform="telegram"} 1.0' in metrics
        assert 'bots_model_seconds_count{model="scripted"} 1.0' in metrics

    for process in (gateway, worker):
        code = await process.terminate()
        assert code == 0, (process.command, process.lines[-5:])
    assert any("worker stopped" in line.get("message", "") for line in worker.lines)
    assert telegram.token not in json.dumps(gateway.lines + worker.lines)


async def test_a_worker_whose_redis_does_not_answer_stops_with_one_line(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots.cli",
        "worker",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=env_for(tmp_path, REDIS_URL=url),
    )
    async with asyncio.timeout(DEADLINE):
        _, err = await proc.communicate()
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert lines[0] == "bots: cannot start:"
    assert lines[1].startswith(f"  REDIS_URL={url!r} does not answer (")
    assert len(lines) == 2, lines
