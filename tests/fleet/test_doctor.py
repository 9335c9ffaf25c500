"""``bots doctor`` against a running fleet (``bots gateway`` and ``bots worker`` processes on a real redis-server):
both alive on one version and the same entry format, the backlog read; then with the worker stopped and a batch in
the dead-letter list, both said, exit 1."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bots.version import version
from core.fleet.entry_format import ENTRY_FORMAT
from tests.bots_fleet import Process, env_for, start_fleet, stop_all
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer, free_port


async def doctor(tmp_path: Path, settings: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bots.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_for(tmp_path, **settings),
        timeout=60,
    )
    assert done.stdout.startswith("{"), done.stderr
    return done.returncode, json.loads(done.stdout)


async def test_doctor_reads_the_running_fleet(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, client: Any, processes: list[Process]
) -> None:
    settings = {"REDIS_URL": redis_server.url, "TELEGRAM_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.api_url}
    gateway, [worker] = await start_fleet(tmp_path, settings, processes)
    code, report = await doctor(tmp_path, {"REDIS_URL": redis_server.url})
    assert code == 0 and report["ok"], report
    assert sorted(p["role"] for p in report["processes"]) == ["gateway", "worker"]
    assert {(p["version"], p["entry_format"]) for p in report["processes"]} == {(version(), ENTRY_FORMAT)}
    assert report["warnings"] == [] and report["backlog"]["dead"] == 0

    await stop_all(worker)  # a worker leaves the fleet's list as it stops
    await client.rpush("bots:dead", json.dumps({"cid": "telegram:chat:9", "id": "3", "entries": [{"t": 1.0}]}))
    code, report = await doctor(tmp_path, {"REDIS_URL": redis_server.url})
    assert code == 1 and not report["ok"]
    assert [p["role"] for p in report["processes"]] == ["gateway"]
    assert any(line.startswith("no worker alive") for line in report["problems"])
    assert any("1 batches in the dead-letter list (bots:dead)" in line for line in report["problems"])
    await stop_all(gateway)

    code, report = await doctor(tmp_path, {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    assert code == 1 and report["problems"][0].startswith("Redis at redis://127.0.0.1:")


async def test_doctor_and_the_metric_say_writes_wait_for_a_replica(tmp_path: Path, redis_server: RedisServer) -> None:
    """``REDIS_MIN_REPLICAS=1`` and a primary without a replica (what the promoted one is after the primary is gone
    for good with one replica): every acknowledgement waits. The doctor names it, with what to do, and the gauge the
    alert rule reads is 1; once a replica is in sync, the doctor says so and the gauge is 0 (issue 50)."""
    from bots.metrics import REDIS_REPLICAS_IN_SYNC, REDIS_WRITES_WAIT
    from bots.worker import redis_sampler
    from core.fleet import QueueConfig, RedisBackend
    from core.fleet.replica_stall import NONE_IN_SYNC

    from .sentinel import ask

    settings = {"REDIS_URL": redis_server.url, "REDIS_MIN_REPLICAS": "1"}
    code, report = await doctor(tmp_path, settings)
    assert code == 1
    (stall,) = [line for line in report["problems"] if line.startswith(NONE_IN_SYNC)]
    assert f"the primary 127.0.0.1:{redis_server.port} has 0 replicas connected" in stall
    assert "bring the old primary back" in stall and "REDIS_MIN_REPLICAS=0" in stall
    backend = RedisBackend(QueueConfig(url=redis_server.url, min_replicas=1))
    replica = RedisServer(tmp_path / "replica")
    try:
        sample = redis_sampler(backend)
        await sample()
        assert (REDIS_WRITES_WAIT._value.get(), REDIS_REPLICAS_IN_SYNC._value.get()) == (1, 0)

        await asyncio.to_thread(replica.start)
        ask(replica.port, "REPLICAOF", "127.0.0.1", str(redis_server.port))
        for _ in range(200):  # online, and acknowledging (every second)
            await sample()
            if REDIS_WRITES_WAIT._value.get() == 0:
                break
            await asyncio.sleep(0.05)
        assert (REDIS_WRITES_WAIT._value.get(), REDIS_REPLICAS_IN_SYNC._value.get()) == (0, 1)
        code, report = await doctor(tmp_path, settings)
        assert not any(NONE_IN_SYNC in line for line in report["problems"]), report["problems"]
        assert "1 replicas in sync with the primary (REDIS_MIN_REPLICAS=1): writes are confirmed" in report["lines"]
    finally:
        await backend.close()
        await asyncio.to_thread(replica.stop)
