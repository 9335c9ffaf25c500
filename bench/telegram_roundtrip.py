"""Telegram round trip: a user's message -> the bot's reply, through the real python-telegram-bot client (long
polling) and the fake Bot API on 127.0.0.1, with a zero-delay scripted model.

Measured from the moment the fake queues the update (waking the bot's pending getUpdates) until it has received
the reply's ``sendMessage``. Prints p50, p90, p99 and max; asserts nothing. Two runs: with the default rate
limiter (30 requests/s for the whole bot, as Telegram asks) and with the limiter off, which shows the adapter's
own cost; then a burst over many chats.

Run: .venv/bin/python bench/telegram_roundtrip.py [--messages 200] [--chats 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.fakes

import core
from extensions.telegram import TelegramSettings, get_runtime, telegram_extension
from extensions.telegram.runtime import TelegramRuntime
from tests.fakes.telegram_server import FakeTelegramServer

REPLY = '<response><output type="telegram:message">Hello **there**, nice to meet you!</output></response>'


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(title: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(
        f"{title:<46} n={len(ms):<4} p50={_percentile(ms, 0.50):6.2f} ms  p90={_percentile(ms, 0.90):6.2f} ms  "
        f"p99={_percentile(ms, 0.99):6.2f} ms  max={max(ms):6.2f} ms  mean={statistics.fmean(ms):6.2f} ms"
    )


async def _bench(messages: int, chats: int, *, limits: dict[str, Any], title: str) -> None:
    fake = FakeTelegramServer()
    await fake.start()
    settings = TelegramSettings(token=fake.token, api_url=fake.api_url, poll_timeout=30, **limits)
    model = core.ScriptedModel(lambda request: REPLY, chunk_size=64)
    agent = core.create_agent(model=model, extensions=[telegram_extension(settings)], memory=core.InMemoryStore())
    await agent.start()
    runtime = get_runtime(agent)
    assert isinstance(runtime, TelegramRuntime)
    try:
        for _ in range(10):  # warm up
            before = len(fake.sent)
            fake.user_says("warm up")
            await fake.wait_replies(before + 1)

        sequential: list[float] = []
        for n in range(messages):
            before = len(fake.sent)
            started = time.perf_counter()
            fake.user_says(f"message {n}")
            await fake.wait_replies(before + 1)
            sequential.append(time.perf_counter() - started)
        _report(f"sequential, one private chat, {title}", sequential)

        # a burst: every message at once, one per user, over ``chats`` private chats; the agent runs one
        # conversation at a time, so messages that arrive while their chat's run is going join it
        before, calls = len(fake.sent), len(model.requests)
        started = time.perf_counter()
        for n in range(messages):
            fake.user_says(f"burst {n}", user_id=5000 + n % chats, first_name=f"user{n % chats}")
        await fake.wait_for(lambda: not fake.pending, timeout=120)  # all fetched and confirmed
        await runtime.wait_idle()  # all decided and answered
        elapsed = time.perf_counter() - started
        print(
            f"burst of {messages} messages over {chats} chats, {title}: answered in {elapsed * 1000:.0f} ms "
            f"({messages / elapsed:.0f} messages/s), {len(model.requests) - calls} model calls, "
            f"{len(fake.sent) - before} replies"
        )
    finally:
        await agent.stop()
        await fake.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--chats", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_bench(args.messages, args.chats, limits={"rate_limit": 0, "group_rate_limit": 0}, title="no limiter"))
    asyncio.run(_bench(args.messages, args.chats, limits={}, title="30 requests/s limiter"))


if __name__ == "__main__":
    main()
