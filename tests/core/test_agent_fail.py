"""``Agent.fail`` / ``Agent.failed``: how a service reports an error it cannot recover from while running."""

from __future__ import annotations

import asyncio

import pytest

from core import ScriptedModel, create_agent
from core.errors import ConfigError, PlatformError


async def test_failed_returns_the_first_reported_error(caplog: pytest.LogCaptureFixture) -> None:
    agent = create_agent(model=ScriptedModel(["<response></response>"]))
    async with agent:
        waiter = asyncio.create_task(agent.failed())
        await asyncio.sleep(0)
        assert not waiter.done()
        first = ConfigError("DISCORD_TOKEN was reset")
        agent.fail(first)
        agent.fail(PlatformError("the gateway closed"))
        assert await waiter is first
        assert await agent.failed() is first  # also for a waiter that comes later
        assert agent.failure is first
        assert agent.running  # the host decides when to stop
    assert "after an earlier fatal error: the gateway closed" in caplog.text


async def test_no_failure_means_failed_keeps_waiting() -> None:
    agent = create_agent(model=ScriptedModel(["<response></response>"]))
    async with agent:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await agent.failed()
    assert agent.failure is None
