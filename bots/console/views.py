"""The console's pages: each handler reads what it shows and renders one template. Changes are forms posted with
the session's CSRF token; every refusal is the same 403."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from aiohttp import web

from core.errors import BotError
from core.memory.history import HISTORY
from core.run_traces import recent_runs
from core.usage import UsageTotals
from extensions.chat.reminders import describe, schedules_or_none
from extensions.web import cookie_name, refused
from extensions.web.guard import visitor_address
from extensions.web.settings import WebSettings

from ..config import settings_table
from .auth import SESSION_COOKIE
from .charts import Bar, bar_chart, money, tokens
from .data import conversation_of, conversations, transcript, usage_report, when

if TYPE_CHECKING:
    from core import Setup
    from extensions.web import Templates, WebRuntime

    from ..ops import Ops
    from ..settings import Settings
    from .auth import Sessions
    from .data import Tail
    from .fleet import FleetView

__all__ = ("Views",)

log = logging.getLogger("bots.console")

PAGES = (
    ("fleet", "Fleet"),
    ("conversations", "Conversations"),
    ("usage", "Usage"),
    ("knowledge", "Knowledge"),
    ("settings", "Settings"),
)
"""The navigation: path and title."""


def _short(name: str, width: int = 18) -> str:
    """A chart's label: ``telegram:chat:-1001234567890`` -> ``…at:-1001234567890`` (the end tells them apart)."""
    return name if len(name) <= width else "…" + name[-(width - 1) :]


class Console(Protocol):
    """What the pages read of the console that serves them (``bots.console.server.Console`` is one)."""

    agent: Setup
    """The agent the console shows."""
    settings: Settings
    """The bot's settings."""
    ops: Ops
    """The process's health and metrics."""
    fleet: FleetView | None
    """The fleet's state in Redis (None in one process)."""
    redis: tuple[Any, str] | None
    """``(client, prefix)`` for the fleet's usage counters (None in one process)."""
    sessions: Sessions
    """The operators' sessions."""
    templates: Templates
    """The pages' templates."""
    tail: Tail
    """The live tail of conversations."""

    @property
    def web_chat(self) -> WebRuntime | None:
        """The web chat of the agent, if it has one."""
        ...


class Views:
    """The handlers of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.sessions = console.sessions
        self.templates = console.templates
        self.cookie = cookie_name(SESSION_COOKIE, secure=console.settings.console.secure_cookies)
        """The session cookie's name (``__Host-console_session`` over HTTPS)."""

    # -- helpers ---------------------------------------------------------------------------------------

    async def session(self, request: web.Request) -> str | None:
        return await self.sessions.session(request.cookies.get(self.cookie))

    def page(self, request: web.Request, name: str, session: str, *, status: int = 200, **values: Any) -> web.Response:
        return self.templates.response(
            f"{name}.html",
            status=status,
            pages=PAGES,
            current=name,
            csrf=self.sessions.csrf(session),
            bot=self.console.settings.bot.name,
            flash=self._flash(request),
            **values,
        )

    def done(self, path: str, text: str) -> web.HTTPSeeOther:
        """Back to ``path`` with ``text`` shown once there (signed: nobody else's link can put words on a page)."""
        text = text[:300]
        return web.HTTPSeeOther(f"{path}?done={quote(text)}&mac={self.sessions.csrf('flash|' + text)}")

    def _flash(self, request: web.Request) -> str:
        text = request.query.get("done", "")
        return text if text and self.sessions.check_csrf("flash|" + text, request.query.get("mac")) else ""

    async def change(self, request: web.Request) -> tuple[str, Any] | web.Response:
        """The session and the form of a change, or the refusal (no session, a wrong CSRF token, a foreign
        origin)."""
        session = await self.session(request)
        origin = request.headers.get("Origin")
        if session is None or (origin is not None and origin.split("://", 1)[-1] != request.host):
            return refused()
        form = await request.post()
        token = form.get("csrf")
        if not self.sessions.check_csrf(session, token if isinstance(token, str) else None):
            return refused()
        return session, form

    # -- login -----------------------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def login_page(self, request: web.Request) -> web.Response:
        if await self.session(request) is not None:
            raise web.HTTPSeeOther("/fleet")
        return self.templates.response("login.html", bot=self.console.settings.bot.name, failed=False)

    async def login(self, request: web.Request) -> web.Response:
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://", 1)[-1] != request.host:
            return refused()
        form = await request.post()
        given = form.get("secret")
        client = (
            visitor_address(request, self.console.settings.group(WebSettings).trusted_proxies) or request.remote or ""
        )
        cookie = await self.sessions.login(given if isinstance(given, str) else "", client=client)  # (two a second)
        if cookie is None:
            log.warning("console: a wrong secret from %s", request.remote)
            return self.templates.response("login.html", status=403, bot=self.console.settings.bot.name, failed=True)
        response = web.HTTPSeeOther("/fleet")
        response.set_cookie(
            self.cookie,
            cookie,
            max_age=self.sessions.seconds,
            httponly=True,
            samesite="Strict",
            secure=self.console.settings.console.secure_cookies,
            path="/",
        )
        raise response

    async def logout(self, request: web.Request) -> web.Response:
        checked = await self.change(request)
        if isinstance(checked, web.Response):
            return checked
        await self.sessions.logout(request.cookies.get(self.cookie))
        response = web.HTTPSeeOther("/login")
        response.del_cookie(self.cookie, path="/", secure=self.console.settings.console.secure_cookies)
        raise response

    async def _require(self, request: web.Request) -> str:
        session = await self.session(request)
        if session is None:
            raise web.HTTPSeeOther("/login")
        return session

    # -- pages -----------------------------------------------------------------------------------------

    async def home(self, request: web.Request) -> web.Response:
        await self._require(request)
        raise web.HTTPSeeOther("/fleet")

    async def fleet(self, request: web.Request) -> web.Response:
        session = await self._require(request)
        view = self.console.fleet
        snapshot = await view.snapshot() if view is not None else None
        web_runtime = self.console.web_chat
        return self.page(
            request,
            "fleet",
            session,
            snapshot=snapshot,
            reminders=await self._reminders(),
            now=time.time(),
            when=lambda s: when(s * 1000),
            process={
                "running": self.console.agent.running,
                "visitors": web_runtime.hub.visitors() if web_runtime is not None else None,
                "pages": len(web_runtime.hub) if web_runtime is not None else None,
            },
        )

    async def dead(self, request: web.Request) -> web.Response:
        checked = await self.change(request)
        if isinstance(checked, web.Response):
            return checked
        _, form = checked
        view = self.console.fleet
        cid, batch, action = str(form.get("cid", "")), str(form.get("batch", "")), str(form.get("action", ""))
        if view is None or action not in ("run", "drop"):
            return refused(400)
        if action == "run":
            count = await view.run_again(cid, batch)
            done = f"batch {batch} of {cid}: {count} message(s) back in the inbox" if count else "nothing to run"
        else:
            done = f"batch {batch} of {cid} dropped" if await view.drop(cid, batch) else "nothing to drop"
        raise self.done("/fleet", done)

    async def conversations(self, request: web.Request) -> web.Response:
        session = await self._require(request)
        words = request.query.get("q", "")[:200]
        found = await conversations(self.console.agent, words)
        return self.page(request, "conversations", session, words=words, found=found, when=when, quote=quote)

    async def conversation(self, request: web.Request) -> web.Response:
        session = await self._require(request)
        cid = request.query.get("cid", "")
        agent = self.console.agent
        known = conversation_of(agent, cid)
        entries = await transcript(agent, cid)
        history = agent.provided(HISTORY)
        summary = (await history.summary(cid)).text if history is not None else ""
        chat = await agent.chat_of(cid)
        settings = {name: getattr(chat, name) for name in type(chat).model_fields}
        tracing = self.console.settings.tracing
        runs = await recent_runs(agent.memory, cid) if tracing.enabled else None
        return self.page(
            request,
            "conversation",
            session,
            cid=cid,
            entries=entries,
            summary=summary,
            settings=settings,
            forgettable=known is not None,
            runs=runs,
            reminders=await self._reminders(cid),
            trace_link=tracing.trace_link,
            when=when,
            quote=quote,
        )

    async def _reminders(self, cid: str | None = None) -> list[str] | None:
        """One line per schedule of ``cid`` (all conversations, the 10 due soonest, without it); None when the
        agent keeps none or they cannot be read."""
        schedules = schedules_or_none(self.console.agent)
        if schedules is None:
            return None
        try:
            found = await (schedules.by_conversation(cid) if cid is not None else schedules.store.upcoming(10))
        except Exception as exc:
            log.warning("console: could not read the schedules: %s", exc)
            return None
        return [describe(s, lang="en") + ("" if cid is not None else f"  ({s.conversation})") for s in found]

    async def forget(self, request: web.Request) -> web.Response:
        checked = await self.change(request)
        if isinstance(checked, web.Response):
            return checked
        _, form = checked
        cid = str(form.get("cid", ""))
        known = conversation_of(self.console.agent, cid)
        if known is None:
            return refused(400)
        try:
            await self.console.agent.forget(*known)
        except BotError as exc:
            raise self.done("/conversations", f"could not forget {cid}: {exc}") from exc
        log.info("console: %s forgotten", cid)
        raise self.done("/conversations", f"{cid} forgotten")

    async def tail(self, request: web.Request) -> web.StreamResponse:
        if await self.session(request) is None:
            return refused()
        cid = request.query.get("cid", "")
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )
        await response.prepare(request)
        fleet = self.console.fleet
        with self.console.tail.watch(cid) as queue, contextlib.suppress(ConnectionResetError):
            remote = None  # the workers' run events of this conversation, in a fleet
            if fleet is not None:
                remote = asyncio.create_task(fleet.follow(cid, lambda item: self.console.tail.put(cid, item)))
            try:
                await response.write(b'retry: 2000\n\ndata: {"type":"watching"}\n\n')
                while True:
                    try:
                        item = await asyncio.wait_for(queue.get(), 15.0)
                    except TimeoutError:
                        await response.write(b": ping\n\n")
                        continue
                    # ASCII: text that is not valid UTF-8 (a lone surrogate) is sent as a JSON escape, not a crash
                    data = json.dumps(item, separators=(",", ":"))
                    await response.write(f"data: {data}\n\n".encode())
            finally:
                if remote is not None:
                    remote.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await remote
        return response  # (the page went away)

    async def usage(self, request: web.Request) -> web.Response:
        session = await self._require(request)
        bot = self.console.settings.bot
        report = await usage_report(
            self.console.agent,
            days=14,
            user_limit=bot.tokens_per_day_user,
            chat_limit=bot.tokens_per_day_conversation,
            redis=self.console.redis,
        )
        day_chart = bar_chart(report.days, title="Tokens per day, last 14 days (UTC)")

        def bars(rows: list[tuple[str, UsageTotals]], count: int = 10) -> list[Bar]:
            return [
                Bar(label=_short(name), input=t.input_tokens, output=t.output_tokens, note=money(t.cost))
                for name, t in rows[:count]
            ]

        model_chart = bar_chart(bars(report.models), title="Tokens per model, last 14 days", height=200)
        user_chart = bar_chart(bars(report.users), title="Tokens per user, last 14 days (top 10)", height=200)
        chat_chart = bar_chart(bars(report.chats), title="Tokens per conversation, last 14 days (top 10)", height=200)
        return self.page(
            request,
            "usage",
            session,
            report=report,
            day_chart=day_chart,
            model_chart=model_chart,
            charts={"Users": user_chart, "Conversations": chat_chart},
            tokens=tokens,
            money=money,
            quote=quote,
        )

    async def settings(self, request: web.Request) -> web.Response:
        session = await self._require(request)
        rows = settings_table(self.console.settings)
        ready, checks = await self.console.ops.readiness()
        return self.page(request, "settings", session, rows=rows, ready=ready, checks=checks)
