"""A tiny bot for the queue tests: a chat context, and a reply output that "posts" into Redis.

The "platform" behaves like Discord with ``enforce_nonce``: a post carrying a nonce it has seen is
not shown twice. Every post attempt is also logged, so tests can see what the ledger prevented.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pydantic
import redis.asyncio
import redis.exceptions

from core import Agent, OutputContext, context, extension, output, service
from core.fleet import ReplyLedger
from core.models.base import ModelRequest
from core.testing import updates_of

__all__ = ("ChatArgs", "answer", "chat", "probe_extension", "replies")

_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)

# one atomic "platform post": show the text unless the nonce was seen before
_POST = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[3]) == 0 then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
"""


class ChatArgs(pydantic.BaseModel):
    chat: str


chat = context(type="probe:chat", schema=ChatArgs, key=lambda a: a.chat, keep_logs=60, max_working_memory=20)


def answer(request: ModelRequest, *, marks: Path | None = None) -> str:
    """Reply with the texts of the new inputs, joined by ``|``."""
    if marks is not None:
        with marks.open("a") as f:
            f.write("run\n")
    found = updates_of(request.prompt)
    texts = _INPUT.findall(found) if found else []
    if not texts:
        return "<response></response>"
    return f'<response><output type="probe:reply">{"|".join(texts)}</output></response>'


async def _retrying(fn: Any, *, budget: float = 20.0) -> Any:
    """The "platform" shares the test's Redis: a Redis restart is a platform outage, retried like one."""
    delay, waited = 0.02, 0.0
    while True:
        try:
            return await fn()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            if waited > budget:
                raise
        await asyncio.sleep(delay)
        waited += delay
        delay = min(delay * 2, 0.5)


def probe_extension(url: str) -> Any:
    """The probe bot's context, its reply output and the Redis client the output posts with."""
    holder: dict[str, Any] = {}

    async def start(agent: Agent) -> None:
        client = redis.asyncio.Redis.from_url(url, decode_responses=True)
        holder["client"] = client
        holder["post"] = client.register_script(_POST)

    async def stop(agent: Agent) -> None:
        await holder["client"].aclose()

    async def deliver(data: str, ctx: OutputContext, agent: Agent) -> dict[str, Any]:
        ledger: ReplyLedger | None = ctx.state.ledger
        nonce = None
        if ledger is not None:
            slot = await ledger.begin("probe:reply", data)
            if slot.done:
                return {"params": {"posted": "earlier"}}
            data, nonce = slot.content, slot.nonce
        nonce = nonce or os.urandom(8).hex()
        client = holder["client"]
        attempt = json.dumps({"chat": ctx.state.key, "pid": os.getpid(), "text": data, "nonce": nonce})
        await _retrying(lambda: client.rpush("probe:attempts", attempt))
        shown = await _retrying(
            lambda: holder["post"](keys=["probe:nonces", f"probe:replies:{ctx.state.key}"], args=[nonce, data, 1])
        )
        if ledger is not None:
            await ledger.posted(slot, nonce)
        return {"params": {"posted": "now" if shown else "nonce"}}

    reply = output(type="probe:reply", handler=deliver, context=chat)
    return extension(
        name="probe", contexts=[chat], outputs=[reply], services=[service(name="probe-redis", start=start, stop=stop)]
    )


async def replies(client: Any, chat_key: str) -> list[str]:
    """The message texts answered in ``chat_key``, in the order they were answered."""
    out: list[str] = []
    for text in await client.lrange(f"probe:replies:{chat_key}", 0, -1):
        out.extend(text.split("|"))
    return out
