"""Discord round trip: a user's message -> the bot's reply, through the real discord.py client and the fake
Discord on 127.0.0.1, with a zero-delay scripted model.

Measured from the moment the fake sends MESSAGE_CREATE on the gateway until it has received the reply's
``POST /channels/{id}/messages``. Prints p50, p90, p99 and max; asserts nothing.

Run: .venv/bin/python bench/discord_roundtrip.py [--messages 200] [--channels 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.fakes

import core
from extensions.discord import DiscordSettings, discord_extension, get_runtime
from tests.fakes.discord_server import FakeDiscord

REPLY = '<response><output type="discord:message">Hello there, nice to meet you!</output></response>'


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(title: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(
        f"{title:<44} n={len(ms):<4} p50={_percentile(ms, 0.50):6.2f} ms  p90={_percentile(ms, 0.90):6.2f} ms  "
        f"p99={_percentile(ms, 0.99):6.2f} ms  max={max(ms):6.2f} ms  mean={statistics.fmean(ms):6.2f} ms"
    )


async def _bench(messages: int, channels: int) -> None:
    fake = FakeDiscord()
    guild = fake.guild()
    alice = fake.user("alice")
    dm = fake.dm_channel(alice)
    rooms = [fake.text_channel(guild, f"room-{n}") for n in range(channels)]
    await fake.start()
    settings = DiscordSettings(
        token="fake-token",
        api_url=fake.api_url,
        gateway_url=fake.gateway_url,
        guild_ready_timeout=0.05,
        reply_policy="always",
    )
    model = core.ScriptedModel(lambda request: REPLY, chunk_size=64)
    agent = core.create_agent(model=model, extensions=[discord_extension(settings)], memory=core.InMemoryStore())
    await agent.start()
    try:
        for _ in range(10):  # warm up
            await fake.say(dm, "warm up", author=alice)
            await fake.wait_posted(dm, len(fake.posted_in(dm)) + 1)

        # one message at a time, in a DM
        sequential: list[float] = []
        for n in range(messages):
            before = len(fake.posted_in(dm))
            started = time.perf_counter()
            await fake.say(dm, f"message {n}", author=alice)
            await fake.wait_posted(dm, before + 1)
            sequential.append(time.perf_counter() - started)
        _report("sequential, one DM", sequential)

        # a burst: every message at once, spread over the channels (one run per channel at a time; messages
        # that arrive while a channel's run is going join it, so there are fewer replies than messages)
        counts = {room: len(fake.posted_in(room)) for room in rooms}
        calls = len(model.requests)
        started = time.perf_counter()
        for n in range(messages):
            await fake.say(rooms[n % channels], f"burst {n}", author=alice)
        before = len(fake.posted_in(dm))
        await fake.say(dm, "barrier", author=alice)  # the gateway keeps order: once this is answered, every
        await fake.wait_posted(dm, before + 1, timeout=60)  # burst message has been handed to a task
        await get_runtime(agent).wait_idle()  # type: ignore[attr-defined]
        calls += 1
        elapsed = time.perf_counter() - started
        replies = sum(len(fake.posted_in(room)) - counts[room] for room in rooms)
        print(
            f"burst of {messages} messages over {channels} channels: all handled in {elapsed * 1000:.0f} ms "
            f"({messages / elapsed:.0f} messages/s), {len(model.requests) - calls} model calls, {replies} replies"
        )
    finally:
        await agent.stop()
        await fake.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--channels", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_bench(args.messages, args.channels))


if __name__ == "__main__":
    main()
