"""Schedules benchmark: a real redis-server (AOF, fsync every second, as deploy/ runs it) and worker processes that
run the bot and fire schedules (``Schedules`` with ``RedisScheduleStore``, the settings' defaults: a look at the
store at least every second, 100 occurrences claimed at once, 32 sent at once per worker).

Prints figures; asserts nothing. Run: python bench/schedules.py [--quick]

- lateness of 1,000 one-off schedules due at the same instant, each in its own conversation, with 2 workers: from
  the due time to the answer posted (claimed, stored in the conversation's inbox, run with a zero-delay scripted
  model, reply through the reply ledger), p50 / p99 / max, and whether each fired exactly once;
- the firing path alone (one process claims, sends and advances 1,000 due occurrences, nobody runs them): per second;
- Redis memory per pending schedule: ``used_memory`` before and after storing 10,000 reminders (a 60-character
  prompt, a Telegram chat's address, a creator), divided by their number.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# bench/core.py is named like the project's core package: keep bench/ off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio  # noqa: E402

from core import Host, OutputContext, ScriptedModel, context, create_agent, output  # noqa: E402
from core.entries import InputRef  # noqa: E402
from core.fleet import (  # noqa: E402
    QueueConfig,
    QueueWorker,
    RedisBackend,
    RedisDispatcher,
    RedisMemoryStore,
    RedisScheduleStore,
)
from core.models.base import ModelRequest  # noqa: E402
from core.schedules import SCHEDULE_INPUT, Schedule, Schedules  # noqa: E402
from core.testing import updates_of  # noqa: E402
from tests.fleet.server import RedisServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SELF = str(Path(__file__).resolve())
_ID = re.compile(r"\bq(\d+)\b")

chat = context(type="bench:chat", schema=str, key=lambda s: s, keep_logs=40, max_working_memory=20)


def answer(request: ModelRequest) -> str:
    found = updates_of(request.prompt)
    ids = _ID.findall(found) if found else []
    return f'<response><output type="bench:reply">{" ".join(f"q{i}" for i in ids)}</output></response>'


# -- the worker process ----------------------------------------------------------------------------------


async def run_worker(args: argparse.Namespace) -> None:
    backend = RedisBackend(QueueConfig(url=args.url, concurrency=args.concurrency, lease_seconds=30.0))
    client = redis.asyncio.Redis.from_url(args.url, decode_responses=True)

    async def deliver(data: str, ctx: OutputContext, agent: Host) -> None:
        ledger = ctx.state.ledger
        slot = await ledger.begin("bench:reply", data) if ledger is not None else None
        if slot is not None and slot.done:
            return
        stored = [
            f"{ref.data['text']}@{ref.timestamp / 1000:.3f}"
            for ref in ctx.state.working_memory.logs
            if isinstance(ref, InputRef) and ref.type == SCHEDULE_INPUT
        ]
        await client.rpush("bench:replies", f"{data}@{time.time():.6f}")
        if stored:
            await client.rpush("bench:stored", *stored)
        if ledger is not None and slot is not None:
            await ledger.posted(slot, "1")

    agent = create_agent(
        model=ScriptedModel(answer, chunk_size=4096),
        contexts=[chat],
        outputs=[output(type="bench:reply", handler=deliver, context=chat)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    Schedules.attach(agent, RedisScheduleStore(backend))  # the defaults bots worker runs with
    await client.rpush("bench:ready", os.getpid())
    try:
        await QueueWorker(agent, backend).run()
    finally:
        await client.aclose()
        await backend.close()


# -- the driver ------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def lateness(url: str, count: int, workers: int) -> None:
    client: Any = redis.asyncio.Redis.from_url(url, decode_responses=True)
    backend = RedisBackend(QueueConfig(url=url))
    store = RedisScheduleStore(backend)
    procs = [
        subprocess.Popen([sys.executable, SELF, "worker", "--url", url], cwd=ROOT, stderr=subprocess.DEVNULL)  # noqa: ASYNC220
        for _ in range(workers)
    ]
    try:
        while await client.llen("bench:ready") < workers:  # noqa: ASYNC110 - a benchmark
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # the workers' loops are up
        due = datetime.now(UTC) + timedelta(seconds=max(3.0, count / 500))
        for i in range(count):
            await store.add(
                Schedule.once(at=due, text=f"q{i}", conversation=f"bench:chat:c{i}", context="bench:chat", args=f"c{i}")
            )
        deadline = time.monotonic() + 120
        posted: dict[str, list[float]] = {}
        while time.monotonic() < deadline:
            posted.clear()
            for item in await client.lrange("bench:replies", 0, -1):
                text, _, at = item.rpartition("@")
                for sid in _ID.findall(text):
                    posted.setdefault(sid, []).append(float(at))
            if len(posted) >= count:
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)
        late = [min(times) - due.timestamp() for times in posted.values()]
        twice = sum(1 for times in posted.values() if len(times) > 1)
        stored: dict[str, float] = {}
        for item in await client.lrange("bench:stored", 0, -1):
            sid, _, at = item.rpartition("@")
            stored[sid] = min(float(at), stored.get(sid, float(at)))
        fired = [at - due.timestamp() for at in stored.values()]
        if not fired or not late:
            print(f"lateness: nothing answered within 120 s ({len(stored)} stored, {len(posted)} answered)")
            return
        print(
            f"lateness, {count} schedules due at once, {workers} workers (each in its own conversation):\n"
            f"  due -> input stored in the conversation's inbox: min {min(fired) * 1000:.0f} ms, p50 {statistics.median(fired) * 1000:.0f} ms, "
            f"p99 {pct(fired, 0.99) * 1000:.0f} ms, max {max(fired) * 1000:.0f} ms\n"
            f"  due -> answer posted (the run included): p50 {statistics.median(late) * 1000:.0f} ms, "
            f"p99 {pct(late, 0.99) * 1000:.0f} ms, max {max(late) * 1000:.0f} ms\n"
            f"  answered {len(posted)}/{count}, twice {twice}"
        )
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        await backend.close()
        await client.aclose()


async def firing_rate(url: str, count: int) -> None:
    """One process sends ``count`` due occurrences with nobody running them: the firing path alone (claim, the
    ingest script, advance)."""
    client: Any = redis.asyncio.Redis.from_url(url, decode_responses=True)
    backend = RedisBackend(QueueConfig(url=url, inbox_cap=100_000))
    store = RedisScheduleStore(backend)
    agent = create_agent(
        model=ScriptedModel(answer),
        contexts=[chat],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    schedules = Schedules.attach(agent, store, fire=False)  # fired by hand below
    try:
        await client.flushall()
        async with agent:
            due = datetime.now(UTC) - timedelta(seconds=1)
            for i in range(count):
                await store.add(
                    Schedule.once(
                        at=due, text=f"q{i}", conversation=f"bench:chat:f{i}", context="bench:chat", args=f"f{i}"
                    )
                )
            started = time.perf_counter()
            while await store.pending() > 0:
                await schedules.fire_due()
                await asyncio.sleep(0.001)
            took = time.perf_counter() - started
        print(f"firing alone, one process: {count} occurrences in {took:.2f} s ({count / took:.0f}/s)")
    finally:
        await backend.close()
        await client.aclose()


async def memory(url: str, count: int) -> None:
    client: Any = redis.asyncio.Redis.from_url(url, decode_responses=True)
    backend = RedisBackend(QueueConfig(url=url))
    store = RedisScheduleStore(backend)
    try:
        await client.flushall()
        before = int((await client.info("memory"))["used_memory"])
        at = datetime.now(UTC) + timedelta(days=30)
        for i in range(count):
            await store.add(
                Schedule.once(
                    at=at + timedelta(seconds=i),
                    text="remind Alex to call the bank about the mortgage papers at 9",
                    creator=f"telegram:{100_000 + i % 500}",
                    conversation=f"telegram:{-1_000_000_000_000 - i}",
                    context="telegram",
                    args={"chat_id": -1_000_000_000_000 - i, "thread_id": None},
                    tz="Europe/Paris",
                )
            )
        after = int((await client.info("memory"))["used_memory"])
        print(
            f"redis memory per pending schedule: {(after - before) / count:.0f} bytes "
            f"({count} reminders, {(after - before) / 1e6:.1f} MB)"
        )
    finally:
        await backend.close()
        await client.aclose()


async def drive(quick: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-schedules-") as folder:
        server = RedisServer(Path(folder) / "redis", fsync="everysec")  # as deploy/ runs it
        server.start()
        try:
            await lateness(server.url, 200 if quick else 1000, 2)
            await firing_rate(server.url, 200 if quick else 1000)
            await memory(server.url, 1000 if quick else 10_000)
        finally:
            server.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", nargs="?", default="drive", choices=["drive", "worker"])
    p.add_argument("--url")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.mode == "worker":
        asyncio.run(run_worker(args))
    else:
        asyncio.run(drive(args.quick))


if __name__ == "__main__":
    main()
