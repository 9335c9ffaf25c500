"""How soon queue workers notice Redis is back after an outage.

A real redis-server on loopback, two idle queue workers as processes (``tests.fleet.worker_main``, the probe bot)
and a gateway in this process. After a first answer, Redis is stopped (SIGTERM) for ``--down`` seconds (3 by
default) and started again on the same port; printed per run: the seconds from Redis answering again to each
worker's log saying so (its loop's "redis is back", the backend's "redis answers again") and to the answer of a
message sent right after the restart.

Prints figures; asserts nothing. Run: python bench/redis_outage.py [--down 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# keep bench/ off the import path (bench/core.py would shadow the core package)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis.asyncio  # noqa: E402

from core import ScriptedModel, create_agent  # noqa: E402
from core.fleet import RedisBackend, RedisDispatcher, RedisMemoryStore  # noqa: E402
from tests.fleet.conftest import queue_config, send, wait_until  # noqa: E402
from tests.fleet.probe import answer, probe_extension, replies  # noqa: E402
from tests.fleet.server import RedisServer  # noqa: E402

__all__ = ("main",)

WORKERS = 2


class Worker:
    """A worker process whose log lines are read as they come, each with ``time.monotonic()``."""

    def __init__(self, url: str) -> None:
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fleet.worker_main", "--url", url, "--lease", "2"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PROBE_LOG": "WARNING"},
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip()))

    def first(self, words: str, *, after: float) -> float | None:
        """When the first line with ``words`` came after ``after``."""
        return next((at for at, line in self.lines if at >= after and words in line), None)


async def outage(down: float) -> tuple[list[float | None], list[float | None], float]:
    """One outage: per worker, the seconds to its loop's and its backend's notice; the seconds to the answer."""
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis")
        server.start()
        workers = [Worker(server.url) for _ in range(WORKERS)]
        backend = RedisBackend(queue_config(server, inbox_cap=100_000))
        agent = create_agent(
            model=ScriptedModel(answer),
            extensions=[probe_extension(server.url)],
            dispatcher=RedisDispatcher(backend),
            memory=RedisMemoryStore(backend),
        )
        client = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
        try:
            async with agent:
                await send(agent, "c0", "before")
                await wait_until(lambda: replies(client, "c0"), what="the first answer")
                await asyncio.sleep(1.0)
                server.stop()
                await asyncio.sleep(down)
                server.start()  # returns once Redis answers a PING
                up = time.monotonic()
                await send(agent, "c0", "after")
                await wait_until(lambda: _count(replies(client, "c0"), 2), what="the answer after the outage")
                answered = time.monotonic() - up
                await asyncio.sleep(max(6.0, down * 2))  # time for the slowest notice to be logged
        finally:
            await client.aclose()
            for w in workers:
                w.proc.terminate()
            for w in workers:
                w.proc.wait(30)
            await backend.close()
            server.stop()
        loop = [w.first("redis is back", after=up - down) for w in workers]
        pool = [w.first("redis answers again", after=up - down) for w in workers]
        return (
            [None if t is None else t - up for t in loop],
            [None if t is None else t - up for t in pool],
            answered,
        )


async def _count(found: Any, n: int) -> bool:
    return len(await found) >= n


def _shown(values: list[float | None]) -> str:
    return ", ".join("-" if v is None else f"{v:.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--down", type=float, default=3.0, help="seconds Redis stays down")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"Redis down {args.down:g}s, {WORKERS} idle workers; seconds after Redis answers again")
    worst = 0.0
    for run in range(args.runs):
        loop, pool, answered = asyncio.run(outage(args.down))
        worst = max([worst, *(v for v in loop + pool if v is not None)])
        print(
            f"  run {run + 1}: worker loops noticed {_shown(loop)}; backends {_shown(pool)}; "
            f"a message sent at once answered after {answered:.2f}"
        )
    print(f"  the latest notice: {worst:.2f}s after Redis was back")


if __name__ == "__main__":
    main()
