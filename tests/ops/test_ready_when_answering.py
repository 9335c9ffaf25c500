"""``/readyz`` says ready only when the bot can answer (issue 47, operators): while the agent's services start (the
embedded model loading its weights, a platform connecting) it answers 503 with the reason, as the web chat answers
``/chat/send`` 503 then; once every service started and every input listens, 200."""

from __future__ import annotations

import asyncio

import aiohttp

from bots.ops import Ops, serve
from core import service

from .support import make_agent


async def test_readyz_is_not_ready_while_the_model_loads_and_ready_once_the_bot_answers() -> None:
    ops = Ops()
    agent = make_agent()
    loading = asyncio.Event()
    loaded = asyncio.Event()

    async def load_model(_agent: object) -> None:  # as bots.models.open_model: weights loaded, then warmed up
        loading.set()
        await loaded.wait()

    agent.add_service(service(name="model", start=load_model))
    ops.attach(agent)
    async with serve(ops, host="127.0.0.1", port=0) as port, aiohttp.ClientSession() as http:
        starting = asyncio.create_task(agent.start())
        try:
            await asyncio.wait_for(loading.wait(), 10)
            assert agent.running and not agent.started
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                status, body = response.status, await response.json()
            assert status == 503 and body["checks"]["agent"].startswith("starting"), body
            loaded.set()
            await asyncio.wait_for(starting, 10)
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                status, body = response.status, await response.json()
            assert status == 200 and agent.started, body
        finally:
            loaded.set()
            await starting
            await agent.stop()
    assert not agent.started
