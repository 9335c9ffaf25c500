"""/healthz, /readyz and /metrics served by ``bots.ops.serve`` on 127.0.0.1, read by a real HTTP client."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from bots import metrics
from bots.ops import Ops, model_check, serve
from core import ScriptedModel
from core.errors import ConfigError, cannot_listen
from extensions.terminal import cli_session
from tests.ports import free_port

from .support import REPLY, CountingModel, make_agent, sample


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def get(http: aiohttp.ClientSession, port: int, path: str) -> tuple[int, str, str]:
    async with http.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


async def get_json(http: aiohttp.ClientSession, port: int, path: str) -> tuple[int, Any]:
    async with http.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.json()


async def test_healthz_answers_while_the_process_lives(http: aiohttp.ClientSession) -> None:
    ops = Ops()
    async with serve(ops, host="127.0.0.1", port=0) as port:
        status, body = await get_json(http, port, "/healthz")
        assert status == 200
        assert body["status"] == "ok"
        ops.stopping()  # still alive while stopping: a liveness probe must not kill a draining process
        status, body = await get_json(http, port, "/healthz")
        assert status == 200


async def test_readyz_follows_the_agent_from_start_to_stop(http: aiohttp.ClientSession) -> None:
    ops = Ops()
    agent = make_agent()
    async with serve(ops, host="127.0.0.1", port=0) as port:
        status, body = await get_json(http, port, "/readyz")
        assert (status, body) == (503, {"ready": False, "checks": {"process": "starting"}})
        ops.attach(agent)
        status, body = await get_json(http, port, "/readyz")
        assert status == 503
        assert body["ready"] is False
        assert "not running" in body["checks"]["agent"]
        async with agent:
            status, body = await get_json(http, port, "/readyz")
            assert status == 200, body
            assert body == {"ready": True, "checks": {"agent": "ok", "model": "ok"}}
            ops.stopping()
            status, body = await get_json(http, port, "/readyz")
            assert status == 503
            assert body["checks"] == {"process": "stopping"}


async def test_readyz_runs_agent_and_process_checks_and_names_each_failure(http: aiohttp.ClientSession) -> None:
    ops = Ops(check_timeout=0.2)
    agent = make_agent()
    ops.attach(agent)
    connected = asyncio.Event()
    never = asyncio.Event()

    async def redis_ping() -> bool:
        return True

    async def hangs() -> None:
        await never.wait()

    def broken() -> None:
        raise ConnectionError("refused")

    agent.readiness["discord"] = lambda: connected.is_set() or "gateway not connected"
    ops.add_check("redis", redis_ping)
    ops.add_check("slow", hangs)
    ops.add_check("broken", broken)
    ops.add_check("plain_false", lambda: False)
    async with agent, serve(ops, host="127.0.0.1", port=0) as port:
        status, body = await get_json(http, port, "/readyz")
        assert status == 503
        checks = body["checks"]
        assert checks["agent"] == "ok"
        assert checks["redis"] == "ok"
        assert checks["discord"] == "gateway not connected"
        assert checks["slow"] == "no answer within 0.2s"
        assert checks["broken"] == "ConnectionError: refused"
        assert checks["plain_false"] == "not ready"
        for name in ("slow", "broken", "plain_false"):
            ops.remove_check(name)
        connected.set()
        status, body = await get_json(http, port, "/readyz")
        assert status == 200, body
        assert set(body["checks"]) == {"agent", "model", "discord", "redis"}


async def test_metrics_count_a_real_run(http: aiohttp.ClientSession) -> None:
    ops = Ops()
    model = CountingModel([REPLY], usage=(100, 7))
    agent = make_agent(model)
    ops.attach(agent)
    answered = sample("bots_messages_answered_total", {"platform": "cli"})
    runs = sample("bots_run_seconds_count", {"platform": "cli"})
    replies = sample("bots_reply_seconds_count", {"platform": "cli"})
    calls = sample("bots_model_seconds_count", {"model": "scripted"})
    tokens_in = sample("bots_model_tokens_total", {"direction": "input"})
    tokens_out = sample("bots_model_tokens_total", {"direction": "output"})
    async with agent, serve(ops, host="127.0.0.1", port=0) as port:
        await agent.send(cli_session, "ops", {"type": "cli:message", "data": "hello"})
        status, content_type, text = await get(http, port, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "bots_messages_received",
        "bots_messages_ignored",
        "bots_messages_answered",
        "bots_messages_failed",
        "bots_queue_depth",
        "bots_run_seconds",
        "bots_model_seconds",
        "bots_reply_seconds",
        "bots_model_tokens",
        "bots_platform_rate_limited",
        "bots_worker_leases",
        "bots_worker_leases_held",
    ):
        assert name in families, f"{name} missing from /metrics"
    assert sample("bots_messages_answered_total", {"platform": "cli"}) == answered + 1
    assert sample("bots_run_seconds_count", {"platform": "cli"}) == runs + 1
    assert sample("bots_reply_seconds_count", {"platform": "cli"}) == replies + 1
    assert sample("bots_model_seconds_count", {"model": "scripted"}) == calls + 1
    assert sample("bots_model_tokens_total", {"direction": "input"}) == tokens_in + 100
    assert sample("bots_model_tokens_total", {"direction": "output"}) == tokens_out + 7


async def test_a_failed_run_and_a_silent_run_are_counted_apart() -> None:
    ops = Ops()
    silent = "<response><reasoning>nothing to say</reasoning></response>"
    agent = make_agent(ScriptedModel([ConnectionError("model down"), silent]))
    ops.attach(agent)
    failed = sample("bots_messages_failed_total", {"platform": "cli"})
    quiet = sample("bots_messages_ignored_total", {"platform": "cli", "reason": "no_reply"})
    answered = sample("bots_messages_answered_total", {"platform": "cli"})
    async with agent:
        await agent.send(cli_session, "fail", {"type": "cli:message", "data": "one"})
        await agent.send(cli_session, "quiet", {"type": "cli:message", "data": "two"})
    assert sample("bots_messages_failed_total", {"platform": "cli"}) == failed + 1
    assert sample("bots_messages_ignored_total", {"platform": "cli", "reason": "no_reply"}) == quiet + 1
    assert sample("bots_messages_answered_total", {"platform": "cli"}) == answered


async def test_extensions_report_through_agent_observe() -> None:
    ops = Ops()
    agent = make_agent()
    ops.attach(agent)
    received = sample("bots_messages_received_total", {"platform": "discord"})
    ignored = sample("bots_messages_ignored_total", {"platform": "discord", "reason": "not_mentioned"})
    limited = sample("bots_platform_rate_limited_total", {"platform": "telegram"})
    claimed = sample("bots_worker_leases_total", {"event": "claimed"})
    held = sample("bots_worker_leases_held")
    shown = sample("bots_attachments_total", {"kind": "image", "outcome": "shown"})
    fetched = sample("bots_attachment_bytes_total")
    agent.observe("attachment:image:shown", "telegram:chat:1")
    agent.observe("attachment_bytes", "telegram:chat:1", 1500)
    agent.observe("message_received", "discord:channel:1")
    agent.observe("message_received", "discord:channel:2")
    agent.observe("message_ignored:not_mentioned", "discord:channel:1")
    agent.observe("rate_limited", "telegram", 3.0)
    agent.observe("queue_depth", "inbox", 17)
    agent.observe("lease_claimed", "discord:channel:1")
    agent.observe("lease_claimed", "discord:channel:2")
    agent.observe("lease_released", "discord:channel:1")
    agent.observe("no_such_kind", "x")  # dropped, never raises
    assert sample("bots_messages_received_total", {"platform": "discord"}) == received + 2
    assert sample("bots_messages_ignored_total", {"platform": "discord", "reason": "not_mentioned"}) == ignored + 1
    assert sample("bots_platform_rate_limited_total", {"platform": "telegram"}) == limited + 1
    assert sample("bots_queue_depth", {"queue": "inbox"}) == 17
    assert sample("bots_worker_leases_total", {"event": "claimed"}) == claimed + 2
    assert sample("bots_worker_leases_held") == held + 1
    assert sample("bots_attachments_total", {"kind": "image", "outcome": "shown"}) == shown + 1
    assert sample("bots_attachment_bytes_total") == fetched + 1500
    metrics.lease("lost")
    assert sample("bots_worker_leases_held") == held
    with pytest.raises(ValueError, match="claimed, renewed, lost, released"):
        metrics.lease("stolen")


async def test_samplers_refresh_gauges_before_metrics_render(http: aiohttp.ClientSession) -> None:
    ops = Ops()
    depth = iter([3, 9])

    async def sample_depth() -> None:
        metrics.set_queue_depth("sampled", next(depth))

    async def broken() -> None:
        raise ConnectionError("redis down")

    ops.add_sampler("depth", sample_depth)
    ops.add_sampler("broken", broken)  # logged, the rest still renders
    async with serve(ops, host="127.0.0.1", port=0) as port:
        _, _, first = await get(http, port, "/metrics")
        _, _, second = await get(http, port, "/metrics")
    assert 'bots_queue_depth{queue="sampled"} 3.0' in first
    assert 'bots_queue_depth{queue="sampled"} 9.0' in second


async def test_a_port_in_use_is_a_config_error_naming_http_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"HTTP_PORT={port}: cannot listen"):
            async with serve(Ops(), host="127.0.0.1", port=port):
                pass


async def test_an_address_this_machine_does_not_have_is_a_config_error_naming_http_host() -> None:
    with pytest.raises(ConfigError, match=r"HTTP_HOST=192.0.2.1: cannot listen on this address"):  # TEST-NET-1
        async with serve(Ops(), host="192.0.2.1", port=0):
            pass
    unknown = socket.gaierror(socket.EAI_NONAME, "Name or service not known")  # tests resolve no names
    error = cannot_listen(unknown, host_var="WEB_HOST", host="web.invalid", port_var="WEB_PORT", port=8765)
    assert str(error).startswith("WEB_HOST=web.invalid: cannot listen on this address (Name or service not known)")


def test_blank_console_and_web_hosts_are_refused_and_a_blank_console_secret_is_none() -> None:
    """An empty ``*_HOST`` would make aiohttp listen on every interface: it is refused, saying what to give."""
    import pydantic

    from bots.console.settings import ConsoleSettings
    from extensions.web.settings import WebSettings

    assert ConsoleSettings.model_validate({"secret": " " * 20}).model_dump()["secret"] is None
    for model in (ConsoleSettings, WebSettings):
        with pytest.raises(pydantic.ValidationError, match=r"give an address: 127\.0\.0\.1"):
            model.model_validate({"host": " "})


async def _model_server(status: int) -> tuple[web.AppRunner, int, list[str]]:
    seen: list[str] = []

    async def models(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"data": []}, status=status)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1], seen


class _HttpModel:
    name = "http"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


@pytest.mark.parametrize(("status", "ready"), [(200, True), (401, True), (503, False)])
async def test_model_check_asks_the_model_server_without_the_key(status: int, ready: bool) -> None:
    runner, port, seen = await _model_server(status)
    try:
        check = model_check(_HttpModel(f"http://127.0.0.1:{port}/v1"))
        outcome = await check()
        assert (outcome is True) is ready, outcome
        if not ready:
            assert outcome == f"the model server answered HTTP {status}"
        await check()  # cached: probes do not hammer the provider
        assert seen == [""]
    finally:
        await runner.cleanup()


async def test_model_check_names_llm_base_url_when_nothing_answers() -> None:
    port = free_port()  # nobody listens there
    outcome = await model_check(_HttpModel(f"http://127.0.0.1:{port}/v1"))()
    assert isinstance(outcome, str)
    assert "cannot reach the model server" in outcome
    assert "LLM_BASE_URL" in outcome


async def test_model_check_prefers_the_models_own_ready_and_knows_the_local_model(tmp_path: Any) -> None:
    class Own:
        name = "own"

        async def ready(self) -> str:
            return "warming up"

    assert await model_check(Own())() == "warming up"

    class Local:
        name = "local"
        loaded = False

        def __init__(self, path: Any) -> None:
            self.model_path = path

    weights = tmp_path / "m.gguf"
    assert "LLM_MODEL_PATH" in model_check(Local(weights))()
    weights.write_bytes(b"GGUF")
    assert model_check(Local(weights))() is True
    assert model_check(ScriptedModel(["x"]))() is True
