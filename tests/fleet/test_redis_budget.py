"""What a message costs Redis, counted (not timed): ``bots gateway`` + two ``bots worker`` processes on a real
redis-server, the fake Bot API and the scripted model, 20 chats writing 5 messages each (round robin, sent at
once, stored while the workers are paused, so that each chat's messages make one batch whatever the machine's
speed; ``bench/capacity.py`` measures the shapes where timing decides). ``INFO commandstats`` after ``CONFIG RESETSTAT`` counts every command Redis ran (those inside scripts
included), ``MONITOR`` the commands clients sent (round trips; a ``WAIT`` pipelined after its script counts with
it). The budgets of issue 29: at most 4 round trips and 25 commands per answered message (what timers send
meanwhile, lease renewals, sweeps, heartbeats, idle pops, is counted apart: it grows with the time the messages
take, not with their number). And Redis keeps
nothing per message: the same chats writing as much again leave as many keys behind (dedupe and usage are per
conversation and per day, not per message or per model call)."""

from __future__ import annotations

import asyncio
import collections
import hashlib
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.fleet import scripts
from core.fleet.answer_book import ANSWER_TTL
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


_TIMER_SCRIPTS = {
    hashlib.sha1(script.encode()).hexdigest(): name
    for name, script in (
        ("renew", scripts.RENEW),
        ("overdue", scripts.OVERDUE),
        ("rescue", scripts.RESCUE),
        ("shard_renew", scripts.SHARD_RENEW),
        ("shard_take", scripts.SHARD_TAKE),
    )
}
"""The scripts run by timers, whatever the traffic: the workers' lease renewals (every ``lease_seconds / 3`` while
contexts run), the sweepers' look at the overdue contexts (every second) and their rescues, the gateway's shard
heartbeats and takes."""
_TIMER_COMMANDS = {"ZRANGEBYSCORE"}
"""Commands only timers send: the approvals' sweeper."""
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


class Monitor:
    """Counts what ``MONITOR`` shows: commands clients sent, and those run inside scripts (``lua``, shown right after
    the script's own line). Commands that timers send (``_TIMER_SCRIPTS``, ``_TIMER_COMMANDS``) are counted apart,
    with the commands inside them: they cost so much a second, not so much a message, and a slow machine runs more
    of them while the same messages are answered. So are the blocking pops that return nothing (an idle worker's
    pop every ``REDIS_POLL_DELAY`` seconds): at most as many pops return work as drain jobs enter the queue."""

    def __init__(self, port: int, queue: str) -> None:
        self.port = port
        self.queue = queue
        self.sent: collections.Counter[str] = collections.Counter()
        """Commands clients sent, timers' included."""
        self.round_trips = 0
        """Round trips, timers' included."""
        self.timer: collections.Counter[str] = collections.Counter()
        """Commands timers sent (by command, or script name)."""
        self.timer_inner = 0
        """Commands run inside the timers' scripts."""
        self.queued = 0
        """Drain jobs put on the queue (by scripts)."""
        self._in_timer_script = False
        self._last: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None

    @property
    def idle_pops(self) -> int:
        """Blocking pops that cannot have returned work (more pops than drain jobs queued)."""
        return max(0, self.sent["BZMPOP"] - self.queued)

    @property
    def timer_round_trips(self) -> int:
        return sum(self.timer.values()) + self.idle_pops

    @property
    def timer_commands(self) -> int:
        return sum(self.timer.values()) + self.timer_inner + self.idle_pops

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
            args = _ARG.findall(rest)
            if not args:
                continue
            command = args[0].upper()
            if who == "lua":
                if self._in_timer_script:
                    self.timer_inner += 1
                if command == "ZADD" and args[1:2] == [self.queue]:
                    self.queued += 1
                continue
            self.sent[command] += 1
            timer = _TIMER_SCRIPTS.get(args[1]) if command == "EVALSHA" and len(args) > 1 else None
            self._in_timer_script = timer is not None
            if command in _TIMER_COMMANDS:
                timer = command
            if timer is not None:
                self.timer[timer] += 1
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
    async with Monitor(redis_server.port, "bots:queue") as monitor:
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
    # what timers sent meanwhile costs so much a second, not so much a message (``Monitor``): left out, and shown
    timers = (monitor.timer.most_common(), monitor.timer_inner, monitor.idle_pops)
    commands = (sum(ran.values()) - monitor.timer_commands) / answered
    round_trips = (monitor.round_trips - monitor.sent["LLEN"] - monitor.timer_round_trips) / answered
    assert round_trips <= ROUND_TRIPS, (round_trips, monitor.sent.most_common(8), timers)
    assert commands <= COMMANDS, (commands, sorted(ran.items(), key=lambda kv: -kv[1])[:10], timers)
    # per batch (each chat's 5 messages, one ingest script each): claim + take, the reply stored with its intent, the
    # post recorded, the acknowledgement, and the pop off the queue at most (lease renewals and idle pops left out)
    scripts_run = monitor.sent["EVALSHA"] - sum(monitor.timer[name] for name in _TIMER_SCRIPTS.values())
    per_batch = (scripts_run - answered + monitor.sent["BZMPOP"] - monitor.idle_pops) / CHATS
    assert per_batch <= 5, (per_batch, monitor.sent.most_common(8), timers)

    # the post is recorded and the batch acknowledged after Telegram has the reply: the keys that live as long as a
    # batch (its ledger, the lease, the batch) may outlast the answers for a while
    await wait_until(lambda: _only_lasting_keys(client), timeout=30, what="the batches' keys gone")
    keys_before = await _lasting_count(client)
    await _traffic(telegram, users)  # as much again, in the same chats
    await wait_until(lambda: _only_lasting_keys(client), timeout=30, what="the batches' keys gone again")
    await wait_until(lambda: _lasting_count_is(client, keys_before), timeout=30, what=f"{keys_before} keys, as before")
    for key in await client.keys("bots:answer:*"):  # (one per answer posted, for the reactions to it: they expire)
        assert 0 < await client.ttl(key) <= ANSWER_TTL, key
    per_message = [k for k in await client.keys("*") if ":dd:" in k or "usage:charged:" in k or k.startswith("arq:")]
    assert per_message == []


_TRANSIENT = re.compile(r"^bots:\{[^}]*\}:(?:ledger:.*|lease|batch|inbox)$")
"""Keys of a batch being answered (and of messages waiting): gone once every batch is acknowledged."""


async def _only_lasting_keys(client: Any) -> bool:
    return not [key for key in await client.keys("*") if _TRANSIENT.match(key)] and not await client.zcard("bots:queue")


async def _lasting_count(client: Any) -> int:
    """Keys but those noting the bot's answers (``core.fleet.answer_book``: one per answer, kept ``ANSWER_TTL``)."""
    return len([key for key in await client.keys("*") if not key.startswith("bots:answer:")])


async def _lasting_count_is(client: Any, size: int) -> bool:
    return await _lasting_count(client) == size


async def _stored(client: Any, inboxes: list[str]) -> bool:
    async with client.pipeline(transaction=False) as pipe:
        for inbox in inboxes:
            pipe.llen(inbox)
        lengths: list[int] = await pipe.execute()
    return sum(lengths) == CHATS * MESSAGES
