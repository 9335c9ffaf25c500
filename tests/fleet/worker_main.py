"""A queue worker process running the probe bot: ``python -m tests.fleet.worker_main --url ...``.

Started by the multi-process tests (and killed, paused, stopped by them). On a clean exit it writes its
counters to ``probe:stats:<pid>``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import redis.asyncio

from core import ScriptedModel, create_agent
from core.fleet import QueueConfig, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from tests.fleet.probe import answer, probe_extension


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--lease", type=float, default=2.0)
    p.add_argument("--delay", type=float, default=0.0, help="seconds the model thinks before answering")
    p.add_argument("--handoff", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--stop-timeout", type=float, default=5.0)
    p.add_argument("--poll-delay", type=float, default=2.0)
    p.add_argument("--quiet-ms", type=int, default=0, help="the quiet window (BOT_QUIET_MS)")
    p.add_argument("--busy", default="steer", help="the busy policy (BOT_BUSY)")
    p.add_argument("--marks", type=Path, default=None, help="append a line here whenever the model is called")
    return p.parse_args(argv)


def dump_tasks() -> None:
    for task in asyncio.all_tasks():
        print(f"task {task.get_name()} cancelling={task.cancelling()}", file=sys.stderr)
        coro: Any = task.get_coro()
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
            if frame is not None:
                print(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}", file=sys.stderr)
            coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)


async def amain(args: argparse.Namespace) -> None:
    config = QueueConfig(
        url=args.url,
        concurrency=args.concurrency,
        lease_seconds=args.lease,
        handoff_batches=args.handoff,
        batch_size=args.batch_size,
        stop_timeout=args.stop_timeout,
        poll_delay=args.poll_delay,
        retry_seconds=30.0,
        quiet_ms=args.quiet_ms,
        busy=args.busy,
    )
    backend = RedisBackend(config, client_name=f"probe-worker-{os.getpid()}")
    model = ScriptedModel(functools.partial(answer, marks=args.marks), first_delay=args.delay)
    agent = create_agent(
        model=model,
        extensions=[probe_extension(args.url)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    worker = QueueWorker(agent, backend)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_tasks)  # a hung test shows where
    try:
        await worker.run()
    finally:
        await backend.close()
    client = redis.asyncio.Redis.from_url(args.url, decode_responses=True)
    try:
        await client.set(f"probe:stats:{os.getpid()}", json.dumps(worker.describe()))
    finally:
        await client.aclose()


def main() -> None:
    logging.basicConfig(level=os.environ.get("PROBE_LOG", "WARNING"), format="%(process)d %(name)s %(message)s")
    logging.getLogger("arq").setLevel(logging.WARNING)
    asyncio.run(amain(parse()))


if __name__ == "__main__":
    main()
