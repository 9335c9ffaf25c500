"""MCP tools with the queue: ``bots gateway`` and two ``bots worker`` processes sharing a real
redis-server; each worker holds its own session to the stdio server, the gateway none; a tool call made
by whichever worker runs the conversation is answered through the fake Telegram Bot API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from extensions.telegram.definitions import MESSAGE
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer
from tests.mcp.support import stdio_config
from tests.ops.test_distributed import DEADLINE, Process, env_for, processes, redis_server, telegram

__all__ = ("processes", "redis_server", "telegram")  # fixtures used here


def reply(text: str) -> Reply:
    return Reply(chunks=(text,))


async def test_every_worker_holds_its_own_sessions(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    call = '<response><action_call name="tools:whoami">{}</action_call></response>'
    said = f'<response><output type="{MESSAGE}">The tool answered.</output></response>'
    async with FakeOpenAIServer(replies=[reply(call), reply(said)], default=reply(said)) as model:
        shared = {
            "REDIS_URL": redis_server.url,
            "TELEGRAM_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.api_url,
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": model.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "fake-model",
            "MCP_SERVERS": json.dumps([stdio_config()]),
        }
        gateway = Process("gateway", env_for(tmp_path, **shared), tmp_path)
        workers = [Process("worker", env_for(tmp_path, **shared), tmp_path) for _ in range(2)]
        processes.extend([gateway, *workers])
        for process in (gateway, *workers):
            await process.start()
        await gateway.wait_for("gateway listening")
        for worker in workers:
            up = await worker.wait_for("MCP server tools")
            assert "is up" in up["message"], up
            await worker.wait_for("worker ready")
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            for worker in workers:
                status, body = await worker.get(http, "/readyz")
                assert status == 200 and json.loads(body)["checks"]["mcp:tools"] == "ok", body
            status, body = await gateway.get(http, "/readyz")
            assert "mcp:tools" not in json.loads(body)["checks"]  # a gateway runs no tools

        telegram.user_says("who answers?")
        [answer] = await telegram.wait_replies(1, timeout=DEADLINE)
        assert answer.text == "The tool answered."
        second = json.dumps(model.requests[1].body)
        assert "tools:whoami" in second and "pid " in second  # the tool's answer reached the model
    async with asyncio.TaskGroup() as tg:
        stopped = [tg.create_task(process.terminate()) for process in (gateway, *workers)]
    assert [task.result() for task in stopped] == [0, 0, 0], [p.lines[-3:] for p in (gateway, *workers)]
