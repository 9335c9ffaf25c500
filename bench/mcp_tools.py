"""MCP benchmark: what one call of an MCP tool costs, over stdio and over Streamable HTTP, against the
``noop`` tool of the test server (``tests/mcp/server.py``, written with the SDK).

Three figures per transport, p50 and p99, each pair measured alternately (the same load on both):
- ``sdk``: ``mcp.Client.call_tool`` alone (the SDK and the transport);
- ``extension``: ``McpServer.call`` (the SDK plus our concurrency slot and result conversion);
- ``agent run``: a whole run in which the scripted model calls ``<server>:noop`` and then answers, beside
  the same run calling a local no-op action; the difference is the overhead of the MCP call in a run.

Prints figures; asserts nothing. Run: python bench/mcp_tools.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

# keep bench/ off the import path (bench/core.py is named like the package it measures)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402

from core import ModelRequest, ScriptedModel, action, create_agent  # noqa: E402
from core.testing import updates_of  # noqa: E402
from extensions.mcp import McpSettings, mcp_toolset  # noqa: E402
from extensions.terminal import cli_extension, cli_session  # noqa: E402
from tests.mcp.support import http_server, stdio_config  # noqa: E402

CALLS = 400
RUNS = 300
WARMUP = 20


def _line(label: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"  {label:<28} p50 {statistics.median(ordered) * 1e3:7.3f} ms   p99 {p99 * 1e3:7.3f} ms"


async def _paired(
    a: Callable[[], Awaitable[Any]], b: Callable[[], Awaitable[Any]], count: int
) -> tuple[list[float], list[float]]:
    """Time ``a`` and ``b`` alternately, so both see the same load on a shared machine."""
    for _ in range(WARMUP):
        await a()
        await b()
    times_a, times_b = [], []
    for _ in range(count):
        for fn, times in ((a, times_a), (b, times_b)):
            started = time.perf_counter()
            await fn()
            times.append(time.perf_counter() - started)
    return times_a, times_b


def _model(tool: str) -> ScriptedModel:
    def reply(request: ModelRequest) -> str:
        if "<action_result" in updates_of(request.prompt):
            return '<response><output type="cli:message">done</output></response>'
        return f'<response><action_call name="{tool}">{{}}</action_call></response>'

    return ScriptedModel(reply, chunk_size=64)


def _agent(tool: str, settings: McpSettings | None) -> Any:
    local = action(name="local:noop", description="Does nothing.", handler=lambda args, ctx, agent: "")
    extensions = [cli_extension()]
    if settings is not None:
        extensions.append(mcp_toolset(settings).extension())
    return create_agent(model=_model(tool), extensions=extensions, actions=[local])


def _sender(agent: Any) -> Callable[[], Awaitable[Any]]:
    counter = iter(range(10**9))

    async def one() -> None:
        await agent.send(cli_session, f"s{next(counter) % 20}", {"type": "cli:message", "data": "go"})

    return one


async def _transport(label: str, entry: dict[str, Any], sdk_server: Any) -> None:
    settings = McpSettings(servers=[entry])
    print(f"{label}:")
    async with Client(sdk_server) as client, mcp_toolset(settings) as toolset:
        server = toolset.servers[0]
        sdk, ours = await _paired(lambda: client.call_tool("noop", {}), lambda: server.call("noop", {}), CALLS)
    print(_line("sdk call_tool", sdk))
    print(_line("extension McpServer.call", ours))
    async with _agent("local:noop", None) as plain, _agent(f"{entry['name']}:noop", settings) as tooled:
        local, remote = await _paired(_sender(plain), _sender(tooled), RUNS)
    print(_line("agent run, local no-op", local))
    print(_line(f"agent run, {entry['name']}:noop", remote))
    overhead = statistics.median(remote) - statistics.median(local)
    print(f"  overhead of one MCP call in a run (p50 difference): {overhead * 1e3:.3f} ms")


async def main() -> None:
    from mcp import StdioServerParameters

    stdio = stdio_config("stdio")
    params = StdioServerParameters(command=stdio["command"], args=stdio["args"], env=stdio["env"], cwd=stdio["cwd"])
    print(f"MCP tool call overhead ({CALLS} calls, {RUNS} runs each, after {WARMUP} warm-up)")
    await _transport("stdio", stdio, params)
    async with http_server() as url:
        await _transport("streamable http", {"name": "http", "url": url}, url)


if __name__ == "__main__":
    asyncio.run(main())
