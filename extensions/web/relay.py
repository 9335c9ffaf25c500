"""Events for a page held by another process: in a fleet a worker runs the conversation and a gateway holds the
browser's connection, so the worker publishes the reply's events on that gateway's channel and the gateway shows
them (``Hub.publish``).

The channel is Redis pub/sub, ``<prefix>web:<gateway id>``: what is published while a gateway is down is lost, and
its pages read the conversation's history when they reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .site import ChatSite

__all__ = ("RedisRelay", "Relay")

log = logging.getLogger("extensions.web")


class Relay(Protocol):
    """Carries page events between the processes of a fleet."""

    async def start(self, runtime: ChatSite) -> None:
        """Start relaying to ``runtime``'s pages what is published for its gateway (when it holds pages)."""
        ...

    async def publish(self, gateway: str, visitor: str, event: dict[str, Any]) -> None:
        """Send ``event`` to the pages of ``visitor`` held by ``gateway``."""
        ...

    async def stop(self) -> None:
        """Stop relaying; close connections."""
        ...


class RedisRelay:
    """The relay on Redis pub/sub: ``client`` is a ``redis.asyncio.Redis`` (decoded responses)."""

    def __init__(self, client: Any, *, prefix: str, listen: bool) -> None:
        self.client = client
        """The Redis connection."""
        self.prefix = prefix
        """The key prefix of the fleet (``REDIS_PREFIX``)."""
        self.listen = listen
        """Subscribe to this gateway's channel (a worker only publishes)."""
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    def channel(self, gateway: str) -> str:
        """The channel of ``gateway``."""
        return f"{self.prefix}web:{gateway}"

    async def start(self, runtime: ChatSite) -> None:
        if not self.listen or not runtime.gateway_id or self._task is not None:
            return
        self._ready.clear()
        self._task = asyncio.create_task(self._pump(runtime), name="web-relay")
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            done, _ = await asyncio.wait({self._task, ready}, timeout=10.0, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if self._task in done:
            self._task.result()

    async def _pump(self, runtime: ChatSite) -> None:
        while True:
            try:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                async with contextlib.aclosing(pubsub):
                    await pubsub.subscribe(self.channel(runtime.gateway_id))
                    self._ready.set()
                    while True:  # (short reads: the client's socket timeout never cuts a quiet channel)
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if message is None or message.get("type") != "message":
                            continue
                        try:
                            item = json.loads(message["data"])
                            runtime.show(str(item["v"]), dict(item["e"]))
                        except (ValueError, KeyError, TypeError) as exc:
                            log.warning("a malformed web event was dropped: %s", exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._ready.set()
                log.warning("the web relay lost Redis (%s); subscribing again in 1s", exc)
                await asyncio.sleep(1.0)

    async def publish(self, gateway: str, visitor: str, event: dict[str, Any]) -> None:
        data = json.dumps({"v": visitor, "e": event}, ensure_ascii=False, separators=(",", ":"))
        await self.client.publish(self.channel(gateway), data)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
