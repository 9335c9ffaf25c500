"""The web chat's and the console's HTTP servers against hostile requests: secrets in URL query strings masked on
the settings page, malformed input refused with a clean 400, half-sent requests dropped and connections capped."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

import pytest

from bots.console.auth import SESSION_COOKIE
from extensions.web.visitors import COOKIE

from .conftest import SECRET, StartBot, client, csrf_of, login, scripted

LLM_URL = "https://x.example/v1?api-key=llm-query-key-value"


async def test_secrets_in_url_query_strings_are_masked_on_the_console_settings_page(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("hi"), llm={"base_url": LLM_URL})
    async with client() as session:
        await login(session, bot)
        async with session.get(bot.console_url + "settings") as response:
            html = await response.text()
    assert response.status == 200
    assert "llm-query-key-value" not in html
    assert "https://x.example/v1?api-key=********" in html


async def _raw(url: str, request: bytes, *, timeout: float = 10.0) -> bytes:
    """What the server at ``url`` answers to the bytes of ``request`` (sent as they are, on a fresh connection)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(timeout):
            return await reader.read()
    finally:
        writer.close()


def _request(url: str, method: str, path: str, *headers: bytes, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\nConnection: close\r\n".encode()
    if body:
        head += f"Content-Length: {len(body)}\r\n".encode()
    return head + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


async def test_malformed_input_gets_a_clean_400_never_a_500(
    start_bot: StartBot, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot(scripted("hi"))
    async with client() as visitor, visitor.get(bot.chat_url) as response:
        csrf = csrf_of(await response.text())
        cookie = f"Cookie: {COOKIE}={response.cookies[COOKIE].value}".encode()
    chat, console = bot.chat_url, bot.console_url
    json_type = b"Content-Type: application/json"
    token = f"X-CSRF-Token: {csrf}".encode()
    refused = [
        # a non-UTF-8 byte in the server's own cookie, on every page of the web chat and the console
        (chat, _request(chat, "GET", "/", b"Cookie: " + COOKIE.encode() + b"=abc.\xff\xfe")),
        (chat, _request(chat, "GET", "/chat/history", b"Cookie: " + COOKIE.encode() + b"=\xff.x")),
        (console, _request(console, "GET", "/fleet", b"Cookie: " + SESSION_COOKIE.encode() + b"=a.1.\xff")),
        (console, _request(console, "GET", "/login", b"Cookie: " + SESSION_COOKIE.encode() + b"=\xc3\x28")),
        # a charset Python does not know, a body that is not valid in its charset
        (chat, _request(chat, "POST", "/chat/send", cookie, token, json_type + b"; charset=bogus", body=b"{}")),
        (console, _request(console, "POST", "/login", b"Content-Type: text/plain; charset=bogus", body=b"x")),
        (
            console,
            _request(console, "POST", "/login", b"Content-Type: application/x-www-form-urlencoded", body=b"s=\xff"),
        ),
        # JSON nested 100,000 deep, JSON that is not UTF-8
        (chat, _request(chat, "POST", "/chat/send", cookie, token, json_type, body=b"[" * 100_000 + b"]" * 100_000)),
        (chat, _request(chat, "POST", "/chat/send", cookie, token, json_type, body=b'{"text": "\xff"}')),
    ]
    with caplog.at_level(logging.INFO):
        for url, request in refused:
            answer = await _raw(url, request)
            assert _status(answer) == 400, (request[:120], answer[:300])
        # a CSRF token with a non-UTF-8 byte is a wrong token (403), not a crash; other sites' cookies are not read
        bad_token = _request(chat, "POST", "/chat/send", cookie, b"X-CSRF-Token: \xff", json_type, body=b"{}")
        assert _status(await _raw(chat, bad_token)) == 403
        other_site = _request(chat, "GET", "/", b"Cookie: elsewhere=\xff\xfe")
        assert _status(await _raw(chat, other_site)) == 200
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "no traceback, no ERROR"
    async with client() as visitor, visitor.get(chat) as response:  # and the servers go on answering
        assert response.status == 200


async def _closed_within(url: str, sent: bytes, seconds: float) -> bytes:
    """Send ``sent`` and wait for the server to close the connection (within ``seconds``); what it answered."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(sent)
        await writer.drain()
        async with asyncio.timeout(seconds):
            return await reader.read()  # b"" or an answer, then EOF: the server closed it
    finally:
        writer.close()


async def _bounded(url: str, *, header_timeout: float, max_connections: int) -> None:
    """The server at ``url`` drops a half-sent request, a trickling body and an idle connection after about
    ``header_timeout``, and answers 503 to a connection past ``max_connections``, then serves again."""
    host = urlsplit(url).netloc.encode()
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await _closed_within(url, b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nX-Slow:", header_timeout + 5) == b""
    assert await _closed_within(url, b"", header_timeout + 5) == b""  # connected, never wrote a byte
    body = b"POST /x HTTP/1.1\r\nHost: " + host + b"\r\nContent-Length: 100\r\n\r\nonly a part"
    answer = await _closed_within(url, body, header_timeout + 5)
    assert answer == b"" or _status(answer) in (404, 405, 408), answer[:200]  # the body never completes
    assert loop.time() - started >= header_timeout  # (not refused at once: dropped once the time was up)
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    held = [await asyncio.open_connection(parts.hostname, parts.port) for _ in range(max_connections)]
    try:
        await asyncio.sleep(0.1)  # (accepted)
        answer = await _closed_within(url, b"", 5)
        assert _status(answer) == 503, answer[:200]
    finally:
        for _reader, writer in held:
            writer.close()
    async with asyncio.timeout(5):  # the cap counts open connections: once they closed, a request is served
        while True:
            answer = await _raw(url, b"GET /healthz HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
            if _status(answer) != 503:
                break
            await asyncio.sleep(0.05)
    assert _status(answer) in (200, 404), answer[:200]


async def test_the_web_chat_and_the_console_drop_half_sent_requests_and_cap_connections(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("hi"), web={"header_timeout": 0.5, "max_connections": 3})
    await _bounded(bot.chat_url, header_timeout=0.5, max_connections=3)
    await _bounded(bot.console_url, header_timeout=0.5, max_connections=3)


async def test_the_ops_endpoints_and_the_telegram_webhook_drop_half_sent_requests_and_cap_connections() -> None:
    from telegram import Bot

    from bots.ops import Ops, serve
    from extensions.chat.http_server import HttpLimits
    from extensions.telegram.webhook import WebhookServer

    limits = HttpLimits(header_timeout=0.5, max_connections=3)
    async with serve(Ops(), host="127.0.0.1", port=0, limits=limits) as port:
        await _bounded(f"http://127.0.0.1:{port}/", header_timeout=0.5, max_connections=3)

    async def handle(update: object) -> None:
        raise AssertionError("no update arrives")

    hook = WebhookServer(Bot("1:x"), handle, listen="127.0.0.1", port=0, path="/hook", secret="s" * 32, limits=limits)
    await hook.start(shutdown_timeout=1)
    try:
        assert hook._runner is not None
        port = hook._runner.addresses[0][1]
        await _bounded(f"http://127.0.0.1:{port}/", header_timeout=0.5, max_connections=3)
    finally:
        await hook.stop()


async def test_cookies_get_the_host_prefix_when_served_over_https(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("hi"), web={"secure_cookies": True}, console={"secure_cookies": True})
    async with client() as visitor:
        async with visitor.get(bot.chat_url) as response:
            set_cookie = response.headers["Set-Cookie"]
        assert set_cookie.startswith("__Host-visitor=") and "Secure" in set_cookie and "Path=/" in set_cookie
        assert "Domain" not in set_cookie
        value = set_cookie.split(";", 1)[0].split("=", 1)[1]
        async with visitor.get(bot.chat_url + "chat/history", headers={"Cookie": f"__Host-visitor={value}"}) as known:
            assert known.status == 200  # the prefixed cookie names the visitor
        async with visitor.get(bot.chat_url + "chat/history", headers={"Cookie": f"{COOKIE}={value}"}) as plain:
            assert plain.status == 403  # the unprefixed name is not read: a page on http:// cannot plant it
        async with visitor.post(bot.console_url + "login", data={"secret": SECRET}, allow_redirects=False) as login:
            set_cookie = login.headers["Set-Cookie"]
        assert set_cookie.startswith(f"__Host-{SESSION_COOKIE}=") and "Secure" in set_cookie
        assert "Path=/" in set_cookie and "Domain" not in set_cookie
