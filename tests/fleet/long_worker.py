"""A queue worker running the long-conversation bot with its history in PostgreSQL:
``python -m tests.fleet.long_worker --url redis://... --database-url postgresql://... --sizes FILE``.

It appends its pid to ``runs`` next to ``--sizes`` at every model call, and the size of every prompt that answers "how are you?" to ``--sizes`` (the test's probe of the
prompt size at a point of the conversation).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from core import ModelRequest
from core.fleet import QueueConfig, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore, RedisSummaryLock
from core.memory.postgres import PostgresHistory
from core.testing import updates_of
from tests.memory.long_chat import brain, long_chat_agent

PROBE = "how are you?"


async def amain(args: argparse.Namespace) -> None:
    config = QueueConfig(url=args.url, lease_seconds=args.lease, batch_size=args.batch_size, retry_seconds=30.0)
    backend = RedisBackend(config, client_name=f"long-worker-{os.getpid()}")

    def answer(request: ModelRequest) -> str:
        with (args.sizes.parent / "runs").open("a") as f:  # who runs the conversation now
            f.write(f"{os.getpid()}\n")
        if PROBE in updates_of(request.prompt):
            with args.sizes.open("a") as f:
                f.write(f"{len(request.prompt)}\n")
        return brain(request)

    agent, _ = long_chat_agent(
        history=PostgresHistory(args.database_url),
        memory=RedisMemoryStore(backend),
        dispatcher=RedisDispatcher(backend),
        every=args.every,
        lock=RedisSummaryLock(backend, ttl=args.lock_ttl),
        answer=answer,
    )
    try:
        await QueueWorker(agent, backend).run()
    finally:
        await backend.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--database-url", required=True)
    p.add_argument("--sizes", type=Path, required=True)
    p.add_argument("--lease", type=float, default=5.0)
    p.add_argument("--lock-ttl", type=float, default=2.0)
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--every", type=int, default=50, help="entries folded per summary call")
    logging.basicConfig(level=os.environ.get("PROBE_LOG", "WARNING"), format="%(process)d %(name)s %(message)s")
    logging.getLogger("arq").setLevel(logging.WARNING)
    asyncio.run(amain(p.parse_args()))


if __name__ == "__main__":
    main()
