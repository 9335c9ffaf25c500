"""python-telegram-bot's HTTP client on aiohttp (PTB's ``BaseRequest``, its documented way to bring another client).

PTB's own ``HTTPXRequest`` goes through httpx, httpcore and anyio: about 1.0 ms of CPU per request on this project's
loaded 2-core machine against 0.28 ms for aiohttp's (200 form POSTs to a local server; aiohttp parses HTTP in C), and
a bot makes two requests between a person's message and its answer (the long poll's answer, the reply), plus the
"typing..." action and the poller's looks while the model writes (docs/explanation/benchmarks.md). aiohttp is
already what the bot's other clients and servers use (Discord, the web chat, the ops endpoints).

What PTB's client does, this one does: the Bot API's form body (JSON-encoded values, as ``RequestData`` gives them)
or a multipart body with files; a connection pool of ``connection_pool_size``; PTB's four timeouts (connect, read,
write, pool: waiting for a free connection counts against ``pool_timeout`` plus ``connect_timeout``; the write is
bounded by the read's time, aiohttp having no write timeout of its own); a proxy from ``HTTPS_PROXY`` /
``HTTP_PROXY`` (``NO_PROXY`` honoured) as httpx takes it: the proxies read from the environment once, when the client
is made (``initialize``), and whether a host goes without one at its first request; errors as PTB's ``TimedOut`` and
``NetworkError``, never with the URL (it holds the token).

Not aiohttp's ``trust_env``: with it, every request looked for a ``.netrc`` file and read the proxy variables again,
each in a worker thread of its own (two thread hand-overs per request, the event loop waiting for the GIL back: 2.8 ms
of a Telegram answer's critical path at load 11, profiled; docs/explanation/benchmarks.md). httpx, PTB's own client,
reads no ``.netrc`` either.
"""

from __future__ import annotations

import logging
import re
import ssl
import urllib.request
from typing import Any

import aiohttp
import yarl
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

__all__ = ("AiohttpRequest",)

log = logging.getLogger("extensions.telegram")

_DEFAULT_MEDIA_WRITE = 20.0
"""Seconds a request with files may take to be written (PTB's ``media_write_timeout``)."""


class AiohttpRequest(BaseRequest):
    """PTB's ``BaseRequest`` on one ``aiohttp.ClientSession`` (made in ``initialize``, closed in ``shutdown``)."""

    def __init__(
        self,
        *,
        connection_pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = _DEFAULT_MEDIA_WRITE,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._pool_size = connection_pool_size
        self._read = read_timeout
        self._write = write_timeout
        self._connect = connect_timeout
        self._pool = pool_timeout
        self._media_write = media_write_timeout
        self._ssl = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, str] = {}
        self._proxy_of: dict[str, tuple[yarl.URL | None, dict[str, str] | None]] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._proxies = urllib.request.getproxies_environment()  # (HTTPS_PROXY, HTTP_PROXY, NO_PROXY: as httpx)
            self._proxy_of = {}
            connector = aiohttp.TCPConnector(
                limit=self._pool_size, limit_per_host=self._pool_size, ssl=self._ssl if self._ssl is not None else True
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,  # (the proxy: ``_proxy``, from the environment read here)
                headers={"User-Agent": self.USER_AGENT},
                skip_auto_headers=("Accept-Encoding",),
                auto_decompress=False,
            )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        files = request_data.multipart_data if request_data is not None else None
        read = self._read if read_timeout is BaseRequest.DEFAULT_NONE else read_timeout
        write = write_timeout
        if write is BaseRequest.DEFAULT_NONE:
            write = self._media_write if files else self._write
        connect = self._connect if connect_timeout is BaseRequest.DEFAULT_NONE else connect_timeout
        pool = self._pool if pool_timeout is BaseRequest.DEFAULT_NONE else pool_timeout
        data: aiohttp.FormData | dict[str, str] | None = None
        if request_data is not None:
            if files:
                form = aiohttp.FormData(quote_fields=False)
                for name, value in request_data.json_parameters.items():
                    form.add_field(name, value)
                for name, part in files.items():
                    filename, content, *rest = part
                    form.add_field(
                        name,
                        content,
                        filename=_LINE_BREAKS.sub(" ", filename or name),
                        content_type=rest[0] if rest and rest[0] else "application/octet-stream",
                    )
                data = form
            else:
                data = request_data.json_parameters
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=_sum(pool, connect),  # a free connection of the pool, then the connection itself
            sock_connect=connect,
            sock_read=_max(read, write),  # (no write timeout in aiohttp: the body is written within the read's)
        )
        proxy, proxy_auth = self._proxy(url)
        plain = proxy_auth is not None and url.startswith("http:")  # (no CONNECT: the request itself goes to the proxy)
        try:
            async with session.request(
                method,
                url,
                data=data,
                timeout=timeout,
                allow_redirects=False,
                proxy=proxy,
                proxy_headers=proxy_auth,
                headers=proxy_auth if plain else None,
            ) as response:
                return response.status, await response.read()
        except TimeoutError as exc:  # (aiohttp's connect and read timeouts are TimeoutErrors too)
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {_without_token(str(exc))}") from exc

    def _proxy(self, url: str) -> tuple[yarl.URL | None, dict[str, str] | None]:
        """The proxy for ``url`` and the header with its credentials (from its URL), as the environment read by
        ``initialize`` gives them: none for a host ``NO_PROXY`` names, or a scheme without one. Worked out once per
        scheme and host."""
        key = "/".join(url.split("/", 3)[:3])  # (scheme://host:port)
        found = self._proxy_of.get(key)
        if found is None:
            found = self._proxy_of[key] = _proxy_for(yarl.URL(url), self._proxies)
        return found


def _proxy_for(url: yarl.URL, proxies: dict[str, str]) -> tuple[yarl.URL | None, dict[str, str] | None]:
    """What aiohttp's ``trust_env`` took from the environment for ``url`` (without its ``.netrc``): the proxy of its
    scheme, unless ``NO_PROXY`` names its host; an https:// proxy is not supported by aiohttp (left, with a warning)."""
    address = proxies.get(url.scheme)
    if not address or url.host is None or urllib.request.proxy_bypass(url.host):
        return None, None
    proxy = yarl.URL(address)
    if proxy.scheme != "http":
        log.warning("%s proxies are not supported; %s requests go without one", proxy.scheme.upper(), url.scheme)
        return None, None
    auth = aiohttp.BasicAuth.from_url(proxy)
    return proxy.with_user(None), None if auth is None else {"Proxy-Authorization": auth.encode()}


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _max(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(a, b)


def _without_token(text: str) -> str:
    """``text`` without the bot's token (a Bot API URL holds it: ``/bot<token>/method``, ``/file/bot<token>/...``)."""
    return _TOKEN_IN_URL.sub("/bot<token>", text)


_TOKEN_IN_URL = re.compile(r"/bot[^/\s'\"]+")
_LINE_BREAKS = re.compile(r"[\r\n]+")
