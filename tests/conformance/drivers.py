"""One small driver per platform for the conformance suite: it starts the platform's fake server, gives the
settings that point the bot (built by ``bots.app.build_agent``, the platform's real client inside) at it, acts as
people there (``say``), and reads what the bot posted (``replies``). A scenario a platform cannot have is declared in
its ``not_applicable``, with the reason.

A new platform is done when its driver is listed in ``DRIVERS`` and every scenario passes or is declared."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import aiohttp

from core.definitions import Context
from extensions.chat.approvals import button_labels
from tests.fakes.discord_server import FakeDiscord, Json
from tests.fakes.matrix_server import FakeHomeserver
from tests.fakes.slack_server import APP_TOKEN, BOT_TOKEN, BOT_USER, SIGNING_SECRET, FakeSlack, SlackMessage
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import free_port

__all__ = ("DRIVERS", "Driver", "Message")

DEADLINE = 60.0
"""Seconds a condition may take to hold (generous: CI runs six workers on two cores)."""


@dataclass(frozen=True, kw_only=True)
class Message:
    """What a person posted, as the driver needs it again (to delete it)."""

    where: str
    """``dm`` or ``group``."""
    raw: Any
    """The fake's own record of it."""


class Driver(abc.ABC):
    """A platform as the scenarios see it: a private conversation (``dm``) and a group (``group``)."""

    name: ClassVar[str]
    """The platform's registered name."""
    output: ClassVar[str]
    """The output type the model answers with."""
    not_applicable: ClassVar[dict[str, str]] = {}
    """Scenarios this platform cannot have, by name, with the reason."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Start the fake server."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop it."""

    @abc.abstractmethod
    def settings(self, **overrides: Any) -> dict[str, Any]:
        """The platform's settings group for ``Settings(<name>=...)``, pointed at the fake (streamed every 0.05 s)."""

    async def bound(self, agent: Any, data_dir: Path) -> None:
        """The bot was started with its data in ``data_dir`` (the terminal's chat loop starts here)."""
        await asyncio.sleep(0)

    async def ready(self) -> None:
        """Wait until the bot listens (its connection open, its commands registered); by default, at once."""
        await asyncio.sleep(0)

    @abc.abstractmethod
    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        """A person writes ``text`` in the DM or the group (mentioning the bot if ``mention``)."""

    @abc.abstractmethod
    async def send_picture(self, data: bytes, caption: str) -> Message:
        """A person sends a PNG picture with ``caption`` in the DM."""

    @abc.abstractmethod
    def replies(self, where: str = "dm") -> list[str]:
        """The bot's messages there, as shown now (a command's private answer excluded)."""

    @abc.abstractmethod
    def versions(self, where: str = "dm") -> list[list[str]]:
        """Every text each of the bot's messages there showed, oldest first."""

    def streamed(self, where: str = "dm") -> bool:
        """The answer was shown while it was written (a message showed more than one text)."""
        return any(len(v) > 1 for v in self.versions(where))

    @abc.abstractmethod
    def pictures_posted(self) -> list[bytes]:
        """The pictures the bot posted."""

    @abc.abstractmethod
    def files_fetched(self) -> int:
        """How many files people sent the bot fetched."""

    @abc.abstractmethod
    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        """A person runs ``/name arg``; returns the bot's answer (waited for)."""

    async def delete(self, message: Message) -> None:
        """Its author deletes ``message``."""
        raise NotImplementedError

    @abc.abstractmethod
    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        """The context and arguments of the conversation there."""

    @abc.abstractmethod
    def operator_channel(self) -> str:
        """The group as an operator writes it (``BOT_SCHEDULES``)."""

    @abc.abstractmethod
    def fleet_env(self) -> dict[str, str]:
        """The platform's settings as environment variables, for ``bots gateway`` and ``bots worker``."""

    def another_gateway(self, env: dict[str, str]) -> dict[str, str]:
        """The environment of a second gateway beside the one of ``env``."""
        return env

    def admin(self) -> str:
        """The platform-qualified id of Bob, the bot's admin in the approval scenario (``BOT_ADMIN_USERS``)."""
        raise NotImplementedError

    def approval_asked(self) -> bool:
        """An approval request with its buttons is shown in the group."""
        raise NotImplementedError

    async def press_approve(self) -> None:
        """Bob presses Approve under the request in the group."""
        raise NotImplementedError

    def connections(self) -> int:
        """How many of the bot's processes listen now, where the fake can tell (0 where it cannot)."""
        return 0

    def extra_deliveries(self) -> int:
        """Events handed to the bot more than once so far (as far as the fake knows)."""
        return 0

    def duplicate_deliveries(self) -> bool:
        """From now on, hand every event to the fleet more than once (to each gateway) if the fake can: True."""
        return False

    @abc.abstractmethod
    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        """Return once ``predicate()`` holds."""

    def answer(self, text: str) -> str:
        """A model answer that posts ``text``."""
        return f'<response><output type="{self.output}">{text}</output></response>'


class TelegramDriver(Driver):
    name = "telegram"
    output = "telegram:message"
    not_applicable: ClassVar[dict[str, str]] = {
        "deletion": "the Bot API tells a bot of no deletion: a deleted message is not known to it",
    }
    GROUP = -100123

    def __init__(self) -> None:
        self.fake = FakeTelegramServer()

    async def start(self) -> None:
        await self.fake.start()

    async def close(self) -> None:
        await self.fake.close()

    def settings(self, **overrides: Any) -> dict[str, Any]:
        return {
            "token": self.fake.token,
            "api_url": self.fake.api_url,
            "poll_timeout": 10,
            "stream_interval": 0.05,
            "stream_drafts": False,
            **overrides,
        }

    def _chat(self, where: str) -> int:
        return 1001 if where == "dm" else self.GROUP

    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        if mention:
            text = f"@{self.fake.bot['username']} {text}"
        if where == "dm":
            update = self.fake.user_says(text)
        else:
            update = self.fake.user_says(text, chat_id=self.GROUP, kind="supergroup", title="Team")
        return Message(where=where, raw=update)

    async def send_picture(self, data: bytes, caption: str) -> Message:
        return Message(where="dm", raw=self.fake.user_sends("photo", data, caption=caption))

    def _mine(self, where: str) -> list[Any]:
        return [m for m in self.fake.sent if m.chat_id == self._chat(where) and not m.deleted]

    def replies(self, where: str = "dm") -> list[str]:
        return [m.text for m in self._mine(where)]

    def versions(self, where: str = "dm") -> list[list[str]]:
        return [m.versions for m in self._mine(where)]

    def pictures_posted(self) -> list[bytes]:
        return [m.file.data for m in self.fake.media if m.method == "sendPhoto"]

    def files_fetched(self) -> int:
        return len(self.fake.downloads)

    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        before = len(self.replies(where))
        await self.say(f"/{name} {arg}".strip(), where=where)
        await self.wait(lambda: len(self.replies(where)) > before)
        return self.replies(where)[before]

    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        from extensions.telegram import ChatArgs, telegram_chat

        return telegram_chat, ChatArgs(chat_id=self._chat(where))

    def operator_channel(self) -> str:
        return f"telegram:{self.GROUP}"

    def admin(self) -> str:
        return "telegram:2002"

    def approval_asked(self) -> bool:
        return any(m.buttons for m in self._mine("group"))

    async def press_approve(self) -> None:
        request = next(m for m in self._mine("group") if m.buttons)
        approve = next(label for label in request.buttons if button_labels()[0] in label)
        self.fake.user_presses(request, approve, user_id=2002, first_name="Bob")

    def fleet_env(self) -> dict[str, str]:
        return {"TELEGRAM_TOKEN": self.fake.token, "TELEGRAM_API_URL": self.fake.api_url, "TELEGRAM_POLL_TIMEOUT": "1"}

    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        await self.fake.wait_for(predicate, timeout=timeout)


class DiscordDriver(Driver):
    name = "discord"
    output = "discord:message"

    def __init__(self) -> None:
        self.fake = FakeDiscord()
        self.guild = self.fake.guild()
        self.general = self.fake.text_channel(self.guild, "general")
        self.alice: Json = self.fake.user("alice")
        self.dm = self.fake.dm_channel(self.alice)
        self.bob: Json = self.fake.user("bob")

    async def start(self) -> None:
        await self.fake.start()

    async def close(self) -> None:
        await self.fake.close()

    def settings(self, **overrides: Any) -> dict[str, Any]:
        return {
            "token": "fake-token",
            "api_url": self.fake.api_url,
            "gateway_url": self.fake.gateway_url,
            "guild_ready_timeout": 0.05,
            "connect_timeout": 30.0,
            "request_timeout": 30.0,
            "stream_interval": 0.05,
            **overrides,
        }

    async def ready(self) -> None:
        await self.wait(lambda: any(c["name"] == "reset" for c in self.fake.commands))

    def _channel(self, where: str) -> int:
        return self.dm if where == "dm" else self.general

    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        said = await self.fake.say(self._channel(where), text, author=self.alice, mention_bot=mention)
        return Message(where=where, raw=said)

    async def send_picture(self, data: bytes, caption: str) -> Message:
        said = await self.fake.say(self.dm, caption, author=self.alice, files=[("picture.png", "image/png", data)])
        return Message(where="dm", raw=said)

    def replies(self, where: str = "dm") -> list[str]:
        return [str(m["content"]) for m in self.fake.visible_in(self._channel(where)) if m["author"]["bot"]]

    def versions(self, where: str = "dm") -> list[list[str]]:
        return [self.fake.versions_of(m) for m in self.fake.visible_in(self._channel(where)) if m["author"]["bot"]]

    def pictures_posted(self) -> list[bytes]:
        return [data for _channel, _name, _mime, data in self.fake.uploads]

    def files_fetched(self) -> int:
        return len(self.fake.downloads)

    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        options = [{"type": 3, "name": "text", "value": arg}] if arg else None
        iid = await self.fake.slash(name, self._channel(where), user=self.alice, options=options)
        await self.wait(lambda: iid in self.fake.interaction_responses)
        data = self.fake.interaction_responses[iid].get("data") or {}
        if data.get("content"):
            return str(data["content"])
        await self.wait(lambda: bool(self.fake.response_message(iid).get("content")))
        return str(self.fake.response_message(iid)["content"])

    async def delete(self, message: Message) -> None:
        channel = self._channel(message.where)
        await self.fake.dispatch("MESSAGE_DELETE", {"id": message.raw["id"], "channel_id": str(channel)})

    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        from extensions.discord import ChannelArgs, discord_channel

        if where == "dm":
            return discord_channel, ChannelArgs(channel_id=self.dm)
        return discord_channel, ChannelArgs(channel_id=self.general, guild_id=self.guild)

    def operator_channel(self) -> str:
        return f"discord:{self.general}"

    def admin(self) -> str:
        return f"discord:{self.bob['id']}"

    def _request(self) -> Json | None:
        shown = self.fake.visible_in(self.general)
        return next((m for m in shown if m["author"]["bot"] and self.fake.buttons(m)), None)

    def approval_asked(self) -> bool:
        return self._request() is not None

    async def press_approve(self) -> None:
        request = self._request()
        assert request is not None
        approve = next(label for label in self.fake.buttons(request) if button_labels()[0] in label)
        await self.fake.press(request, approve, user=self.bob)

    def fleet_env(self) -> dict[str, str]:
        return {
            "DISCORD_TOKEN": "fake-token",
            "DISCORD_API_URL": self.fake.api_url,
            "DISCORD_GATEWAY_URL": self.fake.gateway_url,
            "DISCORD_GUILD_READY_TIMEOUT": "0.05",
        }

    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        await self.fake.wait_until(predicate, timeout=timeout)


class SlackDriver(Driver):
    name = "slack"
    output = "slack:message"
    DM = "D0ALICE"
    GROUP = "C0TEAM"

    def __init__(self) -> None:
        self.fake = FakeSlack()
        self.thread: str | None = None
        """The group thread the scenario talks in (its first message's ts)."""

    async def start(self) -> None:
        await self.fake.start()

    async def close(self) -> None:
        await self.fake.close()

    def settings(self, **overrides: Any) -> dict[str, Any]:
        return {
            "bot_token": BOT_TOKEN,
            "app_token": APP_TOKEN,
            "api_url": self.fake.api_url,
            "stream_interval": 0.05,
            **overrides,
        }

    async def ready(self) -> None:
        await self.wait(lambda: self.fake.sockets > 0)

    def _channel(self, where: str) -> str:
        return self.DM if where == "dm" else self.GROUP

    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        if mention:
            text = f"<@{BOT_USER}> {text}"
        if where == "dm":
            return Message(where=where, raw=self.fake.user_says(self.DM, text))
        said = self.fake.user_says(self.GROUP, text, channel_type="channel", thread_ts=self.thread)
        self.thread = self.thread or said.ts
        return Message(where=where, raw=said)

    async def send_picture(self, data: bytes, caption: str) -> Message:
        said = self.fake.user_says(self.DM, caption, files=[("picture.png", "image/png", data)])
        return Message(where="dm", raw=said)

    def replies(self, where: str = "dm") -> list[str]:
        return [m.text for m in self.fake.bot_messages(self._channel(where)) if m.ephemeral_to is None]

    def versions(self, where: str = "dm") -> list[list[str]]:
        return [m.versions for m in self.fake.bot_messages(self._channel(where)) if m.ephemeral_to is None]

    def pictures_posted(self) -> list[bytes]:
        return [data for data in self.fake.uploads.values() if data]

    def files_fetched(self) -> int:
        return len(self.fake.downloads)

    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        envelope = self.fake.user_commands(self._channel(where), name, arg)
        await self.wait(lambda: envelope in self.fake.acked)
        return str(self.fake.responses.get(envelope, {}).get("text", ""))

    async def delete(self, message: Message) -> None:
        self.fake.user_deletes(message.raw, channel_type="im" if message.where == "dm" else "channel")

    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        from extensions.slack import ConversationArgs, slack_conversation

        if where == "dm":
            return slack_conversation, ConversationArgs(channel=self.DM)
        return slack_conversation, ConversationArgs(channel=self.GROUP, thread_ts=self.thread)

    def operator_channel(self) -> str:
        return f"slack:{self.GROUP}"

    def admin(self) -> str:
        return "slack:UBOB"

    def _request(self) -> SlackMessage | None:
        found = [m for m in self.fake.bot_messages(self.GROUP) if any(b.get("type") == "actions" for b in m.blocks)]
        return found[-1] if found else None

    def approval_asked(self) -> bool:
        return self._request() is not None

    async def press_approve(self) -> None:
        request = self._request()
        assert request is not None
        [actions] = [b for b in request.blocks if b.get("type") == "actions"]
        self.fake.user_presses(request, actions["elements"][0]["action_id"], user="UBOB")

    def fleet_env(self) -> dict[str, str]:
        return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_API_URL": self.fake.api_url}

    def connections(self) -> int:
        return self.fake.sockets

    def extra_deliveries(self) -> int:
        return sum(n - 1 for n in self.fake.delivered.values())

    def duplicate_deliveries(self) -> bool:
        self.fake.fanout = True
        return True

    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        await self.fake.wait_for(predicate, timeout=timeout)


class SlackEventsDriver(SlackDriver):
    """Slack with the Events API: the fake POSTs each event, signed, to the bot's endpoint (``SLACK_MODE=events``)."""

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()
        self.fake.request_url = f"http://127.0.0.1:{self.port}/slack/events"

    def settings(self, **overrides: Any) -> dict[str, Any]:
        events = {
            "mode": "events",
            "signing_secret": SIGNING_SECRET,
            "events_host": "127.0.0.1",
            "events_port": self.port,
        }
        return super().settings(**events, **overrides)

    async def ready(self) -> None:
        await asyncio.sleep(0)  # (the endpoint is served once the bot started; the fake retries until answered)

    def fleet_env(self) -> dict[str, str]:
        return {
            **super().fleet_env(),
            "SLACK_MODE": "events",
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_EVENTS_HOST": "127.0.0.1",
            "SLACK_EVENTS_PORT": str(self.port),
        }

    def another_gateway(self, env: dict[str, str]) -> dict[str, str]:
        return env | {"SLACK_EVENTS_PORT": str(free_port())}  # (behind a balancer in production; here, idle)

    def connections(self) -> int:
        return 0

    def duplicate_deliveries(self) -> bool:
        return False


ALICE, BOB = "@alice:example.org", "@bob:example.org"
"""The people of the Matrix driver's rooms."""
MATRIX_APPROVAL = "io.daydreams.bots.approval"
"""The content field of the bot's approval requests (``extensions.matrix.approvals``)."""


class MatrixDriver(Driver):
    """Matrix: matrix-nio's real client against the fake homeserver; the DM is a room of Alice and the bot, the
    group a room of Alice, Bob and the bot; commands are written ``!name``."""

    name = "matrix"
    output = "matrix:message"

    def __init__(self) -> None:
        self.fake = FakeHomeserver()
        self.dm = ""
        self.group = ""

    async def start(self) -> None:
        await self.fake.__aenter__()
        self.dm = self.fake.room("Alice", {ALICE: "Alice"})
        self.group = self.fake.room("Team", {ALICE: "Alice", BOB: "Bob"})

    async def close(self) -> None:
        await self.fake.__aexit__(None, None, None)

    def settings(self, **overrides: Any) -> dict[str, Any]:
        return {
            "homeserver": self.fake.url,
            "user_id": self.fake.bot,
            "access_token": self.fake.token,
            "stream_interval": 0.05,
            "sync_timeout": 1,
            **overrides,
        }

    async def ready(self) -> None:
        await self.wait(lambda: any(since is not None for since in self.fake.syncs))

    def _room(self, where: str) -> str:
        return self.dm if where == "dm" else self.group

    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        event_id = self.fake.say(self._room(where), ALICE, text, mention=mention)
        return Message(where=where, raw=event_id)

    async def send_picture(self, data: bytes, caption: str) -> Message:
        event_id = self.fake.picture(self.dm, ALICE, data, name="picture.png", caption=caption)
        return Message(where="dm", raw=event_id)

    def replies(self, where: str = "dm") -> list[str]:
        return self.fake.shown(self._room(where))

    def versions(self, where: str = "dm") -> list[list[str]]:
        return self.fake.versions(self._room(where))

    def pictures_posted(self) -> list[bytes]:
        return [data for data, _mime in self.fake.uploaded()]

    def files_fetched(self) -> int:
        return self.fake.downloads()

    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        before = len(self.replies(where))
        await self.say(f"!{name} {arg}".strip(), where=where)
        await self.wait(lambda: len(self.replies(where)) > before)
        return self.replies(where)[before]

    async def delete(self, message: Message) -> None:
        self.fake.redact(self._room(message.where), ALICE, str(message.raw))

    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        from extensions.matrix import RoomArgs, matrix_room

        return matrix_room, RoomArgs(room_id=self._room(where))

    def operator_channel(self) -> str:
        return f"matrix:{self.group}"

    def fleet_env(self) -> dict[str, str]:
        return {**self.fake.settings(), "MATRIX_SYNC_TIMEOUT": "1"}

    def admin(self) -> str:
        return f"matrix:{BOB}"

    def _requests(self) -> list[str]:
        """The bot's approval requests in the group (notices carrying an approval's id), by event id."""
        return [s.event["event_id"] for s in self.fake.bot_messages(self.group) if MATRIX_APPROVAL in s.content]

    def approval_asked(self) -> bool:
        reacted = {event_id for event_id, _key in self.fake.bot_reactions(self.group)}  # (taken away once decided)
        return any(event_id in reacted for event_id in self._requests())

    async def press_approve(self) -> None:
        self.fake.react(self.group, BOB, self._requests()[-1], "✅")

    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        await self.fake.wait_for(predicate, timeout=timeout)


class WebDriver(Driver):
    """The web chat: the bot serves the page itself (no fake); a visitor's session posts to ``chat/send`` and reads
    the page's event stream (``post``, ``edit``, ``delete``, ``notice``, ``media``)."""

    name = "web"
    output = "web:message"
    not_applicable: ClassVar[dict[str, str]] = {
        "group": "the web chat has one conversation per visitor: no group, no mentions",
        "split": "the page shows an answer whole, however long: there is no message length to split at",
        "picture_in": "a visitor sends text only",
        "deletion": "a visitor cannot delete a message",
        "fleet": "a visitor's page is served by the gateway whose address it opened: no ingest to divide",
    }
    SECRET = "web-secret-for-the-conformance-suite-0123456789"

    def __init__(self) -> None:
        self.port = free_port()
        self.session: aiohttp.ClientSession | None = None
        self.csrf = ""
        self.shown: dict[str, list[str]] = {}
        self.deleted: set[str] = set()
        self.media: list[str] = []
        self.pictures: list[bytes] = []
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self.session is not None:
            await self.session.close()

    def settings(self, **overrides: Any) -> dict[str, Any]:
        return {
            "host": "127.0.0.1",
            "port": self.port,
            "secret": self.SECRET,
            "stream_interval": 0.05,
            "visitor_tier": "member",
            "schedules": True,
            **overrides,
        }

    async def ready(self) -> None:
        assert self.session is not None
        if self._reader is not None:
            return
        async with self.session.get(self.url) as response:
            page = await response.text()
        found = re.search(r'name="csrf(?:-token)?" (?:content|value)="([^"]+)"', page)
        assert found is not None, page[:300]
        self.csrf = found.group(1)
        events = await self.session.get(self.url + "chat/events")
        await events.content.readuntil(b'"ready"}\n\n')
        self._reader = asyncio.create_task(self._read(events), name="conformance:web-events")

    async def _read(self, events: aiohttp.ClientResponse) -> None:
        assert self.session is not None
        with contextlib.closing(events):
            async for raw in events.content:
                if not raw.startswith(b"data: "):
                    continue
                event = json.loads(raw[6:])
                op, ident = event.get("op"), str(event.get("id", ""))
                if op == "post":
                    self.shown[ident] = [str(event.get("text", ""))]
                elif op == "edit" and ident in self.shown:
                    self.shown[ident].append(str(event.get("text", "")))
                elif op == "delete":
                    self.deleted.add(ident)
                elif op == "media" and event.get("kind") == "picture":
                    async with self.session.get(self.url + str(event["url"])) as response:
                        self.pictures.append(await response.read())
                self._changed.set()

    async def _send(self, text: str) -> dict[str, Any]:
        assert self.session is not None
        headers = {"X-CSRF-Token": self.csrf}
        async with self.session.post(self.url + "chat/send", json={"text": text}, headers=headers) as response:
            body: dict[str, Any] = await response.json()
            return body

    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        return Message(where=where, raw=await self._send(text))

    async def send_picture(self, data: bytes, caption: str) -> Message:
        raise NotImplementedError

    def replies(self, where: str = "dm") -> list[str]:
        return [versions[-1] for ident, versions in self.shown.items() if ident not in self.deleted]

    def versions(self, where: str = "dm") -> list[list[str]]:
        return [versions for ident, versions in self.shown.items() if ident not in self.deleted]

    def pictures_posted(self) -> list[bytes]:
        return list(self.pictures)

    def files_fetched(self) -> int:
        return 0

    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        return str((await self._send(f"/{name} {arg}".strip())).get("notice", ""))

    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        from extensions.web.definitions import web_chat

        assert self.session is not None
        cookie = next(c.value for c in self.session.cookie_jar if "." in c.value)
        return web_chat, cookie.split(".")[0]

    def operator_channel(self) -> str:
        raise NotImplementedError

    def fleet_env(self) -> dict[str, str]:
        raise NotImplementedError

    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):  # (state inside the bot changes without an event too)
                        await self._changed.wait()


class TerminalDriver(Driver):
    """The terminal chat (``extensions.terminal.chat``, what ``bots chat`` runs) with its lines typed by the driver
    and what it writes read back; Ctrl-C is its ``StopKey``."""

    name = "cli"
    output = "cli:message"
    not_applicable: ClassVar[dict[str, str]] = {
        "group": "one person at a terminal: no group, no mentions",
        "split": "the terminal shows an answer whole, however long",
        "picture_in": "the terminal takes typed lines only",
        "deletion": "a typed line cannot be deleted",
        "reminder": "the terminal shows the answers to what was typed; a reminder runs with no line typed",
        "fleet": "the terminal is one process: no gateway, no ingest to divide",
    }

    def __init__(self) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.written: list[str] = []
        self.data_dir: Path | None = None
        self.key: Any = None
        self._chat: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def start(self) -> None:
        await asyncio.sleep(0)

    async def close(self) -> None:
        if self._chat is not None:
            await self.lines.put(None)
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(DEADLINE):
                    await self._chat

    def settings(self, **overrides: Any) -> dict[str, Any]:
        return dict(overrides)

    async def bound(self, agent: Any, data_dir: Path) -> None:
        from extensions.terminal import StopKey, chat

        self.data_dir, self.key = data_dir, StopKey()

        def write(text: str) -> None:
            self.written.append(text)
            self._changed.set()

        self._chat = asyncio.create_task(
            chat(agent, read_line=self.lines.get, write=write, stop_key=self.key), name="conformance:terminal"
        )

    def _answers(self) -> list[list[str]]:
        """Each answer as it was written: its pieces, in order (a streamed answer has several)."""
        answers: list[list[str]] = []
        current: list[str] | None = None
        for text in self.written:
            if text.startswith("bot> "):
                rest = text.removeprefix("bot> ")
                current = [rest] if rest else []
                answers.append(current)
                if rest.endswith("\n"):
                    current = None
            elif current is not None:
                current.append(text)
                if text.endswith("\n"):
                    current = None
        return answers

    def replies(self, where: str = "dm") -> list[str]:
        return ["".join(pieces).strip() for pieces in self._answers()]

    def versions(self, where: str = "dm") -> list[list[str]]:
        return [["".join(pieces[: n + 1]).strip() for n in range(len(pieces))] for pieces in self._answers()]

    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        await self.lines.put(text)
        return Message(where=where, raw=text)

    async def send_picture(self, data: bytes, caption: str) -> Message:
        raise NotImplementedError

    def pictures_posted(self) -> list[bytes]:
        folder = (self.data_dir or Path("data")) / "media"
        return [p.read_bytes() for p in sorted(folder.glob("picture-*"))] if folder.exists() else []

    def files_fetched(self) -> int:
        return 0

    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        before = len(self.written)
        if name == "stop":  # (Ctrl-C while an answer is written)
            assert self.key is not None and self.key.press()
            await self.wait(lambda: any("(stopped)" in t or t.endswith("\n") for t in self.written[before:]))
            return "".join(self.written[before:]).strip() or "stopped"
        await self.say(f"/{name} {arg}".strip())
        await self.wait(lambda: any(t.startswith("(") for t in self.written[before:]))
        return next(t for t in self.written[before:] if t.startswith("(")).strip()

    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        from extensions.terminal import cli_session

        return cli_session, "default"

    def operator_channel(self) -> str:
        raise NotImplementedError

    def fleet_env(self) -> dict[str, str]:
        raise NotImplementedError

    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await self._changed.wait()


DRIVERS: dict[str, type[Driver]] = {
    **{d.name: d for d in (TelegramDriver, DiscordDriver, SlackDriver, MatrixDriver)},
    "slack-events": SlackEventsDriver,  # (Slack again, its events POSTed over HTTP instead of Socket Mode)
    "web": WebDriver,
    "cli": TerminalDriver,
}
"""Every platform the suite runs against, by name."""


async def settle() -> None:
    """Let the event loop run what is ready (a fake's event on its way to the client)."""
    await asyncio.sleep(0)
