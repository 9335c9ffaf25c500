"""The web chat's HTTP side: the page, its event stream and what it posts.

- ``GET /``: the page (it carries no message: the script reads the history); a visitor without a valid cookie gets
  a new id in a signed cookie (HttpOnly, SameSite=Strict), within ``WEB_NEW_VISITORS_PER_HOUR`` per address; the
  cookie lasts ``WEB_VISITOR_IDLE_DAYS`` from the last visit (``extensions.web.idle``).
- ``GET /chat/history``: the visitor's own conversation, as JSON (the bot's answers also as HTML, ``rich``).
- ``GET /chat/events``: server-sent events, each a JSON object (``extensions.web.hub``).
- ``GET /chat/media/<token>``: a picture or voice message shown on the visitor's page (``extensions.web.media``),
  to that visitor only, with the type read from its bytes.
- ``POST /chat/send``: ``{"text": ...}`` with the page's CSRF token in ``X-CSRF-Token``; commands (``/forget``,
  ``/reset``, ``/settings``...) are answered at once, a message is handed to the agent.

A request without a valid cookie, or with a wrong token, gets the same 403. A visitor only ever reaches the
conversation its cookie names: no request names a conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from typing import TYPE_CHECKING

from aiohttp import web

from core.errors import BotError

from ..chat.commands import COMMANDS, Caller, ChatCommands
from ..chat.i18n import say
from .definitions import web_chat
from .guard import local_only, refused, security_headers, visitor_address, well_formed
from .pages import STATIC, TEMPLATES, Templates
from .rich import rendered
from .visitors import COOKIE, cookie_name, new_visitor_id

if TYPE_CHECKING:
    from .site import ChatSite

__all__ = ("HEARTBEAT", "chat_application")

log = logging.getLogger("extensions.web")

HEARTBEAT = 15.0
"""Seconds between two keep-alive comments on an idle event stream."""
COOKIE_AGE = 365 * 86400
"""Seconds a visitor's cookie lasts when identities never expire (``WEB_VISITOR_IDLE_DAYS=0``)."""


def chat_application(runtime: ChatSite) -> web.Application:
    """The aiohttp application of the web chat."""
    pages = ChatPages(runtime)
    guard = local_only(runtime.settings.host, runtime.settings.trusted_proxies)
    app = web.Application(middlewares=[security_headers, guard, well_formed(pages.cookie)], client_max_size=256 * 1024)
    app.router.add_get("/healthz", pages.health)
    if runtime.settings.chat_enabled:
        app.router.add_get("/", pages.page)
        app.router.add_get("/chat/history", pages.history)
        app.router.add_get("/chat/events", pages.events)
        app.router.add_get("/chat/media/{token}", pages.media)
        app.router.add_post("/chat/send", pages.send)
    app.router.add_static("/static/", STATIC, show_index=False, follow_symlinks=False)
    return app


class ChatPages:
    """The handlers, around one runtime."""

    def __init__(self, runtime: ChatSite) -> None:
        self.runtime = runtime
        self.templates = Templates(TEMPLATES)
        self.cookie = cookie_name(COOKIE, secure=runtime.settings.secure_cookies)
        """The visitor cookie's name (``__Host-visitor`` over HTTPS)."""

    def _visitor(self, request: web.Request) -> str | None:
        return self.runtime.signer.visitor(request.cookies.get(self.cookie))

    def _set_cookie(self, response: web.StreamResponse, visitor: str) -> None:
        response.set_cookie(
            self.cookie,
            self.runtime.signer.cookie(visitor),
            max_age=int(self.runtime.visitors.idle_seconds or COOKIE_AGE),  # (renewed at each visit)
            httponly=True,
            samesite="Strict",
            secure=self.runtime.settings.secure_cookies,
            path="/",
        )

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def page(self, request: web.Request) -> web.Response:
        visitor = self._visitor(request)
        if visitor is None:
            address = visitor_address(request, self.runtime.settings.trusted_proxies)
            if address is not None and not await self.runtime.visitors.newcomer(address):  # None: not known
                log.info("web chat: a new visitor refused (WEB_NEW_VISITORS_PER_HOUR reached for their address)")
                text = say("web.too_many_visitors")
                return web.Response(status=429, text=text, content_type="text/plain", headers={"Retry-After": "600"})
            visitor = new_visitor_id()
        response = self.templates.response(
            "chat.html",
            title=self.runtime.title,
            csrf=self.runtime.signer.csrf(visitor),
            max_chars=self.runtime.settings.max_chars,
        )
        self._set_cookie(response, visitor)  # (a new one, or the same one lasting from this visit)
        await self.runtime.visitors.visited(visitor)
        return response

    async def history(self, request: web.Request) -> web.Response:
        visitor = self._visitor(request)
        if visitor is None:
            return refused()
        await self.runtime.visitors.visited(visitor)
        try:
            messages = await self.runtime.history_of(visitor)
        except BotError as exc:
            log.warning("could not read a web visitor's history: %s", exc)
            return web.json_response({"messages": [], "error": "the history cannot be read now"}, status=503)
        for message in messages:  # the bot's answers laid out, as when they were shown (``rich``)
            if message["role"] != "user":
                message["html"] = rendered(message["text"])
        return web.json_response({"messages": messages})

    async def media(self, request: web.Request) -> web.Response:
        """A picture or voice message of the visitor's conversation; the same 404 for one that is not theirs, is
        gone, or never was."""
        visitor = self._visitor(request)
        if visitor is None:
            return refused()
        item = self.runtime.media.get(visitor, request.match_info["token"])
        if item is None:
            return web.Response(status=404, text="Not found", content_type="text/plain")
        return web.Response(
            body=item.data,
            content_type=item.mime,
            headers={
                "Cache-Control": "private, max-age=86400",
                "Content-Disposition": "inline",
                "X-Content-Type-Options": "nosniff",
            },
        )

    async def events(self, request: web.Request) -> web.StreamResponse:
        visitor = self._visitor(request)
        if visitor is None:
            return refused()
        await self.runtime.visitors.visited(visitor)
        if self.runtime.hub.full(visitor):
            return web.Response(status=429, text="Too many pages open", content_type="text/plain")
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await response.prepare(request)
        with self.runtime.hub.listen(visitor) as queue, contextlib.suppress(ConnectionResetError):
            await response.write(b'retry: 1000\n\ndata: {"op":"ready"}\n\n')
            while True:
                try:  # (asyncio.timeout, not wait_for: no task of its own for each event, one loop turn less)
                    async with asyncio.timeout(HEARTBEAT):
                        event = await queue.get()
                except TimeoutError:
                    await response.write(b": ping\n\n")
                    continue
                if event is None:
                    break
                data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
                await response.write(f"data: {data}\n\n".encode())
        return response  # (a page that went away: its connection reset, nothing more to write)

    async def send(self, request: web.Request) -> web.Response:
        visitor = self._visitor(request)
        if visitor is None or not self.runtime.signer.check_csrf(visitor, request.headers.get("X-CSRF-Token")):
            return refused()
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://", 1)[-1] != request.host:
            return refused()
        await self.runtime.visitors.visited(visitor)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError, RecursionError):  # (RecursionError: JSON nested too deep)
            return web.json_response({"error": 'send JSON: {"text": "..."}'}, status=400)
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return web.json_response({"error": "the message is empty"}, status=400)
        if len(text) > self.runtime.settings.max_chars:
            return web.json_response(
                {"error": f"the message is longer than {self.runtime.settings.max_chars} characters"}, status=413
            )
        text = text.strip()
        if text.startswith("/"):
            notice = await self.command(visitor, text)
            if notice is not None:
                return web.json_response({"notice": notice})
        message_id = secrets.token_hex(8)
        if not self.runtime.take(visitor, text, message_id=message_id):
            return web.json_response({"error": "the bot is not taking messages right now"}, status=503)
        return web.json_response({"id": message_id}, status=202)

    async def command(self, visitor: str, text: str) -> str | None:
        """The answer to a chat command, or None when ``text`` is not one (it goes to the model then)."""
        agent = self.runtime.agent
        if agent is None:
            return None
        name, _, arg = text[1:].partition(" ")
        name = name.lower()
        commands, cid = ChatCommands.of(agent, web_chat, visitor)
        language = await commands.language(cid)
        disabled = agent.chat_policy.disabled_commands
        if name in ("reset", "forget"):
            if name in disabled or "reset" in disabled:
                return say("disabled", language, command=name)
            if name == "forget":
                await agent.forget(web_chat, visitor)
                return say("forget_done", language)
            await agent.reset(web_chat, visitor)
            return say("reset_done", language)
        if name in COMMANDS:
            caller = Caller(user=f"web:{visitor}", manages_chat=True)  # the only person in this conversation
            answer = await commands.run(name, cid, caller, arg or None)
            return answer.text
        return None
