"""Fixtures of the conformance suite: ``driver`` runs each scenario once per platform (``drivers.DRIVERS``), and
``start_bot`` builds the bot as ``bots run`` does (``bots.app.build_agent`` from ``Settings``, the platform's real
client inside), pointed at the platform's fake."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bots.app import build_agent
from bots.settings import Settings
from core import Agent, Model
from core.schedules import Clock

from .drivers import DEADLINE, DRIVERS, Driver

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

StartBot = Callable[..., Awaitable[Agent]]
"""``await start_bot(model, platform={...}, **settings_groups)``: a started bot on the driver's platform."""


@pytest.fixture(params=sorted(DRIVERS))
async def driver(request: pytest.FixtureRequest) -> AsyncIterator[Driver]:
    made = DRIVERS[request.param]()
    await made.start()
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def start_bot(driver: Driver, tmp_path: Path) -> AsyncIterator[StartBot]:
    started: list[Agent] = []

    async def start(
        model: Model, *, platform: dict[str, Any] | None = None, clock: Clock | None = None, **groups: Any
    ) -> Agent:
        bot = {"data_dir": str(tmp_path / "data"), **groups.pop("bot", {})}
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            bot=bot,
            llm={"provider": "scripted"},
            **{driver.name: driver.settings(**(platform or {}))},
            **groups,
        )
        agent = build_agent(settings, model=model, platforms=[driver.name], schedules_clock=clock)
        started.append(agent)
        await agent.start()
        await driver.bound(agent, tmp_path / "data")
        await driver.ready()
        return agent

    try:
        yield start
    finally:
        for agent in reversed(started):
            await agent.stop()


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout: float = DEADLINE) -> None:
    """Return once ``await check()`` holds, looked at every 20 ms (for state inside the bot, which no fake sees
    change); ``TimeoutError`` past ``timeout``."""
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)


def applies(driver: Driver, scenario: str) -> None:
    """Skip ``scenario`` on a platform that declared it not applicable, saying why."""
    reason = driver.not_applicable.get(scenario)
    if reason is not None:
        pytest.skip(f"{driver.name}: {scenario} is not applicable: {reason}")
