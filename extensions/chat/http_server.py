"""The bounds of every HTTP server the bot runs (the web chat, the console, the ops endpoints, the Telegram webhook of
a gateway): a client that opens a connection and sends its request slowly, or not at all, is dropped after a bounded
time, and the connections open at once are capped.

- ``header_timeout``: seconds from the connection's start (or the end of the previous answer on a kept-alive
  connection) to the end of the request's headers; aiohttp's keep-alive timer, armed as the connection opens,
  closes a connection still waiting for them. The body of a request gets the same time again (``body_deadline``),
  and the rest of a body left unread after the answer as long again.
- ``max_connections``: connections open at once; one more is answered 503 and closed without being read.

``start_site`` serves an application with both; ``HttpLimits`` carries the two numbers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

__all__ = ("DEFAULT_LIMITS", "HttpLimits", "body_deadline", "start_site")

log = logging.getLogger("extensions.chat")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpLimits:
    """How long a client may take to send a request, and how many connections may be open at once."""

    header_timeout: float = 10.0
    """Seconds a client has to send a request's headers (and then its body); an idle kept-alive connection is
    closed after as long."""
    max_connections: int = 256
    """Connections open at once at most (event streams count); one more is answered 503 and closed."""


DEFAULT_LIMITS = HttpLimits()
"""The bounds of a server whose operator did not choose them (the ops endpoints, a server built in a test)."""


def body_deadline(seconds: float) -> Callable[..., Awaitable[web.StreamResponse]]:
    """A middleware reading a request's body within ``seconds`` before its handler runs (the handler then reads it
    from memory); a body still arriving after that gets 408 and the connection is closed."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.body_exists:
            try:
                async with asyncio.timeout(seconds):
                    await request.read()
            except TimeoutError:
                log.info("%s %s: the body did not arrive within %gs: 408", request.method, request.path, seconds)
                return web.Response(status=408, text="Request Timeout", headers={"Connection": "close"})
        return await handler(request)

    return middleware


class _Refused(asyncio.Protocol):
    """A connection past the cap: answered 503 at once, closed, never read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY)
        transport.close()


class _CappedServer(web.Server):
    """aiohttp's low-level server, refusing a connection past ``max_connections`` (counted from the moment a
    connection is accepted, so a burst of accepts cannot all slip in before the first is registered)."""

    def __init__(self, *args: Any, max_connections: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.open = 0
        """Connections accepted and not yet lost."""
        self.refused = 0
        """Connections refused because the cap was reached."""

    def __call__(self) -> RequestHandler:
        if self.open >= self.max_connections:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                log.warning(
                    "HTTP server: %d connections open, the most allowed: new ones are answered 503 (%d so far)",
                    self.open,
                    self.refused,
                )
            return _Refused()  # type: ignore[return-value]
        self.open += 1
        return super().__call__()

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        self.open = max(0, self.open - 1)
        super().connection_lost(handler, exc)


class _Runner(web.AppRunner):
    """An ``AppRunner`` whose server is a ``_CappedServer`` (aiohttp has no connection cap of its own): the server
    aiohttp makes for the application is rebuilt from its public parts with the cap."""

    def __init__(self, app: web.Application, *, limits: HttpLimits, shutdown_timeout: float) -> None:
        # the keep-alive timer is armed as a connection opens: it is the header timeout too; the rest of a body
        # left unread after the answer is waited for as long, no more
        self._options: dict[str, Any] = {
            "keepalive_timeout": limits.header_timeout,
            "lingering_time": limits.header_timeout,
            "access_log": None,
        }
        super().__init__(app, handle_signals=False, shutdown_timeout=shutdown_timeout, **self._options)
        self._max_connections = limits.max_connections

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        return _CappedServer(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            max_connections=self._max_connections,
            **self._options,
        )


async def start_site(
    app: web.Application, host: str, port: int, *, limits: HttpLimits, shutdown_timeout: float = 1.0
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` within ``limits`` (a request's body too: ``body_deadline`` is added to the
    application's middlewares); returns the runner (``cleanup()`` stops it) and the bound port (``port=0`` picks
    one). An ``OSError`` when the address cannot be used, with nothing left running."""
    app.middlewares.append(body_deadline(limits.header_timeout))
    runner = _Runner(app, limits=limits, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, int(bound)
