"""What a message costs Redis, counted (not timed): ``bots gateway`` + two ``bots worker`` processes on a real
redis-server, the fake Bot API and the scripted model, 20 chats writing 5 messages each (round robin, sent at
once, stored while the workers are paused, so that each chat's messages make one batch whatever the machine's
speed; ``bench/capacity.py`` measures the shapes where timing decides). ``INFO commandstats`` after ``CONFIG RESETSTAT`` counts every command Redis ran (those inside scripts
included), ``MONITOR`` the commands clients sent (round trips; a ``WAIT`` pipelined after its script counts with
it). The budgets of issue 29: at most 4 round trips and 25 commands per answered message. And Redis keeps
nothing per message: the same chats writing as much again leave as many keys behind (dedupe and usage are per
conversation and per day, not per message or per model call)."""

from __future__ import annotations

import asyncio
import collections
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer

CHATS = 20
MESSAGES = 5
ROUND_TRIPS = 4.0
COMMANDS = 25.0


@pytest.fixture
async def deployment(
    redis_server: RedisServer, telegram: FakeTelegramServer, tmp_path: Path
) -> AsyncIterator[Processes]:
    env = deployment_env(redis_server, tmp_path, telegram=telegram, TELEGRAM_POLL_TIMEOUT="1", LLM_PROVIDER="scripted")
    async with Processes(tmp_path, env) as procs:
        yield procs


class Monitor:
    """Counts what ``MONITOR`` shows: commands clients sent, and those run inside scripts (``lua``)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent: collections.Counter[str] = collections.Counter()
        self.round_trips = 0
        self._last: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> Monitor:
        reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._writer.write(b"MONITOR\r\n")
        await self._writer.drain()
        assert (await reader.readline()).startswith(b"+OK")
        self._task = asyncio.get_running_loop().create_task(self._read(reader))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.sleep(0.2)
        assert self._task is not None and self._writer is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._writer.close()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            head, _, rest = line.decode(errors="replace").partition("] ")
            who = head.rsplit(" ", 1)[-1]
            if who == "lua" or '"' not in rest:
                continue
            command = rest.split('"', 2)[1].upper()
            self.sent[command] += 1
            previous, self._last[who] = self._last.get(who), command
            if not (command == "WAIT" and previous == "EVALSHA"):
                self.round_trips += 1


async def _answered(telegram: FakeTelegramServer, lasts: dict[int, int]) -> None:
    """Until each chat's last message has its answer (a chat's batches run in order)."""

    def done() -> bool:
        replied = {(m.chat_id, m.reply_to) for m in telegram.sent}
        return all((chat, last) in replied for chat, last in lasts.items())

    await telegram.wait_for(done, timeout=120)


def _say(telegram: FakeTelegramServer, users: range) -> dict[int, int]:
    """Each user writes ``MESSAGES`` messages, round robin; returns each chat's last message id."""
    lasts: dict[int, int] = {}
    for m in range(MESSAGES):
        for user in users:
            lasts[user] = telegram.user_says(f"message {m} of {user}", user_id=user)["message"]["message_id"]
    return lasts


async def _traffic(telegram: FakeTelegramServer, users: range) -> None:
    await _answered(telegram, _say(telegram, users))


async def test_a_message_costs_at_most_4_round_trips_and_25_commands_and_leaves_no_key_behind(
    deployment: Processes, telegram: FakeTelegramServer, client: Any, redis_server: RedisServer
) -> None:
    workers = [await deployment.start("worker") for _ in range(2)]
    await deployment.start("gateway")
    await telegram.wait_for(lambda: bool(telegram.calls_of("getUpdates")), timeout=60)
    await _traffic(telegram, range(900, 903))  # warm up: every process has run once
    users = range(1000, 1000 + CHATS)
    inboxes = [f"bots:{{telegram:chat:{user}}}:inbox" for user in users]
    await client.config_resetstat()
    async with Monitor(redis_server.port) as monitor:
        # the workers paused while the messages are stored, so that each chat's messages make one batch however
        # fast this machine runs the gateway and the workers (the batches would otherwise depend on timing)
        for worker in workers:
            worker.send_signal(signal.SIGSTOP)
        try:
            lasts = _say(telegram, users)
            await wait_until(lambda: _stored(client, inboxes), timeout=60, what="every message stored by the gateway")
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGCONT)
        await _answered(telegram, lasts)
    answered = CHATS * MESSAGES
    stats = await client.info("commandstats")
    ran = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    for own in ("info", "config|resetstat", "monitor", "llen"):
        ran.pop(own, None)  # (llen: this test's own look at the inboxes)
    commands = sum(ran.values()) / answered
    round_trips = (monitor.round_trips - monitor.sent["LLEN"]) / answered
    assert round_trips <= ROUND_TRIPS, (round_trips, monitor.sent.most_common(8))
    assert commands <= COMMANDS, (commands, sorted(ran.items(), key=lambda kv: -kv[1])[:10])
    # per batch (each chat's 5 messages, one ingest script each): claim + take, the reply stored with its intent, the
    # post recorded, the acknowledgement, and the pop off the queue at most
    per_batch = (monitor.sent["EVALSHA"] - answered + monitor.sent["BZMPOP"]) / CHATS
    assert per_batch <= 5, (per_batch, monitor.sent.most_common(8))

    keys_before = await client.dbsize()
    await _traffic(telegram, users)  # as much again, in the same chats
    await asyncio.sleep(0.5)
    assert await client.dbsize() == keys_before
    per_message = [k for k in await client.keys("*") if ":dd:" in k or "usage:charged:" in k or k.startswith("arq:")]
    assert per_message == []


async def _stored(client: Any, inboxes: list[str]) -> bool:
    async with client.pipeline(transaction=False) as pipe:
        for inbox in inboxes:
            pipe.llen(inbox)
        lengths: list[int] = await pipe.execute()
    return sum(lengths) == CHATS * MESSAGES
