"""Time for the scheduler, injectable: the system clock, or a clock a test moves by hand."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ("Clock", "ManualClock", "SyncedClock", "SystemClock")


@runtime_checkable
class Clock(Protocol):
    """What the scheduler reads the time from and sleeps on."""

    def now(self) -> datetime:
        """The current instant (aware, UTC)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed on this clock."""
        ...


@runtime_checkable
class SyncedClock(Clock, Protocol):
    """A clock that follows another machine's (``core.fleet.ServerClock``: the Redis primary's): the scheduler
    calls ``sync`` at each look at the store, and it measures again when its last measure is old enough."""

    async def sync(self) -> None:
        """Measure the offset again if it is due."""
        ...


class SystemClock:
    """The machine's clock (``datetime.now(UTC)``, ``asyncio.sleep``)."""

    def now(self) -> datetime:
        """The current instant (aware, UTC)."""
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when told (``advance``, ``set``): a sleeper wakes when the time it waits for is
    reached. For tests: a reminder "in two hours" fires without waiting two hours."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = (start or datetime(2026, 1, 5, 8, 0, tzinfo=UTC)).astimezone(UTC)
        self._moved = asyncio.Condition()

    def now(self) -> datetime:
        """The clock's current instant."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock reaches now + ``seconds``."""
        until = self._now + timedelta(seconds=max(0.0, seconds))
        async with self._moved:
            await self._moved.wait_for(lambda: self._now >= until)

    async def set(self, when: datetime) -> None:
        """Move the clock to ``when`` (never backwards) and wake the sleepers whose time came."""
        async with self._moved:
            self._now = max(self._now, when.astimezone(UTC))
            self._moved.notify_all()
        await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        await self.set(self._now + timedelta(seconds=seconds))
