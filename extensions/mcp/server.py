"""One MCP server: a task that owns its session, and the actions made of its tools.

The session (``mcp.Client``) is entered and exited by one owner task, as the SDK's anyio task groups
require. Tool calls come from the agent's action tasks and only send requests through the session. While
the server is down its tools are hidden from the model; the owner retries with exponential backoff (with
jitter, so many workers do not knock at once) up to ``MCP_RETRY_MAX`` seconds between attempts. Every
``MCP_CHECK_INTERVAL`` seconds, when a call sees the connection fail, and when the server says its tools
changed, the owner lists the tools again: a server that died is found and restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from importlib import metadata
from typing import Any

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, Implementation, Tool, ToolListChangedNotification

from core import tracing
from core.definitions import Action, ActionContext, action
from core.errors import ActionError, DefinitionError
from core.health import Degraded
from core.schema import external_schema

from .results import tool_result
from .settings import McpServerConfig, McpSettings

__all__ = ("McpServer", "ServerState")

log = logging.getLogger("extensions.mcp")


class _OneLine(logging.Filter):
    """Drops the tracebacks the SDK's transports log for what a server sent them (a line that is not JSON-RPC on
    stdout, an unreadable response): the operator gets our one line naming the server, and what the server wrote
    (which may be anything it holds) stays out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True


for _name in ("mcp.client.stdio", "mcp.client.streamable_http"):
    logging.getLogger(_name).addFilter(_OneLine())


def _installed_version() -> str:
    """This project's installed version (pyproject's ``version``), which MCP servers see in the handshake."""
    try:
        return metadata.version("daydreams-bots")
    except metadata.PackageNotFoundError:
        return "0+unknown"


CLIENT_INFO = Implementation(name="daydreams-bots", version=_installed_version())
FIRST_RETRY = 1.0
"""Seconds before the first new attempt after a failure; doubled after each failure."""
STABLE_AFTER = 10.0
"""A session that lasted this long counts as healthy: the next failure starts the backoff over."""


class ServerState(enum.StrEnum):
    """Where a server stands."""

    STARTING = "starting"
    UP = "up"
    DOWN = "down"
    STOPPED = "stopped"


class _Lost(Exception):
    """The connection to the server is gone."""


def describe_error(exc: BaseException) -> str:
    """A short reason from an exception, looking inside the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, _Lost):
        return str(exc)
    if isinstance(exc, MCPError):
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class McpServer:
    """The connection to one MCP server and the actions made of its tools."""

    def __init__(self, config: McpServerConfig, settings: McpSettings) -> None:
        self.config = config
        """What the operator configured."""
        self.name = config.name
        """The server's name, the prefix of its actions."""
        self.timeout = config.timeout if config.timeout is not None else settings.timeout
        """Seconds one tool call may take."""
        self.connect_timeout = (
            config.connect_timeout if config.connect_timeout is not None else settings.connect_timeout
        )
        """Seconds to start the server and list its tools."""
        self.retry_max = settings.retry_max
        """Seconds at most between two attempts."""
        self.check_interval = settings.check_interval
        """Seconds between two checks of a running session (0: never)."""
        self.state = ServerState.STARTING
        """Where the server stands."""
        self.error: str | None = None
        """Why the server is down (the last failure)."""
        self.retry_at: float | None = None
        """When (``time.monotonic()``) the next attempt starts, while down."""
        self.failures = 0
        """Failed attempts since the server was last up."""
        self.server_info: str = ""
        """What the server called itself during initialize."""
        self.hidden_tools: list[str] = []
        """Tools the allow and deny lists keep from the model."""
        self._actions: dict[str, Action] = {}
        self._listed: dict[str, Tool] = {}
        self._client: Client | None = None
        self._slots = asyncio.Semaphore(config.concurrency if config.concurrency is not None else settings.concurrency)
        self._wake = asyncio.Event()
        self._stopping = False
        self._lost: str | None = None
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- what the agent sees ---------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        """True while the session works and the tools are offered."""
        return self.state is ServerState.UP

    @property
    def actions(self) -> list[Action]:
        """The server's tools as actions; empty while it is down."""
        return list(self._actions.values()) if self.up else []

    def status(self) -> str:
        """One line: up with N tools, or down and why."""
        if self.state is ServerState.UP:
            return f"up, {len(self._actions)} tools"
        if self.state is ServerState.DOWN:
            if self.retry_at is None:
                return f"down ({self.error}); reconnecting, its tools are hidden"
            wait = max(0.0, self.retry_at - time.monotonic())
            return f"down ({self.error}); retrying in {wait:.0f}s, its tools are hidden"
        return str(self.state.value)

    def readiness(self) -> bool | str:
        """The ``/readyz`` check: ready when up; a ``Degraded`` note while down, unless the server is
        ``required``."""
        if self.up:
            return True
        note = f"MCP server {self.name!r} is {self.status()}"
        return note if self.config.required else Degraded(note)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the owner task (again after ``stop``)."""
        if self._task is None:
            self._stopping = False
            self._settled.clear()
            self._wake.clear()
            self.state = ServerState.STARTING
            self._task = asyncio.create_task(self._own(), name=f"mcp:{self.name}")

    async def settled(self) -> None:
        """Return once the first attempt to connect has succeeded or failed."""
        await self._settled.wait()

    async def stop(self, *, timeout: float = 5.0) -> None:
        """Close the session (stopping a stdio server) and end the owner task."""
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            log.warning("MCP server %s did not close within %gs; cancelling", self.name, timeout)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        elif not task.cancelled() and task.exception() is not None:
            log.error("MCP server %s: the owner task failed", self.name, exc_info=task.exception())
        self.state = ServerState.STOPPED

    async def _own(self) -> None:
        delay = FIRST_RETRY
        while not self._stopping:
            began = time.monotonic()
            try:
                await self._session()
            except Exception as exc:
                reason = describe_error(exc)
                if self._stopping:
                    log.debug("MCP server %s closed with %s", self.name, reason)
                    break
                self._down(reason)
            finally:
                self._client = None
                self._settled.set()
            if self._stopping:
                break
            if time.monotonic() - began >= STABLE_AFTER:
                delay = FIRST_RETRY
            wait = delay * random.uniform(0.8, 1.2)
            self.retry_at = time.monotonic() + wait
            log.warning(
                "MCP server %s is down (%s); its tools are hidden; attempt %d in %.1fs",
                self.config.describe(),
                self.error,
                self.failures + 1,
                wait,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    self._wake.clear()
                    await self._wake.wait()
            delay = min(delay * 2, self.retry_max)
        self.state = ServerState.STOPPED

    def _down(self, reason: str) -> None:
        self.state = ServerState.DOWN
        self.error = reason
        self.failures += 1

    async def _session(self) -> None:
        """Connect, offer the tools, and keep the session until stopped or lost."""
        self._lost = None
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.timeout(self.connect_timeout):
                client = await stack.enter_async_context(
                    Client(self._transport(), client_info=CLIENT_INFO, message_handler=self._on_message)
                )
                tools = await self._list_tools(client)
            info = client.server_info
            self.server_info = f"{info.name} {info.version}".strip() if info is not None else ""
            self._client = client
            self._offer(tools)
            self.state = ServerState.UP
            self.error = None
            self.failures = 0
            self.retry_at = None
            self._settled.set()
            log.info(
                "MCP server %s is up (%s): %d tools%s",
                self.config.describe(),
                self.server_info or "unnamed",
                len(self._actions),
                f", {len(self.hidden_tools)} hidden by allow/deny" if self.hidden_tools else "",
            )
            while not self._stopping:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.check_interval or None):
                        await self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    break
                if self._lost is not None:
                    raise _Lost(f"connection lost: {self._lost}")
                async with asyncio.timeout(self.connect_timeout):  # the check: list the tools again
                    self._offer(await self._list_tools(client, refresh=True))
            self._client = None

    @contextlib.asynccontextmanager
    async def _http(self) -> AsyncIterator[Any]:
        headers = {k: v.get_secret_value() for k, v in self.config.headers.items()}
        timeout = httpx2.Timeout(self.connect_timeout, read=max(300.0, self.timeout))
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            streamable_http_client(self.config.url or "", http_client=http) as streams,
        ):
            yield streams

    def _transport(self) -> Any:
        config = self.config
        if config.command is not None:
            return StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env={k: v.get_secret_value() for k, v in config.env.items()} or None,
                cwd=config.cwd,
            )
        return self._http()

    async def _list_tools(self, client: Client, *, refresh: bool = False) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever cannot hang us
            page = await client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            log.info("MCP server %s changed its tools; listing them again", self.name)
            self._wake.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %s: transport error %s", self.name, describe_error(message))

    # -- tools -----------------------------------------------------------------------------------------

    def _offer(self, tools: list[Tool]) -> None:
        actions: dict[str, Action] = {}
        hidden: list[str] = []
        for tool in tools:
            if not self.config.offers(tool.name):
                hidden.append(tool.name)
                continue
            existing = self._actions.get(tool.name)
            if existing is not None and self._listed.get(tool.name) == tool:  # unchanged: keep its action
                actions[tool.name] = existing
                continue
            try:
                actions[tool.name] = self._make_action(tool)
            except DefinitionError as exc:
                log.warning("MCP server %s: tool %r is left out: %s", self.name, tool.name, exc)
        self._actions = actions
        self._listed = {tool.name: tool for tool in tools}
        self.hidden_tools = hidden

    def _make_action(self, tool: Tool) -> Action:
        name = f"{self.name}:{tool.name}"

        async def handler(args: dict[str, Any], ctx: ActionContext, agent: Any) -> Any:
            def show(data: bytes, mime: str) -> None:
                ctx.show_image(data, mime=mime, name=f"{tool.name} image")

            return await self.call(tool.name, args, show=show)

        return action(
            name=name,
            description=tool.description or tool.title or "",
            schema=external_schema(tool.input_schema),
            handler=handler,
            timeout=self.timeout,
            address=f"mcp:{name}",  # the operator's policy names it mcp:<server>:<tool> (ACTIONS_POLICY)
        )

    async def call(
        self, tool: str, arguments: dict[str, Any], *, show: Callable[[bytes, str], Any] | None = None
    ) -> Any:
        """Call ``tool``; its result for the model, or ``ActionError`` with what went wrong. Pictures go to
        ``show(data, mime)`` when given, else a note in the text."""
        action_name = f"{self.name}:{tool}"
        client = self._client
        if client is None or not self.up:
            raise ActionError(
                f"{action_name!r} is unavailable: the MCP server {self.name!r} is down ({self.error or 'starting'}); "
                "try again later or answer without it"
            )
        async with self._slots:
            try:
                with tracing.span(f"tools/call {tool}", kind="client") as span:
                    if span.is_recording():
                        span.set_attributes(
                            {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "bots.mcp.server": self.name}
                        )
                    result = await client.call_tool(tool, arguments)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    self._connection_failed(exc.message)
                    raise ActionError(
                        f"{action_name!r} failed: the MCP server {self.name!r} closed the connection "
                        "(it is being restarted; its tools are hidden meanwhile)"
                    ) from exc
                raise ActionError(f"{action_name!r} failed: {exc.message}") from exc
            except (OSError, httpx2.HTTPError, ExceptionGroup) as exc:
                self._wake.set()  # check the session now: the owner lists the tools again
                raise ActionError(f"{action_name!r} failed: {describe_error(exc)}") from exc
        return tool_result(result, action=action_name, show=show)

    def _connection_failed(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
            self.state = ServerState.DOWN  # hide the tools at once; the owner task reconnects
            self.error = f"connection lost: {reason}"
            self.retry_at = None
            self._wake.set()
