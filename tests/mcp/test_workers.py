"""MCP tools with the queue: ``bots gateway`` and two ``bots worker`` processes sharing a real
redis-server; each worker holds its own session to the stdio server, the gateway none; a tool call made
by whichever worker runs the conversation is answered through the fake Telegram Bot API."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from extensions.telegram.definitions import MESSAGE
from tests.bots_fleet import DEADLINE, Process, model_settings, start_fleet, stop_all
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer
from tests.mcp.support import stdio_config


def reply(text: str) -> Reply:
    return Reply(chunks=(text,))


async def test_every_worker_holds_its_own_sessions(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    call = '<response><action_call name="tools:whoami">{}</action_call></response>'
    said = f'<response><output type="{MESSAGE}">The tool answered.</output></response>'
    async with FakeOpenAIServer(replies=[reply(call), reply(said)], default=reply(said)) as model:
        shared = model_settings(
            redis_server,
            telegram,
            model.url,
            MCP_SERVERS=json.dumps([stdio_config()]),
            ACTIONS_POLICY="mcp:*=member",  # MCP tools are for admins by default; this user is a member
        )
        gateway, workers = await start_fleet(tmp_path, shared, processes, workers=2)
        for worker in workers:
            up = await worker.wait_for("MCP server tools")
            assert "is up" in up["message"], up
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
    await stop_all(gateway, *workers)
