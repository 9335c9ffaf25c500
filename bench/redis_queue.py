"""Queue benchmark: the Redis dispatcher with real worker processes and a real redis-server.

Prints figures; asserts nothing. Run: python bench/redis_queue.py [--quick]

- throughput with 1 and 2 workers, zero-delay scripted model, 1,000 contexts x 10 messages:
  "backlog" (all stored before the workers start: each context's messages join one run) and
  "live" (stored while the workers run, 10 rounds of 1,000 messages);
- ingest -> run start latency p50/p99 at 500 messages/s (2 workers), woken by the wake list, and the
  same with arq-style polling every 0.05 s for comparison;
- CPU of an idle worker (woken, and polling every 0.05 s);
- recovery after kill -9 of a worker with runs in flight (lease 2 s).

Every reply goes through the reply ledger (stored before it is "posted", marked after), as the chat
adapters' replies do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# this file is named like the standard library's queue module: keep bench/ off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.ports

import redis.asyncio  # noqa: E402

from core import Host, OutputContext, ScriptedModel, context, create_agent, output  # noqa: E402
from core.fleet import (  # noqa: E402
    QueueConfig,
    QueueWorker,
    RedisBackend,
    RedisDispatcher,
    RedisMemoryStore,
)
from core.models.base import ModelRequest  # noqa: E402
from core.testing import updates_of  # noqa: E402
from tests.ports import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SELF = str(Path(__file__).resolve())
_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)

chat = context(type="bench:chat", schema=str, key=lambda s: s, keep_logs=40, max_working_memory=20)


def answer(request: ModelRequest) -> str:
    """Reply ``<seq>:<ingest->run start seconds>`` for every new message (``<seq>@<sent at>``)."""
    now = time.time()
    found = updates_of(request.prompt)
    parts = []
    for text in _INPUT.findall(found) if found else []:
        seq, _, sent = text.partition("@")
        parts.append(f"{seq}:{now - float(sent):.6f}:{now:.6f}")
    return f'<response><output type="bench:reply">{" ".join(parts)}</output></response>'


def bench_bot(url: str) -> tuple[Any, Any]:
    """The bench context and its reply output, which 'posts' into a Redis list through the ledger."""
    client = redis.asyncio.Redis.from_url(url, decode_responses=True)

    async def deliver(data: str, ctx: OutputContext, agent: Host) -> None:
        ledger = ctx.state.ledger
        slot = await ledger.begin("bench:reply", data) if ledger is not None else None
        if slot is not None and slot.done:
            return
        await client.rpush("bench:replies", data)
        if ledger is not None and slot is not None:
            await ledger.posted(slot, "1")

    return output(type="bench:reply", handler=deliver, context=chat), client


# -- the worker process ---------------------------------------------------------------------------------


async def run_worker(args: argparse.Namespace) -> None:
    config = QueueConfig(
        url=args.url, concurrency=args.concurrency, lease_seconds=args.lease, poll_delay=args.poll_delay
    )
    backend = RedisBackend(config)
    reply, client = bench_bot(args.url)
    agent = create_agent(
        model=ScriptedModel(answer, chunk_size=4096),
        contexts=[chat],
        outputs=[reply],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    worker = QueueWorker(agent, backend)
    if args.poll_only:  # what arq alone does: look at the queue every poll_delay seconds
        from core.fleet.arq_worker import _WakeWorker

        async def poll(self: Any, free: int) -> list[str]:
            popped = await self.backend.client.zpopmin(self.queue_name, free)
            if not popped:
                await asyncio.sleep(args.poll_delay)
            return [job_id for job_id, _ in popped]

        _WakeWorker.pop = poll  # type: ignore[method-assign]
    await client.rpush("bench:ready", os.getpid())
    try:
        await worker.run()
    finally:
        await client.aclose()
        await backend.close()


# -- the driver ------------------------------------------------------------------------------------------


class Redis:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-queue-"))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
             "--maxmemory-policy", "noeviction", "--daemonize", "no", "--logfile", str(self.dir / "redis.log")],
        )  # fmt: skip
        for _ in range(500):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.01)
        raise RuntimeError("redis-server did not start")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Bench:
    def __init__(self, redis_url: str) -> None:
        self.url = redis_url
        self.client: Any = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
        # the gateway side shares the workers' lease (it sets how soon a job popped by a worker that died
        # before claiming it is rescheduled)
        self.backend = RedisBackend(QueueConfig(url=redis_url, inbox_cap=100_000, lease_seconds=2.0))
        self.dispatcher = RedisDispatcher(self.backend)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.seq = 0

    async def reset(self) -> None:
        await self.client.flushall()

    async def start_workers(self, n: int, *extra: str) -> list[subprocess.Popen[bytes]]:
        before = await self.client.llen("bench:ready")
        started = []
        for _ in range(n):
            cmd = [sys.executable, SELF, "worker", "--url", self.url, *extra]
            proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)  # noqa: ASYNC220 - a benchmark
            self.procs.append(proc)
            started.append(proc)
        deadline = time.monotonic() + 60
        while await self.client.llen("bench:ready") < before + n and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # the arq loop is up
        return started

    def stop_workers(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs.clear()

    async def send(self, chat_key: str) -> None:
        self.seq += 1
        await self.dispatcher.submit(chat, chat_key, _ref(f"{self.seq}@{time.time():.6f}"), dedupe_key=f"m{self.seq}")

    async def replies(self) -> list[tuple[int, float, float]]:
        """(seq, ingest -> run start seconds, run start time) of every answered message."""
        out = []
        for text in await self.client.lrange("bench:replies", 0, -1):
            for part in text.split():
                seq, lat, at = part.split(":")
                out.append((int(seq), float(lat), float(at)))
        return out

    async def wait_answered(self, n: int, *, timeout: float = 300) -> float:
        deadline = time.monotonic() + timeout
        while True:
            count = 0
            for text in await self.client.lrange("bench:replies", 0, -1):
                count += text.count(" ") + 1
            if count >= n:
                return time.time()
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {count} of {n} answered after {timeout}s")
            await asyncio.sleep(0.01)

    async def send_rounds(self, contexts: int, rounds: int, *, parallel: int = 100) -> None:
        sem = asyncio.Semaphore(parallel)

        async def one(key: str) -> None:
            async with sem:
                await self.send(key)

        for _ in range(rounds):
            async with asyncio.TaskGroup() as tg:
                for c in range(contexts):
                    tg.create_task(one(f"c{c}"))

    async def throughput(self, workers: int, contexts: int, per: int, *, live: bool) -> tuple[float, float]:
        await self.reset()
        n = contexts * per
        if live:
            await self.start_workers(workers, "--concurrency", "32")
            await self.send_rounds(contexts, per)
        else:
            await self.send_rounds(contexts, per)
            await self.start_workers(workers, "--concurrency", "32")
        done = await self.wait_answered(n)
        replies = await self.replies()
        first = min(at for _, _, at in replies)
        runs = await self.client.llen("bench:replies")
        self.stop_workers()
        return n / (done - first), n / runs

    async def paced(self, rate: float, seconds: float, *, first: int = 0) -> int:
        """Send ``rate`` messages a second for ``seconds``, round robin over 1,000 contexts."""
        n = int(rate * seconds)
        start = time.monotonic()
        async with asyncio.TaskGroup() as tg:
            for i in range(n):
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                tg.create_task(self.send(f"c{(first + i) % 1000}"))
        return n

    async def latency(self, rate: float, seconds: float, *extra: str) -> tuple[float, float]:
        """p50 and p99 of ingest -> run start at ``rate`` messages/s (after one second of warm-up)."""
        await self.reset()
        await self.start_workers(2, *extra)
        warm = await self.paced(rate, 1.0)
        await self.wait_answered(warm)
        await self.client.delete("bench:replies")
        n = await self.paced(rate, seconds, first=warm)
        await self.wait_answered(n)
        lats = sorted(lat for _, lat, _ in await self.replies())
        self.stop_workers()
        return statistics.median(lats), lats[min(len(lats) - 1, int(0.99 * len(lats)))]

    async def capacity(self, contexts: int) -> float:
        """Runs per second of 2 workers on a backlog of one message per context (no batching)."""
        await self.reset()
        await self.send_rounds(contexts, 1)
        await self.start_workers(2, "--concurrency", "32")
        done = await self.wait_answered(contexts)
        first = min(at for _, _, at in await self.replies())
        self.stop_workers()
        return contexts / (done - first)

    async def idle_cpu(self, seconds: float, *extra: str) -> float:
        await self.reset()
        [proc] = await self.start_workers(1, *extra)
        await asyncio.sleep(1.0)
        before = _cpu_seconds(proc.pid)
        await asyncio.sleep(seconds)
        used = _cpu_seconds(proc.pid) - before
        self.stop_workers()
        return 100 * used / seconds

    async def recovery(self) -> float:
        await self.reset()
        victim, _ = await self.start_workers(2, "--lease", "2", "--concurrency", "8")
        await self.send_rounds(200, 5)
        await asyncio.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        killed = time.time()
        victim.wait()
        done = await self.wait_answered(1000)
        self.stop_workers()
        return done - killed

    async def close(self) -> None:
        self.stop_workers()
        await self.client.aclose()
        await self.backend.close()


def _ref(text: str) -> Any:
    from core import InputRef

    return InputRef(type="bench:message", data=text)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(quick: bool) -> None:
    server = Redis()
    bench = Bench(server.url)
    contexts, per = (200, 10) if quick else (1000, 10)
    try:
        load = [f"{x:.2f}" for x in os.getloadavg()]
        print(
            f"redis-server on 127.0.0.1:{server.port} (AOF, appendfsync everysec); {os.cpu_count()} cores; "
            f"load average before: {' '.join(load)}"
        )
        for live in (False, True):
            for workers in (1, 2):
                rate, per_run = await bench.throughput(workers, contexts, per, live=live)
                mode = "live   " if live else "backlog"
                print(
                    f"throughput, {mode}, {workers} worker{'s' if workers > 1 else ' '}, "
                    f"{contexts:,} contexts x {per}: {rate:,.0f} messages/s ({per_run:.1f} messages per run)"
                )
        runs = await bench.capacity(contexts * 3)
        print(f"capacity, 2 workers, one message per run (no batching): {runs:,.0f} runs/s")
        seconds = 4 if quick else 8
        repeats = 1 if quick else 3
        for label, extra in (("woken (BZMPOP)", ()), ("polling every 0.05 s", ("--poll-only", "--poll-delay", "0.05"))):
            results = [await bench.latency(500, seconds, *extra) for _ in range(repeats)]
            shown = ", ".join(f"p50 {p50 * 1e3:.1f} / p99 {p99 * 1e3:.1f} ms" for p50, p99 in results)
            print(f"ingest -> run start at 500 messages/s, 2 workers, {label}: {shown}")
        idle = await bench.idle_cpu(5 if quick else 10)
        polling = await bench.idle_cpu(5 if quick else 10, "--poll-only", "--poll-delay", "0.05")
        print(f"idle worker CPU: {idle:.2f}% woken (poll delay 2 s), {polling:.2f}% polling every 0.05 s")
        recovered = await bench.recovery()
        print(f"kill -9 of 1 of 2 workers mid-traffic (lease 2 s): every message answered {recovered:.2f} s later")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        await bench.close()
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    w = sub.add_parser("worker")
    w.add_argument("--url", required=True)
    w.add_argument("--concurrency", type=int, default=16)
    w.add_argument("--lease", type=float, default=30.0)
    w.add_argument("--poll-delay", type=float, default=2.0)
    w.add_argument("--poll-only", action="store_true")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    args = parser.parse_args()
    with traced():  # TRACING_ENABLED=true: the driver's ingests and the workers' runs (``bench/tracing.py``)
        if args.command == "worker":
            asyncio.run(run_worker(args))
        else:
            asyncio.run(drive(args.quick))


def traced() -> contextlib.AbstractContextManager[Any]:
    """Tracing as ``bots`` sets it up when ``TRACING_ENABLED=true`` is in the environment, else nothing."""
    if os.environ.get("TRACING_ENABLED", "").lower() != "true":
        return contextlib.nullcontext()
    from bots.tracing import TracingSettings, start_tracing

    return start_tracing(TracingSettings(enabled=True), role="bench")


if __name__ == "__main__":
    main()
