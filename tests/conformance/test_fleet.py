"""The fleet's exactly-once ingest, on every platform: ``bots gateway`` (two, where the platform lets several
listen: the others stand by or share the events) and a ``bots worker`` as processes on a real redis-server, the
platform's real client in each against its fake. Each message gets exactly one answer, posted by the worker; where
the fake can hand an event to the fleet twice (Slack, to each gateway's connection), it is still answered once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from bots.models import SCRIPTED_REPLY
from tests.bots_fleet import Process, start_fleet, stop_all
from tests.fleet.server import RedisServer, free_port

from .conftest import applies
from .drivers import DEADLINE, Driver


async def _serving(process: Process) -> None:
    """Wait until ``process`` answers on its health endpoint."""
    async with aiohttp.ClientSession() as http, asyncio.timeout(DEADLINE):
        while True:
            try:
                status, _ = await process.get(http, "/healthz")
            except aiohttp.ClientError:
                status = 0
            if status == 200:
                return
            await asyncio.sleep(0.1)


async def test_each_message_is_answered_once_by_the_fleet(
    driver: Driver, redis_server: RedisServer, processes: list[Process], tmp_path: Path, settings_env: None
) -> None:
    applies(driver, "fleet")
    settings = {"REDIS_URL": redis_server.url, "REDIS_LEASE_SECONDS": "1", **driver.fleet_env()}
    gateway, [worker] = await start_fleet(tmp_path, settings, processes)
    second = Process("gateway", driver.another_gateway(gateway.env | {"HTTP_PORT": str(free_port())}), tmp_path)
    processes.append(second)
    await second.start()
    await _serving(second)  # (up, listening or standing by: a SIGTERM is then a clean stop)
    await driver.ready()
    duplicated = driver.duplicate_deliveries()
    if duplicated:
        await driver.wait(lambda: driver.connections() >= 2)
    asked = ["first question", "second question", "third question"]
    for count, text in enumerate(asked, start=1):
        await driver.say(text)
        await driver.wait(lambda count=count: len(driver.replies()) >= count)  # type: ignore[misc]
    await stop_all(second, gateway, worker)
    assert driver.replies() == [SCRIPTED_REPLY] * len(asked)
    assert not duplicated or driver.extra_deliveries() >= len(asked)  # (each went to both gateways)
