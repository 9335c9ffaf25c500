"""Every configured MCP server of one process: started and stopped with the agent, their tools offered
as actions while they are up, their state in ``/readyz`` and ``bots config``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.definitions import Action, ContextState, Extension, extension, service

from .server import McpServer, ServerState
from .settings import McpSettings

if TYPE_CHECKING:
    from core import Setup

__all__ = ("McpToolset", "ServerReport")

log = logging.getLogger("extensions.mcp")


@dataclass(frozen=True, kw_only=True)
class ServerReport:
    """What ``bots config`` says about one server."""

    name: str
    """The server's name."""
    where: str
    """Its command or URL, secrets masked."""
    answered: bool
    """True when it answered initialize and listed its tools."""
    detail: str
    """The tools offered, or why it did not answer."""
    required: bool
    """Whether ``/readyz`` fails while it is down."""


class McpToolset:
    """The MCP servers of one process."""

    def __init__(self, settings: McpSettings) -> None:
        self.settings = settings
        """The ``MCP_*`` settings."""
        self.servers = [McpServer(config, settings) for config in settings.enabled]
        """One per enabled server, in the configured order."""
        self._unregister: list[Callable[[], None]] = []

    def server(self, name: str) -> McpServer:
        """The server called ``name``."""
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)

    def actions(self, state: ContextState) -> list[Action]:
        """The tools of the servers that are up (an action source: ``Host.add_action_source``)."""
        return [a for server in self.servers for a in server.actions]

    def extension(self) -> Extension:
        """The extension to give ``create_agent``."""

        def install(agent: Setup) -> None:
            agent.add_action_source(self.actions)

        return extension(name="mcp", install=install, services=[service(name="mcp", start=self.start, stop=self.stop)])

    async def start(self, agent: Setup | None = None) -> None:
        """Start every server and wait for each first attempt (``MCP_CONNECT_TIMEOUT`` bounds it): the
        tools of the servers that came up are offered from the first message; the others keep trying."""
        for server in self.servers:
            if agent is not None:
                self._unregister.append(agent.add_readiness(f"mcp:{server.name}", server.readiness))
            server.start()
        if self.servers:
            async with asyncio.TaskGroup() as tg:
                for server in self.servers:
                    tg.create_task(server.settled())
            up = [s.name for s in self.servers if s.up]
            log.info("MCP: %d of %d servers up%s", len(up), len(self.servers), f" ({', '.join(up)})" if up else "")

    async def stop(self, agent: Setup | None = None) -> None:
        """Close every session at once (stdio servers are stopped)."""
        async with asyncio.TaskGroup() as tg:
            for server in self.servers:
                tg.create_task(server.stop())
        while self._unregister:
            self._unregister.pop()()

    async def probe(self) -> list[ServerReport]:
        """Start every server once, see whether it answers initialize, and stop it (``bots config``)."""
        async with self:
            return [
                ServerReport(
                    name=s.name,
                    where=s.config.describe(),
                    answered=s.up,
                    detail=(
                        f"answered initialize ({s.server_info or 'unnamed'}): {len(s.actions)} tools"
                        + (f", {len(s.hidden_tools)} hidden by allow/deny" if s.hidden_tools else "")
                        if s.up
                        else f"did not answer: {s.error or s.state.value}"
                    ),
                    required=s.config.required,
                )
                for s in self.servers
            ]

    async def __aenter__(self) -> McpToolset:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def states(self) -> dict[str, ServerState]:
        """Each server's state by name."""
        return {s.name: s.state for s in self.servers}
