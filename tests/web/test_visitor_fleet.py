"""Web visitors in a fleet (issue 35), with ``bots gateway`` and ``bots worker`` processes on a real redis-server:
an idle visitor's identity and every key it left in Redis expire (``WEB_VISITOR_IDLE_DAYS``), and the new-visitor
cap (``WEB_NEW_VISITORS_PER_HOUR``) is counted for the whole fleet, not per gateway."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from bots.models import SCRIPTED_REPLY
from tests.bots_fleet import Process, env_for, start_fleet, stop_all
from tests.fleet.server import RedisServer, free_port

from .conftest import WEB_SECRET, client
from .visiting import talk, visitor_of

IDLE_DAYS = 0.0001
"""8.64 seconds: the sweep runs every second."""


def _web(redis_server: RedisServer, port: int, **more: str) -> dict[str, str]:
    return {"REDIS_URL": redis_server.url, "WEB_PORT": str(port), "WEB_SECRET": WEB_SECRET, **more}


async def _lasting_keys(redis_client: Any, visitor: str) -> list[str]:
    """The keys naming ``visitor`` that never expire."""
    found = [key for key in await redis_client.keys("*") if visitor in key]
    return sorted([key for key in found if await redis_client.ttl(key) == -1])


async def test_web_visitor_identities_and_their_keys_expire_in_a_fleet(
    tmp_path: Path, redis_server: RedisServer, redis_client: Any, processes: list[Process]
) -> None:
    port = free_port()
    settings = _web(redis_server, port, WEB_VISITOR_IDLE_DAYS=str(IDLE_DAYS))
    gateway, [worker] = await start_fleet(tmp_path, settings, processes)
    chat = f"http://127.0.0.1:{port}/"
    async with client() as visitor:
        await talk(chat, visitor, "hello fleet", until=SCRIPTED_REPLY)
        who = visitor_of(visitor)
    assert await redis_client.zscore("bots:visitors", who) is not None
    wanted = {f"bots:{{web:chat:{who}}}:meta", f"bots:{{web:chat:{who}}}:mem:working"}
    kept: list[str] = []
    async with asyncio.timeout(10):  # the worker saves the run's memory after the answer is posted
        while not wanted <= set(kept := await _lasting_keys(redis_client, who)):
            await asyncio.sleep(0.05)
    assert wanted <= set(kept), kept

    async with asyncio.timeout(30):  # idle 8.64 s, then the next sweep
        while await _lasting_keys(redis_client, who) or await redis_client.zscore("bots:visitors", who) is not None:
            await asyncio.sleep(0.5)
    forgot = await gateway.wait_for("forgot 1 web visitor")
    assert forgot["level"] == "INFO"
    await stop_all(gateway, worker)


async def test_the_new_visitor_cap_is_counted_fleet_wide(
    tmp_path: Path, redis_server: RedisServer, redis_client: Any, processes: list[Process]
) -> None:
    ports = [free_port(), free_port()]
    gateways = [
        Process(
            "gateway",
            env_for(
                tmp_path, **_web(redis_server, port, WEB_NEW_VISITORS_PER_HOUR="2", WEB_TRUSTED_PROXIES="127.0.0.1")
            ),
            tmp_path,
        )
        for port in ports
    ]
    processes.extend(gateways)
    for gateway in gateways:
        await gateway.start()
    for gateway in gateways:
        await gateway.wait_for("gateway listening")

    async def new_visitor(port: int, address: str) -> int:
        headers = {"X-Forwarded-For": address, "Host": "chat.example"}
        async with aiohttp.ClientSession() as fresh, fresh.get(f"http://127.0.0.1:{port}/", headers=headers) as r:
            return r.status

    first, second = ports
    assert await new_visitor(first, "203.0.113.9") == 200
    assert await new_visitor(second, "203.0.113.9") == 200  # the second, at another gateway
    assert await new_visitor(first, "203.0.113.9") == 429  # two in the hour, whichever gateway counted them
    assert await new_visitor(second, "203.0.113.9") == 429
    assert await new_visitor(second, "203.0.113.10") == 200  # another address
    assert 0 < await redis_client.pttl("bots:newcomers:203.0.113.9") <= 3_600_000
    await stop_all(*gateways)
