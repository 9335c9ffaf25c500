"""A message that joined the answer to the one before it, before a word of that answer was shown, is answered after
it when the batch is run again: the real python-telegram-bot client against the fake Bot API, a real redis-server,
the gateway and a worker's drainer in this process. The model call started again with both (``core.busy``) is the
same step in the reply ledger as the call it replaced (``core.fleet.reply_ledger.ReplayModel``). Numbered as the
next step, it lined up with the second part of the batch run again in its parts: the first part, finding nothing
at its step, was answered in a new message, and the second edited the message begun for both into its own answer,
posted before it (``primary-lost-two-replicas`` of ``tests/fleet/test_netfaults.py`` answered chats out of order)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from core import ScriptedModel, create_agent
from core.fleet import Drainer, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore, ReplayModel
from core.fleet.scope import Lease, RunScope
from core.models.base import ModelRequest
from extensions.telegram import telegram_extension
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import queue_config, wait_until
from .server import RedisServer
from .test_e2e_idempotent import echo, front, telegram_settings

USER = 5001
CID = f"telegram:chat:{USER}"
K = f"bots:{{{CID}}}:"
LEASE = 3.0
"""The lease: ended by hand here (as ``tests/fleet/test_joined_redelivery.py`` does), never by time."""


class CutOff(ScriptedModel):
    """``echo: <the new messages>``. Its first call opens the reply, shows nothing and waits until it is cancelled
    (a message joining now starts it again); its second writes the answer's first words and never ends (the worker
    dies while it is shown)."""

    def __init__(self) -> None:
        super().__init__(echo("telegram:message"))
        self.calls = 0
        self.opened, self.shown = asyncio.Event(), asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.calls += 1
        if self.calls == 1:
            yield '<response><output type="telegram:message">'
            self.opened.set()
            await asyncio.Event().wait()
        if self.calls == 2:
            text = echo("telegram:message")(request)
            yield text[: text.index(" |")]  # "echo: one"
            self.shown.set()
            await asyncio.Event().wait()
        async for chunk in super().stream(request):
            yield chunk


async def _recorded(client: Any) -> bool:
    """The ledger holds the id of the message begun for the answer."""
    ledgers = await client.keys(K + "ledger:*")
    for key in ledgers:
        for name, value in (await client.hgetall(key)).items():
            if name.startswith("r") and json.loads(value)["ids"]:
                return True
    return False


async def test_a_message_that_joined_before_the_answer_was_shown_is_answered_after_it_when_the_batch_runs_again(
    redis_server: RedisServer, telegram: FakeTelegramServer, client: Any
) -> None:
    model = CutOff()
    backend = RedisBackend(queue_config(redis_server, busy="collect", lease_seconds=LEASE))
    settings = telegram_settings(telegram, stream_replies=True, stream_interval=0.05)
    agent = create_agent(
        model=ReplayModel(model),
        extensions=[telegram_extension(settings, listen=False)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    drainer, worker = Drainer(agent, backend), QueueWorker(agent, backend)

    async def sched() -> str:
        job: str = await client.hget(K + "meta", "sched")
        return job

    async with front(redis_server, telegram_extension(telegram_settings(telegram))), agent:
        telegram.user_says("one", user_id=USER)
        await wait_until(lambda: client.llen(K + "inbox"), what="one stored")
        job = await sched()
        await client.zrem("bots:queue", job)  # (as a worker's BZMPOP takes it)
        lease = Lease(cid=CID, token="", job_id=job, owner=f"{job}#test", seconds=LEASE)
        result = await drainer.claim(lease)
        assert result[0] == "batch", result
        scope = RunScope(
            backend=backend,
            keys=backend.keys.context(CID),
            lease=lease,
            batch_id=str(result[2]),
            attempt=int(result[3]),
            take=str(result[9]),
        )
        running = asyncio.create_task(drainer._run(scope, json.loads(result[4])))
        await asyncio.wait_for(model.opened.wait(), 10)  # the answer to "one" begun, nothing of it shown
        telegram.user_says("two", user_id=USER)
        await wait_until(lambda: client.llen(K + "inbox"), what="two stored")
        drainer.arrived(CID)  # (what the arrivals channel tells the worker)
        await asyncio.wait_for(model.shown.wait(), 10)  # the call started again with both; "echo: one" shown ...
        await wait_until(lambda: _recorded(client), what="the message begun recorded")
        running.cancel()  # ... and the worker dies there
        with contextlib.suppress(asyncio.CancelledError):
            await running
        agent.cancel_run(CID)
        await scope.close(acknowledged=False)
        assert await client.hget(K + "batch", "cuts") == "1"
        assert [m.text for m in telegram.sent] == ["echo: one"]

        await client.delete(K + "lease")  # (what time does to a dead worker's lease)
        await client.zadd("bots:active", {CID: 0})
        assert await worker.sweep_once() == 1
        assert await drainer.drain({"job_id": await sched()}, CID) == "released"
        replies = sorted(telegram.sent, key=lambda m: m.message_id)
        assert [m.text for m in replies] == ["echo: one", "echo: two"]  # (before: "echo: two", then "echo: one")
        assert drainer.stats.redelivered == 1
    await backend.close()
