"""Fairness under backpressure: one Telegram chat floods past ``REDIS_INBOX_CAP`` while ten others keep talking.

In one process: a real redis-server, the fake Bot API on 127.0.0.1, the Telegram listener in front of the
Redis queue (what ``bots gateway`` runs, long polling through the real python-telegram-bot client) and a
queue worker (what ``bots worker`` runs) with a model that answers in ``--model-ms``. Ten chats each send a
message every ``--every`` seconds; the reply time of each is measured from the moment the fake queues the
update until the reply that answers it is posted (a burst joins one run: its reply answers all of it).

Three runs: the ten chats alone; the same with an eleventh chat that sends ``--flood`` messages at once
(past the cap) with ``REDIS_INBOX_FULL=wait`` and then ``drop``. Prints p50/p90/max of the ten chats' reply
times, how many of their messages went unanswered, and what the flooded chat got. Asserts nothing.

Run: .venv/bin/python bench/inbox_fairness.py [--rounds 10] [--flood 300] [--cap 5]
Before/after: run it with ``PYTHONPATH`` pointing at an older checkout (``REDIS_INBOX_FULL`` is then ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[0] = str(
    Path(__file__).resolve().parent.parent
)  # the repository root (not bench/: its core.py would shadow the package)

import core  # noqa: E402
from core.fleet import QueueConfig, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore  # noqa: E402
from extensions.telegram import TelegramSettings, telegram_extension  # noqa: E402
from tests.fakes.telegram_server import FakeTelegramServer  # noqa: E402
from tests.fleet.server import RedisServer  # noqa: E402

FLOODED = 9000
TALKERS = range(9100, 9110)


class Slow(core.ScriptedModel):
    """Answers ``answered`` after ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(lambda request: '<response><output type="telegram:message">answered</output></response>')
        self.seconds = seconds

    async def stream(self, request: Any) -> Any:  # type: ignore[override]
        await asyncio.sleep(self.seconds)
        async for chunk in super().stream(request):
            yield chunk


def _config(url: str, cap: int, rule: str) -> QueueConfig:
    fields = {f.name for f in dataclasses.fields(QueueConfig)}
    extra = {"inbox_full": rule, "inbox_wait": 5.0} if "inbox_full" in fields else {}
    return QueueConfig(url=url, inbox_cap=cap, lease_seconds=5.0, **extra)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


async def _run(args: argparse.Namespace, redis_url: str, *, flood: int, rule: str) -> dict[str, Any]:
    fake = FakeTelegramServer()
    await fake.start()
    settings = TelegramSettings(
        token=fake.token, api_url=fake.api_url, poll_timeout=10, stream_replies=False, rate_limit=0
    )
    front_backend = RedisBackend(_config(redis_url, args.cap, rule))
    gateway = core.create_agent(
        model=core.ScriptedModel([]),
        extensions=[telegram_extension(settings)],
        dispatcher=RedisDispatcher(front_backend),
        memory=RedisMemoryStore(front_backend),
    )
    worker_backend = RedisBackend(_config(redis_url, args.cap, rule))
    worker_agent = core.create_agent(
        model=Slow(args.model_ms / 1000),
        extensions=[telegram_extension(settings, listen=False)],
        dispatcher=RedisDispatcher(worker_backend),
        memory=RedisMemoryStore(worker_backend),
    )
    worker = QueueWorker(worker_agent, worker_backend)
    asked: list[tuple[int, int, float]] = []
    try:
        await gateway.start()
        async with asyncio.TaskGroup() as tg:
            running = tg.create_task(worker.run(handle_signals=False))
            if flood:
                for i in range(flood):
                    fake.user_says(f"flood {i}", user_id=FLOODED)
            for r in range(args.rounds):
                for chat in TALKERS:
                    update = fake.user_says(f"hello {r}", user_id=chat)
                    asked.append((chat, update["message"]["message_id"], time.monotonic()))
                await asyncio.sleep(args.every)

            def answered() -> bool:
                last = {chat: max(m for c, m, _ in asked if c == chat) for chat in TALKERS}
                return all(any(s.chat_id == c and s.reply_to == m for s in fake.sent) for c, m in last.items())

            with contextlib.suppress(TimeoutError):
                await fake.wait_for(answered, timeout=60)
            worker.stop()
            await running
    finally:
        await gateway.stop()
        await front_backend.close()
        await worker_backend.close()
        await fake.close()
    times, lost = [], 0
    for chat, message_id, at in asked:
        replies = [s for s in fake.sent if s.chat_id == chat and s.reply_to is not None and s.reply_to >= message_id]
        if not replies:
            lost += 1
            continue
        times.append(min(s.posted_at for s in replies) - at)
    flooded = [s for s in fake.sent if s.chat_id == FLOODED]
    return {
        "times": times,
        "lost": lost,
        "asked": len(asked),
        "flood_answers": sum(1 for s in flooded if s.text == "answered"),
        "flood_notices": sum(1 for s in flooded if s.text != "answered"),
    }


def _line(title: str, result: dict[str, Any]) -> str:
    ms = [t * 1000 for t in result["times"]]
    text = (
        f"{title:<34} p50={_pct(ms, 0.5):7.1f} ms  p90={_pct(ms, 0.9):7.1f} ms  max={max(ms, default=0):7.1f} ms  "
        f"unanswered {result['lost']}/{result['asked']}"
    )
    if "flood" in title:
        text += f"; flooded chat: {result['flood_answers']} answers, {result['flood_notices']} busy notices"
    return text


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10, help="messages each of the ten chats sends")
    p.add_argument("--every", type=float, default=0.5, help="seconds between two rounds")
    p.add_argument("--flood", type=int, default=300, help="messages the flooding chat sends at once")
    p.add_argument("--cap", type=int, default=5, help="REDIS_INBOX_CAP")
    p.add_argument("--model-ms", type=float, default=50.0, help="how long the model takes to answer")
    args = p.parse_args()
    logging.basicConfig(level="ERROR")
    with tempfile.TemporaryDirectory() as folder:
        server = RedisServer(Path(folder) / "redis")
        server.start()
        try:
            quiet = await _run(args, server.url, flood=0, rule="wait")
            await _flush(server.url)
            wait = await _run(args, server.url, flood=args.flood, rule="wait")
            await _flush(server.url)
            drop = await _run(args, server.url, flood=args.flood, rule="drop")
        finally:
            server.stop()
    print(
        f"inbox fairness: 10 chats x {args.rounds} messages every {args.every}s, model {args.model_ms:.0f} ms, "
        f"REDIS_INBOX_CAP={args.cap}; flood: {args.flood} messages at once in an 11th chat"
    )
    print(_line("10 chats alone", quiet))
    print(_line("with a flood, REDIS_INBOX_FULL=wait", wait))
    print(_line("with a flood, REDIS_INBOX_FULL=drop", drop))
    base = _pct(quiet["times"], 0.5)
    for name, result in (("wait", wait), ("drop", drop)):
        print(f"p50 with a flood ({name}) / alone: {_pct(result['times'], 0.5) / base:.2f}x")


async def _flush(url: str) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url)
    await client.flushall()
    await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
