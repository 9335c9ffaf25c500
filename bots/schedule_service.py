"""The bot's schedules (``core.schedules``) as ``build_agent`` wires them: the store and firing settings, the
operator's schedules set at start (``bots.schedules``), the ``bots_schedules_pending`` gauge, and the next firings
``bots config`` shows."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from core import Setup, service
from core.schedules import Clock, Schedule, Schedules, ScheduleStore, check_zone

from .schedules import seed_operator_schedules, upcoming_lines

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("attach_schedules", "next_firings")

log = logging.getLogger("bots.schedules")


def attach_schedules(
    agent: Setup, settings: Settings, store: ScheduleStore | None, *, fire: bool, clock: Clock | None = None
) -> Schedules:
    """Give ``agent`` its schedules (``store``: None keeps them in its memory store, one process), fired here
    with ``fire``, on ``clock`` (default: the system's); at start, the operator's (``BOT_SCHEDULES``) are set,
    and ``bots_schedules_pending`` is kept up to date while it runs."""
    from .metrics import SCHEDULES_PENDING

    bot = settings.bot
    schedules = Schedules.attach(
        agent,
        store,
        grace=bot.schedules_grace,
        poll=bot.schedules_poll,
        lease=max(5.0, settings.redis.lease_seconds) if agent.distributed else 30.0,
        fire=fire,
        clock=clock,
    )
    every = max(5.0, bot.schedules_poll * 5)
    tasks: list[asyncio.Task[None]] = []

    async def count() -> None:
        while True:
            try:
                SCHEDULES_PENDING.set(await schedules.pending())
            except Exception as exc:  # the store is down (Redis restarting): counted again later
                log.debug("could not count the pending schedules: %s", exc)
            await asyncio.sleep(every)

    async def start(_agent: Setup) -> None:
        if bot.schedules:
            try:
                await seed_operator_schedules(schedules, bot.schedules, default_tz=bot.timezone)
            except Exception as exc:
                log.warning("BOT_SCHEDULES could not be set now (%s); they are set at the next start", exc)
        tasks.append(asyncio.get_running_loop().create_task(count(), name="schedules-pending"))

    async def stop(_agent: Setup) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        tasks.clear()

    agent.add_service(service(name="schedules-operator", start=start, stop=stop))
    return schedules


async def next_firings(settings: Settings, *, limit: int = 10, timeout: float = 3.0) -> tuple[list[str], list[str]]:
    """The next firings ``bots config`` shows, and the problems met: the stored schedules due soonest (in Redis
    when ``REDIS_URL`` or ``REDIS_SENTINELS`` is set, else in ``BOT_DATA_DIR``'s SQLite memory store, if there is
    one) and the operator's ``BOT_SCHEDULES``."""
    lines: list[str] = []
    problems: list[str] = []
    upcoming: list[Schedule] = []
    try:
        async with asyncio.timeout(timeout):
            upcoming = await _stored_upcoming(settings, limit)
    except Exception as exc:
        problems.append(f"schedules: could not read the next firings ({type(exc).__name__}: {exc})")
    for found in upcoming:
        when = found.next_fire_at
        shown = when.astimezone(check_zone(found.tz)).strftime("%Y-%m-%d %H:%M") if when else "-"
        how = f"cron {found.cron}" if found.cron else f"every {found.every:g}s" if found.every else "once"
        lines.append(f"{shown} {found.tz}  {found.conversation}  {how}  {found.id}  by {found.creator or 'operator'}")
    if settings.bot.schedules:
        lines.append("BOT_SCHEDULES (next firing of each):")
        lines += [f"  {line}" for line in upcoming_lines(settings.bot.schedules, default_tz=settings.bot.timezone)]
    return lines, problems


async def _stored_upcoming(settings: Settings, limit: int) -> list[Schedule]:
    if {"url", "sentinels"} & settings.redis.model_fields_set:  # a fleet (as ``bots config`` reads Redis)
        from core.fleet import RedisBackend, RedisScheduleStore

        backend = RedisBackend(settings.redis.to_config(), client_name="bots-config")
        try:
            return await RedisScheduleStore(backend).upcoming(limit)
        finally:
            await backend.close()
    path = settings.bot.data_dir / "memory.sqlite3"
    if not path.is_file():
        return []
    from core import SQLiteStore
    from core.schedules import MemoryScheduleStore

    memory = SQLiteStore(path)
    try:
        return await MemoryScheduleStore(memory).upcoming(limit)
    finally:
        await memory.close()
