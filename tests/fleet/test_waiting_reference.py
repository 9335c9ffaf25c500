"""A reference waiting for the user's data in the fleet (issue 39): with ``BOT_BUSY=steer`` the data message the
gateway stores while the conversation's batch runs joins that run on the worker, and the call waiting for it goes on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from core import ActionResult, Agent, ScriptedModel, create_agent, data_input, output
from core.fleet import QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from tests.framework.kit import R, chat, msg
from tests.framework.test_spec_runs import greet_action

from .conftest import queue_config, wait_until
from .server import RedisServer


def agent_on(backend: RedisBackend, model: ScriptedModel, sent: list[Any]) -> Agent:
    return create_agent(
        model=model,
        contexts=[chat],
        actions=[greet_action(wait_for_input=30)],
        inputs=[data_input()],
        outputs=[output(type="chat:message", handler=lambda data, ctx, agent: sent.append(data))],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )


@contextlib.asynccontextmanager
async def worker_on(server: RedisServer, model: ScriptedModel, sent: list[Any]) -> AsyncIterator[None]:
    backend = RedisBackend(queue_config(server, busy="steer"))
    worker = QueueWorker(agent_on(backend, model, sent), backend)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(worker.run(handle_signals=False))
        try:
            yield
        finally:
            worker.stop()
            await task
    await backend.close()


async def test_a_queued_data_message_reaches_the_call_waiting_for_it(redis_server: RedisServer) -> None:
    asked = asyncio.Event()

    def reply(request: Any) -> str:
        if asked.is_set():
            return R('<output type="chat:message">done</output>')
        asked.set()
        return R('<action_call name="greet">{"name": "†data.user.name"}</action_call>')

    sent: list[Any] = []
    backend = RedisBackend(queue_config(redis_server, busy="steer"))
    gateway = agent_on(backend, ScriptedModel([]), [])
    async with gateway, worker_on(redis_server, ScriptedModel(reply), sent):
        await gateway.send(chat, "u", msg("greet me"))
        await asyncio.wait_for(asked.wait(), 30)  # the call is made: nothing has written the name yet
        await gateway.send(chat, "u", {"type": "data", "data": {"user": {"name": "Ada"}}})
        await wait_until(lambda: sent == ["done"], what="the answer after the greeting")
        kept = await gateway.load_state(chat, "u")
    await backend.close()
    greeted = [(e.data, e.error) for e in kept.working_memory.logs if isinstance(e, ActionResult)]
    assert greeted == [("Hello Ada", None)]
