"""The fleet on PostgreSQL: documents added with ``bots knowledge add`` into the database at ``DATABASE_URL``, then
``bots gateway`` and ``bots worker`` (real processes, a real redis-server, a real PostgreSQL, the fake Bot API and
the fake OpenAI-compatible model server): the worker's model calls ``search_knowledge``, reads the passage found in
PostgreSQL with its citation, and the answer citing it reaches the Telegram chat."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.cli import main
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.deployment import Processes, deployment_env
from tests.fleet.server import RedisServer

from .support import CITE, QUESTION, write_corpus

CALL = f'<response><action_call name="search_knowledge">{{"query": "{QUESTION}"}}</action_call></response>'
SAID = f"A refund takes five working days. (Source: {CITE})"
ANSWER = f'<response><output type="telegram:message">{SAID}</output></response>'


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(replies=[Reply(chunks=(CALL,)), Reply(chunks=(ANSWER,))]) as server:
        yield server


async def test_a_worker_answers_from_the_documents_in_postgres_with_the_citation(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    llm: FakeOpenAIServer,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", database_url)
    folder = write_corpus(tmp_path / "docs")
    assert await asyncio.to_thread(main, ["knowledge", "add", str(folder), "--collection", "acme"]) == 0

    env = deployment_env(
        redis_server,
        tmp_path,
        telegram=telegram,
        DATABASE_URL=database_url,
        KNOWLEDGE_ENABLED="true",
        TELEGRAM_POLL_TIMEOUT="1",
        TELEGRAM_STREAM_REPLIES="false",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=llm.url,
        LLM_MODEL="fake-model",
        LLM_RETRIES="0",
    )
    async with Processes(tmp_path, env) as procs:
        await procs.start("gateway")
        await procs.start("worker")
        telegram.user_says(QUESTION, user_id=4242)
        [reply] = await telegram.wait_replies(1, timeout=60)
    assert reply.text == SAID
    second = json.dumps(llm.requests[1].body, ensure_ascii=False)
    assert "five working days of the return being received" in second and CITE in second
