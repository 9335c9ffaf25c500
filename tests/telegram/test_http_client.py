"""PTB's HTTP client on aiohttp (``extensions.telegram.http_client``): what PTB's own client did, against servers of
the test's own on 127.0.0.1 (the fake Bot API's end-to-end tests cover the rest: every call, uploads, downloads)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import BodyPartReader, web
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut

from extensions.telegram.http_client import AiohttpRequest
from tests.ports import free_port

TOKEN = "123456:SECRET-token_never_shown"
ME = {"id": 123456, "is_bot": True, "first_name": "Daydream", "username": "daydream_test_bot"}
MESSAGE = {"message_id": 7, "date": 0, "chat": {"id": 5, "type": "private"}}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """Serve ``handler`` on 127.0.0.1 (a free port) for every path; returns the server's root URL."""
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def client() -> AsyncIterator[AiohttpRequest]:
    request = AiohttpRequest(read_timeout=0.3, connect_timeout=1, write_timeout=1, pool_timeout=1)
    await request.initialize()
    yield request
    await request.shutdown()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


async def test_a_bot_api_call_is_a_form_of_json_values_and_its_answer_is_read(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    seen: list[tuple[str, dict[str, str], str]] = []

    async def handler(request: web.Request) -> web.Response:
        form = await request.post()
        seen.append((request.path, {k: str(v) for k, v in form.items()}, request.headers["User-Agent"]))
        return web.json_response({"ok": True, "result": ME if request.path.endswith("/getMe") else MESSAGE})

    url = await serve(handler)
    async with Bot(TOKEN, base_url=f"{url}/bot", request=AiohttpRequest(), get_updates_request=AiohttpRequest()) as bot:
        message = await bot.send_message(chat_id=5, text="héllo & <b>bye</b>", parse_mode="HTML")
    assert message.message_id == 7
    path, form, agent = seen[-1]
    assert path == f"/bot{TOKEN}/sendMessage"
    assert form == {"chat_id": "5", "text": "héllo & <b>bye</b>", "parse_mode": "HTML"}
    assert "python-telegram-bot" in agent


async def test_a_file_is_uploaded_as_multipart_with_its_name_and_type(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    parts: dict[str, tuple[str | None, str | None, bytes]] = {}

    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("/getMe"):
            return web.json_response({"ok": True, "result": ME})
        async for part in await request.multipart():
            assert isinstance(part, BodyPartReader)
            parts[part.name or ""] = (part.filename, part.headers.get("Content-Type"), bytes(await part.read()))
        return web.json_response({"ok": True, "result": MESSAGE | {"photo": []}})

    url = await serve(handler)
    async with Bot(TOKEN, base_url=f"{url}/bot", request=AiohttpRequest(), get_updates_request=AiohttpRequest()) as bot:
        await bot.send_photo(chat_id=5, photo=InputFile(b"\x89PNG-bytes", filename="фото.png"), caption="a photo")
    assert parts["photo"] == ("фото.png", "image/png", b"\x89PNG-bytes")
    assert parts["chat_id"][2] == b"5" and parts["caption"][2] == b"a photo"


async def test_an_answer_slower_than_the_read_timeout_is_timed_out(
    serve: Callable[[Handler], Awaitable[str]], client: AiohttpRequest
) -> None:
    answer = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        await answer.wait()
        return web.json_response({"ok": True, "result": True})

    url = await serve(handler)
    with pytest.raises(TimedOut):
        await client.do_request(f"{url}/bot{TOKEN}/getMe", "POST")
    # a longer read timeout for one call (PTB's long poll adds its timeout to it) is honoured: still waiting at 1 s
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.do_request(f"{url}/bot{TOKEN}/getMe", "POST", read_timeout=10), 1.0)
    answer.set()


async def test_a_server_that_cannot_be_reached_is_a_network_error_without_the_token(client: AiohttpRequest) -> None:
    port = free_port()  # nobody listens there
    with pytest.raises(NetworkError) as caught:
        await client.do_request(f"http://127.0.0.1:{port}/bot{TOKEN}/getMe", "POST")
    assert "SECRET" not in str(caught.value) and TOKEN not in repr(caught.value)


async def test_the_proxy_of_the_environment_is_used(
    serve: Callable[[Handler], Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTP_PROXY`` / ``HTTPS_PROXY`` (and ``NO_PROXY``) are read as PTB's httpx client read them."""
    asked: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        asked.append(str(request.url))
        return web.json_response({"ok": True, "result": True})

    url = await serve(proxy)
    monkeypatch.setenv("HTTP_PROXY", url)
    monkeypatch.setenv("NO_PROXY", "localhost")
    request = AiohttpRequest()
    await request.initialize()
    try:
        status, _ = await request.do_request(f"http://api.telegram.invalid/bot{TOKEN}/getMe", "POST")
    finally:
        await request.shutdown()
    assert status == 200
    assert asked == [f"http://api.telegram.invalid/bot{TOKEN}/getMe"]


async def test_requests_before_initialize_or_after_shutdown_are_refused() -> None:
    request = AiohttpRequest()
    with pytest.raises(RuntimeError, match="not initialized"):
        await request.do_request("http://127.0.0.1:1/bot1:x/getMe", "POST")
    await request.initialize()
    await request.shutdown()
    with pytest.raises(RuntimeError, match="not initialized"):
        await request.do_request("http://127.0.0.1:1/bot1:x/getMe", "POST")


async def test_a_request_goes_without_a_worker_thread(
    serve: Callable[[Handler], Awaitable[str]], client: AiohttpRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy is worked out from the environment read at ``initialize``: no ``.netrc`` looked for nor proxy
    variables read again in a worker thread at each request (aiohttp's ``trust_env``: two thread hand-overs on the
    way of every answer, the event loop waiting for the GIL back)."""

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "result": True})

    url = await serve(handler)
    loop = asyncio.get_running_loop()
    handed: list[object] = []

    def run_in_executor(executor: object, func: object, *args: object) -> asyncio.Future[object]:
        handed.append(func)
        future: asyncio.Future[object] = loop.create_future()
        future.set_exception(AssertionError("a worker thread"))
        return future

    monkeypatch.setattr(loop, "run_in_executor", run_in_executor)
    for _ in range(2):
        status, _body = await client.do_request(f"{url}/bot{TOKEN}/getMe", "POST")
        assert status == 200
    assert handed == []


async def test_a_host_no_proxy_names_goes_direct_and_the_proxy_credentials_are_sent(
    serve: Callable[[Handler], Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``NO_PROXY`` is honoured per host; the user and password in ``HTTP_PROXY`` go to the proxy, not in its URL."""
    asked: list[tuple[str, str | None]] = []

    async def proxy(request: web.Request) -> web.Response:
        asked.append((str(request.url), request.headers.get("Proxy-Authorization")))
        return web.json_response({"ok": True, "result": True})

    async def direct(request: web.Request) -> web.Response:
        asked.append(("direct", None))
        return web.json_response({"ok": True, "result": True})

    proxy_url, direct_url = await serve(proxy), await serve(direct)
    monkeypatch.setenv("HTTP_PROXY", proxy_url.replace("http://", "http://me:pw@"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    request = AiohttpRequest()
    await request.initialize()
    try:
        await request.do_request(f"http://api.telegram.invalid/bot{TOKEN}/getMe", "POST")
        await request.do_request(f"{direct_url}/bot{TOKEN}/getMe", "POST")
    finally:
        await request.shutdown()
    assert asked == [(f"http://api.telegram.invalid/bot{TOKEN}/getMe", "Basic bWU6cHc="), ("direct", None)]
