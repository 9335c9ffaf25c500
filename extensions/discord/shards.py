"""The gateway connections of the shards one process holds: one discord.py client per shard.

With ``DISCORD_SHARD_COUNT`` above 1 (or ``auto``) the bot's servers are split over that many gateway
connections. ``bots gateway`` processes divide them through Redis leases (``core.fleet.shard_leases``) and add or
remove single shards as they take or give them back; ``bots run`` holds them all. Each shard is its own
``BotClient(shard_id=n, shard_count=count)``: discord.py's ``AutoShardedClient`` fixes its shard set when it
connects, so taking one more shard (a gateway died) or giving one back (a gateway joined) would mean
closing and identifying every other shard of the process again, losing their events meanwhile. REST (replies,
typing, slash-command registration) goes through the bot's main client, which never connects.

Every IDENTIFY waits for a slot first (``identify``): across processes a Redis-held slot per concurrency
bucket (``IdentifySlots``), in one process ``LocalIdentify``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from core.errors import BotError, PlatformError

from ._lib import discord
from .platform_errors import NETWORK_ERRORS, platform_error

if TYPE_CHECKING:
    from .settings import DiscordSettings

__all__ = ("Identify", "LocalIdentify", "NewClient", "ShardClients", "open_shards")

log = logging.getLogger("extensions.discord")

Identify = Callable[[int], Awaitable[None]]
"""Awaited before a shard's IDENTIFY: returns once the shard may identify."""

NewClient = Callable[..., discord.Client]
"""Builds a discord.py client of the bot; ``shard_id`` and ``shard_count`` for one shard's connection."""


class LocalIdentify:
    """One IDENTIFY per ``interval`` per bucket (``shard % max_concurrency``) within this process."""

    def __init__(self, *, interval: float, max_concurrency: int) -> None:
        self.interval = interval
        self.max_concurrency = max(1, max_concurrency)
        self._next: dict[int, float] = {}
        self._lock = asyncio.Lock()

    async def wait(self, shard: int) -> None:
        """Return once ``shard`` may identify."""
        bucket = shard % self.max_concurrency
        async with self._lock:
            now = time.monotonic()
            at = max(now, self._next.get(bucket, now))
            self._next[bucket] = at + self.interval
        await asyncio.sleep(at - now)


class ShardClients:
    """The shards this process is connected to, by id."""

    def __init__(
        self,
        *,
        new_client: NewClient,
        failed: Callable[[BotError], None],
        connect_timeout: float,
        token: str,
        count: int,
        identify: Identify,
        max_concurrency: int = 1,
    ) -> None:
        self.new_client = new_client
        """Builds a shard's client."""
        self.failed = failed
        """Told when a shard's connection ends for good (the bot cannot go on)."""
        self.connect_timeout = connect_timeout
        """Seconds a shard's login may take (``DISCORD_CONNECT_TIMEOUT``)."""
        self.count = count
        """Shards in all (``DISCORD_SHARD_COUNT`` or Discord's recommendation)."""
        self.max_concurrency = max_concurrency
        """IDENTIFYs Discord allows at the same time (``session_start_limit.max_concurrency``)."""
        self.identify = identify
        """Awaited before each IDENTIFY of a shard."""
        self._token = token
        self._clients: dict[int, discord.Client] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    @property
    def held(self) -> list[int]:
        """The shard ids this process connects, in order."""
        return sorted(self._clients)

    async def add(self, shard: int) -> None:
        """Log in a client for ``shard`` and start connecting it (it identifies once its slot comes)."""
        if shard in self._clients:
            return
        client = self.new_client(shard_id=shard, shard_count=self.count)
        try:
            async with asyncio.timeout(self.connect_timeout):
                await client.login(self._token)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await client.close()
            if isinstance(exc, Exception) and not isinstance(exc, BotError):
                raise platform_error(exc, f"log in shard {shard}") from exc
            raise
        self._clients[shard] = client
        task = asyncio.create_task(self._run(client, shard), name=f"discord:shard:{shard}")
        self._tasks[shard] = task
        task.add_done_callback(lambda t: self._ended(shard, t))
        log.info("discord: shard %d of %d connecting", shard, self.count)

    async def _run(self, client: discord.Client, shard: int) -> None:
        try:
            await client.connect(reconnect=True)
        except Exception as exc:
            raise platform_error(exc, f"keep shard {shard} connected to the gateway") from exc

    def _ended(self, shard: int, task: asyncio.Task[None]) -> None:
        """A shard's connection ended: unless ``remove`` ended it, the bot cannot go on (``agent.fail``)."""
        if task.cancelled() or self._tasks.get(shard) is not task:
            return
        exc = task.exception()
        error = exc if isinstance(exc, BotError) else None
        if error is None:
            detail = f"{type(exc).__name__}: {exc}" if exc is not None else "discord.py did not reconnect"
            error = PlatformError(f"the Discord gateway connection of shard {shard} ended ({detail})")
        self.failed(error)

    async def remove(self, shard: int) -> None:
        """Close ``shard``'s connection; return once it is closed."""
        client = self._clients.pop(shard, None)
        task = self._tasks.pop(shard, None)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if task is not None:
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if client is not None:
            log.info("discord: shard %d of %d closed", shard, self.count)

    async def close(self) -> None:
        """Close every shard."""
        for shard in self.held:
            await self.remove(shard)

    async def wait_ready(self, timeout: float) -> None:
        """Return once every shard is ready; ``PlatformError`` after ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                for client in list(self._clients.values()):
                    await client.wait_until_ready()
        except TimeoutError:
            raise PlatformError(
                f"the Discord shards were not ready within {timeout:g}s ({self.ready()}); check the network and "
                "DISCORD_GATEWAY_URL, or raise DISCORD_CONNECT_TIMEOUT"
            ) from None

    def ready(self) -> bool | str:
        """True when every held shard is connected and ready (also with none held: another gateway has them)."""
        waiting = [
            shard
            for shard, client in sorted(self._clients.items())
            if not client.is_ready() or client.ws is None or not client.ws.open
        ]
        if waiting:
            return f"shards {', '.join(map(str, waiting))} of {self.count} connecting"
        return True


async def open_shards(
    settings: DiscordSettings,
    client: discord.Client,
    token: str,
    *,
    new_client: NewClient,
    failed: Callable[[BotError], None],
    identify: Identify | None,
    connect: bool,
) -> ShardClients:
    """Ask Discord (``GET /gateway/bot``) for the recommended shard count and the identify concurrency; with
    ``connect``, connect every shard, one IDENTIFY per ``DISCORD_IDENTIFY_INTERVAL`` per bucket (``identify``,
    else ``LocalIdentify``), and wait until they are ready."""
    deadline = settings.connect_timeout
    try:
        async with asyncio.timeout(deadline):
            recommended, _, limits = await client.http.get_bot_gateway()
    except NETWORK_ERRORS as exc:
        raise platform_error(exc, "read the recommended shard count (GET /gateway/bot)") from exc
    count = recommended if settings.shard_count == "auto" else settings.shard_count
    concurrency = int(limits.get("max_concurrency") or 1)
    local = LocalIdentify(interval=settings.identify_interval, max_concurrency=concurrency)
    shards = ShardClients(
        new_client=new_client,
        failed=failed,
        connect_timeout=deadline,
        token=token,
        count=count,
        identify=identify or local.wait,
        max_concurrency=concurrency,
    )
    log.info(
        "discord: %d shards (%s), identify concurrency %d",
        count,
        "recommended by Discord" if settings.shard_count == "auto" else "DISCORD_SHARD_COUNT",
        concurrency,
    )
    if connect:
        try:
            for shard in range(count):
                await shards.add(shard)
            await shards.wait_ready(deadline + count * settings.identify_interval)
        except BaseException:
            await shards.close()
            raise
    return shards
