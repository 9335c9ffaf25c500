"""``bots worker``: run conversations from the Redis queue and post the replies through the platforms'
REST APIs (no gateway connection). Start as many as needed, on as many machines: each conversation runs
in one worker at a time, a crashed worker's conversations are taken over after ``REDIS_LEASE_SECONDS``.

SIGTERM: take no new work, let running answers finish for up to ``BOT_STOP_TIMEOUT`` seconds, then hand
the unfinished ones back to the queue (another worker answers them; nothing is posted twice).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from core.errors import ConfigError

from .settings import Settings

if TYPE_CHECKING:
    from core.fleet import QueueConfig, RedisBackend

__all__ = ("queue_config", "redis_check", "redis_sampler", "run_worker")

log = logging.getLogger("bots.worker")


def queue_config(settings: Settings) -> QueueConfig:
    """The queue configuration from ``REDIS_*``."""
    try:
        config = settings.redis.to_config()
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return dataclasses.replace(config, busy=settings.bot.busy.value, quiet_ms=settings.bot.quiet_ms)


def redis_check(backend: RedisBackend) -> Any:
    """A readiness check: Redis answers a PING (the primary, with sentinels) and, with REDIS_MIN_REPLICAS,
    has that many replicas in sync (online and acknowledging lately, as a write's ``WAIT`` needs them: a replica
    still loading the primary's data, or paused, is connected and confirms nothing). Not ready meanwhile, saying
    for how many seconds the calls have been failing (a failover takes the sentinels' down-after-milliseconds plus
    the promotion); once both hold, the outage is over. It also reads the marker of the fleet's data
    (``core.fleet.data_marker``): one replaced since the last check is logged as an ERROR and counted in
    ``bots_redis_data_lost_total``."""
    from core.fleet.data_marker import DataMarker

    from .metrics import REDIS_DATA_LOST

    marker = DataMarker(prefix=backend.keys.prefix)

    async def check() -> bool | str:
        from core.fleet.backend import replicas_in_step

        cfg = backend.config
        info: dict[str, Any] | None = None
        try:
            async with asyncio.timeout(cfg.op_timeout):
                await backend.client.ping()
                lost = await marker.check(backend.client)
                if backend.confirms:
                    info = await backend.client.info("replication")
        except Exception as exc:
            return f"redis at {cfg.shown_url} does not answer ({type(exc).__name__}){_degraded(backend)}"
        if lost is not None:
            log.error(lost)
            REDIS_DATA_LOST.inc()
        replicas = replicas_in_step(info) if info is not None else cfg.min_replicas
        if replicas < cfg.min_replicas:
            connected = int(info.get("connected_slaves", 0)) if info is not None else 0
            return (
                f"redis primary {backend.primary} has {replicas} replicas in sync ({connected} connected), "
                f"REDIS_MIN_REPLICAS={cfg.min_replicas}: acknowledgements are held{_degraded(backend)}"
            )
        backend.answered(confirmed=True)
        return True

    return check


def redis_sampler(backend: RedisBackend) -> Callable[[], Awaitable[None]]:
    """Refreshes ``bots_redis_replicas_in_sync`` and ``bots_redis_writes_wait_for_replica`` before ``/metrics`` is
    rendered: the primary's ``INFO replication`` (with ``REDIS_MIN_REPLICAS`` > 0 only; a failed read leaves them)."""
    from core.fleet.backend import replicas_in_step
    from core.fleet.replica_stall import replica_stall

    from .metrics import set_replication

    async def sample() -> None:
        cfg = backend.config
        if not backend.confirms:
            return
        try:
            async with asyncio.timeout(cfg.op_timeout):
                info = await backend.client.info("replication")
        except Exception:  # Redis away: readiness says so; the gauges keep their last reading
            return
        stalled = replica_stall(info, min_replicas=cfg.min_replicas) is not None
        set_replication(in_sync=replicas_in_step(info), writes_wait=stalled)

    return sample


def _degraded(backend: RedisBackend) -> str:
    seconds = backend.degraded_for
    return f"; degraded for {seconds:.1f}s ({backend.failure})" if seconds else ""


async def run_worker(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Work until ``stop`` is set (or, without one, until SIGTERM / SIGINT), then stop gracefully."""
    from core.fleet import (
        QueueWorker,
        RedisApprovalStore,
        RedisBackend,
        RedisDispatcher,
        RedisLimitStore,
        RedisMemoryStore,
        RedisScheduleStore,
        RedisSummaryLock,
        RedisUsage,
        ServerClock,
    )

    from .app import build_agent, build_history
    from .config import platforms
    from .console.roles import FleetRole, web_wanted
    from .ops import ops

    logging.getLogger("arq").setLevel(max(logging.WARNING, logging.getLogger().getEffectiveLevel()))
    backend = RedisBackend(queue_config(settings), client_name="bots-worker")
    role = FleetRole(settings, backend, role="worker")  # the console's fleet page; web answers to their gateway
    try:
        agent = build_agent(
            settings,
            dispatcher=RedisDispatcher(backend),
            memory=RedisMemoryStore(backend),
            history=build_history(settings, distributed=True),
            summary_lock=RedisSummaryLock(backend, ttl=max(60.0, settings.llm.timeout * 3)),
            usage=RedisUsage(backend),
            limit_store=RedisLimitStore(backend),
            schedules=RedisScheduleStore(backend),
            schedules_clock=ServerClock(backend),  # due times by the primary's clock, the same for every worker
            approvals=RedisApprovalStore(backend),
            listen=False,
            stop_timeout=backend.config.stop_timeout,
            platforms=platforms(settings) + (["web"] if web_wanted(settings) else []),
            web_fleet=role.web_options(),
        )
        role.watch_runs(agent)  # the consoles' live tails of the conversations this worker runs
        worker = QueueWorker(agent, backend)
        ops.attach(agent)
        ops.add_check("redis", redis_check(backend))
        ops.add_info("redis", backend.state)
        ops.add_sampler("redis", redis_sampler(backend))
        failure: BaseException | None = None
        await role.start()
        from .metrics import WORKER_UP

        try:
            WORKER_UP.set(1)  # (the fleet's alert BotsNoWorker: no process reports 1)
            async with asyncio.TaskGroup() as tg:
                running = tg.create_task(worker.run(handle_signals=stop is None), name="queue-worker")
                failed = tg.create_task(agent.failed(), name="agent-failed")
                waiters: set[asyncio.Task[Any]] = {running, failed}
                if stop is not None:
                    waiters.add(tg.create_task(stop.wait(), name="stop"))
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                if failed.done():
                    failure = failed.result()
                    log.error("stopping: %s", failure)
                worker.stop()
                for waiter in waiters - {running}:
                    waiter.cancel()
        finally:
            WORKER_UP.set(0)
            await role.stop()
            ops.remove_check("redis")
            ops.remove_info("redis")
            ops.detach(agent)
        log.info("worker stopped: %s", worker.describe())
        if failure is not None:
            raise failure  # a platform took the bot's token back, for example: exit with it
    finally:
        await backend.close()
