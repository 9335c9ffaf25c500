"""The bot's connection to Discord: logging in (REST), the gateway connection or the shards' connections
(``shards``), whether they are ready, and what happens when one ends for good.

A gateway that ends for good (4014, a reset token, another fatal close) is reported through ``failed``
(``ChatAdapter.fail``: ``agent.fail``, so ``bots run`` stops with a clear error instead of idling).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import yarl

from core.errors import BotError, ConfigError, PlatformError

from ._lib import discord
from .platform_errors import NETWORK_ERRORS, platform_error
from .settings import DiscordSettings
from .shards import Identify, NewClient, ShardClients, open_shards

__all__ = ("Gateway", "token_of")

log = logging.getLogger("extensions.discord")


def token_of(settings: DiscordSettings) -> str:
    """The bot token; a ``ConfigError`` that says where to find it when it is empty."""
    token = settings.token.get_secret_value().strip() if settings.token is not None else ""
    if not token:
        raise ConfigError(
            "DISCORD_TOKEN is empty: set it in the environment or .env to the bot token from the developer "
            "portal (your application, Bot, Reset Token), or run the bot without the Discord extension"
        )
    return token


class Gateway:
    """The main discord.py client (REST, and the gateway when not sharded) and the shards' clients.
    ``listen=False`` only logs in for REST (no gateway)."""

    def __init__(
        self,
        settings: DiscordSettings,
        *,
        listen: bool,
        new_client: NewClient,
        failed: Callable[[BotError], None],
        failure: Callable[[], BotError | None],
    ) -> None:
        self.settings = settings
        """The ``DISCORD_*`` settings."""
        self.listen = listen
        """Connect to the gateway (False: only log in for REST, for queue workers)."""
        self.new_client = new_client
        """Builds a discord.py client of the bot (``shard_id``/``shard_count`` for one shard's connection)."""
        self._failed = failed
        self._failure = failure
        self.client: discord.Client | None = None
        """The main discord.py client, from ``open`` to ``close``."""
        self.shards: ShardClients | None = None
        """The shard connections (``DISCORD_SHARD_COUNT`` above 1 or ``auto``, or ``manage_shards``)."""
        self.shard_count = 1
        """Shards in all, once open (Discord's recommendation with ``auto``)."""
        self.max_concurrency = 1
        """IDENTIFYs Discord allows at the same time (``session_start_limit.max_concurrency``)."""
        self._gateway: asyncio.Task[None] | None = None
        self._managed = False
        self._identify: Identify | None = None

    def manage_shards(self, *, identify: Identify | None = None) -> None:
        """Before ``open``: connect no shard at start; the caller adds and removes them with ``shards``
        (``bots gateway`` does, as it takes and gives back shard leases). ``identify`` is awaited before each
        IDENTIFY (a Redis-held slot shared by every process)."""
        self._managed = True
        self._identify = identify

    async def open(self, token: str) -> discord.Client:
        """Log in (REST) and, when listening, connect to the gateway and wait until it is ready. With
        ``DISCORD_SHARD_COUNT`` above 1 (or ``auto``) every shard is connected (``shards``); with
        ``manage_shards()`` none: whoever called it adds and removes them (``bots gateway``)."""
        discord.http.Route.BASE = self.settings.api_url.rstrip("/")
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.settings.gateway_url)
        client = self.client = self.new_client()
        deadline = self.settings.connect_timeout
        try:
            try:
                async with asyncio.timeout(deadline):
                    await client.login(token)
            except NETWORK_ERRORS as exc:
                raise platform_error(exc, f"log in at {self.settings.api_url}") from exc
            if self.listen and (self._managed or self.settings.shard_count != 1):
                await self._open_shards(client, token)
            elif self.listen:
                await self._connect(client, deadline)
        except BaseException:
            await self.close()
            raise
        return client

    async def _open_shards(self, client: discord.Client, token: str) -> None:
        """The shard connections (``extensions.discord.shards.open_shards``): all of them, or, managed, none yet."""
        self.shards = await open_shards(
            self.settings,
            client,
            token,
            new_client=self.new_client,
            failed=self.gateway_failed,
            identify=self._identify,
            connect=not self._managed,
        )
        self.shard_count, self.max_concurrency = self.shards.count, self.shards.max_concurrency

    async def before_identify(self, shard_id: int | None) -> bool:
        """Wait for this shard's identify slot; False when this process does not space IDENTIFYs itself
        (one unsharded connection: discord.py's own wait applies)."""
        if self.shards is None or shard_id is None:
            return False
        await self.shards.identify(shard_id)
        return True

    def gateway_failed(self, error: BotError) -> None:
        """A gateway connection ended for good: the bot cannot go on (``failed``)."""
        if self.client is not None:  # else stopping
            self._failed(error)

    async def _connect(self, client: discord.Client, deadline: float) -> None:
        gateway = self._gateway = asyncio.create_task(self._run_gateway(client), name="discord:gateway")
        ready = asyncio.create_task(client.wait_until_ready(), name="discord:ready")
        try:
            done, _ = await asyncio.wait({gateway, ready}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if gateway in done:
            exc = gateway.exception()
            raise exc if exc is not None else PlatformError("the Discord gateway closed before it was ready")
        if ready not in done:
            raise PlatformError(
                f"the Discord gateway at {self.settings.gateway_url} was not ready within {deadline:g}s; "
                "check the network and DISCORD_GATEWAY_URL, or raise DISCORD_CONNECT_TIMEOUT"
            )
        gateway.add_done_callback(self._gateway_done)

    async def _run_gateway(self, client: discord.Client) -> None:
        try:
            await client.connect(reconnect=True)
        except (discord.PrivilegedIntentsRequired, discord.ConnectionClosed, *NETWORK_ERRORS) as exc:
            raise platform_error(exc, "stay connected to the gateway") from exc

    def _gateway_done(self, task: asyncio.Task[None]) -> None:
        """The gateway ended: unless ``close`` ended it, the bot cannot go on, so ``failed`` is told
        (``bots run`` then stops with the error)."""
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, BotError):
            self._failed(exc)
        elif exc is not None:
            log.error("discord: the gateway crashed", exc_info=exc)
            self._failed(PlatformError(f"the Discord gateway crashed: {type(exc).__name__}: {exc}"))
        elif self.client is not None:  # discord.py gave up without an error, and not because we stopped
            self._failed(PlatformError("the Discord gateway connection ended and discord.py did not reconnect"))

    def ready(self) -> bool | str:
        """The readiness check: the gateway is connected and ready; with ``listen=False``, logged in for REST."""
        failure = self._failure()
        if failure is not None:
            return f"failed: {failure}"
        client = self.client
        if client is None:
            return "not connected"
        if not self.listen:
            return True if client.user is not None else "logging in"
        if self.shards is not None:
            return self.shards.ready()
        if not client.is_ready():
            return "gateway connecting"
        ws = client.ws
        if ws is None or not ws.open:
            return "gateway disconnected, reconnecting"
        return True

    async def wait_closed(self) -> None:
        """Return when the gateway connection ends; raise the reason (``ConfigError``/``PlatformError``)
        when it ended on its own rather than through ``close``."""
        if self._gateway is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._gateway)
        failure = self._failure()
        if failure is not None:
            raise failure

    async def close(self) -> None:
        """Close the shards, the client and the gateway connection."""
        client, self.client = self.client, None
        shards, self.shards = self.shards, None
        if shards is not None:
            await shards.close()
        if client is not None:
            with contextlib.suppress(*NETWORK_ERRORS):
                await client.close()
        gateway = self._gateway
        if gateway is not None and not gateway.done():
            gateway.cancel()
        if gateway is not None:
            with contextlib.suppress(BaseException):
                await gateway
