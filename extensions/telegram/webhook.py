"""The webhook server of the queue gateway: Telegram gets its 200 only once an update was handled.

Telegram posts each update to the webhook and posts it again later unless it gets a 2xx answer. PTB's
webhook server answers 200 as soon as the update sits in its in-memory queue: a gateway whose Redis is
down at that moment, or that dies before storing it, loses the update. ``WebhookServer`` hands each
update to ``handle`` (the runtime's listener, the same one ``Poller`` feeds) and answers 200 only once
``handle`` returned: the update is stored in its conversation's inbox or deliberately dropped (filtered
out, a duplicate, answered by the gateway itself). If storing fails (Redis down, the inbox full) or does
not finish within ``deadline`` seconds (kept below Telegram's own wait for an answer), it answers 503 and
Telegram delivers the update again later; Redis drops what had in fact been stored (the dedupe key is the
update id).

A request without the right ``X-Telegram-Bot-Api-Secret-Token`` header gets 403 (it does not come from
Telegram). Stopping: no new connection is accepted, requests in progress get a bounded time to finish.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from telegram import Bot, Update

from core.errors import DispatchError, MemoryStoreError

from ..chat.http_server import HttpLimits, start_site
from .settings import WEBHOOK_DEADLINE

__all__ = ("SECRET_HEADER", "WEBHOOK_DEADLINE", "WebhookServer")

log = logging.getLogger("extensions.telegram")

WEBHOOK_LIMITS = HttpLimits(max_per_address=100)
"""The bounds of the webhook's server: Telegram opens up to 100 connections at once from one of its addresses
(``setWebhook``'s ``max_connections``), and they are all let in."""

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookServer:
    """An aiohttp server on ``listen:port`` answering Telegram's webhook requests at ``path``."""

    def __init__(
        self,
        bot: Bot,
        handle: Callable[[Update], Awaitable[None]],
        *,
        listen: str,
        port: int,
        path: str,
        secret: str,
        deadline: float = WEBHOOK_DEADLINE,
        limits: HttpLimits = WEBHOOK_LIMITS,
    ) -> None:
        self.bot = bot
        """Gives the updates their bot (``Update.de_json``)."""
        self.handle = handle
        """Returns once the update is handled; raises ``DispatchError`` or ``MemoryStoreError`` when it could
        not be stored (then Telegram delivers it again)."""
        self.listen, self.port, self.path = listen, port, path
        self.deadline = deadline
        """Seconds ``handle`` may take before the request is answered 503."""
        self.limits = limits
        """How long a request may take to arrive, and how many connections may be open at once."""
        self._secret = secret.encode()
        self._runner: web.AppRunner | None = None
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def running(self) -> bool:
        """The server listens."""
        return self._runner is not None

    async def start(self, *, shutdown_timeout: float) -> None:
        """Listen (an ``OSError`` when the address cannot be used)."""
        app = web.Application()
        app.router.add_post(self.path, self._on_request)
        self._runner, _port = await start_site(
            app, self.listen, self.port, limits=self.limits, shutdown_timeout=shutdown_timeout
        )

    async def stop(self) -> None:
        """Accept no more requests; give those in progress ``shutdown_timeout`` seconds to be answered."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def wait_idle(self) -> None:
        """Return once no request is being handled."""
        await self._idle.wait()

    async def _on_request(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("webhook request from %s refused: wrong or missing %s", request.remote, SECRET_HEADER)
            return web.Response(status=403)
        try:
            data = json.loads(await request.read())
            update = Update.de_json(data, self.bot)
        except Exception as exc:  # not an update: Telegram would only send it again
            log.warning("webhook request refused: the body is not a Telegram update (%s)", exc)
            return web.Response(status=400)
        self._in_flight += 1
        self._idle.clear()
        try:
            async with asyncio.timeout(self.deadline):
                await self.handle(update)
        except (DispatchError, MemoryStoreError) as exc:
            log.warning("update %s not stored (%s): Telegram is asked to deliver it again", update.update_id, exc)
            return web.Response(status=503, headers={"Retry-After": "1"})
        except TimeoutError:
            log.warning(
                "update %s not handled within %.0fs: Telegram is asked to deliver it again",
                update.update_id,
                self.deadline,
            )
            return web.Response(status=503, headers={"Retry-After": "1"})
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()
        return web.Response(status=200)
