"""The bot's answers in Redis, shared by every process of a fleet (``extensions.chat.answer_book.AnswerBook``): which
conversation each platform message the bot posted as an answer belongs to, so that a reaction on it counts as
feedback (``core.usage.feedback``) whichever process receives the reaction. A worker posts the answer; on
Telegram the gateway receives the reaction, and Telegram's reaction update does not say whose the message is.

Keys (prefix ``bots:``)::

    bots:answer:<platform message key>    string    the conversation's context id; expires ``ANSWER_TTL``

The key is the platform's (``telegram:<chat id>:<message id>``). Each answer is one SET (pipelined for a long answer
split in several messages); a Redis failure is a ``DispatchError``, tried once: a reaction is never worth a wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .backend import RedisBackend

__all__ = ("ANSWER_TTL", "RedisAnswerBook", "RedisEphemeral")

ANSWER_TTL = 7 * 86_400
"""Seconds an answer is remembered: a reaction on an older answer is not counted."""


class RedisAnswerBook:
    """The answers on the process's ``RedisBackend``."""

    def __init__(self, backend: RedisBackend, *, ttl: int = ANSWER_TTL) -> None:
        self.backend = backend
        self.ttl = ttl

    def _key(self, message: str) -> str:
        return f"{self.backend.keys.prefix}answer:{message}"

    async def add(self, messages: Sequence[str], context_id: str) -> None:
        """Remember that the platform messages ``messages`` answer in ``context_id``."""
        if not messages:
            return

        async def write() -> None:
            async with self.backend.client.pipeline(transaction=False) as pipe:
                for message in messages:
                    pipe.set(self._key(message), context_id, ex=self.ttl)
                await pipe.execute()

        await self.backend.run(write, what="noting an answer", retry_for=0)

    async def get(self, message: str) -> str | None:
        """The conversation that ``message`` answers in, or None (not an answer, or older than the TTL)."""
        client, key = self.backend.client, self._key(message)
        found = await self.backend.run(lambda: client.get(key), what="finding an answer", retry_for=0)
        if found is None:
            return None
        return found.decode() if isinstance(found, bytes) else str(found)


class RedisEphemeral:
    """Conversations kept by nothing (a Telegram guest request, one conversation per request): once answered, what
    the queue keeps of one after its batch (the ``meta`` hash: its fence, its batch counter and the dedupe keys of
    its inputs, never their text) expires after ``ttl`` seconds instead of staying for good."""

    def __init__(self, backend: RedisBackend, *, ttl: int = 3600) -> None:
        self.backend = backend
        self.ttl = ttl
        """Seconds the meta stays: longer than the dedupe window (``REDIS_DEDUPE_TTL``), so a platform's update
        delivered again is still recognised."""

    async def expire(self, cid: str) -> None:
        """Let the queue's keys of ``cid`` expire (a Redis failure is a ``DispatchError``, tried once)."""
        client, keys = self.backend.client, self.backend.keys.context(cid)
        ttl = max(self.ttl, int(self.backend.config.dedupe_ttl) + 1)

        async def expire() -> None:
            async with client.pipeline(transaction=False) as pipe:
                for key in (keys.meta, keys.stop):
                    pipe.expire(key, ttl)
                await pipe.execute()

        await self.backend.run(expire, what=f"letting the keys of {cid} expire", retry_for=0)
