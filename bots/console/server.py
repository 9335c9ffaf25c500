"""Serving the console: its own aiohttp server on ``CONSOLE_HOST``:``CONSOLE_PORT`` (loopback by default, and then
only requests from this machine are answered), started after the agent when ``CONSOLE_SECRET`` is set.

``start_console(agent, settings, ops=ops)`` serves it (``bots run`` does); ``console_address(agent)`` says where;
``stop_console(agent)`` stops it. ``fleet`` (a ``FleetView``) and ``redis`` (a client and the key prefix) give it the
fleet's state when the process is part of one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from core.errors import ConfigError, address_in_use, cannot_listen
from extensions.chat.http_server import HttpLimits, start_site
from extensions.web import Templates, cookie_name, local_only, security_headers, web_runtime, well_formed
from extensions.web.pages import STATIC as WEB_STATIC
from extensions.web.settings import WebSettings

from .auth import LOGIN_SPACING, SESSION_COOKIE, Sessions
from .data import Tail
from .knowledge_pages import KnowledgePages
from .logouts import LocalLogouts, RedisLoginTurns, RedisLogouts
from .views import Views

if TYPE_CHECKING:
    from core import Setup
    from extensions.web import WebRuntime

    from ..ops import Ops
    from ..settings import Settings
    from .fleet import FleetView

__all__ = ("LOGOUTS_FILE", "MIN_SECRET", "Console", "console_address", "start_console", "stop_console")

log = logging.getLogger("bots.console")

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
MIN_SECRET = 16
"""Characters ``CONSOLE_SECRET`` has at least."""
LOGOUTS_FILE = "console_logouts.json"
"""The file under ``BOT_DATA_DIR`` keeping the console's logouts in one process."""


class Console:
    """One console: what it reads (the agent, settings, readiness, the fleet) and its server."""

    def __init__(
        self,
        agent: Setup,
        settings: Settings,
        *,
        ops: Ops,
        fleet: FleetView | None = None,
        redis: tuple[Any, str] | None = None,
    ) -> None:
        secret = settings.console.secret.get_secret_value() if settings.console.secret is not None else ""
        if len(secret) < MIN_SECRET:
            raise ConfigError(
                f"CONSOLE_SECRET is too short: give it {MIN_SECRET} characters or more (or leave it empty: no console)"
            )
        self.agent = agent
        self.settings = settings
        self.ops = ops
        self.fleet = fleet
        """The fleet's state in Redis (None in one process)."""
        self.redis = redis
        """``(client, prefix)`` for the fleet's usage counters (None in one process)."""
        if redis is not None:  # a fleet: every gateway sees a logout, and login attempts share one pace
            client, prefix = redis
            self.sessions = Sessions(
                secret,
                hours=settings.console.session_hours,
                logouts=RedisLogouts(client, prefix=prefix),
                turns=RedisLoginTurns(client, prefix=prefix, spacing=LOGIN_SPACING),
            )
        else:  # one process: its logouts survive a restart
            logouts = LocalLogouts(settings.bot.data_dir / LOGOUTS_FILE)
            self.sessions = Sessions(secret, hours=settings.console.session_hours, logouts=logouts)
        self.templates = Templates(TEMPLATES)
        self.tail = Tail()
        self.address: str | None = None
        """``http://host:port/`` once serving."""
        self._runner: web.AppRunner | None = None
        self._undo: Any = None
        self.withdraw: Callable[[], None] = lambda: None
        """Takes the console back from its agent (``agent.provided(Console)``), once it is served."""

    @property
    def web_chat(self) -> WebRuntime | None:
        """The web chat of the agent, if it has one."""
        return web_runtime(self.agent)

    def application(self) -> web.Application:
        """The console's aiohttp application."""
        views = Views(self)
        app = web.Application(
            middlewares=[
                security_headers,
                local_only(self.settings.console.host),
                well_formed(cookie_name(SESSION_COOKIE, secure=self.settings.console.secure_cookies)),
            ],
            client_max_size=64 * 1024,
        )
        app.router.add_get("/healthz", views.health)
        app.router.add_get("/login", views.login_page)
        app.router.add_post("/login", views.login)
        app.router.add_post("/logout", views.logout)
        app.router.add_get("/", views.home)
        app.router.add_get("/fleet", views.fleet)
        app.router.add_post("/fleet/dead", views.dead)
        app.router.add_get("/conversations", views.conversations)
        app.router.add_get("/conversation", views.conversation)
        app.router.add_post("/conversation/forget", views.forget)
        app.router.add_get("/conversation/events", views.tail)
        app.router.add_get("/usage", views.usage)
        app.router.add_get("/settings", views.settings)
        KnowledgePages(views).routes(app)
        app.router.add_static("/static/", WEB_STATIC, show_index=False, follow_symlinks=False)
        app.router.add_static("/assets/", STATIC, show_index=False, follow_symlinks=False)
        return app

    async def start(self) -> None:
        """Serve the console and watch the agent's run events for the live tail."""
        console = self.settings.console
        web_settings = self.settings.group(WebSettings)  # the console's pages are bounded like the web chat's
        limits = HttpLimits(
            header_timeout=web_settings.header_timeout,
            max_connections=web_settings.max_connections,
            max_per_address=web_settings.max_per_address,
            trusted_proxies=web_settings.trusted_proxies,
        )
        try:
            runner, port = await start_site(self.application(), console.host, console.port, limits=limits)
        except OSError as exc:
            if address_in_use(exc) and "port" not in console.model_fields_set:
                log.warning("the console is off: port %d is busy; set CONSOLE_PORT to a free port", console.port)
                return
            raise cannot_listen(
                exc, host_var="CONSOLE_HOST", host=console.host, port_var="CONSOLE_PORT", port=console.port
            ) from exc
        self._runner = runner
        self._undo = self.agent.add_event_listener(self.tail.on_event)
        shown = console.host if ":" not in console.host else f"[{console.host}]"
        self.address = f"http://{shown}:{port}/"
        log.info("operator console on %s", self.address)

    async def stop(self) -> None:
        """Stop serving."""
        if self._undo is not None:
            self._undo()
            self._undo = None
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self.address = None


async def start_console(
    agent: Setup,
    settings: Settings,
    *,
    ops: Ops,
    fleet: FleetView | None = None,
    redis: tuple[Any, str] | None = None,
) -> Console | None:
    """Serve the console for ``agent`` (nothing when ``CONSOLE_SECRET`` is empty or ``CONSOLE_PORT=0``)."""
    secret = settings.console.secret.get_secret_value() if settings.console.secret is not None else ""
    if not secret or not settings.console.port:
        return None
    console = Console(agent, settings, ops=ops, fleet=fleet, redis=redis)
    await console.start()
    console.withdraw = agent.provide(Console, console)
    return console


def console_address(agent: Setup) -> str | None:
    """Where the console of ``agent`` is served, or None."""
    console = agent.provided(Console)
    return console.address if console is not None else None


async def stop_console(agent: Setup) -> None:
    """Stop the console of ``agent`` (nothing when none runs)."""
    console = agent.provided(Console)
    if console is not None:
        console.withdraw()
        await console.stop()
