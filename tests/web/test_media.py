"""Pictures the bot makes and spoken replies in the web chat (issue 41): the page is sent a media event naming an
address on the web chat itself, which serves the bytes to the visitor they were made for only, with the type read
from the bytes; ``/voice on`` makes a text message's answer spoken too. Through the web chat's HTTP API, and in the
real headless Chromium (an ``<img>`` the browser decodes, an ``<audio>`` element, the caption shown as text)."""

from __future__ import annotations

import asyncio
import json
import struct
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from core import ScriptedModel
from extensions.web.media import MediaShelf, checked_mime
from tests.fakes.openai_server import FakeOpenAIServer

from .browser import Browser
from .conftest import StartBot, answer, client, csrf_of, until
from .visiting import saved

KEY = "sk-web-media-secret"
CAPTION = '<img src=x onerror="alert(1)"> a fox & its "den"'


def tiny_png() -> bytes:
    """A real 2x2 PNG (red), which a browser decodes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def picture_then(text: str) -> ScriptedModel:
    """Calls make_picture once (with a caption full of markup), then answers ``text``."""
    call = json.dumps({"prompt": "a red fox in the snow", "caption": CAPTION})
    return ScriptedModel([f'<response><action_call name="make_picture">{call}</action_call></response>', answer(text)])


@pytest.fixture
async def openai() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(api_key=KEY) as server:
        yield server


class Page:
    """One visitor's page: its cookie, CSRF token and event stream."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url
        self.csrf = ""
        self.shown: list[dict[str, Any]] = []
        self._events: aiohttp.ClientResponse | None = None

    async def open(self) -> Page:
        async with self.session.get(self.url) as response:
            assert response.status == 200
            self.csrf = csrf_of(await response.text())
        self._events = await self.session.get(self.url + "chat/events")
        await self._events.content.readuntil(b'"ready"}\n\n')
        return self

    async def send(self, text: str) -> dict[str, Any]:
        async with self.session.post(
            self.url + "chat/send", json={"text": text}, headers={"X-CSRF-Token": self.csrf}
        ) as response:
            assert response.status in (200, 202), await response.text()
            body: dict[str, Any] = await response.json()
            return body

    async def until(self, found: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        assert self._events is not None
        try:
            async with asyncio.timeout(15):
                while True:
                    for event in self.shown:
                        if found(event):
                            return event
                    line = await self._events.content.readline()
                    if line.startswith(b"data: "):
                        self.shown.append(json.loads(line[6:]))
        except TimeoutError:
            raise AssertionError(f"not shown; the page was shown {self.shown}") from None

    def close(self) -> None:
        if self._events is not None:
            self._events.close()


async def test_a_picture_is_shown_from_the_web_chats_own_address_to_its_visitor_only(
    start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    bot = await start_bot(
        picture_then("Here is your fox."),
        images={"base_url": openai.url, "api_key": KEY, "per_day_user": 3},
        web={"visitor_tier": "member"},  # (make_picture is for members and above, like any action by default)
    )
    async with client() as session, client() as stranger:
        page = await Page(session, bot.chat_url).open()
        try:
            await page.send("draw me a fox")
            media = await page.until(lambda e: e.get("op") == "media")
            await page.until(lambda e: e.get("op") == "post" and e.get("text") == "Here is your fox.")
        finally:
            page.close()
        assert media["kind"] == "picture" and media["caption"] == CAPTION  # (text: the page shows it as text)
        assert "data" not in media and media["url"].startswith("chat/media/")
        async with session.get(bot.chat_url + media["url"]) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "image/png"
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            assert "media-src 'self'" in response.headers["Content-Security-Policy"]
            assert await response.read() == openai.picture
        async with stranger.get(bot.chat_url) as response:  # another visitor, with a cookie of their own
            assert response.status == 200
        async with stranger.get(bot.chat_url + media["url"]) as response:
            assert response.status == 404
        async with aiohttp.ClientSession() as nobody, nobody.get(bot.chat_url + media["url"]) as response:
            assert response.status == 403
        async with session.get(bot.chat_url + "chat/media/not-a-token") as response:
            assert response.status == 404
    [request] = [r for r in openai.requests if r.path.endswith("/images/generations")]
    assert request.body["prompt"] == "a red fox in the snow"


async def test_voice_on_speaks_the_answer_to_a_text_message_as_an_audio_element(
    start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    model = ScriptedModel(lambda request: answer("The sea is calm today."))
    bot = await start_bot(model, tts={"base_url": openai.url, "api_key": KEY})
    async with client() as session:
        page = await Page(session, bot.chat_url).open()
        try:
            shown = await page.send("/voice")
            assert "answers to voice messages are spoken" in shown["notice"]
            await page.send("hello")  # not spoken: a text message, /voice not on
            await page.until(lambda e: e.get("op") == "post")
            await until(lambda: saved(bot, session, "hello"))  # (its run ended: the next one reads /voice)
            done = (await page.send("/voice on"))["notice"]
            assert done == "Done: spoken replies in this chat: every answer is also spoken."
            page.shown.clear()
            await page.send("how is the sea?")
            media = await page.until(lambda e: e.get("op") == "media")
            assert not any(e.get("op") == "media" for e in page.shown[: page.shown.index(media)] if e is not media)
        finally:
            page.close()
        assert media["kind"] == "voice" and media["caption"] == ""
        async with session.get(bot.chat_url + media["url"]) as response:
            assert response.status == 200 and response.headers["Content-Type"] == "audio/ogg"
            assert await response.read() == openai.speech
        spoken = [r.body["input"] for r in openai.requests if r.path.endswith("/audio/speech")]
        assert spoken == ["The sea is calm today."]  # once: the first answer, to a text message, was not spoken
        async with session.get(bot.chat_url) as response:
            csrf = csrf_of(await response.text())
        async with session.post(
            bot.chat_url + "chat/send", json={"text": "/voice off"}, headers={"X-CSRF-Token": csrf}
        ) as response:
            assert "never" in (await response.json())["notice"]


async def test_voice_says_plainly_when_the_bot_has_no_speech_engine(start_bot: StartBot) -> None:
    bot = await start_bot(ScriptedModel(lambda request: answer("hi")))
    async with client() as session:
        page = await Page(session, bot.chat_url).open()
        try:
            shown = await page.send("/voice on")
        finally:
            page.close()
    assert "TTS_BASE_URL or TTS_ENGINE" in shown["notice"]


def test_the_shelf_checks_the_bytes_and_serves_them_to_their_visitor_only() -> None:
    shelf = MediaShelf(max_bytes=100)
    assert checked_mime("picture", b"<svg onload=alert(1)>") is None  # an SVG is no picture here: it runs script
    assert checked_mime("voice", b"\x89PNG\r\n\x1a\n") is None
    assert shelf.put("ann", "picture", b"<html>") is None
    token = shelf.put("ann", "picture", b"\x89PNG\r\n\x1a\n" + b"x" * 40)
    assert token is not None
    assert shelf.get("bob", token) is None
    item = shelf.get("ann", token)
    assert item is not None and item.mime == "image/png"
    second = shelf.put("ann", "voice", b"OggS" + b"y" * 60)  # over the shelf's bytes: the oldest goes
    assert second is not None and shelf.get("ann", token) is None and len(shelf) == 1
    assert shelf.page_event("ann", {"op": "media", "kind": "picture", "data": "not base64!"}) is None


async def test_the_page_shows_the_picture_and_its_caption_as_text_in_chromium(
    browser: Browser, start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    openai.picture = tiny_png()
    bot = await start_bot(
        picture_then("Here is your fox."),
        images={"base_url": openai.url, "api_key": KEY},
        web={"visitor_tier": "member"},
    )
    await browser.get(bot.chat_url)
    await browser.wait_for(lambda: not browser.driver.find_element("id", "send").get_attribute("disabled"))
    await browser.type("#text", "draw me a fox\n")
    await browser.wait_for(
        lambda: browser.driver.execute_script(
            "var i = document.querySelector('.message.media img'); return i && i.complete && i.naturalWidth;"
        ),
        what="the picture, decoded",
    )
    assert browser.driver.execute_script("return document.querySelector('.message.media img').naturalWidth") == 2
    assert await browser.text(".message.media p") == CAPTION  # shown as text
    assert browser.driver.execute_script("return document.querySelectorAll('img[src=x]').length") == 0
    await browser.screenshot("web-chat-picture")
