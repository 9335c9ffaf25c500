"""A fake Slack on 127.0.0.1: the Web API over HTTP (``/api/<method>``, what ``slack_sdk``'s ``base_url`` points
at), the Socket Mode websocket (``apps.connections.open`` hands out its URL; events go to one open connection, as
Slack spreads them over up to ten, and are sent again until acknowledged) and the Events API (events POSTed to a
request URL, signed with the signing secret as Slack signs them).

Tests make people act (``user_says``, ``user_deletes``, ``user_commands``, ``user_shares``) and read what the bot
did (``messages``, ``visible``, ``wait_for``). Messages keep every text they were shown with (``versions``): a
streamed answer is posted, then updated (``chat.update``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp
from aiohttp import web

__all__ = ("APP_TOKEN", "BOT_TOKEN", "BOT_USER", "SIGNING_SECRET", "FakeSlack", "SlackMessage")

BOT_TOKEN = "xoxb-fake-bot-token"
"""The bot token the fake accepts for the Web API."""
APP_TOKEN = "xapp-fake-app-token"
"""The app-level token the fake accepts for ``apps.connections.open``."""
SIGNING_SECRET = "fake-signing-secret"
"""The secret Events API requests are signed with."""
BOT_USER = "UBOT"
"""The bot's user id (``<@UBOT>`` mentions it)."""


@dataclass(kw_only=True, eq=False)
class SlackMessage:
    """A message in the fake, by anyone."""

    channel: str
    ts: str
    user: str
    text: str
    thread_ts: str | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    """Every text it was shown with, in order (the first post, then each update)."""
    deleted: bool = False
    ephemeral_to: str | None = None
    """Shown to this user alone (``chat.postEphemeral``)."""


class FakeSlack:
    """The fake workspace. ``await start()``, then point ``slack_sdk`` at ``api_url``; ``await close()``."""

    def __init__(self) -> None:
        self.messages: list[SlackMessage] = []
        """Every message, people's and the bot's, in order."""
        self.calls: list[tuple[str, dict[str, Any]]] = []
        """Every Web API call: ``(method, parameters)``."""
        self.unhandled: list[str] = []
        """Web API methods asked for that the fake does not implement."""
        self.uploads: dict[str, bytes] = {}
        """Files the bot uploaded, by file id."""
        self.user_files: dict[str, bytes] = {}
        """Files people shared, by file id (downloaded from ``url_private`` with the bot token)."""
        self.downloads: list[str] = []
        """The file ids the bot downloaded."""
        self.acked: list[str] = []
        """Envelope ids the Socket Mode clients acknowledged."""
        self.responses: dict[str, dict[str, Any]] = {}
        """What an acknowledgement carried, by envelope id (a slash command's answer: ``{"text": ...}``)."""
        self.delivered: dict[str, int] = {}
        """How many times each event id was handed out."""
        self.request_url: str | None = None
        """Events API mode: where events are POSTed (None: Socket Mode)."""
        self.signing_secret = SIGNING_SECRET
        """What Events API requests are signed with (a test may change it to forge them)."""
        self.event_statuses: list[int] = []
        """The HTTP status of every Events API delivery, in order."""
        self.fanout = False
        """Hand each envelope to every open connection at once (as Slack may, retrying on another connection an
        event the first was slow to acknowledge): the fleet must still answer it once."""
        self._sockets: list[web.WebSocketResponse] = []
        self._pending: dict[str, dict[str, Any]] = {}
        self._clock = itertools.count(1)
        self._ids = itertools.count(1)
        self._waiters: set[asyncio.Future[None]] = set()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._delivery: asyncio.Task[None] | None = None
        self._posting: set[asyncio.Future[None]] = set()
        self._wake = asyncio.Event()
        self._closing = False
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1, a free port."""
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_route("POST", "/api/{method}", self._api)
        app.router.add_route("GET", "/api/{method}", self._api)  # (slack_sdk reads a few with GET)
        app.router.add_route("GET", "/socket", self._socket)
        app.router.add_route("POST", "/upload/{file_id}", self._upload)
        app.router.add_route("GET", "/files/{file_id}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._session = aiohttp.ClientSession()
        self._delivery = asyncio.create_task(self._deliver(), name="fake-slack:deliver")

    async def close(self) -> None:
        """Close the websockets, stop delivering, stop listening."""
        self._closing = True
        self._wake.set()
        if self._delivery is not None:
            self._delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivery
        for posting in list(self._posting):
            posting.cancel()
        await asyncio.gather(*self._posting, return_exceptions=True)
        for ws in list(self._sockets):
            await ws.close()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api_url(self) -> str:
        """``slack_sdk``'s ``base_url`` (``SLACK_API_URL``)."""
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def sockets(self) -> int:
        """Socket Mode connections open now."""
        return len(self._sockets)

    # -- what people do --------------------------------------------------------------------------------

    def user_says(
        self,
        channel: str,
        text: str,
        *,
        user: str = "UALICE",
        thread_ts: str | None = None,
        channel_type: str = "im",
        files: list[tuple[str, str, bytes]] = (),  # type: ignore[assignment]
    ) -> SlackMessage:
        """``user`` posts ``text`` in ``channel`` (``channel_type``: ``im`` a DM, ``channel`` a public channel),
        in the thread of ``thread_ts`` if given; ``files`` are ``(name, mimetype, bytes)`` shared with it."""
        shared = [self._file(name, mimetype, data) for name, mimetype, data in files]
        message = SlackMessage(
            channel=channel, ts=self._ts(), user=user, text=text, thread_ts=thread_ts, files=shared, versions=[text]
        )
        self.messages.append(message)
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": message.ts,
            "event_ts": message.ts,
            "channel_type": channel_type,
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        if shared:
            event["subtype"] = "file_share"
            event["files"] = shared
        self.push(event)
        return message

    def user_deletes(self, message: SlackMessage, *, channel_type: str = "im") -> None:
        """The author deletes ``message``: Slack sends a ``message_deleted`` message event."""
        message.deleted = True
        ts = self._ts()
        event = {
            "type": "message",
            "subtype": "message_deleted",
            "channel": message.channel,
            "channel_type": channel_type,
            "hidden": True,
            "deleted_ts": message.ts,
            "ts": ts,
            "event_ts": ts,
            "previous_message": {"type": "message", "user": message.user, "text": message.text, "ts": message.ts},
        }
        if message.thread_ts is not None:
            event["thread_ts"] = message.thread_ts
        self.push(event)

    def user_commands(self, channel: str, command: str, text: str = "", *, user: str = "UALICE") -> str:
        """``user`` types ``/command text`` in ``channel``: a ``slash_commands`` envelope; returns its id."""
        payload = {
            "command": f"/{command.lstrip('/')}",
            "text": text,
            "channel_id": channel,
            "user_id": user,
            "user_name": user.lower(),
            "team_id": "TFAKE",
            "trigger_id": f"trigger-{next(self._ids)}",
            "response_url": f"http://127.0.0.1:{self.port}/api/response",
        }
        return self._enqueue("slash_commands", payload)

    def user_presses(self, message: SlackMessage, action_id: str, value: str = "", *, user: str = "UALICE") -> str:
        """``user`` presses the button ``action_id`` under ``message``: a ``block_actions`` interaction."""
        payload = {
            "type": "block_actions",
            "user": {"id": user, "name": user.lower()},
            "channel": {"id": message.channel},
            "container": {"type": "message", "message_ts": message.ts, "channel_id": message.channel},
            "message": {"ts": message.ts, "text": message.text, "thread_ts": message.thread_ts},
            "actions": [{"action_id": action_id, "value": value, "type": "button", "block_id": "b"}],
            "trigger_id": f"trigger-{next(self._ids)}",
            "team": {"id": "TFAKE"},
        }
        return self._enqueue("interactive", payload)

    def push(self, event: dict[str, Any]) -> str:
        """Deliver an Events API ``event_callback`` holding ``event``; returns its event id."""
        event_id = f"Ev{next(self._ids):08d}"
        payload = {
            "type": "event_callback",
            "token": "verification-token",
            "team_id": "TFAKE",
            "api_app_id": "AFAKE",
            "event": event,
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [{"team_id": "TFAKE", "user_id": BOT_USER, "is_bot": True}],
        }
        self._enqueue("events_api", payload, envelope_id=event_id)
        return event_id

    # -- what tests read -------------------------------------------------------------------------------

    def bot_messages(self, channel: str | None = None) -> list[SlackMessage]:
        """The bot's messages (not deleted), in order, in ``channel`` or everywhere."""
        return [
            m
            for m in self.messages
            if m.user == BOT_USER and not m.deleted and (channel is None or m.channel == channel)
        ]

    def visible(self, channel: str) -> list[str]:
        """The bot's messages in ``channel`` as they are shown now."""
        return [m.text for m in self.bot_messages(channel)]

    async def wait_for(self, predicate: Callable[[], bool], *, timeout: float = 30.0) -> None:
        """Return once ``predicate()`` holds (checked after every change), or raise ``TimeoutError``."""
        async with asyncio.timeout(timeout):
            await self._changed(predicate)

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        """The parameters of every call of ``method``."""
        return [params for name, params in self.calls if name == method]

    # -- the Web API -----------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip() or params.get("token", "")
        self.calls.append((method, params))
        self._notify()
        expected = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if method == "response":
            return web.json_response({"ok": True})
        if token != expected:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            self.unhandled.append(method)
            return web.json_response({"ok": False, "error": "unknown_method"})
        try:
            result = handler(params)
        except _ApiError as exc:
            return web.json_response({"ok": False, "error": exc.error})
        self._notify()
        return web.json_response({"ok": True, **result})

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.method == "GET":
            return dict(request.query)
        if request.content_type == "application/json":
            body = await request.json()
            return dict(body) if isinstance(body, dict) else {}
        form = await request.post()
        params: dict[str, Any] = {}
        for key, value in form.items():
            if isinstance(value, str) and key in ("blocks", "files", "attachments"):
                with contextlib.suppress(json.JSONDecodeError):
                    params[key] = json.loads(value)
                    continue
            params[key] = value
        return params

    def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": "daydream",
            "team_id": "TFAKE",
            "user_id": BOT_USER,
            "bot_id": "BBOT",
            "is_enterprise_install": False,
        }

    def _api_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self.port}/socket?ticket={next(self._ids)}"}

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._post(params)
        return {"channel": message.channel, "ts": message.ts, "message": self._shown(message)}

    def _api_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._post(params)
        message.ephemeral_to = str(params.get("user", ""))
        return {"message_ts": message.ts}

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._find(params)
        text = str(params.get("text", ""))
        if "blocks" in params:
            message.blocks = list(params["blocks"] or [])
        if text != message.text:
            message.text = text
            message.versions.append(text)
        return {"channel": message.channel, "ts": message.ts, "text": text}

    def _api_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._find(params)
        message.deleted = True
        return {"channel": message.channel, "ts": message.ts}

    def _api_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, root = params.get("channel"), params.get("ts")
        thread = [
            self._shown(m)
            for m in self.messages
            if m.channel == channel and not m.deleted and m.ephemeral_to is None and root in (m.ts, m.thread_ts)
        ]
        return {"messages": thread[: int(params.get("limit") or 1000)], "has_more": False}

    def _api_reactions_add(self, params: dict[str, Any]) -> dict[str, Any]:
        self._find({"channel": params.get("channel"), "ts": params.get("timestamp")})
        return {}

    def _api_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = f"FUP{next(self._ids)}"
        self.uploads[file_id] = b""
        return {"upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}", "file_id": file_id}

    def _api_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        files = params.get("files") or []
        if isinstance(files, str):
            files = json.loads(files)
        shared = []
        for f in files:
            if f["id"] not in self.uploads:
                raise _ApiError("file_not_found")
            shared.append({"id": f["id"], "name": f.get("title", ""), "size": len(self.uploads[f["id"]])})
        channel = params.get("channel_id")
        if channel:
            message = SlackMessage(
                channel=str(channel),
                ts=self._ts(),
                user=BOT_USER,
                text=str(params.get("initial_comment", "")),
                thread_ts=params.get("thread_ts") or None,
                files=shared,
            )
            message.versions.append(message.text)
            self.messages.append(message)
        return {"files": shared}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self.uploads:
            return web.Response(status=404)
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            part = await reader.next()
            data = await part.read() if isinstance(part, aiohttp.BodyPartReader) else b""
        else:
            data = await request.read()
        self.uploads[file_id] = bytes(data)
        self._notify()
        return web.Response(text=f"OK - {len(data)}")

    async def _download(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return web.Response(status=302, headers={"Location": "/login"})  # (as Slack answers a missing token)
        data = self.user_files.get(file_id)
        if data is None:
            return web.Response(status=404)
        self.downloads.append(file_id)
        self._notify()
        return web.Response(body=data)

    # -- Socket Mode and the Events API ------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True, heartbeat=None)
        await ws.prepare(request)
        await ws.send_json({"type": "hello", "num_connections": len(self._sockets) + 1, "debug_info": {}})
        self._sockets.append(ws)
        self._wake.set()
        self._notify()
        try:
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                ack = json.loads(message.data)
                envelope_id = ack.get("envelope_id")
                if envelope_id and self._pending.pop(envelope_id, None) is not None:
                    self.acked.append(envelope_id)
                    if isinstance(ack.get("payload"), dict):
                        self.responses[envelope_id] = ack["payload"]
                    self._notify()
        finally:
            self._sockets.remove(ws)
            self._notify()
        return ws

    async def _deliver(self) -> None:
        """Hand each unacknowledged envelope to one open connection (or POST it to the request URL), again every
        few seconds until it is acknowledged, as Slack retries."""
        sent_at: dict[str, float] = {}
        turn = itertools.count()
        while not self._closing:
            self._wake.clear()
            now = time.monotonic()
            for envelope_id, envelope in list(self._pending.items()):
                if now - sent_at.get(envelope_id, -1e9) < 3.0:
                    continue
                if self.request_url is not None:
                    sent_at[envelope_id] = now
                    posting = asyncio.ensure_future(self._post_event(envelope_id, envelope))
                    self._posting.add(posting)
                    posting.add_done_callback(self._posting.discard)
                    continue
                if not self._sockets:
                    continue
                chosen = list(self._sockets) if self.fanout else [self._sockets[next(turn) % len(self._sockets)]]
                sent_at[envelope_id] = now
                for ws in chosen:
                    self.delivered[envelope_id] = self.delivered.get(envelope_id, 0) + 1
                    with contextlib.suppress(ConnectionError, RuntimeError):
                        await ws.send_json(envelope)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2 if self._pending else None):
                    await self._wake.wait()

    async def _post_event(self, envelope_id: str, envelope: dict[str, Any]) -> None:
        """POST one event (JSON) or interaction (a slash command's form, an interaction's ``payload`` field) to the
        request URL, signed as Slack signs it; a 200 acknowledges it (its body kept in ``responses``)."""
        assert self._session is not None and self.request_url is not None
        kind, payload = envelope["type"], envelope["payload"]
        if kind == "events_api":
            body, content_type = json.dumps(payload), "application/json"
        elif kind == "slash_commands":
            body, content_type = urllib.parse.urlencode(payload), "application/x-www-form-urlencoded"
        else:
            body = urllib.parse.urlencode({"payload": json.dumps(payload)})
            content_type = "application/x-www-form-urlencoded"
        stamp = str(int(time.time()))
        secret = self.signing_secret.encode()
        signature = hmac.new(secret, f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": f"v0={signature}",
        }
        self.delivered[envelope_id] = self.delivered.get(envelope_id, 0) + 1
        answer: dict[str, Any] = {}
        try:
            async with asyncio.timeout(10):
                async with self._session.post(self.request_url, data=body, headers=headers) as response:
                    status = response.status
                    text = await response.text()
        except (aiohttp.ClientError, TimeoutError):
            status, text = 0, ""
        self.event_statuses.append(status)
        if status == 200 and self._pending.pop(envelope_id, None) is not None:
            self.acked.append(envelope_id)
            try:
                answer = json.loads(text) if text else {}
            except json.JSONDecodeError:
                answer = {"text": text}  # (a plain body is a text answer, as Slack reads it)
            if isinstance(answer, dict) and answer:
                self.responses[envelope_id] = answer
        self._notify()

    def _enqueue(self, kind: str, payload: dict[str, Any], *, envelope_id: str | None = None) -> str:
        envelope_id = envelope_id or f"env-{next(self._ids)}"
        self._pending[envelope_id] = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
        }
        self._wake.set()
        self._notify()
        return envelope_id

    # -- helpers ---------------------------------------------------------------------------------------

    def _ts(self) -> str:
        return f"{1_700_000_000 + next(self._clock)}.000100"

    def _file(self, name: str, mimetype: str, data: bytes) -> dict[str, Any]:
        file_id = f"FUSER{next(self._ids)}"
        self.user_files[file_id] = data
        return {
            "id": file_id,
            "name": name,
            "mimetype": mimetype,
            "size": len(data),
            "url_private": f"http://127.0.0.1:{self.port}/files/{file_id}",
            "url_private_download": f"http://127.0.0.1:{self.port}/files/{file_id}",
        }

    def _post(self, params: dict[str, Any]) -> SlackMessage:
        channel = str(params.get("channel", ""))
        if not channel:
            raise _ApiError("channel_not_found")
        text = str(params.get("text", ""))
        if not text and not params.get("blocks"):
            raise _ApiError("no_text")
        message = SlackMessage(
            channel=channel,
            ts=self._ts(),
            user=BOT_USER,
            text=text,
            thread_ts=str(params["thread_ts"]) if params.get("thread_ts") else None,
            blocks=list(params.get("blocks") or []),
            versions=[text],
        )
        self.messages.append(message)
        return message

    def _find(self, params: dict[str, Any]) -> SlackMessage:
        for message in self.messages:
            if message.channel == params.get("channel") and message.ts == params.get("ts") and not message.deleted:
                return message
        raise _ApiError("message_not_found")

    def _shown(self, message: SlackMessage) -> dict[str, Any]:
        shown: dict[str, Any] = {"type": "message", "user": message.user, "text": message.text, "ts": message.ts}
        if message.thread_ts:
            shown["thread_ts"] = message.thread_ts
        return shown

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _changed(self, predicate: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        while not predicate():
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)


class _ApiError(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error
