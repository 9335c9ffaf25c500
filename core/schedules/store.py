"""Where schedules live: the ``ScheduleStore`` protocol, and the store of one process kept in its memory store
(in memory, SQLite or PostgreSQL: ``bots run``). The fleet's store is ``core.fleet.schedule_store``.

A store hands due schedules out with ``claim`` (each one to one claimer, for ``lease`` seconds: a claimer that
dies leaves it to the next claim after that) and moves one on with ``advance``, a compare-and-set on the
occurrence the claimer fired: however many claimers, each occurrence is advanced once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from ..errors import ScheduleLimitError, ValidationError
from ..memory import MemoryStore
from .model import Schedule, to_utc

__all__ = ("MemoryScheduleStore", "ScheduleLimitError", "ScheduleStore", "check_limits")

INDEX_KEY = "schedules"
"""The memory-store key of the list of schedule ids."""
KEY_PREFIX = "schedule:"
"""The memory-store key of one schedule is this and its id."""


@runtime_checkable
class ScheduleStore(Protocol):
    """Active schedules, by id, by conversation, by creator and by next occurrence."""

    async def add(
        self, schedule: Schedule, *, per_conversation: int | None = None, per_creator: int | None = None
    ) -> None:
        """Store ``schedule`` (its ``next_fire_at`` set). With ``per_conversation`` / ``per_creator``, raise
        ``ScheduleLimitError`` instead when its conversation / creator already has that many (checked and added
        atomically)."""
        ...

    async def get(self, schedule_id: str) -> Schedule | None:
        """The active schedule ``schedule_id``, or None."""
        ...

    async def by_conversation(self, conversation: str) -> list[Schedule]:
        """The active schedules of a conversation (context id), soonest first."""
        ...

    async def by_creator(self, creator: str) -> list[Schedule]:
        """The active schedules a user set (platform-qualified id), soonest first."""
        ...

    async def cancel(self, schedule_id: str) -> Schedule | None:
        """Remove ``schedule_id``; the removed schedule, or None if there was none."""
        ...

    async def claim(self, now: datetime, *, limit: int, lease: float) -> list[Schedule]:
        """Up to ``limit`` schedules due at ``now`` (soonest first), each hidden from other claims for ``lease``
        seconds (a claimer that dies hands it over then). ``next_fire_at`` is the occurrence to fire."""
        ...

    async def advance(self, schedule: Schedule, *, next_fire_at: datetime | None, missed: bool = False) -> bool:
        """Move ``schedule`` past the occurrence it was claimed with (``schedule.next_fire_at``): to
        ``next_fire_at``, or remove it when None. Counted as fired, or as ``missed``. False (nothing changed) when
        that occurrence was already advanced or the schedule cancelled."""
        ...

    async def upcoming(self, limit: int) -> list[Schedule]:
        """The ``limit`` active schedules due soonest, of every conversation (``bots config``, the console)."""
        ...

    async def next_due(self) -> datetime | None:
        """The soonest time a schedule is due or a claim expires (None: nothing pending)."""
        ...

    async def pending(self) -> int:
        """Active schedules in all."""
        ...

    async def close(self) -> None:
        """Release what the store holds (not the memory store or connection it was given)."""
        ...


def check_limits(
    schedule: Schedule, others: list[Schedule], *, per_conversation: int | None, per_creator: int | None
) -> None:
    """``ScheduleLimitError`` when ``others`` (the active schedules) leave no room for ``schedule``."""
    if per_conversation is not None:
        count = sum(1 for s in others if s.conversation == schedule.conversation)
        if count >= per_conversation:
            raise ScheduleLimitError(
                f"{schedule.conversation} already has {count} active schedules (at most {per_conversation}): "
                "cancel one first"
            )
    if per_creator is not None and schedule.creator is not None:
        count = sum(1 for s in others if s.creator == schedule.creator)
        if count >= per_creator:
            raise ScheduleLimitError(
                f"you already have {count} active schedules (at most {per_creator}): cancel one first"
            )


class MemoryScheduleStore:
    """The schedules of one process, kept in its memory store (``InMemoryStore``, ``SQLiteStore``, a PostgreSQL
    store): each under ``schedule:<id>``, their ids under ``schedules``. Loaded once, then served from memory;
    every change is written through before it returns. One process owns the memory store (``bots run``): in a
    fleet, use ``core.fleet.RedisScheduleStore``."""

    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory
        """Where the schedules are written."""
        self._items: dict[str, Schedule] | None = None
        self._leases: dict[str, datetime] = {}
        self._lock = asyncio.Lock()

    async def _load(self) -> dict[str, Schedule]:
        if self._items is None:
            ids = await self.memory.get(INDEX_KEY) or []
            items: dict[str, Schedule] = {}
            for sid in ids:
                raw = await self.memory.get(KEY_PREFIX + sid)
                if raw is not None:
                    items[sid] = Schedule.model_validate(raw)
            self._items = items
        return self._items

    async def _write_index(self, items: dict[str, Schedule]) -> None:
        await self.memory.set(INDEX_KEY, list(items))

    async def add(
        self, schedule: Schedule, *, per_conversation: int | None = None, per_creator: int | None = None
    ) -> None:
        """Store ``schedule`` (see ``ScheduleStore.add``)."""
        if schedule.next_fire_at is None:
            raise ValidationError("a schedule without a next occurrence cannot be added")
        async with self._lock:
            items = await self._load()
            others = [s for s in items.values() if s.id != schedule.id]
            check_limits(schedule, others, per_conversation=per_conversation, per_creator=per_creator)
            await self.memory.set(KEY_PREFIX + schedule.id, schedule.to_json())
            new = schedule.id not in items
            items[schedule.id] = schedule
            if new:
                await self._write_index(items)

    async def get(self, schedule_id: str) -> Schedule | None:
        """The active schedule ``schedule_id``, or None."""
        async with self._lock:
            return (await self._load()).get(schedule_id)

    async def by_conversation(self, conversation: str) -> list[Schedule]:
        """The active schedules of a conversation, soonest first."""
        async with self._lock:
            return _soonest(s for s in (await self._load()).values() if s.conversation == conversation)

    async def by_creator(self, creator: str) -> list[Schedule]:
        """The active schedules a user set, soonest first."""
        async with self._lock:
            return _soonest(s for s in (await self._load()).values() if s.creator == creator)

    async def cancel(self, schedule_id: str) -> Schedule | None:
        """Remove ``schedule_id``; the removed schedule or None."""
        async with self._lock:
            items = await self._load()
            found = items.pop(schedule_id, None)
            if found is not None:
                self._leases.pop(schedule_id, None)
                await self._write_index(items)
                await self.memory.delete(KEY_PREFIX + schedule_id)
            return found

    async def claim(self, now: datetime, *, limit: int, lease: float) -> list[Schedule]:
        """The schedules due at ``now`` and not claimed within ``lease`` seconds, soonest first."""
        now = to_utc(now)
        async with self._lock:
            items = await self._load()
            due = _soonest(
                s
                for s in items.values()
                if s.next_fire_at is not None
                and s.next_fire_at <= now
                and self._leases.get(s.id, s.next_fire_at) <= now
            )[:limit]
            for s in due:
                self._leases[s.id] = now + timedelta(seconds=lease)
            return due

    async def advance(self, schedule: Schedule, *, next_fire_at: datetime | None, missed: bool = False) -> bool:
        """Move ``schedule`` past its claimed occurrence (see ``ScheduleStore.advance``)."""
        async with self._lock:
            items = await self._load()
            current = items.get(schedule.id)
            if current is None or current.next_fire_at != schedule.next_fire_at:
                return False
            self._leases.pop(schedule.id, None)
            if next_fire_at is None:
                del items[schedule.id]
                await self._write_index(items)
                await self.memory.delete(KEY_PREFIX + schedule.id)
                return True
            moved = current.model_copy(
                update={
                    "next_fire_at": to_utc(next_fire_at),
                    "fired": current.fired + (0 if missed else 1),
                    "missed": current.missed + (1 if missed else 0),
                }
            )
            items[schedule.id] = moved
            await self.memory.set(KEY_PREFIX + schedule.id, moved.to_json())
            return True

    async def upcoming(self, limit: int) -> list[Schedule]:
        """The ``limit`` active schedules due soonest."""
        async with self._lock:
            return _soonest((await self._load()).values())[: max(0, limit)]

    async def next_due(self) -> datetime | None:
        """The soonest next occurrence (or claim expiry) of the active schedules."""
        async with self._lock:
            times = [
                max(s.next_fire_at, self._leases.get(s.id, s.next_fire_at))
                for s in (await self._load()).values()
                if s.next_fire_at is not None
            ]
            return min(times, default=None)

    async def pending(self) -> int:
        """Active schedules in all."""
        async with self._lock:
            return len(await self._load())

    async def close(self) -> None:
        """Nothing to release: the memory store is the agent's."""


def _soonest(schedules: Iterable[Schedule]) -> list[Schedule]:
    return sorted(schedules, key=lambda s: (s.next_fire_at is None, s.next_fire_at, s.id))
