"""``bots run`` as a real process against the fake platforms: a platform that fails for good while the bot
runs (Discord closing the gateway with 4014, a Telegram token revoked) stops it with one clear line naming
the fix and a non-zero exit code, instead of leaving it running deaf."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.cli import SHUTDOWN_GRACE
from bots.settings import Settings
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer

GROUPS = tuple(f"{name.upper()}_" for name in Settings.model_fields)
STOP_TIMEOUT = 5.0
DEADLINE = 60.0
"""Seconds the test waits for an event before it gives up (a bound, not a timing assertion)."""


class Bot:
    """``bots run`` as an asyncio subprocess (the fake platform lives in the test's event loop)."""

    def __init__(self, tmp_path: Path, **settings: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith(GROUPS)}
        env.update(
            LLM_PROVIDER="scripted",
            BOT_DATA_DIR=str(tmp_path / "data"),
            BOT_STOP_TIMEOUT=str(STOP_TIMEOUT),
            PYTHONUNBUFFERED="1",
            **settings,
        )
        self.env, self.cwd = env, tmp_path
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr = ""

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bots.cli",
            "run",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
        )

    async def wait_for(self, text: str) -> None:
        """Read stderr until ``text`` shows (an event, not a sleep)."""
        assert self.proc is not None and self.proc.stderr is not None
        async with asyncio.timeout(DEADLINE):
            while text not in self.stderr:
                line = await self.proc.stderr.readline()
                if not line:
                    raise AssertionError(f"bots run ended without logging {text!r}:\n{self.stderr}")
                self.stderr += line.decode(errors="replace")

    async def exit_code(self) -> int:
        """Wait for the process to end on its own (bounded by its shutdown bound); its exit code."""
        assert self.proc is not None and self.proc.stderr is not None
        async with asyncio.timeout(STOP_TIMEOUT + SHUTDOWN_GRACE + DEADLINE):
            self.stderr += (await self.proc.stderr.read()).decode(errors="replace")
            return await self.proc.wait()


@pytest.fixture
async def bots(tmp_path: Path) -> AsyncIterator[list[Bot]]:
    started: list[Bot] = []
    yield started
    for bot in started:
        if bot.proc is not None and bot.proc.returncode is None:
            bot.proc.kill()
            await bot.proc.wait()


async def test_discord_4014_after_ready_stops_bots_run_with_the_fix(tmp_path: Path, bots: list[Bot]) -> None:
    fake = FakeDiscord()
    await fake.start()
    try:
        bot = Bot(
            tmp_path,
            DISCORD_TOKEN="fake-token",
            DISCORD_API_URL=fake.api_url,
            DISCORD_GATEWAY_URL=fake.gateway_url,
            DISCORD_GUILD_READY_TIMEOUT="0.05",
        )
        bots.append(bot)
        await bot.start()
        await bot.wait_for("ready with discord")
        await fake.drop_gateway(code=4014)  # the intent was turned off in the developer portal
        code = await bot.exit_code()
    finally:
        await fake.close()
    assert code == 2, bot.stderr  # a setting to fix, like any other bad setting
    last = bot.stderr.strip().splitlines()[-1]
    assert last.startswith("bots: Discord refused the gateway connection with close code 4014")
    assert "'Message Content Intent'" in last and "https://discord.com/developers/applications" in last
    assert "Traceback" not in bot.stderr
    assert "fake-token" not in bot.stderr
    assert "stopped" in bot.stderr  # the agent was stopped cleanly before the exit


async def test_a_telegram_token_revoked_while_running_stops_bots_run(tmp_path: Path, bots: list[Bot]) -> None:
    fake = FakeTelegramServer()
    await fake.start()
    token = fake.token
    try:
        bot = Bot(tmp_path, TELEGRAM_TOKEN=token, TELEGRAM_API_URL=fake.api_url, TELEGRAM_POLL_TIMEOUT="10")
        bots.append(bot)
        await bot.start()
        await bot.wait_for("ready with telegram")
        fake.token = "123456:a-new-token-from-botfather"  # the old one was revoked
        fake.user_says("hello?")  # ends the long poll in progress; the next request gets 401
        code = await bot.exit_code()
    finally:
        await fake.close()
    assert code == 2, bot.stderr
    last = bot.stderr.strip().splitlines()[-1]
    assert last.startswith("bots: Telegram stopped accepting TELEGRAM_TOKEN (401 Unauthorized")
    assert "Traceback" not in bot.stderr
    assert token not in bot.stderr and "TEST-token" not in bot.stderr
