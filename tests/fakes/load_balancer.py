"""A round-robin HTTP load balancer on 127.0.0.1, for webhooks spread over several gateway processes.

Each request goes to the next backend in turn, with its path, body and headers; the backend's status and
body come back. A backend that does not answer (stopped, killed) makes that request answer 502, as a load
balancer without health checks does; the sender (the fake Bot API) delivers it again, to the next backend.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any

import aiohttp
from aiohttp import web

__all__ = ("RoundRobin",)


class RoundRobin:
    """``await start()``, point the sender at ``url``, ``await close()``."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        """Base URLs (``http://127.0.0.1:8443``) requests are spread over."""
        self.answered: collections.Counter[str] = collections.Counter()
        """Requests each backend answered (any status)."""
        self.failed: collections.Counter[str] = collections.Counter()
        """Requests each backend did not answer."""
        self.port = 0
        self._turn = itertools.cycle(range(len(backends)))
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        """The base URL the balancer listens on."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen on a free port."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        backend = self.backends[next(self._turn)]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        try:
            async with self._session.request(
                request.method, backend + request.path_qs, data=await request.read(), headers=headers
            ) as response:
                body = await response.read()
                self.answered[backend] += 1
                return web.Response(status=response.status, body=body)
        except (aiohttp.ClientError, TimeoutError):
            self.failed[backend] += 1
            return web.Response(status=502)
