"""A message its author deleted leaves what the fleet keeps (issue 35, ``core.deleted``), a gateway in this process and
a queue worker on a real redis-server: the gateway stores the deletion in the conversation's inbox, the worker that
runs the conversation takes the message out of its working memory, and the model never reads it again; with the
policy steer, a deletion sent while the message's batch runs joins that batch and takes it out of the run."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from core import ScriptedModel

from .conftest import wait_until
from .probe import ChatArgs, answer, chat
from .server import RedisServer
from .test_busy import gateway_with, posts
from .test_worker import gated, running_worker


async def said(gateway: Any, chat_key: str, text: str, message_id: str) -> None:
    await gateway.send(
        chat, ChatArgs(chat=chat_key), {"type": "probe:message", "data": text, "params": {"message_id": message_id}}
    )


async def test_a_deleted_message_leaves_the_memory_the_worker_keeps(redis_server: RedisServer, client: Any) -> None:
    model = ScriptedModel(answer)
    async with gateway_with(redis_server) as gateway, running_worker(redis_server, model=model):
        await said(gateway, "d1", "my locker code is 4711", "m1")
        await wait_until(lambda: _count(client, "d1", 1), what="the answer")
        assert await gateway.forget_messages(chat, ChatArgs(chat="d1"), ["m1"]) == 0  # stored for the worker
        await said(gateway, "d1", "what do you know?", "m2")
        await wait_until(lambda: _count(client, "d1", 2), what="the next answer")
    assert _shown(model.requests[0].prompt)
    assert not _shown(model.requests[-1].prompt) and "what do you know?" in model.requests[-1].prompt


async def test_a_deletion_while_the_batch_runs_takes_the_message_out_of_the_run(
    redis_server: RedisServer, client: Any
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    model = gated(started, release)
    async with (
        gateway_with(redis_server, busy="steer") as gateway,
        running_worker(redis_server, model=model, busy="steer"),
    ):
        await said(gateway, "d2", "my locker code is 4711", "m1")
        await asyncio.wait_for(started.wait(), 30)
        await gateway.forget_messages(chat, ChatArgs(chat="d2"), ["m1"])
        await wait_until(lambda: _inbox_empty(client, "d2"), what="the deletion joined to the running batch")
        release.set()
        await wait_until(lambda: _count(client, "d2", 1), what="the answer")
        await said(gateway, "d2", "what do you know?", "m2")
        await wait_until(lambda: _count(client, "d2", 2), what="the next answer")
    requests = model.requests  # type: ignore[attr-defined]
    assert not _shown(requests[-1].prompt) and "what do you know?" in requests[-1].prompt


def _shown(prompt: str) -> bool:
    """The deleted message is among the inputs the prompt shows (the probe's answer, which repeats it, may stay)."""
    return re.search(r"<input [^>]*>[^<]*4711", prompt) is not None


async def _count(client: Any, chat_key: str, count: int) -> bool:
    return len(await posts(client, chat_key)) >= count


async def _inbox_empty(client: Any, chat_key: str) -> bool:
    return await client.llen(f"bots:{{probe:chat:{chat_key}}}:inbox") == 0
