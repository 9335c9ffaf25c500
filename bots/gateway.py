"""``bots gateway``: the platform listeners only. Messages are filtered, deduplicated and stored in
their conversation's Redis inbox; ``bots worker`` processes answer them.

Run as many gateways as the ingest needs; they share the work through Redis:

- Discord: the ``DISCORD_SHARD_COUNT`` shards (gateway connections) are divided among the gateways by
  leases (``core.fleet.ShardLeases``, ``<prefix>shards:discord:<hash of the token>:<count>:...``, the platform's
  ``Platform.gateway``): each holds
  a fair share, a dead gateway's shards are taken over within ``REDIS_LEASE_SECONDS`` (at least
  ``MIN_LOCK_TTL``) plus an identify slot, a new one takes its share from the others, and a shard is never
  connected by two of them. IDENTIFYs are spaced across all of them (``DISCORD_IDENTIFY_INTERVAL`` per
  concurrency bucket, ``core.fleet.IdentifySlots``).
- Telegram webhooks: every gateway serves the webhook (put them behind one load balancer at
  ``TELEGRAM_WEBHOOK_URL``); each answers 200 only once the update is stored.
- Telegram long polling: getUpdates allows one poller, so one gateway polls and the others stand by on a lease
  (``<prefix>lock:telegram:<hash of the token>``), taking over within ``REDIS_LEASE_SECONDS`` if it dies.

Redis unreachable: the listener keeps what it fetched and tries again (Telegram: the update offset moves
only once an update is stored, so nothing fetched is lost even if the gateway dies meanwhile); once the
lease runs out it stops listening and stands by until Redis answers again, then takes the lease back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import importlib.util
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from core import ScriptedModel
from core.errors import ConfigError, DispatchError, ModelError
from extensions.platforms import GatewayPeriod
from extensions.platforms import platform as registered

from .config import platform_settings, platforms
from .metrics import set_shards
from .ops import ops
from .settings import Settings
from .worker import queue_config, redis_check, redis_sampler

if TYPE_CHECKING:
    from core import Agent
    from core.fleet import PlatformLock, RedisBackend

    from .console.roles import FleetRole

__all__ = ("MIN_LOCK_TTL", "lock_names", "run_gateway", "token_digest")

log = logging.getLogger("bots.gateway")

MIN_LOCK_TTL = 1.0
"""Seconds a dead gateway's platform lease lasts at least before a standby gateway takes over."""
REDIS_DOWN_PAUSE = 0.5
"""Seconds a standby gateway waits before asking Redis for the lease again after Redis failed (each
attempt already retries for ``REDIS_RETRY_SECONDS``)."""


def token_digest(settings: Settings, platform: str) -> str:
    """A short hash of ``platform``'s token, naming its leases in Redis (never the token itself)."""
    token = platform_settings(settings, registered(platform)).token
    return hashlib.sha256(token.get_secret_value().encode()).hexdigest()[:16]


def lock_names(settings: Settings) -> list[str]:
    """One single-holder lease name per platform token that only one gateway may listen with (a platform whose
    ingest is ``single``: Telegram long polling). Shards and webhooks are shared by every gateway."""
    names = []
    for name in platforms(settings):
        found = registered(name)
        if found.settings_group and found.ingest(platform_settings(settings, found)) == "single":
            names.append(f"{name}:{token_digest(settings, name)}")
    return names


def _source(settings: Settings, name: str) -> str:
    """What the gateway listens to on platform ``name``, for its log."""
    found = registered(name)
    group = platform_settings(settings, found)
    said = f"{name} {found.listening(group)}".strip()
    if group is not None and found.ingest(group) == "single":
        said += f", lease {name}:{token_digest(settings, name)}"
    return said


def _preload(name: str) -> None:
    """Import the runtime module of platform ``name`` (its SDK), if its package has one beside its declaration
    (``extensions.slack.platform``: ``extensions.slack.runtime``); a platform from another package may have none."""
    package = registered(name).build.__module__.rpartition(".")[0]
    if package and importlib.util.find_spec(f"{package}.runtime") is not None:
        importlib.import_module(f"{package}.runtime")


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
    """Listen until ``stop`` is set (or, without one, until SIGTERM / SIGINT). Each platform is served by its
    own agent: Discord's shards are shared with the other gateways at once, while Telegram long polling stands
    by as long as another gateway holds its lease (and stands by again at once if the lease is lost). A
    platform that fails for good (a token refused) ends the gateway with that error."""
    from core.fleet import RedisBackend

    from .console.roles import FleetRole, web_wanted

    chosen = platforms(settings) + (["web"] if web_wanted(settings) else [])
    if not chosen:
        raise ConfigError(
            "bots gateway has no platform to listen to: set DISCORD_TOKEN and/or TELEGRAM_TOKEN, or WEB_PORT"
        )
    loop = asyncio.get_running_loop()
    own_signals = stop is None
    stopping = stop if stop is not None else asyncio.Event()
    if own_signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
    backend = RedisBackend(queue_config(settings), client_name="bots-gateway")
    ops.add_check("redis", redis_check(backend))
    ops.add_info("redis", backend.state)
    ops.add_sampler("redis", redis_sampler(backend))
    role = FleetRole(settings, backend, role="gateway")  # the console's fleet page, the web chat's relay
    try:
        await backend.run(backend.client.ping, what="connecting")
        await role.start()
        for platform in chosen:  # imported now, not while another platform's leases need renewing
            _preload(platform)
        try:
            async with asyncio.TaskGroup() as tg:
                for platform in chosen:
                    tg.create_task(_serve(settings, backend, stopping, platform, role), name=f"gateway:{platform}")
        except BaseExceptionGroup as group:  # the first platform that failed says why the gateway ends
            raise group.exceptions[0] from None
    finally:
        await role.stop()
        ops.remove_check("redis")
        ops.remove_info("redis")
        if own_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        await backend.close()


async def _serve(
    settings: Settings, backend: RedisBackend, stopping: asyncio.Event, platform: str, role: FleetRole
) -> None:
    """Serve one platform until ``stopping`` is set: take its lease if it needs one (Telegram polling), listen,
    stand by again whenever the lease is lost."""
    from core.fleet import PlatformLock

    while not stopping.is_set():
        ttl = max(MIN_LOCK_TTL, backend.config.lease_seconds)
        names = [name for name in lock_names(settings) if name.split(":", 1)[0] == platform]
        locks = [PlatformLock(backend, name, ttl=ttl) for name in names]
        try:
            for lock in locks:
                if not await _acquire(lock, stopping):
                    return
            await _listen(settings, backend, stopping, locks, ttl=ttl, platform=platform, role=role)
        finally:
            for lock in locks:
                await lock.release()
        if not stopping.is_set():
            log.warning("%s: stopped listening (its lease was lost, or Redis is down); standing by", platform)
            await _unless(asyncio.sleep(REDIS_DOWN_PAUSE), stopping)


async def _listen(
    settings: Settings,
    backend: RedisBackend,
    stopping: asyncio.Event,
    locks: list[PlatformLock],
    *,
    ttl: float,
    platform: str,
    role: FleetRole,
) -> None:
    """One listening period of one platform's agent (Discord's shards leased meanwhile) until ``stopping`` is
    set, a lock is lost, or the platform fails for good (raised)."""
    from core.fleet import (
        RedisApprovalStore,
        RedisDispatcher,
        RedisMemoryStore,
        RedisScheduleStore,
        RedisUsage,
    )

    from .app import build_agent, build_history

    agent = build_agent(
        settings,
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
        history=build_history(settings, distributed=True),  # for /forget
        usage=RedisUsage(backend),  # for /stats
        schedules=RedisScheduleStore(backend),  # for /reminders; the workers fire them
        fire_schedules=False,
        approvals=RedisApprovalStore(backend),  # presses are decided here; the workers time requests out
        sweep_approvals=False,
        model=_no_model(),
        listen=True,
        tools=False,
        platforms=[platform],
        stop_timeout=settings.bot.stop_timeout,
        web_fleet=role.web_options() if platform == "web" else role.fleet_options(),
    )
    found = registered(platform)
    part = None
    if found.gateway is not None:
        period = GatewayPeriod(
            settings=platform_settings(settings, found),
            backend=backend,
            lease_name=f"{platform}:{token_digest(settings, platform)}",
            ttl=ttl,
            stopping=stopping,
            observe=_observe,
            shards=lambda count, held: set_shards(platform, count=count, held=held),
        )
        part = found.gateway(agent, period)
    ops.attach(agent, check_model=False)
    failure: BaseException | None = None
    try:
        await agent.start()
        if platform == "web":  # the operator console (with CONSOLE_SECRET) beside the web chat
            await role.start_console(agent, ops=ops)
        async with part if part is not None else contextlib.nullcontext():
            log.info("gateway listening (%s); inputs go to %s", _source(settings, platform), backend.config.shown_url)
            failure = await _first(agent, stopping, *(lock.lost for lock in locks))
    except DispatchError as exc:  # Redis went away just as the lease was taken
        log.warning("could not start listening: %s", exc)
    finally:
        if platform == "web":
            from .console.server import stop_console

            await stop_console(agent)
        await agent.stop()
        ops.detach(agent)
    if failure is not None:
        raise failure  # a platform took the bot's token back, for example: exit with it


def _observe(name: str, info: Callable[[], dict[str, Any]]) -> Callable[[], None]:
    """Show a platform's ``info()`` on ``/readyz`` and sample it for the metrics (``GatewayPeriod.observe``)."""

    async def sample() -> None:
        info()

    ops.add_info(name, info)
    ops.add_sampler(name, sample)

    def remove() -> None:
        ops.remove_info(name)
        ops.samplers.pop(name, None)

    return remove
