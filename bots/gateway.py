"""``bots gateway``: the platform listeners only. Messages are filtered, deduplicated and stored in
their conversation's Redis inbox; ``bots worker`` processes answer them.

Run one gateway per platform token. A second gateway on the same token stands by: a lease in Redis
(``<prefix>lock:<platform>:<hash of the token>``) lets only one of them poll Telegram or hold the
Discord connection, and the standby takes over within ``REDIS_LEASE_SECONDS`` (at least
``MIN_LOCK_TTL``) if the active one dies.

Redis unreachable: the listener keeps what it fetched and tries again (Telegram: the update offset moves
only once an update is stored, so nothing fetched is lost even if the gateway dies meanwhile); once the
lease runs out it stops listening and stands by until Redis answers again, then takes the lease back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import signal
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from core import ScriptedModel
from core.errors import ConfigError, DispatchError, ModelError

from .config import platforms
from .settings import Settings
from .worker import queue_config, redis_check

if TYPE_CHECKING:
    from core import Agent
    from core.redis import PlatformLock

__all__ = ("MIN_LOCK_TTL", "lock_names", "run_gateway")

log = logging.getLogger("bots.gateway")

MIN_LOCK_TTL = 1.0
"""Seconds a dead gateway's platform lease lasts at least before a standby gateway takes over."""
REDIS_DOWN_PAUSE = 0.5
"""Seconds a standby gateway waits before asking Redis for the lease again after Redis failed (each
attempt already retries for ``REDIS_RETRY_SECONDS``)."""


def lock_names(settings: Settings) -> list[str]:
    """One lease name per configured platform token (a hash of the token, never the token)."""
    names = []
    for platform in platforms(settings):
        token = getattr(settings, platform).token
        digest = hashlib.sha256(token.get_secret_value().encode()).hexdigest()[:16]
        names.append(f"{platform}:{digest}")
    return names


def _no_model() -> ScriptedModel:
    return ScriptedModel(lambda request: ModelError("bots gateway does not run the model: bots worker does"))


async def _unless(work: Awaitable[Any], stop: asyncio.Event) -> bool:
    """Await ``work`` unless ``stop`` is set first (then ``work`` is cancelled); True if it finished."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


async def _acquire(lock: PlatformLock, stop: asyncio.Event) -> bool:
    """Wait until this process holds ``lock`` (True) or ``stop`` is set (False); while Redis cannot be
    reached, keep trying (a gateway outlives a Redis restart)."""
    failing = False
    while True:
        try:
            held = await _unless(lock.acquire(), stop)
        except DispatchError as exc:
            if not failing:
                log.warning("standing by until Redis answers: %s", exc)
                failing = True
            if not await _unless(asyncio.sleep(REDIS_DOWN_PAUSE), stop):
                return False
            continue
        if failing and held:
            log.warning("Redis answers again: took the %s lease", lock.name)
        return held


async def _first(agent: Agent, *events: asyncio.Event) -> BaseException | None:
    """Wait until any of ``events`` is set (None) or a service of ``agent`` reports a fatal error (it)."""
    failed = asyncio.ensure_future(agent.failed())
    waiters = [failed, *(asyncio.ensure_future(e.wait()) for e in events)]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    return failed.result() if failed.done() and not failed.cancelled() else None


async def run_gateway(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Listen until ``stop`` is set (or, without one, until SIGTERM / SIGINT). While another gateway
    holds a platform token's lease this one stands by; if the lease is lost it stops listening at once
    and stands by again."""
    from core.redis import PlatformLock, RedisBackend, RedisDispatcher, RedisMemoryStore

    from .app import build_agent, build_history
    from .ops import ops

    names = lock_names(settings)
    if not names:
        raise ConfigError("bots gateway has no platform to listen to: set DISCORD_TOKEN and/or TELEGRAM_TOKEN")
    loop = asyncio.get_running_loop()
    own_signals = stop is None
    stopping = stop if stop is not None else asyncio.Event()
    if own_signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
    backend = RedisBackend(queue_config(settings), client_name="bots-gateway")
    ops.add_check("redis", redis_check(backend))
    try:
        await backend.run(backend.client.ping, what="connecting")
        while not stopping.is_set():
            ttl = max(MIN_LOCK_TTL, backend.config.lease_seconds)
            locks = [PlatformLock(backend, name, ttl=ttl) for name in names]
            try:
                for lock in locks:
                    if not await _acquire(lock, stopping):
                        return
                agent = build_agent(
                    settings,
                    dispatcher=RedisDispatcher(backend),
                    memory=RedisMemoryStore(backend),
                    history=build_history(settings, distributed=True),  # for /forget
                    model=_no_model(),
                    listen=True,
                    tools=False,
                    stop_timeout=settings.bot.stop_timeout,
                )
                ops.attach(agent, check_model=False)
                failure: BaseException | None = None
                try:
                    await agent.start()
                    log.info("gateway listening (%s); inputs go to %s", ", ".join(names), backend.config.shown_url)
                    failure = await _first(agent, stopping, *(lock.lost for lock in locks))
                except DispatchError as exc:  # Redis went away just as the lease was taken
                    log.warning("could not start listening: %s", exc)
                finally:
                    await agent.stop()
                    ops.detach(agent)
                if failure is not None:
                    raise failure  # a platform took the bot's token back, for example: exit with it
            finally:
                for lock in locks:
                    await lock.release()
            if not stopping.is_set():
                log.warning("a platform lease was lost (another gateway took over, or Redis is down); standing by")
    finally:
        ops.remove_check("redis")
        if own_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        await backend.close()
