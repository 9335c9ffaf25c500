"""What a fleet process adds for the web chat and the console: its presence lease (the console's fleet page), the
web chat's relay (a worker's answers reach the gateway holding the page), its visitor book in Redis and, in a
gateway, the console itself.

``bots gateway`` and ``bots worker`` each make one ``FleetRole``; ``bots run`` needs none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from extensions.web import RedisRelay
from extensions.web.settings import WebSettings

from .fleet import FleetView, Presence, RunEventRelay

if TYPE_CHECKING:
    from core import Setup
    from core.fleet import RedisBackend

    from ..ops import Ops
    from ..settings import Settings
    from .server import Console

__all__ = ("FleetRole", "web_wanted")


def web_wanted(settings: Settings) -> bool:
    """A fleet serves the web chat: the operator configured it (``WEB_CHAT_ENABLED``, ``WEB_HOST`` or
    ``WEB_PORT`` set), it is enabled and has a port. (``bots run`` serves it unless turned off.)"""
    return settings.group(WebSettings).in_fleet


class FleetRole:
    """One gateway's or worker's part in the fleet's pages."""

    def __init__(self, settings: Settings, backend: RedisBackend, *, role: str) -> None:
        self.settings = settings
        self.backend = backend
        self.role = role
        """``gateway`` or ``worker``."""
        self.prefix = backend.keys.prefix
        self.presence = Presence(backend.client, prefix=self.prefix, role=role)
        """This process's lease on the fleet page; its id names the gateway's channel for page events."""
        self.run_events = RunEventRelay(backend.client, prefix=self.prefix)
        """A worker's run events for the consoles' live tails (``watch_runs``)."""
        self._undo: Callable[[], None] | None = None

    def watch_runs(self, agent: Setup) -> None:
        """A worker: publish the run events of the conversations a console watches (from ``start`` on)."""
        self._undo = agent.add_event_listener(self.run_events.on_event)

    async def start(self) -> None:
        """Appear on the fleet page (and, with ``watch_runs``, feed the live tails)."""
        await self.presence.start()
        if self._undo is not None:
            await self.run_events.start()

    async def stop(self) -> None:
        """Leave the fleet page."""
        await self.run_events.stop()
        if self._undo is not None:
            self._undo()
            self._undo = None
        await self.presence.stop()

    def fleet_options(self) -> dict[str, Any]:
        """The platforms' fleet options (``Build.fleet``): the bot's answers, in Redis, for reactions as feedback
        (a worker posts an answer, a gateway receives the reaction on it), and the expiry of the keys of a
        conversation kept by nothing (a Telegram guest request)."""
        from core.fleet import RedisAnswerBook, RedisEphemeral

        return {"answers": RedisAnswerBook(self.backend), "ephemeral": RedisEphemeral(self.backend)}

    def web_options(self) -> dict[str, Any]:
        """``fleet_options`` and ``web_extension``'s: a gateway listens on its channel, a worker only publishes;
        the visitors (their visits, the new ones per address) are the fleet's, in Redis."""
        from core.fleet import RedisVisitorBook

        return {
            **self.fleet_options(),
            "gateway_id": self.presence.id,
            "relay": RedisRelay(self.backend.client, prefix=self.prefix, listen=self.role == "gateway"),
            "visitors": RedisVisitorBook(self.backend),
        }

    async def start_console(self, agent: Setup, *, ops: Ops) -> Console | None:
        """Serve the console (a gateway, with ``CONSOLE_SECRET``), with the fleet's state from Redis."""
        from core.fleet import RedisDispatcher

        from .server import start_console  # (its pages, templates and jinja2 only in a gateway that serves them)

        view = FleetView(self.backend.client, prefix=self.prefix, dispatcher=RedisDispatcher(self.backend))
        return await start_console(agent, self.settings, ops=ops, fleet=view, redis=(self.backend.client, self.prefix))
