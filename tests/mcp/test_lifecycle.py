"""A server's life while the bot runs: its tools change, it dies between calls, it comes back."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from extensions.mcp import McpSettings, mcp_toolset
from extensions.mcp.server import ServerState
from tests.mcp.support import free_port, http_server, stdio_config


async def until(condition: object, *, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.02)


async def test_changed_tools_are_offered_after_the_next_check() -> None:
    settings = McpSettings(servers=[stdio_config()], check_interval=0.2)
    async with mcp_toolset(settings) as toolset:
        tools = toolset.server("tools")
        assert "tools:grown" not in [a.name for a in tools.actions]
        assert await tools.call("grow", {}) == {"result": "a tool was added"}
        await until(lambda: "tools:grown" in [a.name for a in tools.actions])
        assert await tools.call("grown", {}) == "grown up"  # no output schema: the text


async def test_a_server_that_dies_between_calls_is_found_and_reconnected() -> None:
    port = free_port()
    async with http_server(port=port) as url:
        settings = McpSettings(servers=[{"name": "web", "url": url}], check_interval=0.2, retry_max=1)
        async with mcp_toolset(settings) as toolset:
            web = toolset.server("web")
            assert web.up
        # the toolset is closed; open it again and kill the server under it
        toolset = mcp_toolset(settings)
        await toolset.start()
    try:
        web = toolset.server("web")
        await until(lambda: web.state is ServerState.DOWN)  # found by the check, no call needed
        assert web.actions == [] and "its tools are hidden" in web.status()
        async with http_server(port=port):
            await until(lambda: web.up)
            assert await web.call("echo", {"text": "again"}) == {"result": "echo: again"}
    finally:
        await toolset.stop()


async def test_a_server_that_writes_garbage_is_reported_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """What the server wrote may be anything it holds: no traceback of the SDK carries it into the log."""
    script = "import os, sys; print(os.environ['TOKEN']); sys.stdout.flush(); sys.stdin.read()"
    noisy_server = {"name": "noisy", "command": sys.executable, "args": ["-c", script], "env": {"TOKEN": "secret-ish"}}
    settings = McpSettings(servers=[noisy_server], connect_timeout=2, retry_max=1)
    caplog.set_level(logging.DEBUG)
    async with mcp_toolset(settings) as toolset:
        noisy = toolset.server("noisy")
        await until(lambda: any(r.name == "mcp.client.stdio" for r in caplog.records))
        assert not noisy.up
    sdk = [r for r in caplog.records if r.name.startswith("mcp.")]
    assert sdk and all(r.exc_info is None for r in sdk)
    assert "secret-ish" not in caplog.text and "Traceback" not in caplog.text


def test_servers_are_told_the_installed_version_in_the_handshake() -> None:
    from importlib.metadata import version

    from extensions.mcp.server import CLIENT_INFO

    assert CLIENT_INFO.version == version("daydreams-bots")  # was a fixed "0.1.0" behind every release
