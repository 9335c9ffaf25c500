"""A server's life while the bot runs: its tools change, it dies between calls, it comes back."""

from __future__ import annotations

import asyncio

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
