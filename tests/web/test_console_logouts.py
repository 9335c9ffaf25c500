"""Console logouts hold everywhere (issue 35): stored in Redis in a fleet, so a cookie logged out on one gateway is
refused by another; in a file under ``BOT_DATA_DIR`` in one process, so a logout survives a restart. Login attempts
take turns fleet-wide: guesses sent at once to two gateways wait in one line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bots.app import build_agent
from bots.console.auth import LOGIN_SPACING, SESSION_COOKIE, Sessions
from bots.console.logouts import LocalLoginTurns, LocalLogouts, RedisLoginTurns
from bots.console.server import LOGOUTS_FILE, Console
from bots.ops import Ops
from bots.settings import Settings
from core import Agent

from .conftest import SECRET, _free_port, client, login, scripted

StartConsole = Callable[..., Coroutine[Any, Any, Console]]


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    built = build_agent(_settings(tmp_path), platforms=["cli"], model=scripted("hi"))
    await built.start()
    try:
        yield built
    finally:
        await built.stop()


@pytest.fixture
async def start_console(agent: Agent, tmp_path: Path) -> AsyncIterator[StartConsole]:
    """``await start_console(redis=(client, prefix) | None)``: a console of its own (as another gateway's, or
    the same process's after a restart) on a free port, on the same data dir."""
    started: list[Console] = []

    async def start(*, redis: tuple[Any, str] | None = None) -> Console:
        console = Console(agent, _settings(tmp_path), ops=Ops(), redis=redis)
        await console.start()
        started.append(console)
        return console

    try:
        yield start
    finally:
        for console in started:
            await console.stop()


def _settings(tmp_path: Path) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        bot={"data_dir": tmp_path / "data"},
        llm={"provider": "scripted"},
        console={"secret": SECRET, "port": _free_port()},
    )


async def _fleet_page(console: Console, cookie: str) -> int:
    """The status of the fleet page with the session ``cookie``, on ``console`` (303: to the login page)."""
    assert console.address is not None
    headers = {"Cookie": f"{SESSION_COOKIE}={cookie}"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(console.address + "fleet", headers=headers, allow_redirects=False) as response,
    ):
        return response.status


async def _log_in_and_out(console: Console) -> str:
    """Log in on ``console`` and out again; the session cookie that was logged out."""
    assert console.address is not None
    async with client() as session:
        token = await login(session, _Bot(console))
        cookie = next(c.value for c in session.cookie_jar if c.key == SESSION_COOKIE)
        assert await _fleet_page(console, cookie) == 200
        async with session.post(console.address + "logout", data={"csrf": token}, allow_redirects=False) as r:
            assert r.status == 303
        assert await _fleet_page(console, cookie) == 303
    return cookie


class _Bot:
    """What ``conftest.login`` reads of a bot: its console's address."""

    def __init__(self, console: Console) -> None:
        assert console.address is not None
        self.console_url = console.address


async def test_a_console_logout_is_refused_by_every_gateway_sharing_redis(
    start_console: StartConsole, redis_client: Any
) -> None:
    first = await start_console(redis=(redis_client, "bots:"))
    second = await start_console(redis=(redis_client, "bots:"))
    cookie = await first.sessions.login(SECRET)
    assert cookie is not None and await _fleet_page(second, cookie) == 200  # one secret, any gateway
    logged_out = await _log_in_and_out(first)
    assert await _fleet_page(second, logged_out) == 303  # refused on the other gateway too
    assert await _fleet_page(first, logged_out) == 303
    keys = await redis_client.keys("bots:console:logout:*")
    ttl = await redis_client.ttl(keys[0])
    assert len(keys) == 1 and 0 < ttl <= first.sessions.seconds  # kept as long as the session would have lasted


async def test_a_console_logout_survives_a_restart(start_console: StartConsole, tmp_path: Path) -> None:
    before = await start_console()
    logged_out = await _log_in_and_out(before)
    await before.stop()
    after = await start_console()  # the same data dir, a new process's console
    assert await _fleet_page(after, logged_out) == 303
    fresh = await after.sessions.login(SECRET)
    assert fresh is not None and await _fleet_page(after, fresh) == 200
    stored = tmp_path / "data" / LOGOUTS_FILE
    assert stored.stat().st_mode & 0o777 == 0o600
    again = Sessions(SECRET, hours=1, logouts=LocalLogouts(stored))
    assert await again.session(logged_out) is None and await again.session(fresh) is not None


async def test_the_console_login_throttle_is_fleet_wide(start_console: StartConsole, redis_client: Any) -> None:
    gateways = [await start_console(redis=(redis_client, "bots:")) for _ in range(2)]
    statuses: list[int] = []

    async def guess(console: Console, secret: str) -> None:
        assert console.address is not None
        async with client() as session:
            url = console.address + "login"
            async with session.post(url, data={"secret": secret}, allow_redirects=False) as response:
                statuses.append(response.status)

    started = time.monotonic()
    async with asyncio.TaskGroup() as group:  # two guesses at each gateway at once, then the secret itself
        for index in range(4):
            group.create_task(guess(gateways[index % 2], f"wrong-guess-{index}"))
        await asyncio.sleep(0.05)
        group.create_task(guess(gateways[0], SECRET))
    took = time.monotonic() - started
    assert sorted(statuses) == [303, 403, 403, 403, 403]
    assert took >= 4 * LOGIN_SPACING - 0.1  # five attempts in one line, whichever gateway they reached


async def test_login_turns_are_taken_in_one_line_by_every_process(redis_client: Any) -> None:
    first, second = (RedisLoginTurns(redis_client, prefix="bots:", spacing=10.0) for _ in range(2))
    waits = [await turns.reserve() for turns in (first, second, first, second)]
    assert waits[0] == 0 and [round(w or 0) for w in waits] == [0, 10, 20, 30]
    assert await first.reserve() is None  # 40 s away: refused at once, never compared
    assert await second.wait() is False


async def test_a_guesser_makes_no_other_client_wait_for_its_login(redis_client: Any) -> None:
    """Issue 49 point 4: the login throttle is per client (its address), in every process of the fleet and in one;
    before, a correct login waited behind someone else's guesses (5.3 s measured)."""
    first, second = (RedisLoginTurns(redis_client, prefix="bots:", spacing=10.0) for _ in range(2))
    guesses = [await turns.reserve("203.0.113.7") for turns in (first, second, first)]
    assert [round(w or 0) for w in guesses] == [0, 10, 20]
    assert await second.reserve("198.51.100.1") == 0  # the operator's own login: no wait
    assert round(await first.reserve("203.0.113.7") or 0) == 30
    assert await first.reserve("203.0.113.7") is None  # the guesser's line is full: refused at once
    assert await first.reserve("198.51.100.1") is not None  # not the operator's
    local = LocalLoginTurns(10.0, clock=lambda: 100.0)
    assert [local.reserve("203.0.113.7") for _ in range(4)] == [0.0, 10.0, 20.0, 30.0]
    assert local.reserve("203.0.113.7") is None and local.reserve("198.51.100.1") == 0.0
