"""Fixtures for the web chat and console tests: a bot with the web chat (and Telegram on the fake Bot API), its
console, and a headless Chromium."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bots.app import build_agent
from bots.console.server import Console, start_console, stop_console
from bots.ops import Ops
from bots.settings import Settings
from core import Agent, Model, ScriptedModel
from extensions.web import WebRuntime, web_runtime
from tests.fakes.telegram_server import FakeTelegramServer
from tests.ports import free_port as _free_port

from .browser import CHROMEDRIVER, CHROMIUM, Browser

SECRET = "console-secret-for-tests-0123456789"
WEB_SECRET = "web-secret-for-tests-0123456789abcdef0123"


def answer(text: str, output: str = "web:message") -> str:
    return f'<response><output type="{output}">{text}</output></response>'


@dataclass
class Bot:
    """A started bot: its agent, web chat and console."""

    agent: Agent
    web: WebRuntime
    console: Console
    settings: Settings

    @property
    def chat_url(self) -> str:
        assert self.web.address is not None
        return self.web.address

    @property
    def console_url(self) -> str:
        assert self.console.address is not None
        return self.console.address


StartBot = Callable[..., Awaitable[Bot]]


@pytest.fixture
async def start_bot(tmp_path: Path) -> AsyncIterator[StartBot]:
    """``await start_bot(model, platforms=[...], **settings)``: the bot as ``bots run`` builds it, web chat and
    console on free ports."""
    started: list[Bot] = []

    async def start(model: Model, *, platforms: list[str] | None = None, **values: Any) -> Bot:
        config: dict[str, Any] = {
            "bot": {"data_dir": tmp_path / "data", "quiet_ms": 0},  # (no burst measured: answered at once)
            "llm": {"provider": "scripted"},
            "web": {"port": _free_port(), "secret": WEB_SECRET},
            "console": {"secret": SECRET, "port": _free_port()},
        }
        for group, fields in values.items():
            config.setdefault(group, {}).update(fields)
        settings = Settings(_env_file=None, **config)  # type: ignore[call-arg]
        agent = build_agent(settings, platforms=platforms or ["web"], model=model)
        ops = Ops()
        ops.attach(agent)
        await agent.start()
        runtime = web_runtime(agent)
        assert runtime is not None
        console = await start_console(agent, settings, ops=ops)
        assert console is not None
        bot = Bot(agent=agent, web=runtime, console=console, settings=settings)
        started.append(bot)
        return bot

    try:
        yield start
    finally:
        for bot in started:
            await stop_console(bot.agent)
            await bot.agent.stop()


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    fake = FakeTelegramServer()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    """A headless Chromium; screenshots in ``<tmp>/screenshots`` (and ``docs/screenshots``)."""
    if not CHROMEDRIVER.exists() or not CHROMIUM.exists():
        pytest.skip(
            "needs Debian's chromium and chromium-driver (/usr/bin/chromedriver): apt-get install chromium chromium-driver"
        )
    window = Browser(tmp_path / "profile", tmp_path / "screenshots")
    try:
        yield window
    finally:
        window.quit()


def client() -> aiohttp.ClientSession:
    """An HTTP client keeping cookies of 127.0.0.1."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf(?:-token)?" (?:content|value)="([^"]+)"', html)
    assert found is not None, html[:500]
    return found.group(1)


async def login(session: aiohttp.ClientSession, bot: Bot) -> str:
    """Log in; returns the CSRF token of the session."""
    async with session.post(bot.console_url + "login", data={"secret": SECRET}) as response:
        assert response.status == 200 and response.url.path == "/fleet"
        return csrf_of(await response.text())


async def until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.02)


def scripted(text: str, **options: Any) -> ScriptedModel:
    """Answers ``text`` in whichever chat asks (web or Telegram)."""

    def reply(request: Any) -> str:
        where = "telegram:message" if "telegram:message" in request.output_types else "web:message"
        return answer(text, where)

    return ScriptedModel(reply, **options)
