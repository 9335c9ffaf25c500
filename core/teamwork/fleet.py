"""Tasks across a fleet: handed to another bot's workers through its Redis inboxes, answered through Redis.

Keys (the prefix of the bot that takes the task, ``bots:`` by default)::

    bots:task:<task id>:answer    list   the answer (one entry, JSON), kept ``ANSWER_TTL`` seconds

The bot that asks stores the task's input in the other bot's queue (its ``REDIS_PREFIX``, on the same Redis) with
the dedupe key ``task:<id>``, then waits for the answer with ``BLPOP``.
"""

from __future__ import annotations

from typing import Any

from ..entries import InputRef
from ..fleet.backend import RedisBackend
from ..fleet.dispatcher import RedisDispatcher
from .model import Answer, TaskArgs, task_context

__all__ = ("ANSWER_TTL", "FleetPeer", "RedisAnswerBox")

ANSWER_TTL = 600
"""Seconds an answer waits in Redis for the bot that asked."""


class RedisAnswerBox:
    """An ``AnswerBox`` in Redis, under ``backend``'s prefix."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend

    def _key(self, task_id: str) -> str:
        return self.backend.keys.task_answer(task_id)

    async def put(self, task_id: str, answer: Answer) -> None:
        key = self._key(task_id)

        async def write() -> None:
            async with self.backend.client.pipeline(transaction=True) as pipe:
                pipe.rpush(key, answer.dump())
                pipe.expire(key, ANSWER_TTL)
                await pipe.execute()

        await self.backend.run(write, what="storing a task's answer")

    async def wait(self, task_id: str, timeout: float) -> Answer | None:
        key = self._key(task_id)
        found: Any = await self.backend.run(
            lambda: self.backend.client.blpop([key], timeout=max(1, int(timeout + 0.999))),
            what="waiting for a task's answer",
            extra=timeout + 1,
        )
        if not found:
            return None
        raw = found[1]
        return Answer.load(raw.decode() if isinstance(raw, bytes) else raw)


class FleetPeer:
    """Another bot of the fleet: its workers take tasks from its inboxes (``backend``: its queue's Redis and
    prefix)."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        self.box = RedisAnswerBox(backend)
        self._dispatcher = RedisDispatcher(backend)

    async def hand(self, task_id: str, ref: InputRef) -> None:
        """Store the task in the other bot's inbox (``DispatchError`` when Redis cannot take it)."""
        await self._dispatcher.submit(task_context, TaskArgs(id=task_id), ref, dedupe_key=f"task:{task_id}")

    async def close(self) -> None:
        """Close the connection."""
        await self.backend.close()
