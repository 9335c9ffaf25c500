"""Fixtures: a fake Discord on 127.0.0.1 with a server, a channel and some people, and a bot factory that
starts a real agent with the Discord extension logged into it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

import core
from core.media import MediaReader
from extensions.chat.trust import TrustRules
from extensions.discord import DiscordSettings, discord_extension, get_runtime
from extensions.discord.runtime import DiscordRuntime
from tests.agent_args import agent_args
from tests.fakes.discord_server import FakeDiscord, Json

TOKEN = "fake-token"


def say(text: str) -> str:
    """A model answer that posts ``text`` as the Discord reply."""
    return f'<response><output type="discord:message">{text}</output></response>'


@dataclasses.dataclass(kw_only=True)
class World:
    """The fake platform and what lives in it."""

    fake: FakeDiscord
    guild: int
    general: int
    alice: Json
    bob: Json
    other_bot: Json
    dm: int
    """The DM channel between alice and the bot."""


@pytest.fixture
async def world() -> AsyncIterator[World]:
    fake = FakeDiscord()
    guild = fake.guild()
    general = fake.text_channel(guild, "general")
    alice = fake.user("alice")
    w = World(
        fake=fake,
        guild=guild,
        general=general,
        alice=alice,
        bob=fake.user("bob"),
        other_bot=fake.user("otherbot", bot=True),
        dm=fake.dm_channel(alice),
    )
    await fake.start()
    yield w
    await fake.close()
    assert fake.unhandled == [], f"the fake was asked for things it does not implement: {fake.unhandled}"


def settings_for(fake: FakeDiscord, **overrides: Any) -> DiscordSettings:
    """Settings that point discord.py at the fake."""
    values: dict[str, Any] = {
        "token": TOKEN,
        "api_url": fake.api_url,
        "gateway_url": fake.gateway_url,
        "guild_ready_timeout": 0.05,
        "connect_timeout": 10.0,
        "request_timeout": 10.0,
    }
    values.update(overrides)
    return DiscordSettings(**values)


StartBot = Callable[..., Awaitable[core.Agent]]


@pytest.fixture
async def start_bot(world: World) -> AsyncIterator[StartBot]:
    """``await start_bot(model, **settings)``: a started agent; stopped after the test."""
    agents: list[core.Agent] = []

    async def start(
        model: core.Model,
        *,
        listen: bool = True,
        agent_options: dict[str, Any] | None = None,
        extensions: Sequence[core.Extension] = (),
        trust: TrustRules | None = None,
        **overrides: Any,
    ) -> core.Agent:
        options: dict[str, Any] = {
            "memory": core.InMemoryStore(),
            "stop_timeout": 5.0,
            "media": MediaReader(),  # a bot that reads attachments, as bots run's
            **(agent_options or {}),
        }
        agent = core.create_agent(
            **agent_args(
                model=model,
                extensions=[
                    discord_extension(settings_for(world.fake, **overrides), listen=listen, trust=trust),
                    *extensions,
                ],
                **options,
            )
        )
        await agent.start()
        agents.append(agent)
        return agent

    yield start
    for agent in reversed(agents):
        await agent.stop()


def runtime_of(agent: core.Agent) -> DiscordRuntime:
    """The agent's Discord runtime, typed."""
    runtime = get_runtime(agent)
    assert isinstance(runtime, DiscordRuntime)
    return runtime


async def barrier(world: World) -> None:
    """Alice DMs the bot and waits for its answer. The gateway delivers events in order and the bot
    decides on each message before it looks at the next, so every message dispatched before this one
    has been decided once this returns. (Needs a model that answers the DM.)"""
    before = len(world.fake.posted_in(world.dm))
    await world.fake.say(world.dm, "barrier", author=world.alice)
    await world.fake.wait_posted(world.dm, before + 1)


def answers(text: str = "ok") -> core.ScriptedModel:
    """A model that answers every request with ``text``."""
    return core.ScriptedModel(lambda request: say(text))
