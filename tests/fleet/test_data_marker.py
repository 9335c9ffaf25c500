"""A Redis that lost the fleet's data is reported (issue 50): a real redis-server killed and started again without
its data folder (as a server back from a lost volume) leaves the marker ``bots:fleet:data`` gone; the readiness
check of each process that had read it logs one ERROR naming what happened and what to check, and counts it in
``bots_redis_data_lost_total``; a process started after the loss has nothing to report; ``bots doctor`` reports the
loss for a day."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import time
from pathlib import Path

import pytest
import redis.asyncio
from prometheus_client import REGISTRY

from core.fleet import QueueConfig, RedisBackend
from core.fleet.data_marker import LOST, DataMarker

from .server import RedisServer


def lost_total() -> float:
    return REGISTRY.get_sample_value("bots_redis_data_lost_total") or 0.0


async def test_a_redis_back_without_its_data_is_reported_by_each_process_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from bots.worker import redis_check

    server = RedisServer(tmp_path / "redis")
    server.start()
    backends = [RedisBackend(QueueConfig(url=server.url, retry_seconds=1.0)) for _ in range(3)]
    try:
        gateway, worker = redis_check(backends[0]), redis_check(backends[1])
        assert await gateway() is True and await worker() is True
        assert await gateway() is True
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        before = lost_total()

        server.stop(sig=signal.SIGKILL)
        shutil.rmtree(server.folder)  # its volume lost
        server.start()

        caplog.clear()
        deadline = time.monotonic() + 60
        while await gateway() is not True:  # the client reconnects
            assert time.monotonic() < deadline, "Redis did not come back"
            await asyncio.sleep(0.2)
        assert await worker() is True
        assert await gateway() is True  # reported once
        assert await redis_check(backends[2])() is True  # a process started since: nothing it read was lost
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 2, errors
        assert all(e.startswith(f"{LOST}: the marker bots:fleet:data") and "AOF" in e for e in errors), errors
        assert lost_total() - before == 2

        async with redis.asyncio.Redis(port=server.port, decode_responses=True) as client:
            marker = DataMarker()
            assert str(await marker.report(client)).startswith(f"{LOST} about 0 minutes ago")
            assert await marker.report(client, recent=0) is None  # a day later
            await client.delete(marker.key)
            assert await marker.check(client) is None  # the first reading writes it
            assert await marker.report(client) is None
    finally:
        for backend in backends:
            await backend.close()
        server.stop()
