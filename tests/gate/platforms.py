"""The four ways people talk to the ``bots`` program, as the release gate drives them: the fake Bot API (the real
python-telegram-bot client in the process polls it), the fake Discord (the real discord.py client), the web chat
over HTTP (its page's calls: the cookie, the CSRF token, ``/chat/send`` and the event stream), and the terminal chat
on a pty. Each ``Chat`` gives the settings an operator sets for it, lets a person speak (``say``), privately or in a
group, and shows what that person sees of the bot's replies (``texts``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import aiohttp

from tests.fakes.discord_server import FakeDiscord, Json, layout_text
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import free_port
from tests.web.conftest import WEB_SECRET, client, csrf_of

__all__ = ("ANN", "BOB", "DEADLINE", "PLATFORMS", "Chat", "DiscordChat", "TelegramChat", "TerminalChat", "WebChat")

ANN, BOB = 0, 1
"""The two people of every conversation."""
DEADLINE = 120.0
"""Seconds a gate test waits for an answer (a bound, not a timing assertion: the embedded model on two busy cores
takes tens of seconds for some)."""
PLATFORMS = ("telegram", "discord", "web", "terminal")


class Chat(Protocol):
    """One platform as its people use it."""

    name: str
    """The platform's name in the matrix (``telegram``, ``discord``, ``web``, ``terminal``)."""
    metric: str
    """Its name in the bot's metrics (``platform="..."``)."""
    has_group: bool
    """People can talk to the bot together (a Telegram group, a Discord server channel)."""

    def settings(self) -> dict[str, str]:
        """What an operator sets for it (environment variables)."""
        ...

    async def say(self, person: int, text: str, *, group: bool = False) -> None:
        """``person`` writes ``text`` to the bot, in a private chat or in the group."""
        ...

    def texts(self, person: int, *, group: bool = False) -> list[str]:
        """The bot's replies ``person`` sees (in the group: everyone's), oldest first."""
        ...


async def wait_until(predicate: Callable[[], bool], what: str, *, timeout: float = DEADLINE) -> None:
    """Poll ``predicate`` until it holds; fails naming ``what``."""
    try:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


class TelegramChat:
    """Ann and Bob in their private chats with the bot, and in a group where they mention it."""

    name, metric, has_group = "telegram", "telegram", True
    GROUP = -4700

    def __init__(self, fake: FakeTelegramServer) -> None:
        self.fake = fake
        self.people = [(1001, "Ann", "ann"), (1002, "Bob", "bob")]

    def settings(self) -> dict[str, str]:
        return {
            "TELEGRAM_TOKEN": self.fake.token,
            "TELEGRAM_API_URL": self.fake.api_url,
            "TELEGRAM_POLL_TIMEOUT": "1",
        }

    async def say(self, person: int, text: str, *, group: bool = False) -> None:
        user_id, first_name, username = self.people[person]
        if group:
            self.fake.user_says(
                f"@daydream_test_bot {text}",
                user_id=user_id,
                first_name=first_name,
                username=username,
                chat_id=self.GROUP,
                kind="group",
                title="Gate",
            )
        else:
            self.fake.user_says(text, user_id=user_id, first_name=first_name, username=username)

    def texts(self, person: int, *, group: bool = False) -> list[str]:
        chat = self.GROUP if group else self.people[person][0]
        return [m.text for m in self.fake.sent if m.chat_id == chat and not m.deleted]


class DiscordChat:
    """Ann and Bob in direct messages with the bot, and in a server channel where they mention it."""

    name, metric, has_group = "discord", "discord", True

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.guild = fake.guild("Gate")
        self.channel = fake.text_channel(self.guild, "general")
        self.people: list[Json] = [fake.user("ann"), fake.user("bob")]
        self.dms = [fake.dm_channel(user) for user in self.people]

    def settings(self) -> dict[str, str]:
        return {
            "DISCORD_TOKEN": "fake-token",
            "DISCORD_API_URL": self.fake.api_url,
            "DISCORD_GATEWAY_URL": self.fake.gateway_url,
            "DISCORD_GUILD_READY_TIMEOUT": "0.05",
            "DISCORD_SYNC_COMMANDS": "false",
        }

    async def say(self, person: int, text: str, *, group: bool = False) -> None:
        where = self.channel if group else self.dms[person]
        await self.fake.say(where, text, author=self.people[person], mention_bot=group)

    def texts(self, person: int, *, group: bool = False) -> list[str]:
        """What each reply shows: its content, or for an answer with structure (a list, a table, a code block), laid
        out with components v2, its text displays (such a message has no content)."""
        return [
            str(m["content"]) or layout_text(m)
            for m in self.fake.visible_in(self.channel if group else self.dms[person])
        ]


class _Visitor:
    """One browser's side of the web chat: its cookie, CSRF token and open event stream."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = client()
        self.shown: dict[str, str] = {}
        """The bot's messages on the page by id, as last edited, in the order posted."""
        self.csrf = ""
        self._reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        async with self.session.get(self.url) as response:
            assert response.status == 200, await response.text()
            self.csrf = csrf_of(await response.text())
        ready = asyncio.Event()
        self._reader = asyncio.create_task(self._read(ready))
        async with asyncio.timeout(DEADLINE):
            await ready.wait()

    async def _read(self, ready: asyncio.Event) -> None:
        async with self.session.get(self.url + "chat/events", timeout=aiohttp.ClientTimeout(total=None)) as events:
            async for raw in events.content:
                if not raw.startswith(b"data: "):
                    continue
                event = json.loads(raw[6:])
                if event.get("op") == "ready":
                    ready.set()
                elif event.get("op") == "post" and event.get("role", "bot") != "user":
                    self.shown[str(event.get("id", len(self.shown)))] = str(event.get("text", ""))
                elif event.get("op") == "edit":  # (a live reply: posted with its first words, then edited)
                    self.shown[str(event.get("id"))] = str(event.get("text", ""))
                elif event.get("op") == "delete":
                    self.shown.pop(str(event.get("id")), None)
                elif event.get("op") == "notice":
                    self.shown[f"notice-{len(self.shown)}"] = str(event.get("text", ""))

    async def say(self, text: str) -> None:
        headers = {"X-CSRF-Token": self.csrf}
        async with self.session.post(self.url + "chat/send", json={"text": text}, headers=headers) as response:
            assert response.status == 202, await response.text()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await self._reader
        await self.session.close()


class WebChat:
    """Ann and Bob, two visitors of the web chat (it has no shared room: "the group" is both speaking at once,
    each in their own conversation)."""

    name, metric, has_group = "web", "web", False

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.visitors: list[_Visitor] = []

    def settings(self) -> dict[str, str]:
        return {"WEB_PORT": str(self.port), "WEB_SECRET": WEB_SECRET}

    async def open(self) -> None:
        """The two visitors open the page (once the process serves it)."""
        self.visitors = [_Visitor(self.url), _Visitor(self.url)]
        for visitor in self.visitors:
            await visitor.open()

    async def say(self, person: int, text: str, *, group: bool = False) -> None:
        if not self.visitors:
            await self.open()
        await self.visitors[person].say(text)

    def texts(self, person: int, *, group: bool = False) -> list[str]:
        return list(self.visitors[person].shown.values()) if self.visitors else []

    async def close(self) -> None:
        for visitor in self.visitors:
            await visitor.close()


class TerminalChat:
    """Ann at a terminal: ``bots run`` on a pty, no platform token (one person: no group)."""

    name, metric, has_group = "terminal", "cli", False
    PROMPT = "you> "

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.screen = ""
        self._reader: asyncio.Task[None] | None = None

    def settings(self) -> dict[str, str]:
        return {"WEB_PORT": "0"}

    def start_reading(self) -> None:
        loop = asyncio.get_running_loop()
        os.set_blocking(self.master, False)

        def readable() -> None:
            try:
                self.screen += os.read(self.master, 65536).decode(errors="replace")
            except OSError:  # the process closed the terminal
                loop.remove_reader(self.master)

        loop.add_reader(self.master, readable)

    async def say(self, person: int, text: str, *, group: bool = False) -> None:
        assert person == ANN and not group, "one person at a terminal"
        await wait_until(  # (the first one once the embedded model has loaded and warmed up)
            lambda: self.screen.rstrip().endswith(self.PROMPT.strip()), "the terminal's prompt", timeout=DEADLINE * 5
        )
        os.write(self.master, text.encode() + b"\r")

    def texts(self, person: int, *, group: bool = False) -> list[str]:
        """Each answer: what the terminal shows between a typed line and the next prompt (so only whole ones)."""
        turns = self.screen.split(self.PROMPT)[1:-1]
        answers = []
        for turn in turns:
            _typed, _, shown = turn.partition("\n")
            if shown.strip():
                answers.append(shown.strip())
        return answers

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.master)
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.asynccontextmanager
async def started(name: str) -> AsyncIterator[Any]:
    """The ``Chat`` of platform ``name`` with its fake started (closed after)."""
    if name == "telegram":
        async with FakeTelegramServer() as telegram:
            yield TelegramChat(telegram)
    elif name == "discord":
        async with FakeDiscord() as discord:
            yield DiscordChat(discord)
    elif name == "web":
        web = WebChat()
        try:
            yield web
        finally:
            await web.close()
    else:
        terminal = TerminalChat()
        try:
            yield terminal
        finally:
            terminal.close()
