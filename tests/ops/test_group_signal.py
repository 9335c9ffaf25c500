"""A stop signal sent to the process and to its group at once (``timeout``, ``kill -- -PGID``: ``make run`` puts the
bot in make's group, so ``timeout 60 make run`` delivers SIGTERM twice within milliseconds) is one stop: the answer
being written still finishes. Taken as the second signal of a person pressing Ctrl-C twice, it stopped the bot at
once, its answer cut, and logged that it "did not stop within 15s" the moment it was asked to."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from bots.cli import SAME_SIGNAL, _Stop
from tests.bots_fleet import Process, env_for
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

ANSWER = ('<response><output type="telegram:message">', "Finished", " after all.", "</output></response>")


async def test_the_same_signal_twice_at_once_is_one_stop_and_a_later_one_is_a_second() -> None:
    stop = _Stop()
    stop._on_signal(signal.SIGTERM)
    stop._on_signal(signal.SIGTERM)  # the group's copy
    assert stop.first.is_set() and not stop.again.is_set()
    stop._on_signal(signal.SIGINT)  # another signal is a second one at once
    assert stop.again.is_set()

    later = _Stop()
    later._on_signal(signal.SIGINT)
    later._first_at -= SAME_SIGNAL + 0.1  # (a person's second Ctrl-C comes later than this)
    later._on_signal(signal.SIGINT)
    assert later.again.is_set()


@pytest.fixture
async def telegram() -> FakeTelegramServer:
    async with FakeTelegramServer() as server:
        yield server  # type: ignore[misc]


async def test_bots_run_signalled_with_its_group_finishes_the_answer_being_written(
    tmp_path: Path, telegram: FakeTelegramServer
) -> None:
    async with FakeOpenAIServer(default=Reply(chunks=ANSWER, delay=1.0)) as model:
        env = env_for(
            tmp_path,
            TELEGRAM_TOKEN=telegram.token,
            TELEGRAM_API_URL=telegram.api_url,
            LLM_PROVIDER="openai",
            LLM_BASE_URL=model.url,
            LLM_API_KEY="sk-test",
            LLM_MODEL="slow-model",
            WEB_PORT="0",
        )
        bot = Process("run", env, tmp_path)
        await bot.start()
        try:
            await bot.wait_for("ready with")
            telegram.user_says("hello")
            while not model.requests:
                await asyncio.sleep(0.02)
            assert bot.proc is not None and bot.proc.stderr is not None
            bot.proc.send_signal(signal.SIGTERM)  # as timeout(1) does: the child, then its group (a few ms apart
            await asyncio.sleep(0.05)  # there; sent at once, the kernel may merge the two and the test proves nothing)
            bot.proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(60):
                async for raw in bot.proc.stderr:
                    decoded = raw.decode(errors="replace").strip()
                    bot.lines.append(json.loads(decoded) if decoded.startswith("{") else {"message": decoded})
                code = await bot.proc.wait()
        finally:
            if bot.proc is not None and bot.proc.returncode is None:
                bot.proc.kill()
    messages = [line.get("message", "") for line in bot.lines]
    assert code == 0, messages[-5:]
    assert [m.text for m in telegram.sent] == ["Finished after all."]
    assert not any("stopping now" in m or "did not stop" in m for m in messages), messages
