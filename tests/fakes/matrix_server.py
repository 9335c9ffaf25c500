"""A fake Matrix homeserver on 127.0.0.1: enough of the client-server API for matrix-nio's real ``AsyncClient``.

- ``GET /_matrix/client/v3/sync``: a long poll with since-tokens (``s<position>``) over one stream of events; the
  first sync (no token) gives each joined room's state and its latest timeline (``filter`` ``room.timeline.limit``
  honoured), the rooms the bot is invited to, and a ``summary`` with the member count;
- ``PUT .../rooms/{room}/send/{type}/{txn}`` (idempotent per access token and transaction id, as the spec says),
  ``PUT .../rooms/{room}/redact/{event}/{txn}``, ``PUT .../rooms/{room}/typing/{user}``, ``POST .../join/{room}``,
  ``GET .../joined_rooms``, ``GET .../rooms/{room}/joined_members``, ``GET .../account/whoami``;
- account data (``GET``/``PUT .../user/{user}/account_data/{type}``), where the bot keeps its sync token;
- media: ``POST /_matrix/media/v3/upload`` and ``GET /_matrix/client/v1/media/download/{server}/{id}``.

Every request needs the bearer token (``M_UNKNOWN_TOKEN`` otherwise). People act through the test's helpers
(``room``, ``say``, ``picture``, ``redact``, ``invite``); what the bot wrote is read with ``bot_messages`` and
``shown`` (edits applied, redactions removed).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.ports import free_port as _free_port

__all__ = ("BOT", "BOT_NAME", "FakeHomeserver", "Room", "Sent")

BOT = "@bot:example.org"
"""The bot account's user id."""
BOT_NAME = "Daydream"
"""The bot account's display name."""
SERVER = "example.org"
CLIENT = "/_matrix/client/v3"
DEADLINE = 60.0
"""Seconds ``wait_for`` waits at most (a bound, not a timing assertion)."""

Json = dict[str, Any]


@dataclass
class Room:
    """One room: its members (user id to display name), its state and whether the bot is in it."""

    room_id: str
    name: str
    members: dict[str, str]
    encrypted: bool = False
    bot_joined: bool = True
    power: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Sent:
    """One event of the stream."""

    position: int
    room_id: str
    event: Json

    @property
    def content(self) -> Json:
        return dict(self.event.get("content", {}))


class FakeHomeserver:
    """The homeserver (``async with FakeHomeserver() as hs``); ``url`` is its base URL."""

    def __init__(self, *, token: str | None = None, bot: str = BOT, device: str = "BOTDEVICE") -> None:
        self.token = token or "syt_" + secrets.token_urlsafe(24)
        """The bot's access token (secret)."""
        self.bot = bot
        self.device = device
        self.rooms: dict[str, Room] = {}
        self.stream: list[Sent] = []
        """Every event, in order (state and messages)."""
        self.account_data: dict[str, Json] = {}
        self.media: dict[str, tuple[bytes, str]] = {}
        """Uploaded files by media id: their bytes and content type."""
        self.requests: list[tuple[str, str]] = []
        """``(method, path)`` of every request."""
        self.syncs: list[str | None] = []
        """The since-token of every /sync."""
        self.served = 0
        """The stream position the latest sync answered up to (the events before it were handed to a client)."""
        self.typing: list[str] = []
        """Rooms the bot said it types in."""
        self._txns: dict[tuple[str, str], str] = {}
        self._changed = asyncio.Event()
        """Set (and replaced) at each change: what a long poll waits on."""
        self._counter = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self) -> dict[str, str]:
        """The ``MATRIX_*`` variables of a bot on this homeserver."""
        return {"MATRIX_HOMESERVER": self.url, "MATRIX_USER_ID": self.bot, "MATRIX_ACCESS_TOKEN": self.token}

    async def __aenter__(self) -> FakeHomeserver:
        app = web.Application(middlewares=[self._auth], client_max_size=64 * 1024 * 1024)
        app.router.add_get(f"{CLIENT}/account/whoami", self._whoami)
        app.router.add_get(f"{CLIENT}/sync", self._sync)
        app.router.add_put(f"{CLIENT}/rooms/{{room}}/send/{{type}}/{{txn}}", self._send)
        app.router.add_put(f"{CLIENT}/rooms/{{room}}/redact/{{event}}/{{txn}}", self._redact)
        app.router.add_put(f"{CLIENT}/rooms/{{room}}/typing/{{user}}", self._typing)
        app.router.add_get(f"{CLIENT}/rooms/{{room}}/joined_members", self._joined_members)
        app.router.add_get(f"{CLIENT}/rooms/{{room}}/event/{{event}}", self._get_event)
        app.router.add_post(f"{CLIENT}/join/{{room}}", self._join)
        app.router.add_post(f"{CLIENT}/rooms/{{room}}/join", self._join)
        app.router.add_get(f"{CLIENT}/joined_rooms", self._joined_rooms)
        app.router.add_get(f"{CLIENT}/user/{{user}}/account_data/{{type}}", self._get_account_data)
        app.router.add_put(f"{CLIENT}/user/{{user}}/account_data/{{type}}", self._put_account_data)
        app.router.add_post("/_matrix/media/v3/upload", self._upload)
        app.router.add_get("/_matrix/client/v1/media/download/{server}/{media}", self._download)
        app.router.add_get("/_matrix/client/v1/media/download/{server}/{media}/{name}", self._download)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        self.port = _free_port()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _auth(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        given = request.headers.get("Authorization", "").removeprefix("Bearer ") or request.query.get(
            "access_token", ""
        )
        if not secrets.compare_digest(given, self.token):
            return web.json_response({"errcode": "M_UNKNOWN_TOKEN", "error": "Unknown access token"}, status=401)
        response: web.StreamResponse = await handler(request)
        return response

    # -- what people do --------------------------------------------------------------------------------

    def _event(self, room_id: str, sender: str, type_: str, content: Json, *, state_key: str | None = None) -> Json:
        event: Json = {
            "type": type_,
            "event_id": f"${secrets.token_urlsafe(12)}",
            "sender": sender,
            "origin_server_ts": int(time.time() * 1000),
            "content": content,
            "room_id": room_id,
            "unsigned": {"age": 0},
        }
        if state_key is not None:
            event["state_key"] = state_key
        return event

    def _append(self, room_id: str, event: Json) -> Sent:
        sent = Sent(position=len(self.stream) + 1, room_id=room_id, event=event)
        self.stream.append(sent)
        self._wake()
        return sent

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()  # (the long polls waiting on it look again)

    def _state(self, room: Room) -> list[Json]:
        """The room's current state events."""
        creator = next(iter(room.members), self.bot)
        events = [
            self._event(
                room.room_id, creator, "m.room.create", {"creator": creator, "room_version": "10"}, state_key=""
            ),
            self._event(room.room_id, creator, "m.room.name", {"name": room.name}, state_key=""),
            self._event(
                room.room_id,
                creator,
                "m.room.power_levels",
                {"users": dict(room.power), "users_default": 0, "events_default": 0, "state_default": 50},
                state_key="",
            ),
        ]
        for user, name in room.members.items():
            events.append(
                self._event(
                    room.room_id, user, "m.room.member", {"membership": "join", "displayname": name}, state_key=user
                )
            )
        if room.bot_joined:
            events.append(
                self._event(
                    room.room_id,
                    self.bot,
                    "m.room.member",
                    {"membership": "join", "displayname": BOT_NAME},
                    state_key=self.bot,
                )
            )
        if room.encrypted:
            events.append(
                self._event(
                    room.room_id, creator, "m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"}, state_key=""
                )
            )
        return events

    def room(
        self,
        name: str,
        members: dict[str, str],
        *,
        encrypted: bool = False,
        joined: bool = True,
        moderators: tuple[str, ...] = (),
    ) -> str:
        """A room with ``members`` (user id: display name) and the bot (joined, or only invited); returns its id."""
        room_id = f"!{secrets.token_urlsafe(8)}:{SERVER}"
        room = Room(room_id=room_id, name=name, members=dict(members), encrypted=encrypted, bot_joined=joined)
        room.power = {user: 100 for user in moderators}
        self.rooms[room_id] = room
        if joined:  # (joined since the bot's last sync: its state comes in the next one)
            for event in self._state(room):
                self._append(room_id, event)
        else:
            self._wake()
        return room_id

    def say(
        self,
        room_id: str,
        sender: str,
        text: str,
        *,
        thread: str | None = None,
        mention: bool = False,
        reply_to: str | None = None,
    ) -> str:
        """``sender`` writes ``text`` in the room (in the thread whose root is ``thread``; with an ``m.mentions``
        of the bot); returns the event id."""
        content: Json = {"msgtype": "m.text", "body": text}
        if mention:
            content["m.mentions"] = {"user_ids": [self.bot]}
        if thread is not None:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": thread,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": reply_to or thread},
            }
        elif reply_to is not None:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return str(self._append(room_id, self._event(room_id, sender, "m.room.message", content)).event["event_id"])

    def position(self, event_id: str) -> int:
        """The stream position of ``event_id``."""
        return next(s.position for s in self.stream if s.event["event_id"] == event_id)

    def picture(
        self, room_id: str, sender: str, data: bytes, *, mime: str = "image/png", name: str = "p.png", caption: str = ""
    ) -> str:
        """``sender`` posts a picture (uploaded to the media repository), with ``caption`` as its body (the
        file's name otherwise); returns the event id."""
        media_id = secrets.token_urlsafe(10)
        self.media[media_id] = (data, mime)
        content = {
            "msgtype": "m.image",
            "body": caption or name,
            "filename": name,
            "url": f"mxc://{SERVER}/{media_id}",
            "info": {"mimetype": mime, "size": len(data)},
        }
        return str(self._append(room_id, self._event(room_id, sender, "m.room.message", content)).event["event_id"])

    def react(self, room_id: str, sender: str, event_id: str, key: str) -> str:
        """``sender`` reacts to ``event_id`` with ``key``; returns the reaction's id."""
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return str(self._append(room_id, self._event(room_id, sender, "m.reaction", content)).event["event_id"])

    def bot_reactions(self, room_id: str) -> list[tuple[str, str]]:
        """The bot's reactions in the room still shown (not redacted): ``(event id, key)``."""
        redacted = {s.event.get("redacts") for s in self.stream if s.event["type"] == "m.room.redaction"}
        return [
            (s.content["m.relates_to"]["event_id"], s.content["m.relates_to"]["key"])
            for s in self.stream
            if s.room_id == room_id
            and s.event["sender"] == self.bot
            and s.event["type"] == "m.reaction"
            and s.event["event_id"] not in redacted
        ]

    def latest(self, event_id: str) -> str:
        """What the message ``event_id`` shows now (its last edit's text, or its own)."""
        text = ""
        for sent in self.stream:
            related = sent.content.get("m.relates_to", {})
            if sent.event["event_id"] == event_id:
                text = str(sent.content.get("body", ""))
            elif related.get("rel_type") == "m.replace" and related.get("event_id") == event_id:
                text = str(sent.content["m.new_content"]["body"])
        return text

    def redact(self, room_id: str, sender: str, event_id: str) -> str:
        """``sender`` deletes the event ``event_id``; returns the redaction's id."""
        event = self._event(room_id, sender, "m.room.redaction", {"redacts": event_id})
        event["redacts"] = event_id
        return str(self._append(room_id, event).event["event_id"])

    # -- what the bot did ------------------------------------------------------------------------------

    def bot_messages(self, room_id: str | None = None) -> list[Sent]:
        """The bot's ``m.room.message`` events (edits included), in order."""
        return [
            s
            for s in self.stream
            if s.event["sender"] == self.bot
            and s.event["type"] == "m.room.message"
            and (room_id is None or s.room_id == room_id)
        ]

    def shown(self, room_id: str, *, thread: str | None = None, notices: bool = True) -> list[str]:
        """What a person sees of the bot's messages in the room (in one thread, or outside threads: ``thread``
        None), edits applied, redacted ones left out, in order."""
        texts: dict[str, str] = {}
        redacted = {s.event.get("redacts") for s in self.stream if s.event["type"] == "m.room.redaction"}
        for sent in self.bot_messages(room_id):
            content, event_id = sent.content, sent.event["event_id"]
            related = content.get("m.relates_to", {})
            if related.get("rel_type") == "m.replace":
                if related["event_id"] in texts:
                    texts[related["event_id"]] = content["m.new_content"]["body"]
                continue
            in_thread = related.get("event_id") if related.get("rel_type") == "m.thread" else None
            if in_thread != thread or (content.get("msgtype") == "m.notice" and not notices):
                continue
            texts[event_id] = str(content.get("body", ""))
        return [text for event_id, text in texts.items() if event_id not in redacted]

    def versions(self, room_id: str) -> list[list[str]]:
        """Every text each of the bot's messages in the room showed (its edits after it), redacted ones left out."""
        shown: dict[str, list[str]] = {}
        redacted = {s.event.get("redacts") for s in self.stream if s.event["type"] == "m.room.redaction"}
        for sent in self.bot_messages(room_id):
            related = sent.content.get("m.relates_to", {})
            if related.get("rel_type") == "m.replace":
                shown.setdefault(related["event_id"], []).append(str(sent.content["m.new_content"]["body"]))
            else:
                shown[sent.event["event_id"]] = [str(sent.content.get("body", ""))]
        return [texts for event_id, texts in shown.items() if event_id not in redacted]

    def downloads(self) -> int:
        """How many files were downloaded from the media repository."""
        return sum(1 for method, path in self.requests if method == "GET" and "/media/download/" in path)

    def edits(self, room_id: str) -> list[Sent]:
        """The bot's edits (``m.replace``) in the room."""
        return [
            s for s in self.bot_messages(room_id) if s.content.get("m.relates_to", {}).get("rel_type") == "m.replace"
        ]

    async def wait_for(
        self, predicate: Callable[[], bool], what: str = "the condition", *, timeout: float = DEADLINE
    ) -> None:
        """Wait until ``predicate()`` holds (checked at each change, and every 50 ms)."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None

    # -- the API ---------------------------------------------------------------------------------------

    async def _whoami(self, request: web.Request) -> web.Response:
        return web.json_response({"user_id": self.bot, "device_id": self.device})

    def _position(self, since: str | None) -> int:
        if since and since.startswith("s") and since[1:].isdigit():
            return int(since[1:])
        return 0

    async def _sync(self, request: web.Request) -> web.Response:
        since = request.query.get("since")
        self.syncs.append(since)
        timeout = int(request.query.get("timeout", "0")) / 1000
        start = self._position(since)
        if since is not None:
            try:
                async with asyncio.timeout(timeout):
                    while not self._news(start):
                        await self._changed.wait()
            except TimeoutError:
                pass
        limit: int | None = None
        raw = request.query.get("filter")
        if raw:
            try:
                limit = int(json.loads(raw)["room"]["timeline"]["limit"])
            except (ValueError, KeyError, TypeError):
                limit = None
        body = self._sync_body(start, initial=since is None, limit=limit)
        self.served = max(self.served, len(self.stream))
        return web.json_response(body)

    def _news(self, start: int) -> bool:
        return len(self.stream) > start or any(not r.bot_joined for r in self.rooms.values())

    def _sync_body(self, start: int, *, initial: bool, limit: int | None) -> Json:
        end = len(self.stream)
        join: Json = {}
        invite: Json = {}
        for room in self.rooms.values():
            if not room.bot_joined:
                invite[room.room_id] = {
                    "invite_state": {
                        "events": [
                            {
                                "type": "m.room.name",
                                "sender": next(iter(room.members)),
                                "state_key": "",
                                "content": {"name": room.name},
                            },
                            {
                                "type": "m.room.member",
                                "sender": next(iter(room.members)),
                                "state_key": self.bot,
                                "content": {"membership": "invite"},
                            },
                        ]
                    }
                }
                continue
            events = [s.event for s in self.stream[start:end] if s.room_id == room.room_id]
            if initial:
                state = self._state(room)
                timeline = [
                    e for e in (s.event for s in self.stream if s.room_id == room.room_id) if "state_key" not in e
                ]
                if limit is not None:
                    timeline = timeline[len(timeline) - limit :] if limit else []
            else:
                state, timeline = [], events
            if not initial and not timeline:
                continue
            join[room.room_id] = {
                "timeline": {"events": timeline, "limited": False, "prev_batch": f"p{start}"},
                "state": {"events": state},
                "ephemeral": {"events": []},
                "account_data": {"events": []},
                "summary": {
                    "m.joined_member_count": len(room.members) + 1,
                    "m.invited_member_count": 0,
                    "m.heroes": list(room.members)[:5],
                },
                "unread_notifications": {"notification_count": 0, "highlight_count": 0},
            }
        return {
            "next_batch": f"s{end}",
            "rooms": {"join": join, "invite": invite, "leave": {}},
            "account_data": {"events": []},
            "presence": {"events": []},
            "to_device": {"events": []},
            "device_lists": {"changed": [], "left": []},
            "device_one_time_keys_count": {},
        }

    def _room_of(self, request: web.Request) -> Room | None:
        room = self.rooms.get(request.match_info["room"])
        return room if room is not None and room.bot_joined else None

    async def _send(self, request: web.Request) -> web.Response:
        room = self._room_of(request)
        if room is None:
            return web.json_response({"errcode": "M_FORBIDDEN", "error": "not in the room"}, status=403)
        key = (self.token, request.match_info["txn"])
        if key in self._txns:  # the same transaction again: the same event
            return web.json_response({"event_id": self._txns[key]})
        content = await request.json()
        event = self._event(room.room_id, self.bot, request.match_info["type"], content)
        self._append(room.room_id, event)
        self._txns[key] = event["event_id"]
        return web.json_response({"event_id": event["event_id"]})

    async def _redact(self, request: web.Request) -> web.Response:
        room = self._room_of(request)
        if room is None:
            return web.json_response({"errcode": "M_FORBIDDEN", "error": "not in the room"}, status=403)
        body = await request.json() if request.can_read_body else {}
        target = request.match_info["event"]
        event = self._event(room.room_id, self.bot, "m.room.redaction", {"redacts": target, **body})
        event["redacts"] = target
        self._append(room.room_id, event)
        return web.json_response({"event_id": event["event_id"]})

    async def _typing(self, request: web.Request) -> web.Response:
        self.typing.append(request.match_info["room"])
        return web.json_response({})

    async def _get_event(self, request: web.Request) -> web.Response:
        room, event_id = request.match_info["room"], request.match_info["event"]
        for sent in self.stream:
            if sent.room_id == room and sent.event["event_id"] == event_id:
                return web.json_response(sent.event)
        return web.json_response({"errcode": "M_NOT_FOUND", "error": "no such event"}, status=404)

    async def _joined_members(self, request: web.Request) -> web.Response:
        room = self._room_of(request)
        if room is None:
            return web.json_response({"errcode": "M_FORBIDDEN", "error": "not in the room"}, status=403)
        joined = {user: {"display_name": name} for user, name in room.members.items()}
        joined[self.bot] = {"display_name": BOT_NAME}
        return web.json_response({"joined": joined})

    async def _join(self, request: web.Request) -> web.Response:
        room = self.rooms.get(request.match_info["room"])
        if room is None:
            return web.json_response({"errcode": "M_NOT_FOUND", "error": "no such room"}, status=404)
        if not room.bot_joined:
            room.bot_joined = True
            for event in self._state(room):
                self._append(room.room_id, event)
        return web.json_response({"room_id": room.room_id})

    async def _joined_rooms(self, request: web.Request) -> web.Response:
        return web.json_response({"joined_rooms": [r.room_id for r in self.rooms.values() if r.bot_joined]})

    async def _get_account_data(self, request: web.Request) -> web.Response:
        found = self.account_data.get(request.match_info["type"])
        if found is None:
            return web.json_response({"errcode": "M_NOT_FOUND", "error": "no such account data"}, status=404)
        return web.json_response(found)

    async def _put_account_data(self, request: web.Request) -> web.Response:
        self.account_data[request.match_info["type"]] = await request.json()
        return web.json_response({})

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        media_id = secrets.token_urlsafe(10)
        self.media[media_id] = (data, request.headers.get("Content-Type", "application/octet-stream"))
        return web.json_response({"content_uri": f"mxc://{SERVER}/{media_id}"})

    async def _download(self, request: web.Request) -> web.Response:
        found = self.media.get(request.match_info["media"])
        if found is None:
            return web.json_response({"errcode": "M_NOT_FOUND", "error": "no such media"}, status=404)
        data, mime = found
        return web.Response(body=data, content_type=mime)

    def uploaded(self) -> list[tuple[bytes, str]]:
        """The files the bot uploaded, in order."""
        mxcs = [
            s.content.get("url", "") for s in self.bot_messages() if s.content.get("msgtype") in ("m.image", "m.audio")
        ]
        return [self.media[url.rsplit("/", 1)[-1]] for url in mxcs if url.rsplit("/", 1)[-1] in self.media]

    def next_id(self) -> int:
        return next(self._counter)
