"""Fixtures for the Telegram tests: the fake Bot API server and agents wired to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from core import Agent, Extension, InMemoryStore, MemoryStore, Model, ScriptedModel, create_agent
from core.media import MediaReader
from extensions.chat.trust import TrustRules
from extensions.telegram import TelegramSettings, telegram_extension
from extensions.telegram.definitions import MESSAGE
from tests.agent_args import agent_args
from tests.fakes.telegram_server import FakeTelegramServer

StartBot = Callable[..., Awaitable[Agent]]


def answer(text: str) -> str:
    """What a model writes to answer ``text`` in a Telegram chat."""
    return f'<response><output type="{MESSAGE}">{text}</output></response>'


def scripted(*texts: str) -> ScriptedModel:
    """A model answering with ``texts`` in turn, then the last one forever."""
    return ScriptedModel([answer(t) for t in texts], repeat_last=True)


@pytest.fixture
async def server() -> AsyncIterator[FakeTelegramServer]:
    """A started fake Bot API; a test fails if the bot called a method the fake does not know."""
    fake = FakeTelegramServer()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()
    assert fake.unknown_calls == [], [c.method for c in fake.unknown_calls]


@pytest.fixture
async def start_bot(server: FakeTelegramServer) -> AsyncIterator[StartBot]:
    """``await start_bot(model, **settings)``: a started agent with the Telegram extension on the fake (and
    the ``extensions`` given)."""
    agents: list[Agent] = []

    async def start(
        model: Model | Sequence[str],
        *,
        memory: MemoryStore | None = None,
        listen: bool = True,
        stop_timeout: float = 10.0,
        extensions: Sequence[Extension] = (),
        agent_options: dict[str, Any] | None = None,
        trust: TrustRules | None = None,
        **overrides: Any,
    ) -> Agent:
        if not isinstance(model, Model):
            model = scripted(*model)
        values: dict[str, Any] = {"token": server.token, "api_url": server.api_url, "poll_timeout": 10}
        values.update(overrides)
        settings = TelegramSettings(**values)
        agent = create_agent(
            **agent_args(
                model=model,
                extensions=[telegram_extension(settings, listen=listen, trust=trust), *extensions],
                memory=memory if memory is not None else InMemoryStore(),
                stop_timeout=stop_timeout,
                **{"media": MediaReader(), **(agent_options or {})},  # a bot that reads attachments, as bots run's
            )
        )
        agents.append(agent)
        await agent.start()
        return agent

    try:
        yield start
    finally:
        for agent in agents:
            await agent.stop()


class RunWatcher:
    """Counts the agent's finished runs (memory saved), so a test can wait for one without sleeping."""

    def __init__(self, agent: Agent) -> None:
        self.finished = 0
        self._event = asyncio.Event()
        agent.observers.append(self._observe)

    def _observe(self, kind: str, context_id: str, value: float) -> None:
        if kind == "run_seconds":
            self.finished += 1
            self._event.set()

    async def wait(self, count: int, *, timeout: float = 10.0) -> None:
        """Return once ``count`` runs have finished."""
        async with asyncio.timeout(timeout):
            while self.finished < count:
                self._event.clear()
                await self._event.wait()
