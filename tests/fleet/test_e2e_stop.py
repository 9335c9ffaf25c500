"""Stop across the fleet, end to end (issue 37): ``bots gateway`` and two ``bots worker`` processes on a real
redis-server, the fake Bot API and a slow fake OpenAI-compatible model. /stop taken by the gateway stops the run on
the worker that holds the conversation: the model server sees its stream closed within the bound, the answer keeps
what was written with its mark, no later answer is written for it, and the next message is answered. In a group,
the gateway refuses a Stop by someone the answer is not for (issue 49)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from core.engine import STOP_MARK
from extensions.chat.i18n import say
from extensions.telegram.definitions import MESSAGE
from tests.bots_fleet import DEADLINE, Process, model_settings, start_fleet, stop_all
from tests.fakes.slow_model import SlowModelServer
from tests.fakes.telegram_server import FakeTelegramServer

from .server import RedisServer

STOP_WITHIN = 2.0
"""Seconds from the press to the model's stream closed on the worker: what the issue promises (a second), with a
second of slack for a loaded machine; the figures are bench/stop.py's."""


async def test_a_stop_on_the_gateway_stops_the_run_on_the_worker_that_holds_it(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    async with SlowModelServer(MESSAGE) as model:
        settings = model_settings(redis_server, telegram, model.url, TELEGRAM_STREAM_INTERVAL="0.2")
        gateway, workers = await start_fleet(tmp_path, settings, processes, workers=2)

        telegram.user_says("tell me a story")
        async with asyncio.timeout(DEADLINE):
            await model.writing.wait()
        await telegram.wait_for(lambda: any("Answer 1:" in m.text for m in telegram.sent), timeout=DEADLINE)
        pressed = time.monotonic()
        telegram.user_says("/stop")
        closed = await model.wait_closed(1, timeout=DEADLINE)
        assert closed - pressed < STOP_WITHIN, closed - pressed

        await telegram.wait_for(lambda: any(m.text == say("stop_done") for m in telegram.sent), timeout=DEADLINE)
        await telegram.wait_for(
            lambda: any(m.text.endswith(STOP_MARK.strip()) for m in telegram.sent), timeout=DEADLINE
        )
        await first_to_log(workers, "Stop pressed: its run is stopped")  # the worker that held it

        telegram.user_says("and now?")
        await telegram.wait_for(lambda: any(m.text == "Answer 2." for m in telegram.sent), timeout=DEADLINE)
        assert model.calls == 2  # the stopped answer was not started again by the other worker
        [story] = [m for m in telegram.sent if m.text.startswith("Answer 1:")]
        assert story.text.endswith(STOP_MARK.strip())
        await stop_all(gateway, *workers)


GROUP = -100500600


async def test_in_a_group_the_gateway_refuses_an_outsiders_stop_and_takes_an_admins(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    """Issue 49, point 6, in a fleet: a group member the answer is not for is told so and the worker's run goes on;
    an administrator of the group (getChatMember) stops it on the worker."""
    async with SlowModelServer(MESSAGE) as model:
        settings = model_settings(
            redis_server, telegram, model.url, TELEGRAM_STREAM_INTERVAL="0.2", TELEGRAM_REPLY_POLICY="always"
        )
        telegram.chat(GROUP, kind="supergroup")
        telegram.admins[GROUP] = {3003}
        gateway, workers = await start_fleet(tmp_path, settings, processes, workers=1)

        telegram.user_says("tell me a story", chat_id=GROUP, user_id=1001)
        async with asyncio.timeout(DEADLINE):
            await model.writing.wait()
        await telegram.wait_for(lambda: any("Answer 1:" in m.text for m in telegram.sent), timeout=DEADLINE)
        telegram.user_says("/stop", chat_id=GROUP, user_id=2002, first_name="Bo", username="bo")
        refused = say("stop_not_yours")
        await telegram.wait_for(lambda: any(m.text == refused for m in telegram.sent), timeout=DEADLINE)
        assert not model.closed  # the answer goes on

        telegram.user_says("/stop", chat_id=GROUP, user_id=3003, first_name="Cy", username="cy")
        await model.wait_closed(1, timeout=DEADLINE)
        await telegram.wait_for(lambda: any(m.text == say("stop_done") for m in telegram.sent), timeout=DEADLINE)
        await telegram.wait_for(
            lambda: any(m.text.startswith("Answer 1:") and m.text.endswith(STOP_MARK.strip()) for m in telegram.sent),
            timeout=DEADLINE,
        )
        await stop_all(gateway, *workers)


async def first_to_log(workers: list[Process], text: str) -> Process:
    """The first of ``workers`` to log ``text``."""
    waits = {asyncio.ensure_future(w.wait_for(text)): w for w in workers}
    done, pending = await asyncio.wait(waits, timeout=DEADLINE, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    assert done, f"no worker logged {text!r}"
    return waits[done.pop()]
