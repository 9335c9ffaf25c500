"""One client cannot lock everyone out (issue 49, point 4): every HTTP server (``extensions.chat.http_server``: the
web chat, the console, the ops endpoints, the Telegram webhook) caps the connections one address holds open, so
another client is still answered; behind a trusted proxy the requests in progress (event streams) are counted per
visitor the proxy names. Loopback has many addresses: 127.0.0.1 and 127.0.0.2 are two clients here."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from extensions.chat.http_server import HttpLimits, start_site
from extensions.telegram.webhook import WEBHOOK_LIMITS


@asynccontextmanager
async def served(limits: HttpLimits, release: asyncio.Event) -> AsyncIterator[int]:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    async def stream(request: web.Request) -> web.StreamResponse:  # an open page's event stream
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b": open\n\n")
        await release.wait()
        return response

    app = web.Application()
    app.router.add_get("/", hello)
    app.router.add_get("/events", stream)
    runner, port = await start_site(app, "127.0.0.1", 0, limits=limits)
    try:
        yield port
    finally:
        release.set()
        await runner.cleanup()


async def get(port: int, path: str = "/", *, source: str = "127.0.0.1", headers: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    try:
        writer.write(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + b"\r\n")
        await writer.drain()
        async with asyncio.timeout(10):
            return await reader.read()
    finally:
        writer.close()


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


async def test_one_address_holding_its_cap_of_idle_connections_does_not_lock_another_client_out() -> None:
    limits = HttpLimits(header_timeout=30, max_connections=50, max_per_address=4)
    async with served(limits, asyncio.Event()) as port:
        held = [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.1", 0)) for _ in range(4)]
        try:
            await asyncio.sleep(0.1)  # (accepted)
            assert status(await get(port)) == 503  # one more from the same address
            answers = [await get(port, source="127.0.0.2") for _ in range(10)]
            assert [status(a) for a in answers] == [200] * 10  # another client: every request answered
        finally:
            for _reader, writer in held:
                writer.close()
        async with asyncio.timeout(5):  # its connections closed: the address is served again
            while status(answer := await get(port)) == 503:
                await asyncio.sleep(0.05)
        assert status(answer) == 200


async def test_behind_a_trusted_proxy_event_streams_are_counted_per_visitor() -> None:
    limits = HttpLimits(max_connections=50, max_per_address=2, trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    release = asyncio.Event()
    async with served(limits, release) as port:
        visitor = b"X-Forwarded-For: 203.0.113.7\r\n"
        streams = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\n" + visitor + b"\r\n")
            await reader.readuntil(b": open\n\n")
            streams.append(writer)
        try:
            assert status(await get(port, "/events", headers=visitor)) == 503  # a third stream of that visitor
            other = b"X-Forwarded-For: 203.0.113.8\r\n"
            assert [status(await get(port, headers=other)) for _ in range(5)] == [200] * 5  # the proxy is not capped
            spoofed = b"X-Forwarded-For: 198.51.100.1, 203.0.113.7\r\n"  # only what the proxy appended counts
            assert status(await get(port, "/events", headers=spoofed)) == 503
        finally:
            release.set()
            for writer in streams:
                writer.close()


def test_the_telegram_webhook_lets_in_every_connection_telegram_opens() -> None:
    assert WEBHOOK_LIMITS.max_per_address >= 100  # setWebhook's max_connections is at most 100
