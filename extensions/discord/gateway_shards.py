"""A fleet gateway's part of Discord (``Platform.gateway``): the ``DISCORD_SHARD_COUNT`` shards are divided among
the gateways by leases (``core.fleet.ShardLeases``, ``<prefix>shards:discord:<hash of the token>:<count>:...``):
each holds a fair share, a dead gateway's shards are taken over within ``REDIS_LEASE_SECONDS`` plus an identify
slot, a new one takes its share from the others, and one shard logs in at a time per concurrency bucket across all
of them (``IdentifySlots``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast

from core.definitions import service
from core.errors import BotError

from .definitions import get_runtime

if TYPE_CHECKING:
    from core.fleet import IdentifySlots
    from core.host import Setup

    from ..platforms import GatewayPeriod
    from .runtime import DiscordRuntime

__all__ = ("shard_leases",)

log = logging.getLogger("extensions.discord")


def shard_leases(agent: Setup, period: GatewayPeriod) -> AbstractAsyncContextManager[None]:
    """Before the agent starts: its runtime connects the shards it is handed, one login per identify slot; once
    started (the context): this gateway's share of the shards, leased until the context is left."""
    from core.fleet import IdentifySlots

    slots = IdentifySlots(
        period.backend, period.lease_name, max_concurrency=1, interval=period.settings.identify_interval
    )
    identify = slots.wait

    def manage(agent: Setup) -> None:  # the runtime is bound at install, before the services start
        cast("DiscordRuntime", get_runtime(agent)).manage_shards(identify=identify)

    agent.add_service(service(name="discord-shard-leases", start=manage), first=True)
    return _leased(agent, period, slots)


@contextlib.asynccontextmanager
async def _leased(agent: Setup, period: GatewayPeriod, slots: IdentifySlots) -> AsyncIterator[None]:
    task = await _lease_shards(agent, period, slots)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _lease_shards(agent: Setup, period: GatewayPeriod, slots: IdentifySlots) -> asyncio.Task[None]:
    """Divide the shards with the other gateways (a task: cancel it to give every shard back); return once this
    gateway took its first share and those shards are ready (bounded by DISCORD_CONNECT_TIMEOUT). A fatal error on
    the way (a token refused) is reported with ``agent.fail``."""
    from core.fleet import ShardLeases

    runtime = cast("DiscordRuntime", get_runtime(agent))
    assert runtime.shards is not None
    clients = runtime.shards
    slots.max_concurrency = runtime.max_concurrency
    leases = ShardLeases(
        period.backend,
        f"{period.lease_name}:{clients.count}",  # gateways configured with another count divide another set
        count=clients.count,
        ttl=period.ttl,
        connect=clients.add,
        disconnect=clients.remove,
    )

    def info() -> dict[str, Any]:
        period.shards(clients.count, leases.held)
        return {"count": clients.count, "held": leases.held, "gateways": leases.members}

    remove = period.observe("discord_shards", info)
    task = asyncio.create_task(leases.run(), name="discord:shard-leases")

    def done(task: asyncio.Task[None]) -> None:
        remove()
        period.shards(clients.count, [])
        if not task.cancelled() and task.exception() is not None:
            agent.fail(task.exception())  # type: ignore[arg-type]

    task.add_done_callback(done)
    settled = asyncio.ensure_future(leases.settled.wait())
    stopping = asyncio.ensure_future(period.stopping.wait())
    timeout = period.settings.connect_timeout
    try:
        await asyncio.wait({task, settled, stopping}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not task.done() and not period.stopping.is_set():
            ready = asyncio.ensure_future(clients.wait_ready(timeout))
            try:
                await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if ready.done():
                    ready.result()
            except BotError as exc:
                log.warning("discord: %s", exc)
            finally:
                ready.cancel()
    finally:
        settled.cancel()
        stopping.cancel()
    return task
