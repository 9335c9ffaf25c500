"""One deployment's ``bots`` processes (``bots gateway``, ``bots worker``) for the end-to-end tests: the
environment they run with and ``Processes``, which starts them and stops them at the end."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fork_server import ForkedProcess, spawn_async

from .logs import assert_nothing_left_behind
from .server import RedisServer

__all__ = ("Processes", "deployment_env")

CLEARED = ("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_", "BOT_")
"""Settings left out of this process's environment: none leaks in from the shell that runs the tests."""


def deployment_env(
    redis_server: RedisServer,
    folder: Path,
    *,
    telegram: FakeTelegramServer | None = None,
    discord: FakeDiscord | None = None,
    **settings: str,
) -> dict[str, str]:
    """This process's environment without the bot's settings (``CLEARED``), then what every deployment of a
    test has: ``REDIS_URL`` of ``redis_server``, ``BOT_DATA_DIR`` in ``folder``, ``LOG_LEVEL=INFO`` (the tests
    wait for log lines), ``HTTP_PORT=0`` (each process an endpoint port of its own) and ``BOT_QUIET_MS=0`` (no
    quiet window: no test of a deployment measures bursts); the address of the fake ``telegram``
    (``TELEGRAM_TOKEN``, ``TELEGRAM_API_URL``) and of the fake ``discord`` (``DISCORD_TOKEN``, ``DISCORD_API_URL``,
    ``DISCORD_GATEWAY_URL``, no wait for its servers, no command sync) when given; last ``settings``, the test's
    own, which win."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    env.update(
        REDIS_URL=redis_server.url, BOT_DATA_DIR=str(folder / "data"), LOG_LEVEL="INFO", HTTP_PORT="0", BOT_QUIET_MS="0"
    )
    if telegram is not None:
        env.update(TELEGRAM_TOKEN=telegram.token, TELEGRAM_API_URL=telegram.api_url)
    if discord is not None:
        env.update(
            DISCORD_TOKEN="fake-token",
            DISCORD_API_URL=discord.api_url,
            DISCORD_GATEWAY_URL=discord.gateway_url,
            DISCORD_GUILD_READY_TIMEOUT="0.05",
            DISCORD_SYNC_COMMANDS="false",
        )
    env.update(settings)
    return env


class Processes:
    """``bots <role>`` processes with the environment of one deployment, each logging into ``folder``;
    ``async with`` stops those still running at the end."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.procs: list[tuple[str, asyncio.subprocess.Process | ForkedProcess]] = []

    async def __aenter__(self) -> Processes:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_all()

    async def start(self, role: str) -> asyncio.subprocess.Process | ForkedProcess:
        """``python -m bots.cli ROLE``, forked from the fork server (tests/fork_server.py)."""
        log = self.folder / f"{role}-{len(self.procs)}.log"
        with log.open("wb") as out:
            proc = await spawn_async("bots.cli", role, cwd=self.folder, env=self.env, stdout=out, stderr=out)
        self.procs.append((str(log), proc))
        return proc

    def log_of(self, proc: asyncio.subprocess.Process | ForkedProcess) -> str:
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
        assert_nothing_left_behind([Path(log) for log, _ in self.procs])
