"""A run over several contexts in the fleet (issue 39): a queue worker loads the contexts a conversation uses from
Redis with it and saves them back there, so a user's profile kept in one channel is seen in another."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from core import Agent, ScriptedModel, create_agent, output
from core.fleet import QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from tests.framework.kit import R, msg, section
from tests.framework.test_spec_runs import channel, profile, remember

from .conftest import queue_config, wait_until
from .server import RedisServer

SAY = '<output type="chat:message">ok</output>'


def agent_on(backend: RedisBackend, model: ScriptedModel, sent: list[Any]) -> Agent:
    return create_agent(
        model=model,
        contexts=[channel, profile],
        actions=[remember],
        outputs=[output(type="chat:message", handler=lambda data, ctx, agent: sent.append(data))],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )


@contextlib.asynccontextmanager
async def worker_on(server: RedisServer, model: ScriptedModel, sent: list[Any]) -> AsyncIterator[None]:
    backend = RedisBackend(queue_config(server))
    worker = QueueWorker(agent_on(backend, model, sent), backend)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(worker.run(handle_signals=False))
        try:
            yield
        finally:
            worker.stop()
            await task
    await backend.close()


async def test_the_contexts_a_run_uses_are_loaded_and_saved_through_redis(redis_server: RedisServer) -> None:
    model = ScriptedModel([R('<action_call name="remember_name">{"name": "Ada"}</action_call>'), R(SAY), R(SAY)])
    sent: list[Any] = []
    backend = RedisBackend(queue_config(redis_server))
    gateway = agent_on(backend, ScriptedModel([]), [])
    async with gateway, worker_on(redis_server, model, sent):
        await gateway.send(channel, {"channel": "c1", "user": "ada"}, msg("call me Ada"))
        await wait_until(lambda: len(sent) == 1, what="the answer in c1")
        await gateway.send(channel, {"channel": "c2", "user": "ada"}, msg("who am I?"))
        await wait_until(lambda: len(sent) == 2, what="the answer in c2")
        kept = await gateway.load_state(profile, "ada")  # read from Redis by another agent than the worker
    await backend.close()
    assert kept.memory == {"name": "Ada"}
    assert "name: Ada" in section(model.requests[2].prompt, "contexts")
