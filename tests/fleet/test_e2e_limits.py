"""Limits across queue workers: two worker processes (``python -m tests.fleet.test_e2e_limits``) share their
counters in a real redis-server; the real python-telegram-bot client posts through the fake Bot API; the listener
runs in this process. One worker is killed with ``kill -9`` while the model answers a message (its message already
counted): the survivor answers it (the message keeps its place in the window even when later ones were counted
meanwhile) without counting it twice, and the limit still holds exactly, with one notice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.testing import updates_of
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .server import RedisServer
from .test_e2e_idempotent import front, telegram_settings
from .test_e2e_idempotent_kill import Workers
from .worker_process import kill, run, serve, stop_every, worker_arguments

_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)
LEASE = 1.0
PER_MINUTE = 3


class Counting:
    """Answers ``ok: <message>`` and reports 100 tokens read, 10 written. The first time it is asked about
    ``hang`` it stops in the middle (the worker is killed there); ``marks`` records every call."""

    name = "counting"
    model = ""
    vision = False

    def __init__(self, marks: Path) -> None:
        self.marks = marks
        self.last_usage: Any = None

    async def stream(self, request: Any) -> AsyncIterator[str]:
        from core import ModelUsage

        found = updates_of(request.prompt)
        text = " | ".join(_INPUT.findall(found) if found else [])
        earlier = self.marks.read_text() if self.marks.exists() else ""
        with self.marks.open("a") as f:
            f.write(json.dumps({"pid": os.getpid(), "text": text}) + "\n")
        yield f'<response><output type="telegram:message">ok: {text}'
        if text == "hang" and '"hang"' not in earlier:
            await asyncio.sleep(3600)
        yield "</output></response>"
        self.last_usage = ModelUsage(input_tokens=100, output_tokens=10)


async def _work(args: argparse.Namespace) -> None:
    from core import LimitConfig, Limiter
    from core.fleet import QueueConfig, RedisBackend, RedisLimitStore, RedisUsage
    from extensions.telegram import TelegramSettings, telegram_extension

    backend = RedisBackend(QueueConfig(url=args.url, lease_seconds=LEASE, retry_seconds=30.0))
    await serve(
        backend,
        model=Counting(args.marks),
        extensions=[  # replies posted whole: what a killed worker showed of a streamed one is tested elsewhere
            telegram_extension(
                TelegramSettings(token=args.token, api_url=args.api_url, stream_replies=False), listen=False
            )
        ],
        usage=RedisUsage(backend),  # what the token limits read: shared by the workers, as in bots worker
        limiter=Limiter(  # a day's window: the test never straddles two
            LimitConfig(messages_per_minute=PER_MINUTE, message_window=86_400), RedisLimitStore(backend)
        ),
    )


def main() -> None:
    p = worker_arguments()
    p.add_argument("--marks", type=Path, required=True)
    run(_work, p, level="INFO")


class LimitWorkers(Workers):
    module = "tests.fleet.test_e2e_limits"

    def texts(self) -> list[str]:
        if not self.marks.exists():
            return []
        return [json.loads(line)["text"] for line in self.marks.read_text().splitlines()]

    def pid_of(self, text: str) -> int:
        return next(json.loads(x)["pid"] for x in self.marks.read_text().splitlines() if json.loads(x)["text"] == text)


async def _settled(client: Any) -> bool:
    return not await client.keys("bots:{*}:batch") and not await client.keys("bots:{*}:inbox")


def _refused(procs: LimitWorkers) -> bool:
    """Some worker logged that m4's author is over the limit (m4 was decided without the model)."""
    logs = "".join(p.read_text() for p in procs.folder.glob("worker-*.log"))
    return logs.count("over the messages limit") >= 2


@pytest.fixture
def workers() -> Iterator[list[LimitWorkers]]:
    made: list[LimitWorkers] = []
    yield made
    stop_every(made)


async def test_messages_per_minute_hold_across_two_workers_and_a_kill(
    redis_server: RedisServer, telegram: FakeTelegramServer, client: Any, tmp_path: Path, workers: list[LimitWorkers]
) -> None:
    from extensions.telegram import telegram_extension

    common = ["--url", redis_server.url, "--api-url", telegram.api_url, "--token", telegram.token]
    procs = LimitWorkers(tmp_path, *common)
    workers.append(procs)
    first, second = procs.start(), procs.start()
    chats = [2001, 2002, 2003, 2004, 2005]  # one user (7) writing to the bot in several group chats
    async with front(redis_server, telegram_extension(telegram_settings(telegram, reply_policy="always"))):
        telegram.user_says("hang", user_id=7, chat_id=chats[0], kind="group")
        await wait_until(lambda: "hang" in procs.texts(), timeout=30, what="the model asked")
        victim = first if procs.pid_of("hang") == first.pid else second
        kill(victim)
        procs.start()  # two workers again
        await telegram.wait_replies(1, timeout=30)  # the survivor answered the message the victim had counted
        for i, chat in enumerate(chats[1:], start=1):  # 2 more within the limit of 3, then 2 over it
            telegram.user_says(f"m{i}", user_id=7, chat_id=chat, kind="group")
            await telegram.wait_replies(min(i + 1, PER_MINUTE + 1), timeout=30)
            if i == len(chats) - 1:
                await wait_until(lambda: "m4" in procs.texts() or _refused(procs), timeout=30, what="m4 decided")
        telegram.user_says("from someone else", user_id=8, chat_id=chats[4], kind="group")
        await telegram.wait_replies(PER_MINUTE + 2, timeout=30)
        await asyncio.sleep(0.5)  # nothing more comes
    texts = [r.text for r in telegram.sent]
    assert sorted(t for t in texts if t.startswith("ok:")) == [
        "ok: from someone else",
        "ok: hang",
        "ok: m1",
        "ok: m2",
    ]
    notices = [t for t in texts if not t.startswith("ok:")]
    assert len(notices) == 1 and "at most 3 in 24 hours" in notices[0]  # m3 is told, m4 is not
    assert sorted(set(procs.texts())) == ["from someone else", "hang", "m1", "m2"]  # never m3 or m4
    # the killed worker's call was not charged, the survivor's once (a call is charged as its stream ends, just
    # after its reply went out: wait until every batch is acknowledged)
    await wait_until(lambda: _settled(client), timeout=30, what="every batch acknowledged")
    day = next(iter(await client.keys("bots:usage:*:user:telegram:7"))).split(":")[2]
    zero = {"cost": "0"}  # (a batch adds only what is not zero: the scripted model costs nothing)
    assert zero | await client.hgetall(f"bots:usage:{day}:user:telegram:7") == {"in": "300", "out": "30", "cost": "0"}
    chat = await client.hgetall(f"bots:usage:{day}:chat:telegram:chat:{chats[0]}")
    assert zero | chat == {"in": "100", "out": "10", "cost": "0"}


async def test_token_limits_read_the_shared_usage_counters_and_a_charge_counts_once(
    redis_server: RedisServer, client: Any
) -> None:
    from core import InputRef, LimitConfig, Limiter
    from core.fleet import RedisBackend, RedisLimitStore, RedisUsage
    from core.limits import LimitKind
    from core.usage import day_of

    from .conftest import queue_config

    one, two = RedisBackend(queue_config(redis_server)), RedisBackend(queue_config(redis_server))  # two workers
    store = RedisLimitStore(one)
    limiter = Limiter(LimitConfig(tokens_per_day_user=7, tokens_per_day_conversation=12), store)
    ref = InputRef.model_validate({"type": "telegram:message", "data": "hi", "params": {"user_id": "7"}})
    try:
        day = day_of()
        for _ in range(3):  # a batch run again after a crash charges the same id, on whichever worker
            await RedisUsage(two).add(
                day=day, keys=["user:telegram:7", "chat:c"], input_tokens=5, output_tokens=1, cost=0, charge="b1:1"
            )
        assert await limiter.check(ref, conversation="c", text="hi", usage=RedisUsage(one)) is None  # 6 < 7
        await RedisUsage(two).add(
            day=day, keys=["user:telegram:7", "chat:c"], input_tokens=1, output_tokens=0, cost=0, charge="b1:2"
        )
        refusal = await limiter.check(ref, conversation="c", text="hi", usage=RedisUsage(one))
        assert refusal is not None and refusal.kind == LimitKind.USER_TOKENS
        places = [await store.count_message(user="u", message_id=m, minute=1) for m in ("a", "b", "a", "c", "b")]
        assert places == [1, 2, 1, 3, 2]
        assert await store.notice_due(key="k", until_ms=2**41) and not await store.notice_due(key="k", until_ms=2**41)
        assert await client.keys("bots:limits:usage:*") == []  # the limits keep no token counters of their own
    finally:
        await one.close()
        await two.close()


if __name__ == "__main__":
    main()
