"""The shutdown bound of ``bots`` processes: answers in progress get BOT_STOP_TIMEOUT, then are cancelled;
a stop that hangs is abandoned at the bound; a second signal abandons it at once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bots.cli import _bounded, _Stop
from core import ScriptedModel
from extensions.terminal import cli_session

from .support import REPLY, make_agent


async def test_a_stop_that_ends_is_clean() -> None:
    async def stops() -> None:
        await asyncio.sleep(0)

    assert await _bounded(stops(), bound=30.0, stop=_Stop(), what="test") is True


async def test_a_stop_that_hangs_is_abandoned_at_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    never = asyncio.Event()
    assert await _bounded(never.wait(), bound=0.05, stop=_Stop(), what="the bot") is False
    assert "the bot did not stop within" in caplog.text
    assert "its stop timeout" in caplog.text


async def test_a_second_signal_abandons_the_stop_at_once() -> None:
    stop = _Stop()
    never = asyncio.Event()
    stop.first.set()
    stop.again.set()
    assert await _bounded(never.wait(), bound=3600.0, stop=stop, what="test") is False


async def test_an_answer_in_progress_is_cancelled_after_the_stop_timeout(caplog: pytest.LogCaptureFixture) -> None:
    started = asyncio.Event()

    def slow(request: object) -> str:
        started.set()
        return REPLY

    agent = make_agent(ScriptedModel(slow, first_delay=3600.0), stop_timeout=0.05)
    await agent.start()
    sending = asyncio.create_task(agent.send(cli_session, "busy", {"type": "cli:message", "data": "hi"}))
    await started.wait()
    caplog.set_level(logging.ERROR)
    assert await _bounded(agent.stop(), bound=agent.stop_timeout + 5.0, stop=_Stop(), what="the bot") is True
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert "did not stop" not in caplog.text
