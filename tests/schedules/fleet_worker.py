"""A queue worker process of the probe bot that also fires schedules: ``python -m tests.schedules.fleet_worker
--url ...``. With ``--crash-after N`` it kills itself with SIGKILL while firing: after sending the conversation its
input for the (N+1)th occurrence and before advancing the schedule (the worst moment: the input is stored, the
schedule not moved), with other occurrences claimed and not yet sent."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from datetime import datetime

from core import ScriptedModel, create_agent
from core.fleet import QueueConfig, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore, RedisScheduleStore
from core.schedules import Schedule, Schedules
from core.schedules.plugin import ScheduledTexts
from tests.fleet.probe import answer, probe_extension


class CrashingStore(RedisScheduleStore):
    """Dies (SIGKILL) at the ``crash_after``-th advance, before it is written."""

    def __init__(self, backend: RedisBackend, *, crash_after: int) -> None:
        super().__init__(backend)
        self.crash_after = crash_after
        self.advanced = 0

    async def advance(self, schedule: Schedule, *, next_fire_at: datetime | None, missed: bool = False) -> bool:
        if self.advanced >= self.crash_after:
            os.kill(os.getpid(), signal.SIGKILL)
        self.advanced += 1
        return await super().advance(schedule, next_fire_at=next_fire_at, missed=missed)


async def amain(args: argparse.Namespace) -> None:
    config = QueueConfig(url=args.url, lease_seconds=args.lease, retry_seconds=30.0, concurrency=16)
    backend = RedisBackend(config, client_name=f"schedule-worker-{os.getpid()}")
    agent = create_agent(
        model=ScriptedModel(answer),
        extensions=[probe_extension(args.url)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
        plugins=[ScheduledTexts()],
    )
    store = (
        CrashingStore(backend, crash_after=args.crash_after)
        if args.crash_after is not None
        else RedisScheduleStore(backend)
    )
    Schedules.attach(agent, store, lease=args.lease, poll=args.poll, batch=args.batch)
    try:
        await QueueWorker(agent, backend).run()
    finally:
        await backend.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--lease", type=float, default=2.0)
    p.add_argument("--poll", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--crash-after", type=int, default=None)
    args = p.parse_args()
    logging.basicConfig(level=os.environ.get("PROBE_LOG", "WARNING"), format="%(process)d %(name)s %(message)s")
    logging.getLogger("arq").setLevel(logging.WARNING)
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
