"""End to end: two bots of one fleet hand a task across: a person asks the front bot in Telegram (``bots gateway``),
the front bot's worker (``bots worker``) hands the task with ``ask_bot`` to the expert bot, whose worker (another
``bots worker``, under its own ``REDIS_PREFIX`` on the same real redis-server) answers it; the answer comes back and
the front bot says it in the chat. Both bots' model is the fake OpenAI-compatible server, which answers by what
each prompt shows."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from core.testing import updates_of
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

from .deployment import Processes, deployment_env
from .server import RedisServer

_RESULT = re.compile(r"<action_result [^>]*>(.*?)</action_result>", re.S)


class TwoBotsModel(FakeOpenAIServer):
    """The front bot asks the expert; the expert answers tasks; the front bot says the answer."""

    def choose(self, body: dict[str, Any]) -> str:
        prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
        news = updates_of(prompt)
        if "hands you this task" in news:
            return '<response><output type="task:answer">The answer is 42.</output></response>'
        results = _RESULT.findall(news)
        if results:
            answer = json.loads(results[-1].replace("&quot;", '"'))["answer"] if "{" in results[-1] else results[-1]
            return f'<response><output type="telegram:message">The expert says: {answer}</output></response>'
        call = json.dumps({"bot": "expert", "task": "What is six times seven?"})
        return f'<response><action_call name="ask_bot">{call}</action_call></response>'

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.replies = deque([Reply(chunks=(self.choose(body),))])
        return await super()._handle(request)


@pytest.fixture
async def model() -> AsyncIterator[TwoBotsModel]:
    server = TwoBotsModel()
    async with server:
        yield server


@pytest.fixture
async def deployment(
    redis_server: RedisServer, telegram: FakeTelegramServer, model: TwoBotsModel, tmp_path: Path
) -> AsyncIterator[Processes]:
    env = deployment_env(
        redis_server,
        tmp_path,
        telegram=telegram,
        REDIS_LEASE_SECONDS="1",
        TELEGRAM_POLL_TIMEOUT="1",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=model.url,
        LLM_API_KEY="fake-key",
        LLM_MODEL="fake",
        TEAMWORK_ENABLED="true",
        TEAMWORK_TIMEOUT="60",
    )
    async with Processes(tmp_path, env) as procs:
        yield procs


async def test_two_bots_hand_a_task_across_a_gateway_and_two_workers(
    deployment: Processes, telegram: FakeTelegramServer, model: TwoBotsModel, client: Any
) -> None:
    front = dict(deployment.env, REDIS_PREFIX="front:", BOT_NAME="Front", TEAMWORK_PEERS="expert=expert:")
    expert = dict(deployment.env, REDIS_PREFIX="expert:", BOT_NAME="Expert")
    deployment.env = expert
    expert_worker = await deployment.start("worker")
    deployment.env = front
    front_worker = await deployment.start("worker")
    gateway = await deployment.start("gateway")
    asked = telegram.user_says("what is six times seven? ask the expert", user_id=4242)
    [reply] = await telegram.wait_replies(1, timeout=90)
    assert reply.chat_id == 4242 and reply.reply_to == asked["message"]["message_id"]
    assert reply.text == "The expert says: The answer is 42."
    await deployment.stop_all()
    assert len(telegram.sent) == 1
    prompts = ["\n".join(str(m.get("content")) for m in r.body["messages"]) for r in model.requests]
    tasks = [p for p in prompts if "hands you this task" in updates_of(p)]
    assert len(tasks) == 1 and "What is six times seven?" in tasks[0] and 'depth="1"' in tasks[0]
    assert re.search(r"task [0-9a-f]{12} handed to expert \(depth 1\)", deployment.log_of(front_worker))
    assert await client.keys("expert:task:*") == []  # the answer was taken
    assert all(p.returncode == 0 for p in (expert_worker, front_worker, gateway))
