"""Where facts live: the ``FactStore`` protocol, and the store of one process kept in its memory store (in memory,
SQLite: ``bots run``). The fleet's store is ``core.fleet.fact_store``.

A store answers by conversation (what a run may show) and by owner (what ``/memory`` lists, across every
conversation); each change is atomic, made where it is asked (a command on a gateway, a deletion event), never
held back with a run's memory: a run never writes facts back over a deletion made meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Protocol, runtime_checkable

from ..memory import MemoryStore
from ..recent import Recent
from .model import Fact

__all__ = ("FactStore", "MemoryFactStore")

CONVERSATION_KEY = "facts:"
"""The memory-store key of a conversation's facts is this and its context id."""
OWNER_KEY = "facts-of:"
"""The memory-store key of the conversations where a person has facts is this and their id."""
KEPT_CONVERSATIONS = 1024
"""Conversations whose facts ``MemoryFactStore`` keeps loaded, at most (the most recently used)."""


@runtime_checkable
class FactStore(Protocol):
    """Facts by conversation and by owner."""

    async def add(self, fact: Fact, *, limit: int) -> Fact:
        """Keep ``fact``, or return the one already kept the same (``Fact.same_as``: a retried run adds nothing);
        its conversation keeps its ``limit`` newest facts."""
        ...

    async def of_conversation(self, conversation: str) -> list[Fact]:
        """The facts of a conversation (context id), oldest first."""
        ...

    async def of_owner(self, owner: str) -> list[Fact]:
        """The facts a person (platform-qualified id) owns, in every conversation, oldest first."""
        ...

    async def delete(self, conversation: str, ids: Collection[str]) -> list[Fact]:
        """Remove the facts ``ids`` of a conversation; those removed."""
        ...

    async def drop_message(self, conversation: str, message: str) -> list[Fact]:
        """Remove the facts that came from the message ``message`` of a conversation (its author deleted it);
        those removed."""
        ...

    async def forget(self, conversation: str) -> None:
        """Remove every fact of a conversation (``/forget``, ``/reset``)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def oldest_first(facts: Collection[Fact]) -> list[Fact]:
    """``facts`` by when they were kept, then id."""
    return sorted(facts, key=lambda f: (f.at, f.id))


class MemoryFactStore:
    """The facts of one process, kept in its memory store: a conversation's under ``facts:<context id>``, the
    conversations where a person has facts under ``facts-of:<person>``. Every change is read and written under one
    lock. One process owns the memory store (``bots run``): in a fleet, use ``core.fleet.RedisFactStore``.

    Since every change goes through it, it keeps the facts of the conversations it read or wrote last
    (``KEPT_CONVERSATIONS``): a run reads its conversation's facts before each model call, and without them kept
    that was a thread's round trip with SQLite before every answer (``bench/latency.py``, issue 51)."""

    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory
        """Where the facts are written."""
        self._lock = asyncio.Lock()
        self._kept: Recent[str, tuple[Fact, ...]] = Recent(KEPT_CONVERSATIONS)

    async def _read(self, conversation: str) -> list[Fact]:
        kept = self._kept.get(conversation)
        if kept is None:
            raw = await self.memory.get(CONVERSATION_KEY + conversation)
            kept = tuple(Fact.model_validate(item) for item in raw or [])
        self._kept.keep(conversation, kept)
        return list(kept)  # (the facts are frozen: the list is the caller's)

    async def _write(self, conversation: str, facts: list[Fact], *, owners: set[str]) -> None:
        """Write a conversation's ``facts``; the index of each of ``owners`` (whose facts there changed) follows."""
        self._kept.pop(conversation, None)  # (a write that fails half-way: read again)
        if facts:
            await self.memory.set(CONVERSATION_KEY + conversation, [f.model_dump(mode="json") for f in facts])
        else:
            await self.memory.delete(CONVERSATION_KEY + conversation)
        self._kept.keep(conversation, tuple(facts))
        still = {f.owner for f in facts}
        for owner in owners:
            places: list[str] = list(await self.memory.get(OWNER_KEY + owner) or [])
            wanted = owner in still
            if wanted == (conversation in places):
                continue
            places = [*places, conversation] if wanted else [p for p in places if p != conversation]
            if places:
                await self.memory.set(OWNER_KEY + owner, places)
            else:
                await self.memory.delete(OWNER_KEY + owner)

    async def add(self, fact: Fact, *, limit: int) -> Fact:
        """Keep ``fact`` (see ``FactStore.add``)."""
        async with self._lock:
            facts = await self._read(fact.conversation)
            kept = next((f for f in facts if f.same_as(fact)), None)
            if kept is not None:
                return kept
            facts = oldest_first([*facts, fact])
            dropped, facts = facts[: max(0, len(facts) - limit)], facts[max(0, len(facts) - limit) :]
            owners = {f.owner for f in (fact, *dropped) if f.owner is not None}
            await self._write(fact.conversation, facts, owners=owners)
            return fact

    async def of_conversation(self, conversation: str) -> list[Fact]:
        """The facts of a conversation, oldest first."""
        async with self._lock:
            return oldest_first(await self._read(conversation))

    async def of_owner(self, owner: str) -> list[Fact]:
        """The facts ``owner`` owns, in every conversation, oldest first."""
        async with self._lock:
            found: list[Fact] = []
            for conversation in await self.memory.get(OWNER_KEY + owner) or []:
                found.extend(f for f in await self._read(conversation) if f.owner == owner)
            return oldest_first(found)

    async def _remove(self, conversation: str, *, ids: Collection[str] = (), message: str | None = None) -> list[Fact]:
        async with self._lock:
            facts = await self._read(conversation)
            gone = [f for f in facts if f.id in ids or (message is not None and f.message == message)]
            if gone:
                kept = [f for f in facts if f not in gone]
                await self._write(conversation, kept, owners={f.owner for f in gone if f.owner is not None})
            return gone

    async def delete(self, conversation: str, ids: Collection[str]) -> list[Fact]:
        """Remove the facts ``ids`` of a conversation; those removed."""
        return await self._remove(conversation, ids=set(ids))

    async def drop_message(self, conversation: str, message: str) -> list[Fact]:
        """Remove the facts that came from ``message``; those removed."""
        return await self._remove(conversation, message=message)

    async def forget(self, conversation: str) -> None:
        """Remove every fact of a conversation."""
        async with self._lock:
            facts = await self._read(conversation)
            await self._write(conversation, [], owners={f.owner for f in facts if f.owner is not None})

    async def close(self) -> None:
        """Nothing to release: the memory store is the agent's (it closes it)."""
