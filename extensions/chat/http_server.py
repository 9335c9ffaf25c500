"""The bounds of every HTTP server the bot runs (the web chat, the console, the ops endpoints, the Telegram webhook of
a gateway): a client that opens a connection and sends its request slowly, or not at all, is dropped after a bounded
time, and the connections open at once are capped.

- ``header_timeout``: seconds from the connection's start (or the end of the previous answer on a kept-alive
  connection) to the end of the request's headers; aiohttp's keep-alive timer, armed as the connection opens,
  closes a connection still waiting for them. The body of a request gets the same time again (``body_deadline``),
  and the rest of a body left unread after the answer as long again.
- ``max_connections``: connections open at once; one more is answered 503 and closed without being read.
- ``max_per_address``: connections open at once from one address (an IPv6 address stands for its /64), so one
  client holding idle connections cannot take the whole of ``max_connections``; one more from it is answered 503
  and closed. A trusted proxy's connections (``trusted_proxies``) are not capped so: every visitor comes through
  it; its requests in progress (an open page's event stream is one) are counted per visitor instead, by the
  address the proxy appended to ``X-Forwarded-For``, and one past the cap is answered 503.

``start_site`` serves an application within them; ``HttpLimits`` carries the numbers.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

__all__ = ("DEFAULT_LIMITS", "HttpLimits", "address_key", "body_deadline", "forwarded_for", "per_visitor", "start_site")

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
    max_per_address: int = 32
    """Connections open at once from one address at most (an IPv6 /64); behind a trusted proxy, requests in
    progress per visitor (event streams count); one more is answered 503."""
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    """The reverse proxies in front of the server: their connections are counted by the visitor each request is
    forwarded for (``X-Forwarded-For``), not as one address."""


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


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(text: str) -> Address | None:
    """The address in ``text`` (``1.2.3.4``, ``::1``, ``::ffff:1.2.3.4``: the IPv4 one), None when there is none."""
    try:
        found = ipaddress.ip_address(text.strip().split("%")[0])
    except ValueError:
        return None
    mapped = found.ipv4_mapped if isinstance(found, ipaddress.IPv6Address) else None
    return mapped if mapped is not None else found


def address_key(address: Address) -> str:
    """What connections are counted by: an IPv4 address, the /64 of an IPv6 one (one subscriber's prefix)."""
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _trusted(address: Address | None, limits: HttpLimits) -> bool:
    return address is not None and any(address in network for network in limits.trusted_proxies)


def forwarded_for(request: web.Request, limits: HttpLimits) -> str | None:
    """The visitor a trusted proxy forwarded ``request`` for (the nearest address in ``X-Forwarded-For`` that is not
    a trusted proxy: only what the proxies appended counts), as ``address_key`` writes it; None when the peer is no
    trusted proxy or names nobody."""
    address = _address(request.remote or "")
    if not _trusted(address, limits):
        return None
    hops = [hop.strip() for hop in ",".join(request.headers.getall("X-Forwarded-For", [])).split(",") if hop.strip()]
    while hops and _trusted(address, limits):
        address = _address(hops.pop())
    return address_key(address) if address is not None and not _trusted(address, limits) else None


def per_visitor(limits: HttpLimits) -> Callable[..., Awaitable[web.StreamResponse]]:
    """A middleware counting, per visitor a trusted proxy forwards for, the requests in progress (an event stream
    is one while it is open); one past ``max_per_address`` is answered 503."""
    open_by: dict[str, int] = {}

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        visitor = forwarded_for(request, limits)
        if visitor is None:
            return await handler(request)
        if open_by.get(visitor, 0) >= limits.max_per_address:
            log.info("HTTP server: a visitor behind a proxy has %d requests open: 503", limits.max_per_address)
            return web.Response(status=503, text="Service Unavailable", headers={"Retry-After": "1"})
        open_by[visitor] = open_by.get(visitor, 0) + 1
        try:
            return await handler(request)
        finally:
            left = open_by.pop(visitor) - 1
            if left:
                open_by[visitor] = left

    return middleware


class _Refused(asyncio.Protocol):
    """A connection past the cap: answered 503 at once, closed, never read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY)
        transport.close()


class _Gate(asyncio.Protocol):
    """A connection within the cap, before its address is known: once it is (``connection_made``), the server's
    request handler takes the connection over, or, past the address's cap, it is answered 503 and closed."""

    def __init__(self, server: _CappedServer) -> None:
        self.server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        handler = self.server.admit(transport)
        if handler is None:
            transport.write(_BUSY)
            transport.close()
            return
        transport.set_protocol(handler)  # (before any byte is read: nothing was received yet)
        handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:  # a refused one only: the handler has the others
        self.server.open = max(0, self.server.open - 1)


class _CappedServer(web.Server):
    """aiohttp's low-level server, refusing a connection past ``max_connections`` (counted from the moment a
    connection is accepted, so a burst of accepts cannot all slip in before the first is registered), and one past
    ``max_per_address`` from its address (counted once the address is known, as it is made; a trusted proxy's
    are not)."""

    def __init__(self, *args: Any, limits: HttpLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.max_connections = limits.max_connections
        self.open = 0
        """Connections accepted and not yet lost."""
        self.refused = 0
        """Connections refused because the cap was reached."""
        self.by_address: dict[str, int] = {}
        """Connections open per address (``address_key``)."""
        self.refused_by_address = 0
        """Connections refused because their address had ``max_per_address`` open."""
        self._address_of: dict[RequestHandler, str] = {}

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
        return _Gate(self)  # type: ignore[return-value]

    def admit(self, transport: asyncio.Transport) -> RequestHandler | None:
        """The request handler of a connection just made, counted against its address's cap; None when that
        address has ``max_per_address`` open already (the caller answers 503)."""
        peer = transport.get_extra_info("peername")
        address = _address(str(peer[0])) if isinstance(peer, tuple) and peer else None
        key = None if address is None or _trusted(address, self.limits) else address_key(address)
        if key is not None and self.by_address.get(key, 0) >= self.limits.max_per_address:
            self.refused_by_address += 1
            if self.refused_by_address == 1 or self.refused_by_address % 1000 == 0:
                log.warning(
                    "HTTP server: one address has %d connections open, the most allowed: its new ones are answered "
                    "503 (%d so far)",
                    self.limits.max_per_address,
                    self.refused_by_address,
                )
            return None
        handler = super().__call__()
        if key is not None:
            self.by_address[key] = self.by_address.get(key, 0) + 1
            self._address_of[handler] = key
        return handler

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        self.open = max(0, self.open - 1)
        key = self._address_of.pop(handler, None)
        if key is not None:
            left = self.by_address.pop(key, 1) - 1
            if left > 0:
                self.by_address[key] = left
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
        self._limits = limits

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        return _CappedServer(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            limits=self._limits,
            **self._options,
        )


async def start_site(
    app: web.Application, host: str, port: int, *, limits: HttpLimits, shutdown_timeout: float = 1.0
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` within ``limits`` (a request's body too: ``body_deadline`` is added to the
    application's middlewares); returns the runner (``cleanup()`` stops it) and the bound port (``port=0`` picks
    one). An ``OSError`` when the address cannot be used, with nothing left running."""
    app.middlewares.append(body_deadline(limits.header_timeout))
    if limits.trusted_proxies:
        app.middlewares.insert(0, per_visitor(limits))
    runner = _Runner(app, limits=limits, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1] if runner.addresses else port
    return runner, int(bound)
