"""A fake Discord on 127.0.0.1 that the real discord.py client logs into: REST and the gateway.

REST (``/api/v10``): ``GET /users/@me``, ``GET /oauth2/applications/@me``, ``PUT`` application commands,
``POST /channels/{id}/messages`` (2,000-character limit, ``allowed_mentions``, ``enforce_nonce``, replies, files
as multipart uploads kept in ``uploads``; a voice message's flag, duration and waveform),
``PATCH`` and ``DELETE /channels/{id}/messages/{id}`` (every version of a message is kept in ``versions``),
typing, reactions, and interaction callbacks. Every response body is JSON with a ``Content-Type`` of exactly
``application/json`` (discord.py compares it literally). A route it does not implement answers 404 and is
recorded in ``unhandled``, which tests assert stays empty. ``rate_limit(...)`` makes the next calls of a
route answer 429 with ``retry_after`` (and the ``Via`` header discord.py needs to trust it).

Gateway (``/gateway``, plain text JSON frames, no zlib): HELLO, IDENTIFY, READY, GUILD_CREATE, heartbeats and
their ACKs, dispatches (MESSAGE_CREATE, THREAD_CREATE, INTERACTION_CREATE) with sequence numbers, RESUME
(replaying what was missed, then RESUMED). ``refuse_intents=True`` closes an IDENTIFY that asks for the
Message Content intent with 4014, as Discord does when the intent is not enabled in the developer portal.

Messages the bot posts are dispatched back to it as MESSAGE_CREATE, as Discord does. Start it with ``start()`` and
``close()``, or ``async with FakeDiscord() as fake:``.

Shards: IDENTIFY may carry ``shard: [id, count]``; a session then receives READY and the dispatches of the
servers with ``(guild_id >> 22) % count == id`` only (DMs go to shard 0), as Discord splits them.
``GET /gateway/bot`` answers ``recommended_shards`` and a ``session_start_limit`` with ``max_concurrency``.
``guild(shard=..., shard_count=...)`` makes a server that lands on a given shard. Every connection that
identified (or resumed) for a shard is recorded in ``connections``; one opened while another of the same shard
was still open is recorded in ``overlaps`` (a shard connected twice: tests assert none). A dispatch for a shard
whose latest session has no connection is kept for a RESUME (as before), and counted in ``undelivered``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import itertools
import json
import re
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Self

from aiohttp import WSMsgType, web

__all__ = ("GUILD_EPOCH", "Connection", "FakeDiscord", "RateLimit", "Request", "shard_of")

MESSAGE_CONTENT_INTENT = 1 << 15
"""The privileged intent bit discord.py asks for with ``intents.message_content``."""
VOICE_MESSAGE = 1 << 13
"""``IS_VOICE_MESSAGE``: a message with one OGG attachment, its duration and waveform, and no text."""

_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")

Json = dict[str, Any]


IS_COMPONENTS_V2 = 1 << 15
"""The message flag of a components v2 message (its text is in text displays, not in ``content``)."""


def _layout_texts(components: list[Json]) -> list[str]:
    """The text of every text display (type 10) in a components v2 tree, in order."""
    found: list[str] = []
    for component in components:
        if component.get("type") == 10:
            found.append(component.get("content") or "")
        found.extend(_layout_texts(component.get("components") or []))
    return found


def _galleries(components: list[Json]) -> list[Json]:
    """Every media gallery (type 12) in a components v2 tree, in order."""
    found: list[Json] = []
    for component in components:
        if component.get("type") == 12:
            found.append(component)
        found.extend(_galleries(component.get("components") or []))
    return found


def _gallery_problem(gallery: Json, filenames: set[str]) -> str | None:
    """What Discord says of a media gallery it refuses (None: it takes it): 1 to 10 items, each with a media URL
    that is an ``http(s)`` address or ``attachment://<name>`` of a file attached to the same message, and a
    description of at most 1,024 characters."""
    items = gallery.get("items")
    if not isinstance(items, list) or not 1 <= len(items) <= 10:
        return "BASE_TYPE_BAD_LENGTH"
    for item in items:
        url = (item.get("media") or {}).get("url") if isinstance(item, dict) else None
        if not isinstance(url, str) or not url:
            return "BASE_TYPE_REQUIRED"
        if url.startswith("attachment://"):
            if url.removeprefix("attachment://") not in filenames:
                return "UNFURLED_MEDIA_ITEM_ATTACHMENT_NOT_FOUND"
        elif not url.startswith(("https://", "http://")):
            return "URL_TYPE_INVALID_PROTOCOL"
        if len(item.get("description") or "") > 1024:
            return "BASE_TYPE_MAX_LENGTH"
    return None


def layout_galleries(message: Json) -> list[Json]:
    """The media galleries of a components v2 message."""
    return _galleries(message.get("components") or [])


def layout_text(message: Json) -> str:
    """What a components v2 message shows: its text displays, one after the other."""
    return "\n".join(_layout_texts(message.get("components") or []))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def _json(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _error(status: int, code: int, message: str, errors: Json | None = None) -> web.Response:
    body: Json = {"code": code, "message": message}
    if errors is not None:
        body["errors"] = errors
    return _json(body, status=status)


@dataclasses.dataclass(kw_only=True)
class Request:
    """One REST call the fake received."""

    method: str
    path: str
    body: Any
    status: int = 0
    at: float = dataclasses.field(default_factory=time.monotonic)
    """``time.monotonic()`` when it arrived."""


@dataclasses.dataclass(kw_only=True)
class RateLimit:
    """The next ``times`` calls matching ``method`` and ``pattern`` answer 429."""

    method: str
    pattern: re.Pattern[str]
    retry_after: float
    times: int
    is_global: bool = False
    served: int = 0


@dataclasses.dataclass(kw_only=True)
class Connection:
    """One gateway connection that identified or resumed for a shard."""

    shard: tuple[int, int]
    """``(shard id, shard count)``."""
    opened: float
    """``time.monotonic()`` of its IDENTIFY (or RESUME)."""
    closed: float | None = None
    """``time.monotonic()`` when it closed (None while open)."""


GUILD_EPOCH = 1 << 35
"""Server ids are ``(GUILD_EPOCH + n) << 22``: consecutive servers land on consecutive shards."""


def shard_of(guild_id: int | None, count: int) -> int:
    """The shard (of ``count``) that carries ``guild_id``'s events; DMs (None) go to shard 0."""
    return 0 if guild_id is None else (guild_id >> 22) % count


@dataclasses.dataclass(kw_only=True)
class _Session:
    id: str
    shard: tuple[int, int] = (0, 1)
    seq: int = 0
    events: list[Json] = dataclasses.field(default_factory=list)
    ws: web.WebSocketResponse | None = None


class FakeDiscord:
    """The fake platform. ``await start()``, point discord.py at ``api_url``/``gateway_url``, ``await close()``."""

    def __init__(self, *, bot_name: str = "Daydream", refuse_intents: bool = False) -> None:
        self._ids = itertools.count(100_000_000_000_000_000)
        self.refuse_intents = refuse_intents
        self.refuse_layout = False
        """Answer a components v2 message with 400, as Discord does for a layout it cannot take."""
        """Close IDENTIFY with 4014 when it asks for the Message Content intent."""
        self.hold_ready: asyncio.Event | None = None
        """When set to an event, READY is sent only once it is set (the client stays "connecting")."""
        self.bot = self.user(bot_name, bot=True)
        """The bot's user (its id is also the application id)."""
        self.users: dict[int, Json] = {int(self.bot["id"]): self.bot}
        self._owner = self.user("owner")
        self._interaction_channels: dict[int, int] = {}
        self._interaction_messages: dict[int, int] = {}
        self._last_buttons: dict[int, dict[str, str]] = {}
        self.guilds: dict[int, Json] = {}
        self.dms_closed: set[str] = set()
        """The ids of users who take no direct messages from the bot (a DM to them: 403, code 50007)."""
        self.channels: dict[int, Json] = {}
        """Channel payloads by id (text channels, threads, DM channels)."""
        self.messages: dict[int, Json] = {}
        self.uploads: list[tuple[int, str, str, bytes]] = []
        """``(message id, filename, content type, bytes)`` of every file the bot attached to a message."""
        """Every message by id, written by users or the bot."""
        self.posted: list[Json] = []
        """Messages the bot posted through REST, in order (edits change them in place)."""
        self.versions: dict[int, list[tuple[float, str]]] = {}
        """Every content each of the bot's messages showed, with ``time.monotonic()`` of the post or edit."""
        self.deleted: set[int] = set()
        """Ids of the bot's messages it deleted."""
        self.unchanged_edits = 0
        """Edits that did not change the content (Discord accepts them; a good bot does not send them)."""
        self.requests: list[Request] = []
        """Every REST call, in order."""
        self.unhandled: list[str] = []
        """REST routes and gateway opcodes the fake does not implement (tests assert none)."""
        self.typing: list[int] = []
        """Channel ids of typing indicators, in order."""
        self.reactions: list[tuple[int, int, str]] = []
        """``(channel_id, message_id, emoji)`` of reactions the bot added."""
        self.commands: list[Json] = []
        """The registered application commands."""
        self.command_answer = "ok"
        """How ``PUT`` application commands is answered: ``ok``, ``refuse`` (403 Missing Access) or ``malformed``
        (200 with commands lacking their ids, as a Discord-like server once answered)."""
        self.removed_from: set[int] = set()
        """Servers the bot was removed from (``remove_bot``)."""
        self.interaction_responses: dict[int, Json] = {}
        """Interaction callbacks by interaction id."""
        self.identifies: list[Json] = []
        """IDENTIFY payloads received."""
        self.resumes = 0
        """Successful RESUMEs."""
        self.heartbeats = 0
        """Heartbeats received."""
        self.rate_limits: list[RateLimit] = []
        self.files: dict[str, bytes] = {}
        """Attachment bytes by CDN path (``/attachments/<channel>/<id>/<name>``)."""
        self.downloads: list[str] = []
        """The path of every attachment download, in order."""
        self.failing_downloads = 0
        """Answer this many next downloads with 503."""
        self.recommended_shards = 1
        """``shards`` in ``GET /gateway/bot``."""
        self.max_concurrency = 1
        """``session_start_limit.max_concurrency`` in ``GET /gateway/bot``."""
        self.connections: dict[int, list[Connection]] = {}
        """Every connection that identified or resumed, by shard id."""
        self.overlaps: list[int] = []
        """Shard ids that a connection identified or resumed for while another one of them was open."""
        self.undelivered = 0
        """Dispatches for a shard with no open connection (kept in its session for a RESUME)."""
        self.member_roles: dict[tuple[int, int], list[str]] = {}
        """Role ids of a member, by ``(guild id, user id)`` (``give_role``), sent with the member's messages."""
        self._open: dict[web.WebSocketResponse, Connection] = {}
        self._guild_seq = itertools.count(1)
        self._nonces: dict[tuple[int, str], int] = {}
        self._sessions: dict[str, _Session] = {}
        self._session: _Session | None = None
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self.port = 0

    # -- server ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1, on a free port."""
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        app.router.add_get("/attachments/{tail:.+}", self._download)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Close the gateway connections and stop listening."""
        for ws in list(self._sockets):
            await ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api_url(self) -> str:
        """The REST base for ``DISCORD_API_URL``."""
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        """The gateway for ``DISCORD_GATEWAY_URL``."""
        return f"ws://127.0.0.1:{self.port}/gateway"

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], Any], *, timeout: float = 10.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every change the fake sees, and every 50 ms besides:
        a predicate on something the fake does not see, the model's requests or a store, is not left for the
        fake's next change); return it."""
        async with asyncio.timeout(timeout):
            while not (result := predicate()):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.05):
                        await self._changed.wait()
        return result

    async def wait_posted(self, channel_id: int, count: int = 1, *, timeout: float = 10.0) -> list[Json]:
        """Wait until the bot has posted ``count`` messages in the channel; return them."""
        messages: list[Json] = await self.wait_until(
            lambda: (msgs := self.posted_in(channel_id)) and len(msgs) >= count and msgs, timeout=timeout
        )
        return messages

    def posted_in(self, channel_id: int) -> list[Json]:
        """The bot's messages in one channel, in order."""
        return [m for m in self.posted if m["channel_id"] == str(channel_id)]

    def visible_in(self, channel_id: int) -> list[Json]:
        """The bot's messages in one channel that it did not delete, in order."""
        return [m for m in self.posted_in(channel_id) if int(m["id"]) not in self.deleted]

    def versions_of(self, message: Json) -> list[str]:
        """Every content ``message`` showed, oldest first."""
        return [text for _, text in self.versions[int(message["id"])]]

    # -- the world -------------------------------------------------------------------------------------

    def _id(self) -> int:
        return next(self._ids)

    def user(self, name: str, *, bot: bool = False) -> Json:
        """A new user."""
        data: Json = {
            "id": str(self._id()),
            "username": name,
            "global_name": name,
            "discriminator": "0",
            "avatar": None,
            "bot": bot,
            "flags": 0,
            "public_flags": 0,
        }
        if hasattr(self, "users"):  # not yet while the bot user itself is made
            self.users[int(data["id"])] = data
        return data

    def guild(self, name: str = "Test Server", *, shard: int | None = None, shard_count: int = 1) -> int:
        """A new server with the bot in it (and its managed role); returns its id. With ``shard``, one whose
        events go to that shard of ``shard_count``."""
        while True:
            gid = (GUILD_EPOCH + next(self._guild_seq)) << 22
            if shard is None or shard_of(gid, shard_count) == shard:
                break
        bot_role = {
            "id": str(self._id()),
            "name": self.bot["username"],
            "permissions": "274877975552",
            "position": 1,
            "color": 0,
            "hoist": False,
            "managed": True,
            "mentionable": False,
            "flags": 0,
            "tags": {"bot_id": self.bot["id"]},
        }
        everyone = {**bot_role, "id": str(gid), "name": "@everyone", "position": 0, "managed": False, "tags": {}}
        self.guilds[gid] = {
            "id": str(gid),
            "name": name,
            "icon": None,
            "owner_id": str(self._id()),
            "roles": [everyone, bot_role],
            "bot_role_id": bot_role["id"],
            "channels": [],
            "threads": [],
            "joined_at": _now(),
            "large": False,
            "unavailable": False,
            "member_count": 2,
            "features": [],
            "emojis": [],
            "stickers": [],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "preferred_locale": "en-US",
            "members": [self._member(self.bot, roles=[bot_role["id"]])],
        }
        return gid

    def role(self, guild_id: int, name: str, *, permissions: int = 0) -> str:
        """A new role in a server, with ``permissions`` (a bit set: ``1 << 5`` is Manage Server); returns its id.
        Make roles before the bot connects (they go out with the server at IDENTIFY)."""
        role = {
            "id": str(self._id()),
            "name": name,
            "permissions": str(permissions),
            "position": len(self.guilds[guild_id]["roles"]),
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": True,
            "flags": 0,
        }
        self.guilds[guild_id]["roles"].append(role)
        return str(role["id"])

    def give_role(self, guild_id: int, user: Json, role_id: str) -> None:
        """``user`` has the role ``role_id`` in the server from now on (their next messages carry it)."""
        self.member_roles.setdefault((guild_id, int(user["id"])), []).append(role_id)

    def _member(self, user: Json, *, roles: list[str] | None = None, with_user: bool = True) -> Json:
        member: Json = {
            "roles": roles or [],
            "joined_at": _now(),
            "deaf": False,
            "mute": False,
            "flags": 0,
            "nick": None,
            "permissions": "2199023255551",
        }
        if with_user:
            member["user"] = user
        return member

    def text_channel(self, guild_id: int, name: str = "general") -> int:
        """A new text channel in a server; returns its id."""
        cid = self._id()
        data = {
            "id": str(cid),
            "type": 0,
            "guild_id": str(guild_id),
            "name": name,
            "position": len(self.guilds[guild_id]["channels"]),
            "permission_overwrites": [],
            "parent_id": None,
            "topic": None,
            "nsfw": False,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "flags": 0,
        }
        self.channels[cid] = data
        self.guilds[guild_id]["channels"].append(data)
        return cid

    def forum_channel(self, guild_id: int, name: str = "help") -> int:
        """A new forum channel in a server (type 15: its posts are threads); returns its id."""
        cid = self.text_channel(guild_id, name)
        self.channels[cid].update(
            {
                "type": 15,
                "available_tags": [],
                "default_reaction_emoji": None,
                "default_thread_rate_limit_per_user": 0,
                "default_sort_order": None,
                "default_forum_layout": 0,
            }
        )
        return cid

    async def forum_post(
        self, forum_id: int, title: str, content: str, *, author: Json, mention_bot: bool = False
    ) -> Json:
        """``author`` opens a post in a forum: a thread (THREAD_CREATE) whose starter message has the thread's id
        (MESSAGE_CREATE), as Discord makes them; returns the starter message (its ``channel_id`` is the post)."""
        tid = await self.thread(forum_id, title)
        self.channels[tid]["owner_id"] = author["id"]
        if mention_bot:
            content = f"<@{self.bot['id']}> {content}"
        data = self._message(channel_id=tid, author=author, content=content)
        del self.messages[int(data["id"])]
        data["id"] = str(tid)
        self.messages[tid] = data
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def thread(self, parent_id: int, name: str = "a thread") -> int:
        """A new public thread under a text channel (THREAD_CREATE is dispatched); returns its id."""
        parent = self.channels[parent_id]
        tid = self._id()
        data = {
            "id": str(tid),
            "type": 11,
            "guild_id": parent["guild_id"],
            "parent_id": str(parent_id),
            "owner_id": self.bot["id"],
            "name": name,
            "last_message_id": None,
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _now(),
                "locked": False,
            },
        }
        self.channels[tid] = data
        self.guilds[int(parent["guild_id"])]["threads"].append(data)
        await self.dispatch("THREAD_CREATE", {**data, "newly_created": True})
        return tid

    async def remove_bot(self, guild_id: int) -> None:
        """The bot is removed from the server (kicked, or the server deleted): GUILD_DELETE without
        ``unavailable``; its channels answer 403 Missing Access from now on."""
        self.removed_from.add(guild_id)
        await self.dispatch("GUILD_DELETE", {"id": str(guild_id)})

    def dm_channel(self, user: Json) -> int:
        """The DM channel between the bot and ``user``; returns its id."""
        cid = self._id()
        self.channels[cid] = {"id": str(cid), "type": 1, "recipients": [user], "last_message_id": None}
        return cid

    def _open_dm(self, body: Any) -> web.Response:
        """POST /users/@me/channels: the DM channel with ``recipient_id``, the one open or a new one."""
        try:
            user_id = int((body or {}).get("recipient_id"))
        except (TypeError, ValueError):
            return _error(400, 50035, "Invalid Form Body")
        user = self.users.get(user_id)
        if user is None:
            return _error(404, 10013, "Unknown User")
        for channel in self.channels.values():
            if channel.get("type") == 1 and channel["recipients"][0]["id"] == str(user_id):
                return _json(channel)
        return _json(self.channels[self.dm_channel(user)])

    def _guild_of(self, channel_id: int) -> int | None:
        gid = self.channels.get(channel_id, {}).get("guild_id")
        return int(gid) if gid else None

    # -- acting as people ------------------------------------------------------------------------------

    def _message(
        self,
        *,
        channel_id: int,
        author: Json,
        content: str,
        allowed_mentions: Json | None = None,
        reply_to: int | None = None,
        nonce: str | None = None,
        flags: int = 0,
    ) -> Json:
        """A message as Discord stores it; mentions resolved as ``allowed_mentions`` allows (None: all)."""
        guild_id = self._guild_of(channel_id)
        parse = (allowed_mentions or {"parse": ["users", "roles", "everyone"]}).get("parse", [])
        explicit_users = {str(u) for u in (allowed_mentions or {}).get("users", [])}
        mentioned = [
            self.users[int(uid)]
            for uid in dict.fromkeys(_MENTION.findall(content))
            if int(uid) in self.users and ("users" in parse or uid in explicit_users)
        ]
        mention_roles = list(dict.fromkeys(_ROLE_MENTION.findall(content))) if "roles" in parse else []
        data: Json = {
            "id": str(self._id()),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": "everyone" in parse and ("@everyone" in content or "@here" in content),
            "mentions": [{**u, "member": self._member(u, with_user=False)} if guild_id else u for u in mentioned],
            "mention_roles": mention_roles,
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": flags,
            "components": [],
        }
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
            roles = self.member_roles.get((guild_id, int(author["id"])))
            data["member"] = self._member(author, roles=list(roles or []), with_user=False)
        if nonce is not None:
            data["nonce"] = nonce
        if reply_to is not None:
            data["type"] = 19
            data["message_reference"] = {"type": 0, "message_id": str(reply_to), "channel_id": str(channel_id)}
            if guild_id is not None:
                data["message_reference"]["guild_id"] = str(guild_id)
            referenced = self.messages.get(reply_to)
            data["referenced_message"] = referenced
            ping_author = allowed_mentions is None or allowed_mentions.get("replied_user", False)
            if referenced is not None and ping_author and referenced["author"] not in mentioned:
                data["mentions"].append(referenced["author"])  # a reply pings its author unless told not to
        self.messages[int(data["id"])] = data
        return data

    async def say(
        self,
        channel_id: int,
        content: str,
        *,
        author: Json,
        mention_bot: bool = False,
        reply_to: int | None = None,
        files: list[tuple[str, str | None, bytes]] | None = None,
        claimed_size: int | None = None,
        webhook_id: int | None = None,
    ) -> Json:
        """``author`` writes ``content`` in the channel (MESSAGE_CREATE is dispatched); returns the message.
        ``files`` are attachments ``(filename, content type, bytes)``, served from this fake's CDN path
        (``claimed_size`` overrides the size Discord reports, for limits); ``webhook_id``: posted by that webhook
        (``author`` is then the name it gives itself, with the webhook's id, as Discord sends it)."""
        if mention_bot:
            content = f"<@{self.bot['id']}> {content}"
        data = self._message(channel_id=channel_id, author=author, content=content, reply_to=reply_to)
        if webhook_id is not None:
            data["webhook_id"] = str(webhook_id)
            data["author"] = {**author, "id": str(webhook_id), "bot": True, "discriminator": "0000"}
            data.pop("member", None)  # (a webhook is no member of the server)
        for filename, content_type, raw in files or ():
            attachment_id = self._id()
            path = f"/attachments/{channel_id}/{attachment_id}/{filename}"
            self.files[path] = raw
            url = f"http://127.0.0.1:{self.port}{path}?ex=abc&is=def&hm=signed"
            item: Json = {
                "id": str(attachment_id),
                "filename": filename,
                "size": len(raw) if claimed_size is None else claimed_size,
                "url": url,
                "proxy_url": url,
            }
            if content_type is not None:
                item["content_type"] = content_type
            data["attachments"].append(item)
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def react(self, message: Json, emoji: str, *, user: Json) -> None:
        """``user`` adds the reaction ``emoji`` (a unicode emoji) on ``message``: MESSAGE_REACTION_ADD is dispatched,
        naming the message's author as Discord does (``message_author_id``)."""
        channel_id = int(message["channel_id"])
        data: Json = {
            "user_id": str(user["id"]),
            "channel_id": str(channel_id),
            "message_id": str(message["id"]),
            "emoji": {"id": None, "name": emoji},
            "message_author_id": str(message["author"]["id"]),
            "burst": False,
            "type": 0,
        }
        guild_id = self._guild_of(channel_id)
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
        await self.dispatch("MESSAGE_REACTION_ADD", data)

    async def vote(self, message: Json, answer_id: int, *, user: Json) -> None:
        """``user`` votes for answer ``answer_id`` (from 1) in the poll of ``message``: MESSAGE_POLL_VOTE_ADD."""
        poll = message.get("poll")
        if not poll or all(a["answer_id"] != answer_id for a in poll["answers"]):
            raise AssertionError(f"message {message['id']} has no poll with answer {answer_id}")
        counts = poll["results"]["answer_counts"]
        found = next((c for c in counts if c["id"] == answer_id), None)
        if found is None:
            counts.append({"id": answer_id, "count": 1, "me_voted": False})
        else:
            found["count"] += 1
        channel_id = int(message["channel_id"])
        data: Json = {
            "user_id": str(user["id"]),
            "channel_id": str(channel_id),
            "message_id": str(message["id"]),
            "answer_id": answer_id,
        }
        guild_id = self._guild_of(channel_id)
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
        await self.dispatch("MESSAGE_POLL_VOTE_ADD", data)

    async def slash(
        self,
        name: str,
        channel_id: int,
        *,
        user: Json,
        options: list[Json] | None = None,
        permissions: int | None = None,
        autocomplete: bool = False,
    ) -> int:
        """``user`` runs the slash command ``/name`` in the channel; returns the interaction id. ``options`` are
        the command's options as Discord sends them (``{"type": 3, "name": "text", "value": "..."}``; a
        subcommand is ``{"type": 1, "name": "set", "options": [...]}``); ``permissions`` are the member's
        permissions in the channel (default: all); ``autocomplete`` sends the autocomplete interaction for the
        option marked ``"focused": True`` instead (its answer is in ``interaction_responses``)."""
        command = next((c for c in self.commands if c["name"] == name), None)
        if command is None:
            raise AssertionError(f"/{name} is not registered; registered: {[c['name'] for c in self.commands]}")
        iid = self._id()
        body = {"id": command["id"], "name": name, "type": 1, "options": options or []}
        data = self._interaction(iid, 4 if autocomplete else 2, body, channel_id, user)
        if "member" in data and permissions is not None:
            data["member"]["permissions"] = str(permissions)
        self._interaction_channels[iid] = channel_id
        await self.dispatch("INTERACTION_CREATE", data)
        return iid

    def _interaction(
        self, iid: int, kind: int, body: Json, channel_id: int, user: Json, *, roles: list[str] | None = None
    ) -> Json:
        """The ``INTERACTION_CREATE`` payload of ``user``'s interaction ``iid`` of type ``kind`` (2: a slash
        command, 3: a component, 4: autocomplete) in ``channel_id``, with ``data`` ``body``; in a server, the
        member with ``roles``."""
        guild_id = self._guild_of(channel_id)
        data: Json = {
            "id": str(iid),
            "application_id": self.bot["id"],
            "type": kind,
            "data": body,
            "channel_id": str(channel_id),
            "channel": self.channels[channel_id],
            "token": f"interaction-token-{iid}",
            "version": 1,
            "locale": "en-US",
            "app_permissions": "2199023255551",
            "attachment_size_limit": 8388608,
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(guild_id or 0)},
            "context": 1 if guild_id is None else 0,
        }
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
            data["guild_locale"] = "en-US"
            data["member"] = self._member(user, roles=roles)
        else:
            data["user"] = user
        return data

    def response_message(self, interaction_id: int) -> Json:
        """The message an interaction's response created (a slash command's answer, its buttons with it)."""
        return self.messages[self._interaction_messages[interaction_id]]

    def buttons(self, message: Json) -> dict[str, str]:
        """The buttons under one of the bot's messages: ``custom_id`` by label."""
        return {
            c.get("label", ""): c.get("custom_id", "")
            for row in message.get("components") or []
            for c in row.get("components") or []
            if c.get("type") == 2
        }

    async def press(self, message: Json, label: str, *, user: Json, permissions: int | None = None) -> int:
        """``user`` presses the button ``label`` under the bot's ``message`` (a component interaction; the custom
        id as it was sent, even if the buttons are gone since: a client showing a stale message); returns the
        interaction id. ``permissions``: the member's permissions in the channel (default: none)."""
        channel_id = int(message["channel_id"])
        custom_id = self.buttons(message).get(label) or self._last_buttons[int(message["id"])][label]
        iid = self._id()
        guild_id = self._guild_of(channel_id)
        roles = list(self.member_roles.get((guild_id, int(user["id"]))) or []) if guild_id is not None else None
        body = {"custom_id": custom_id, "component_type": 2}
        data = self._interaction(iid, 3, body, channel_id, user, roles=roles)
        data["message"] = message
        if "member" in data:
            data["member"]["permissions"] = str(permissions or 0)
        self._interaction_channels[iid] = channel_id
        self._interaction_messages[iid] = int(message["id"])
        self._last_buttons.setdefault(int(message["id"]), self.buttons(message))
        await self.dispatch("INTERACTION_CREATE", data)
        return iid

    # -- gateway ---------------------------------------------------------------------------------------

    def _current(self) -> list[_Session]:
        """The latest session of every shard (the one a RESUME would continue)."""
        latest: dict[tuple[int, int], _Session] = {}
        for session in self._sessions.values():
            latest[session.shard] = session
        return list(latest.values())

    def connected(self, shard: int) -> int:
        """Connections open now for ``shard``."""
        return sum(1 for c in self._open.values() if c.shard[0] == shard)

    def shards_connected(self) -> set[int]:
        """Shard ids with an open connection now."""
        return {c.shard[0] for c in self._open.values()}

    async def dispatch(self, event: str, data: Json) -> None:
        """Send a dispatch to the connected client (or keep it for a RESUME when disconnected). A server's
        events go to the session of its shard; DMs to shard 0's."""
        sessions = self._current()
        if not sessions:
            raise AssertionError(f"{event} dispatched before the bot identified")
        raw = data.get("guild_id") or (data.get("id") if event in ("GUILD_CREATE", "GUILD_DELETE") else None)
        guild_id = int(raw) if raw else None
        for session in sessions:
            shard, count = session.shard
            if shard_of(guild_id, count) == shard:
                await self._send(session, event, data)
        self._notify()

    async def _send(self, session: _Session, event: str, data: Json) -> None:
        session.seq += 1
        payload = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(payload)
        try:
            if session.ws is None or session.ws.closed:
                raise ConnectionResetError("no connection")
            await session.ws.send_str(json.dumps(payload))
        except ConnectionResetError:  # the connection is going away (a gateway killed): kept for a RESUME
            self.undelivered += 1

    async def drop_gateway(self, *, code: int = 4000) -> None:
        """Close the gateway connection the way a network hiccup does (the client resumes)."""
        session = self._session
        assert session is not None and session.ws is not None
        ws, session.ws = session.ws, None
        await ws.close(code=code, message=b"fake: dropped")
        self._notify()

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None}))
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    self.unhandled.append(f"gateway frame {msg.type!r}")
                    continue
                await self._on_gateway(ws, json.loads(msg.data))
        finally:
            self._sockets.discard(ws)
            connection = self._open.pop(ws, None)
            if connection is not None:
                connection.closed = time.monotonic()
            for session in self._sessions.values():
                if session.ws is ws:
                    session.ws = None
            self._notify()
        return ws

    def _opened(self, ws: web.WebSocketResponse, shard: tuple[int, int]) -> None:
        """``ws`` now carries ``shard``: record it, and an overlap if another connection already does."""
        if self.connected(shard[0]):
            self.overlaps.append(shard[0])
        connection = Connection(shard=shard, opened=time.monotonic())
        self._open[ws] = connection
        self.connections.setdefault(shard[0], []).append(connection)

    async def _on_gateway(self, ws: web.WebSocketResponse, payload: Json) -> None:
        op, data = payload.get("op"), payload.get("d") or {}
        if op == 1:
            self.heartbeats += 1
            await ws.send_str(json.dumps({"op": 11, "d": None, "s": None, "t": None}))
        elif op == 2:
            await self._identify(ws, data)
        elif op == 6:
            await self._resume(ws, data)
        elif op in (3, 4, 8):  # presence, voice state, member requests: accepted and ignored
            pass
        else:
            self.unhandled.append(f"gateway op {op}")
        self._notify()

    async def _identify(self, ws: web.WebSocketResponse, data: Json) -> None:
        self.identifies.append(data)
        if data.get("token") != "fake-token":
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        if self.refuse_intents and int(data.get("intents", 0)) & MESSAGE_CONTENT_INTENT:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        raw_shard = data.get("shard") or [0, 1]
        shard = (int(raw_shard[0]), int(raw_shard[1]))
        if not 0 <= shard[0] < shard[1]:
            await ws.close(code=4010, message=b"Invalid shard.")
            return
        if self.hold_ready is not None:
            await self.hold_ready.wait()
        session = _Session(id=f"session-{self._id()}", shard=shard, ws=ws)
        self._sessions[session.id] = session
        self._session = session
        self._opened(ws, shard)
        guilds = [g for gid, g in self.guilds.items() if shard_of(gid, shard[1]) == shard[0]]
        ready = {
            "v": 10,
            "user": self.bot,
            "guilds": [{"id": g["id"], "unavailable": True} for g in guilds],
            "session_id": session.id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": self.bot["id"], "flags": 0},
            "private_channels": [],
            "relationships": [],
        }
        if "shard" in data:
            ready["shard"] = list(shard)
        await self._send(session, "READY", ready)
        for guild in guilds:
            await self._send(session, "GUILD_CREATE", {k: v for k, v in guild.items() if k != "bot_role_id"})

    async def _resume(self, ws: web.WebSocketResponse, data: Json) -> None:
        session = self._sessions.get(data.get("session_id", ""))
        if session is None or data.get("token") != "fake-token":
            await ws.send_str(json.dumps({"op": 9, "d": False, "s": None, "t": None}))
            return
        session.ws = ws
        self._session = session
        self._opened(ws, session.shard)
        self.resumes += 1
        for event in session.events:
            if event["s"] > int(data.get("seq") or 0):
                await ws.send_str(json.dumps(event))
        await self._send(session, "RESUMED", {})
        self._notify()

    # -- REST ------------------------------------------------------------------------------------------

    def rate_limit(
        self, method: str, path: str, *, retry_after: float, times: int = 1, is_global: bool = False
    ) -> None:
        """The next ``times`` calls of ``method path`` (a regex on the path after ``/api/v10``) answer 429."""
        self.rate_limits.append(
            RateLimit(
                method=method, pattern=re.compile(path), retry_after=retry_after, times=times, is_global=is_global
            )
        )

    async def _download(self, request: web.Request) -> web.Response:
        path = request.path
        self.downloads.append(path)
        self._notify()
        if self.failing_downloads > 0:
            self.failing_downloads -= 1
            return web.Response(status=503, text="upstream connect error")
        if path not in self.files:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=self.files[path], content_type="application/octet-stream")

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body: Any = None
        if request.can_read_body and request.content_type == "multipart/form-data":  # a message with files
            form = await request.post()
            payload = form.get("payload_json")
            body = json.loads(payload) if isinstance(payload, str) else {}
            body["_files"] = [
                (value.filename, value.content_type, value.file.read())
                for value in form.values()
                if isinstance(value, web.FileField)
            ]
        elif request.can_read_body:
            raw = await request.read()
            if request.headers.get("Content-Type") == "application/json":
                body = json.loads(raw)
            else:
                body = raw.decode(errors="replace")
        record = Request(method=request.method, path=path, body=body)
        self.requests.append(record)
        response = await self._route(request, path, body)
        record.status = response.status
        self._notify()
        return response

    def _auth_ok(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == "Bot fake-token"

    async def _route(self, request: web.Request, path: str, body: Any) -> web.Response:
        method = request.method
        for rule in self.rate_limits:
            if rule.method == method and rule.served < rule.times and rule.pattern.fullmatch(path):
                rule.served += 1
                return _json(
                    {
                        "message": "You are being rate limited.",
                        "retry_after": rule.retry_after,
                        "global": rule.is_global,
                    },
                    status=429,
                    headers={"Via": "1.1 google", "Retry-After": str(max(1, round(rule.retry_after)))},
                )
        is_interaction = path.startswith("/interactions/")
        if not is_interaction and not self._auth_ok(request):
            return _error(401, 0, "401: Unauthorized")
        if method == "GET" and path == "/users/@me":
            return _json(self.bot)
        if method == "GET" and path == "/oauth2/applications/@me":
            return _json(self._application())
        if method == "GET" and path == "/gateway/bot":
            return _json(
                {
                    "url": self.gateway_url,
                    "shards": self.recommended_shards,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 1000 - len(self.identifies),
                        "reset_after": 86_400_000,
                        "max_concurrency": self.max_concurrency,
                    },
                }
            )
        if m := re.fullmatch(r"/applications/(\d+)/commands", path):
            if method == "PUT":
                return self._put_commands(int(m[1]), body)
            if method == "GET":
                return _json(self.commands)
        if method == "POST" and (m := re.fullmatch(r"/channels/(\d+)/messages", path)):
            return await self._create_message(int(m[1]), body)
        if method == "POST" and path == "/users/@me/channels":
            return self._open_dm(body)
        if method == "PATCH" and (m := re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path)):
            return await self._edit_message(int(m[1]), int(m[2]), body)
        if method == "DELETE" and (m := re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path)):
            return await self._delete_message(int(m[1]), int(m[2]))
        if method == "POST" and (m := re.fullmatch(r"/channels/(\d+)/typing", path)):
            if int(m[1]) not in self.channels:
                return _error(404, 10003, "Unknown Channel")
            self.typing.append(int(m[1]))
            return web.Response(status=204)
        if method == "PUT" and (m := re.fullmatch(r"/channels/(\d+)/messages/(\d+)/reactions/([^/]+)/@me", path)):
            return self._react(int(m[1]), int(m[2]), urllib.parse.unquote(m[3]))
        if method == "POST" and (m := re.fullmatch(r"/interactions/(\d+)/([^/]+)/callback", path)):
            return await self._interaction_callback(int(m[1]), m[2], body)
        self.unhandled.append(f"{method} {path}")
        return _error(404, 0, "404: Not Found")

    def _application(self) -> Json:
        return {
            "id": self.bot["id"],
            "name": self.bot["username"],
            "icon": None,
            "description": "",
            "rpc_origins": [],
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": self._owner,
            "summary": "",
            "verify_key": "0" * 64,
            "team": None,
            "flags": 1 << 19,
            "bot": self.bot,
        }

    def _put_commands(self, application_id: int, body: Any) -> web.Response:
        if str(application_id) != self.bot["id"] or not isinstance(body, list):
            return _error(400, 50035, "Invalid Form Body")
        if self.command_answer == "refuse":
            return _error(403, 50001, "Missing Access")
        if self.command_answer == "malformed":
            return _json([{"name": command.get("name")} for command in body])
        self.commands = [
            {
                "id": str(self._id()),
                "application_id": self.bot["id"],
                "version": str(self._id()),
                "type": 1,
                "options": [],
                "default_member_permissions": None,
                "dm_permission": True,
                "nsfw": False,
                "contexts": None,
                "integration_types": [0],
                **command,
                **(
                    {"default_member_permissions": str(command["default_member_permissions"])}
                    if command.get("default_member_permissions") is not None
                    else {}
                ),
            }
            for command in body
        ]
        return _json(self.commands)

    async def _create_message(self, channel_id: int, body: Any) -> web.Response:
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if self._guild_of(channel_id) in self.removed_from:
            return _error(403, 50001, "Missing Access")
        recipients = self.channels[channel_id].get("recipients") or [{}]
        if self.channels[channel_id].get("type") == 1 and recipients[0].get("id") in self.dms_closed:
            return _error(403, 50007, "Cannot send messages to this user")
        if not isinstance(body, dict):
            return _error(400, 50109, "The request body contains invalid JSON.")
        content = body.get("content") or ""
        if len(content) > 2000:
            return _error(
                400,
                50035,
                "Invalid Form Body",
                {
                    "content": {
                        "_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]
                    }
                },
            )
        uploads = body.get("_files") or []
        poll = body.get("poll")
        layout = int(body.get("flags") or 0) & IS_COMPONENTS_V2
        if layout:  # Discord's rules for components v2: no content, no embeds, components that show something
            refused = self._layout_refused(
                body.get("components") or [], content=content, body=body, filenames={f[0] for f in uploads}
            )
            if refused is not None:
                return refused
        if not content.strip() and not body.get("embeds") and not uploads and not poll and not layout:
            return _error(400, 50006, "Cannot send an empty message")
        if int(body.get("flags") or 0) & VOICE_MESSAGE:  # Discord's rules for a voice message
            described = body.get("attachments") or []
            if content or len(uploads) != 1 or len(described) != 1:
                return _error(400, 50161, "Voice messages must have a single audio attachment and no content")
            if "duration_secs" not in described[0] or "waveform" not in described[0]:
                return _error(
                    400, 50035, "Invalid Form Body", {"attachments": {"_errors": [{"code": "BASE_TYPE_REQUIRED"}]}}
                )
        nonce = body.get("nonce")
        if nonce is not None and body.get("enforce_nonce"):
            if len(str(nonce)) > 25:
                return _error(
                    400, 50035, "Invalid Form Body", {"nonce": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}}
                )
            existing = self._nonces.get((channel_id, str(nonce)))
            if existing is not None:
                return _json(self.messages[existing])
        reference = body.get("message_reference") or {}
        reply_to = int(reference["message_id"]) if reference.get("message_id") else None
        if reply_to is not None and reply_to not in self.messages and reference.get("fail_if_not_exists", True):
            return _error(
                400,
                50035,
                "Invalid Form Body",
                {"message_reference": {"_errors": [{"code": "REPLIES_UNKNOWN_MESSAGE"}]}},
            )
        data = self._message(
            channel_id=channel_id,
            author=self.bot,
            content=content,
            allowed_mentions=body.get("allowed_mentions"),
            reply_to=reply_to if reply_to in self.messages else None,
            nonce=None if nonce is None else str(nonce),
            flags=int(body.get("flags") or 0),
        )
        if nonce is not None and body.get("enforce_nonce"):
            self._nonces[(channel_id, str(nonce))] = int(data["id"])
        data["components"] = body.get("components") or []
        if poll:
            answers = poll.get("answers") or []
            if not 1 <= len(answers) <= 10 or not (poll.get("question") or {}).get("text"):
                return _error(400, 50035, "Invalid Form Body", {"poll": {"_errors": [{"code": "BASE_TYPE_BAD"}]}})
            hours = int(poll.get("duration") or 24)
            expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=hours)
            data["poll"] = {
                "question": {"text": poll["question"]["text"]},
                "answers": [{"answer_id": n, "poll_media": a["poll_media"]} for n, a in enumerate(answers, start=1)],
                "expiry": expiry.isoformat(),
                "allow_multiselect": bool(poll.get("allow_multiselect")),
                "layout_type": int(poll.get("layout_type") or 1),
                "results": {"is_finalized": False, "answer_counts": []},
            }
        described = {int(a.get("id", -1)): a for a in body.get("attachments") or [] if isinstance(a, dict)}
        for index, (filename, content_type, raw) in enumerate(uploads):
            attachment_id = self._id()
            path = f"/attachments/{channel_id}/{attachment_id}/{filename}"
            self.files[path] = raw
            url = f"http://127.0.0.1:{self.port}{path}"
            item: Json = {"id": str(attachment_id), "filename": filename, "size": len(raw), "url": url}
            item["proxy_url"] = url
            item["content_type"] = content_type
            for field in ("duration_secs", "waveform"):  # a voice message's metadata
                if field in described.get(index, {}):
                    item[field] = described[index][field]
            data["attachments"].append(item)
            self.uploads.append((int(data["id"]), filename, content_type, raw))
        self.posted.append(data)
        self.versions[int(data["id"])] = [(time.monotonic(), content)]
        if self._session is not None:  # Discord shows the bot its own message too
            await self.dispatch("MESSAGE_CREATE", data)
        return _json(data)

    def _own_message(self, channel_id: int, message_id: int) -> Json | web.Response:
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        message = self.messages.get(message_id)
        if message is None or message["channel_id"] != str(channel_id) or message_id in self.deleted:
            return _error(404, 10008, "Unknown Message")
        if message["author"]["id"] != self.bot["id"]:
            return _error(403, 50005, "Cannot edit a message authored by another user")
        return message

    def _layout_refused(
        self, components: list[Json], *, content: str, body: Json, filenames: set[str]
    ) -> web.Response | None:
        """Discord's 400 for a components v2 message it does not take (None: it takes it): content or embeds
        beside the components, nothing shown (no text display, no media gallery), a media gallery Discord refuses
        (``_gallery_problem``; ``filenames``: the files attached to the message), more than 4,000 characters of
        text, or any layout while ``refuse_layout`` is set."""
        texts = _layout_texts(components)
        galleries = _galleries(components)
        if content or body.get("embeds") or not (texts or galleries):
            return _error(400, 50035, "Invalid Form Body", {"components": {"_errors": [{"code": "BASE_TYPE_BAD"}]}})
        for gallery in galleries:
            problem = _gallery_problem(gallery, filenames)
            if problem is not None:
                error = {"code": problem, "message": f"Invalid media gallery ({problem})"}
                return _error(400, 50035, "Invalid Form Body", {"components": {"_errors": [error]}})
        if self.refuse_layout or sum(len(t) for t in texts) > 4000:
            return _error(400, 50035, "Invalid Form Body", {"components": {"_errors": [{"code": "LAYOUT_REFUSED"}]}})
        return None

    async def _edit_message(self, channel_id: int, message_id: int, body: Any) -> web.Response:
        message = self._own_message(channel_id, message_id)
        if isinstance(message, web.Response):
            return message
        if not isinstance(body, dict):
            return _error(400, 50109, "The request body contains invalid JSON.")
        was_layout = int(message.get("flags") or 0) & IS_COMPONENTS_V2
        if "flags" in body and was_layout and not int(body.get("flags") or 0) & IS_COMPONENTS_V2:
            return _error(400, 50035, "Invalid Form Body", {"flags": {"_errors": [{"code": "COMPONENTS_V2_SET"}]}})
        if int(body.get("flags") or 0) & IS_COMPONENTS_V2 or was_layout:  # Discord's rules for components v2
            filenames = {a["filename"] for a in message.get("attachments") or []}
            refused = self._layout_refused(
                body.get("components") or message.get("components") or [],
                content=body.get("content") or "",
                body=body,
                filenames=filenames | {f[0] for f in body.get("_files") or []},
            )
            if refused is not None:
                return refused
            message["flags"] = int(message.get("flags") or 0) | IS_COMPONENTS_V2
            message["content"] = ""
            message["components"] = body.get("components") or message.get("components") or []
            message["edited_timestamp"] = _now()
            self.versions[message_id].append((time.monotonic(), layout_text(message)))
            if self._session is not None:
                await self.dispatch("MESSAGE_UPDATE", message)
            return _json(message)
        if "content" in body:
            content = body.get("content") or ""
            if len(content) > 2000:
                return _error(
                    400,
                    50035,
                    "Invalid Form Body",
                    {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
                )
            if not content.strip():
                return _error(400, 50006, "Cannot send an empty message")
            if content == message["content"]:
                self.unchanged_edits += 1
            message["content"] = content
            message["edited_timestamp"] = _now()
            self.versions[message_id].append((time.monotonic(), content))
        if "components" in body:
            message["components"] = body.get("components") or []
        if self._session is not None:
            await self.dispatch("MESSAGE_UPDATE", message)
        return _json(message)

    async def _delete_message(self, channel_id: int, message_id: int) -> web.Response:
        message = self._own_message(channel_id, message_id)
        if isinstance(message, web.Response):
            return message
        self.deleted.add(message_id)
        if self._session is not None:
            await self.dispatch("MESSAGE_DELETE", {"id": str(message_id), "channel_id": str(channel_id)})
        return web.Response(status=204)

    def _react(self, channel_id: int, message_id: int, emoji: str) -> web.Response:
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if message_id not in self.messages:
            return _error(404, 10008, "Unknown Message")
        if not emoji or (emoji.isascii() and not re.fullmatch(r"[\w~]+:\d+", emoji)):
            return _error(400, 10014, "Unknown Emoji")
        self.reactions.append((channel_id, message_id, emoji))
        return web.Response(status=204)

    async def _interaction_callback(self, interaction_id: int, token: str, body: Any) -> web.Response:
        if token != f"interaction-token-{interaction_id}":
            return _error(401, 50027, "Invalid Webhook Token")
        if interaction_id in self.interaction_responses:
            return _error(400, 40060, "Interaction has already been acknowledged.")
        self.interaction_responses[interaction_id] = body
        answer: Json = {"interaction": {"id": str(interaction_id), "type": 2}}
        if body.get("type") == 7:  # UPDATE_MESSAGE: the message the pressed component belongs to
            message = self.messages[self._interaction_messages[interaction_id]]
            payload = body.get("data") or {}
            if "content" in payload:
                message["content"] = payload.get("content") or ""
                message["edited_timestamp"] = _now()
                self.versions.setdefault(int(message["id"]), []).append((time.monotonic(), message["content"]))
            if "components" in payload:
                message["components"] = payload.get("components") or []
            answer["interaction"]["type"] = 3
            return _json(answer)
        if body.get("type") == 4:
            payload = body.get("data") or {}
            message = self._message(
                channel_id=self._interaction_channels[interaction_id],
                author=self.bot,
                content=payload.get("content") or "",
                allowed_mentions=payload.get("allowed_mentions"),
                flags=int(payload.get("flags") or 0),
            )
            message["components"] = payload.get("components") or []
            self._interaction_messages[interaction_id] = int(message["id"])
            answer["interaction"].update(
                response_message_id=message["id"],
                response_message_loading=False,
                response_message_ephemeral=bool(message["flags"] & 64),
            )
            answer["resource"] = {"type": 4, "message": message}
        return _json(answer)
