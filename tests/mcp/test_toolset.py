"""The servers of one process: allow/deny, per-server concurrency, /readyz, ``bots config``, the roles."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from bots import plugins
from bots.cli import main
from bots.config import check_mcp_servers, load_settings
from bots.ops import Ops
from bots.settings import Settings
from core import InMemoryUsage, ScriptedModel, create_agent
from extensions.mcp import McpSettings, mcp_toolset
from tests.mcp.support import stdio_config

GROUPS = tuple(f"{name.upper()}_" for name in Settings.model_fields)


def settings(*servers: dict[str, Any], **options: Any) -> McpSettings:
    return McpSettings(servers=json.dumps(list(servers)), **options)


def names(actions: Sequence[Any]) -> list[str]:
    return sorted(a.name for a in actions)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for var in list(os.environ):
        if var.upper().startswith(GROUPS):
            monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)


async def test_allow_and_deny_lists_choose_the_tools() -> None:
    config = settings(
        stdio_config("a", allow=["echo", "add", "fail"], deny=["fail"]),
        stdio_config("b", deny=["crash", "picture"]),
    )
    async with mcp_toolset(config) as toolset:
        a, b = toolset.servers
        assert names(a.actions) == ["a:add", "a:echo"]
        assert "b:crash" not in names(b.actions) and "b:whoami" in names(b.actions)
        assert sorted(b.hidden_tools) == ["crash", "picture"]
        agent_view = names(toolset.actions(None))  # type: ignore[arg-type]
        assert agent_view == sorted([*names(a.actions), *names(b.actions)])


async def test_a_server_runs_at_most_its_concurrency_of_calls() -> None:
    async with mcp_toolset(settings(stdio_config(concurrency=1))) as toolset:
        tools = toolset.server("tools")
        first = asyncio.create_task(tools.call("slow", {"seconds": 0.5}))
        second = asyncio.create_task(tools.call("echo", {"text": "queued"}))
        async with asyncio.timeout(10):
            while not tools._slots.locked():
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        assert not second.done()  # waits for the slot the slow call holds
        assert await first == {"result": "woke up"}
        assert await second == {"result": "echo: queued"}


async def test_readyz_reports_a_down_server_and_stays_ready_unless_it_is_required() -> None:
    ops = Ops(registry=CollectorRegistry())
    config = settings(stdio_config(), stdio_config("gone", "--exit"), connect_timeout=10)
    agent = create_agent(model=ScriptedModel(["<response></response>"]), extensions=[mcp_toolset(config).extension()])
    ops.attach(agent, check_model=False)
    async with agent:
        ready, results = await ops.readiness()
        by_name = {r.name: r for r in results}
        assert ready
        assert by_name["mcp:tools"].detail == "ok"
        assert by_name["mcp:gone"].ok and by_name["mcp:gone"].detail.startswith("degraded: MCP server 'gone' is down")
    required = settings(stdio_config("gone", "--exit", required=True), connect_timeout=10)
    agent = create_agent(model=ScriptedModel(["<response></response>"]), extensions=[mcp_toolset(required).extension()])
    ops = Ops(registry=CollectorRegistry())
    ops.attach(agent, check_model=False)
    async with agent:
        ready, results = await ops.readiness()
        assert not ready
        assert "MCP server 'gone' is down" in {r.name: r for r in results}["mcp:gone"].detail
    assert "mcp:gone" not in agent.readiness


async def test_bots_config_says_which_servers_answered_initialize(clean_env: None) -> None:
    servers = [stdio_config(deny=["crash"]), stdio_config("gone", "--exit", required=True)]
    lines, problems = await check_mcp_servers(Settings(mcp=settings(*servers, connect_timeout=10)))
    assert lines[0].startswith("ok    tools (stdio: ")
    assert "answered initialize (test-tools): " in lines[0] and " tools, 1 hidden by allow/deny" in lines[0]
    assert lines[1].startswith("DOWN  gone (stdio: ") and "did not answer" in lines[1]
    [problem] = problems
    assert problem.startswith("MCP_SERVERS: required server 'gone' did not answer: ")
    assert problem.endswith("; fix its command or url, or set required to false")


def test_bots_config_lists_the_servers_with_secrets_masked(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stdio_config(env={"PYTHONPATH": stdio_config()["env"]["PYTHONPATH"], "API_TOKEN": "tok-very-secret"})
    monkeypatch.setenv("MCP_SERVERS", json.dumps([server]))
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "MCP servers:\n  ok    tools (stdio: " in out and "API_TOKEN=********" in out
    assert "tok-very-secret" not in out


def test_gateways_run_no_tools_and_workers_do(clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_SERVERS", json.dumps([stdio_config()]))
    loaded = load_settings()

    def brought(*, tools: bool) -> list[str]:
        deployment = plugins.Deployment(settings=loaded, usage=InMemoryUsage(), tools=tools)
        found = [p.extension() for p in plugins.resolve([plugins.mcp()], deployment)]
        return [ext.name for ext in found if ext is not None]

    assert "mcp" in brought(tools=True)  # one process, a queue worker
    assert "mcp" not in brought(tools=False)  # a gateway


async def test_the_readme_demo_server_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.mcp.test_settings import _readme_example

    demo = json.loads(_readme_example())["mcpServers"]["demo"]
    demo = {**stdio_config("demo"), "args": demo["args"]}  # this interpreter instead of .venv/bin/python
    async with mcp_toolset(settings(demo)) as toolset:
        assert await toolset.server("demo").call("add", {"a": 20, "b": 22}) == {"sum": 42}
