"""Usage accounting: model tokens in and out and their estimated cost, per day, under keys.

A model call's usage is added under several keys at once: ``user:<platform>:<id>`` (who asked),
``chat:<context id>`` (the conversation) and ``model:<name>`` (for totals without user ids). Days are UTC
dates (``2026-11-23``); stores keep ``USAGE_DAYS`` days. Costs are kept in millionths of a dollar (integers:
totals add up exactly). The same counters serve ``/stats`` and the per-day token limits (``core.limits``), which
read ``user:`` and ``chat:`` of today. Of a call's input tokens, those the provider read from its prompt cache are
also added under ``cached:`` and the conversation's and model's key (``cached:chat:<id>``, ``cached:model:<name>``).

Stores: ``InMemoryUsage`` (tests, one process), ``SQLiteUsage`` (embedded, a file next to the memory store: a
call's counts are written a moment later, several calls at once, off the answer's way), ``core.fleet.RedisUsage``
(every worker adds to the same counters, atomically).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..entries import InputRef
from ..memory.sqlite import SQLiteFile
from ..slots import Slot

__all__ = (
    "CACHED",
    "USAGE",
    "USAGE_DAYS",
    "WRITE_AFTER",
    "InMemoryUsage",
    "Price",
    "SQLiteUsage",
    "UsageIndex",
    "UsageStore",
    "UsageTotals",
    "cost_micros",
    "day_of",
    "last_days",
    "user_of",
)

USAGE: Slot[UsageStore] = Slot("usage")
"""Where the ``Usage`` plugin counts tokens and costs (``agent.provided(USAGE)``; None: nothing counts them)."""
CACHED = "cached:"
"""Before a conversation's or a model's key: its input tokens the provider read from its prompt cache (a prefix of
the prompt it had seen), counted as input tokens; the key itself counts every input token, cached or not."""
USAGE_DAYS = 90
"""Days of usage kept."""
WRITE_AFTER = 1.0
"""Seconds ``SQLiteUsage`` keeps a call's counts in memory before it writes them, with whatever else was counted
meanwhile, in one transaction: the write (a worker thread) no longer runs while the answer is being posted, and a
busy bot writes once a second, not twice a model call. Reads write what is waiting first; ``close`` writes the rest
(a process stopped normally loses nothing; one killed loses at most this long of counts)."""

log = logging.getLogger("core.usage")


@dataclass(frozen=True, kw_only=True)
class Price:
    """What a model costs, in dollars per million tokens."""

    input: float = 0.0
    """Dollars per million tokens read."""
    output: float = 0.0
    """Dollars per million tokens written."""
    cached_input: float | None = None
    """Dollars per million tokens read from the provider's prompt cache (a prompt's beginning it had seen: OpenAI
    and Anthropic bill those at a fraction of ``input``); None: at ``input``."""


@dataclass(kw_only=True)
class UsageTotals:
    """Tokens and cost added up."""

    input_tokens: int = 0
    """Tokens the model read."""
    output_tokens: int = 0
    """Tokens the model wrote."""
    cost_micros: int = 0
    """Estimated cost in millionths of a dollar."""

    @property
    def tokens(self) -> int:
        """Tokens read and written."""
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> float:
        """Estimated cost in dollars."""
        return self.cost_micros / 1_000_000

    def add(self, other: UsageTotals) -> None:
        """Add ``other`` to these totals."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_micros += other.cost_micros


def cost_micros(price: Price | None, input_tokens: int, output_tokens: int, *, cached_input_tokens: int = 0) -> int:
    """The estimated cost of a call in millionths of a dollar (0 without a price): of its ``input_tokens``, the
    ``cached_input_tokens`` read from the provider's cache at ``price.cached_input`` when it is set."""
    if price is None:
        return 0
    cached = min(max(0, cached_input_tokens), input_tokens) if price.cached_input is not None else 0
    read = (input_tokens - cached) * price.input + cached * (price.cached_input or 0.0)
    return round(read + output_tokens * price.output)


_DAY_MS = 86_400_000
_last_day: tuple[int, str] = (-1, "")
"""The last day asked (its number since the epoch, its text): the same day is not formatted again."""


def day_of(ms: int | None = None) -> str:
    """The UTC day of ``ms`` (milliseconds since the epoch; now by default) as ``YYYY-MM-DD``."""
    global _last_day
    if ms is None:
        ms = int(time.time() * 1000)
    number = ms // _DAY_MS
    if _last_day[0] != number:
        _last_day = (number, dt.datetime.fromtimestamp(number * 86_400, tz=dt.UTC).date().isoformat())
    return _last_day[1]


def last_days(count: int, *, today: str | None = None) -> list[str]:
    """The ``count`` days ending with ``today`` (UTC), newest first."""
    end = dt.date.fromisoformat(today or day_of())
    return [(end - dt.timedelta(days=n)).isoformat() for n in range(count)]


def user_of(ref: InputRef) -> str | None:
    """The platform-qualified id of who wrote ``ref`` (``discord:123``, ``telegram:456``), when its params
    carry one (``user_id`` or ``author_id``); the platform is the input type's prefix, or the ``platform`` param
    of an input that is no platform's (a ``schedule`` firing counts to the user who set it)."""
    user = ref.params.get("user_id") or ref.params.get("author_id")
    if not user:
        return None
    return f"{ref.params.get('platform') or ref.type.partition(':')[0]}:{user}"


@runtime_checkable
class UsageStore(Protocol):
    """Counters of tokens and cost per day and key."""

    async def add(
        self,
        *,
        day: str,
        keys: Sequence[str],
        input_tokens: int,
        output_tokens: int,
        cost: int,
        charge: str | None = None,
    ) -> bool:
        """Add one call's usage (``cost`` in millionths of a dollar) under each of ``keys`` on ``day``. With a
        ``charge`` id (a queued run's batch and step) it is added once however often the call is repeated (a
        batch run again after a crash); False when that id was added already."""
        ...

    async def totals(self, key: str, days: Sequence[str]) -> UsageTotals:
        """The usage under ``key`` over ``days``."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...


@runtime_checkable
class UsageIndex(Protocol):
    """A usage store that can list its counters (the operator console's usage page)."""

    async def day_rows(self, days: Sequence[str]) -> list[tuple[str, str, UsageTotals]]:
        """Every ``(day, key, totals)`` counted on ``days``."""
        ...


class InMemoryUsage:
    """Usage counters in a dict (tests, and agents without a persistent store)."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, str], UsageTotals] = {}
        """Totals by ``(day, key)``."""
        self.charged: dict[str, str] = {}
        """Charge ids added (with their day), kept two days."""
        self._pruned = ""
        """The day old counters and charge ids were last dropped (once a day, not at every call)."""

    async def add(
        self,
        *,
        day: str,
        keys: Sequence[str],
        input_tokens: int,
        output_tokens: int,
        cost: int,
        charge: str | None = None,
    ) -> bool:
        """Add one call's usage (once per ``charge``)."""
        if day != self._pruned:
            self._prune(day)
        if charge is not None:
            if charge in self.charged:
                return False
            self.charged[charge] = day
        for key in keys:
            totals = self.data.get((day, key))
            if totals is None:
                totals = self.data[(day, key)] = UsageTotals()
            totals.input_tokens += input_tokens
            totals.output_tokens += output_tokens
            totals.cost_micros += cost
        return True

    def _prune(self, day: str) -> None:
        """Drop the counters older than ``USAGE_DAYS`` and the charge ids older than yesterday."""
        self._pruned = day
        yesterday = last_days(2, today=day)[-1]
        self.charged = {c: d for c, d in self.charged.items() if d >= yesterday}
        oldest = last_days(USAGE_DAYS, today=day)[-1]
        for stale in [k for k in self.data if k[0] < oldest]:
            del self.data[stale]

    async def totals(self, key: str, days: Sequence[str]) -> UsageTotals:
        """The usage under ``key`` over ``days``."""
        total = UsageTotals()
        for day in days:
            found = self.data.get((day, key))
            if found is not None:
                total.add(found)
        return total

    async def day_rows(self, days: Sequence[str]) -> list[tuple[str, str, UsageTotals]]:
        """Every ``(day, key, totals)`` counted on ``days``."""
        wanted = set(days)
        return [(day, key, totals) for (day, key), totals in self.data.items() if day in wanted]

    async def close(self) -> None:
        """Nothing to release."""


class SQLiteUsage(SQLiteFile):
    """Usage counters in a SQLite file (one row per day and key), the embedded default. A call's counts without a
    ``charge`` id are added up in memory and written ``write_after`` seconds later with the others counted by then,
    in a worker thread (``WRITE_AFTER``); those with one are written at once (whether the id was added before is the
    file's to say). ``totals`` and ``day_rows`` write what waits before they read, and ``close`` writes it."""

    what = "the usage database"
    component = "usage"
    schema = """
CREATE TABLE IF NOT EXISTS usage (
    day TEXT NOT NULL, key TEXT NOT NULL, input INTEGER NOT NULL, output INTEGER NOT NULL, cost INTEGER NOT NULL,
    PRIMARY KEY (day, key)
);
CREATE TABLE IF NOT EXISTS charged (id TEXT PRIMARY KEY, day TEXT NOT NULL);
"""

    def __init__(self, path: str | Path, *, write_after: float = WRITE_AFTER) -> None:
        super().__init__(path)
        self.write_after = write_after
        """Seconds the counts of a call wait in memory before they are written (0: at the next loop turn)."""
        self._pruned = ""
        """The day old counters and charge ids were last dropped."""
        self._waiting: dict[tuple[str, str], list[int]] = {}
        """Counts not written yet: input, output and cost by ``(day, key)``."""
        self._waiting_lock = threading.Lock()
        """Held while ``_waiting`` is added to (the event loop) or taken to be written (a worker thread)."""
        self._writer: asyncio.Task[None] | None = None
        """Writes ``_waiting`` once ``write_after`` has passed, while there is any (owned: ``close`` ends it)."""

    def _count(self, conn: sqlite3.Connection, rows: Sequence[tuple[str, str, int, int, int]]) -> None:
        """Add ``rows`` (day, key, input, output, cost) in the open transaction, and drop the counters older than
        ``USAGE_DAYS`` and the charge ids older than yesterday once a day."""
        newest = max(self._pruned, *(row[0] for row in rows))
        oldest = last_days(USAGE_DAYS, today=newest)[-1]
        conn.executemany(
            "INSERT INTO usage (day, key, input, output, cost) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(day, key) DO UPDATE SET input = input + excluded.input, "
            "output = output + excluded.output, cost = cost + excluded.cost",
            [row for row in rows if row[0] >= oldest],  # (older ones would be dropped at once)
        )
        if self._pruned != newest:
            conn.execute("DELETE FROM usage WHERE day < ?", (oldest,))
            conn.execute("DELETE FROM charged WHERE day < ?", (last_days(2, today=newest)[-1],))
            self._pruned = newest

    def _add(
        self,
        conn: sqlite3.Connection,
        day: str,
        keys: Sequence[str],
        input_tokens: int,
        output_tokens: int,
        cost: int,
        charge: str,
    ) -> bool:
        with conn:
            conn.execute("BEGIN")
            added = conn.execute("INSERT OR IGNORE INTO charged (id, day) VALUES (?, ?)", (charge, day))
            if added.rowcount == 0:
                return False
            self._count(conn, [(day, key, input_tokens, output_tokens, cost) for key in keys])
        return True

    def _write_waiting(self, conn: sqlite3.Connection) -> None:
        """Write the counts waiting in memory, in one transaction (in the worker thread, the connection's lock
        held: a read that follows sees them)."""
        with self._waiting_lock:
            waiting, self._waiting = self._waiting, {}
        if not waiting:
            return
        with conn:
            conn.execute("BEGIN")
            self._count(conn, [(day, key, i, o, c) for (day, key), (i, o, c) in waiting.items()])

    async def _write_later(self) -> None:
        while self._waiting:
            await asyncio.sleep(self.write_after)
            try:
                await self._do(self._write_waiting)
            except Exception:  # (the file cannot be written: those counts are lost, as a failed add's were)
                log.exception("could not write the usage counted in the last %.1f s", self.write_after)

    async def add(
        self,
        *,
        day: str,
        keys: Sequence[str],
        input_tokens: int,
        output_tokens: int,
        cost: int,
        charge: str | None = None,
    ) -> bool:
        """Add one call's usage (once per ``charge``): written at once with a ``charge`` id, else counted in memory
        and written within ``write_after`` seconds."""
        if charge is not None:
            return await self._do(lambda conn: self._add(conn, day, keys, input_tokens, output_tokens, cost, charge))
        with self._waiting_lock:
            for key in keys:
                counts = self._waiting.get((day, key))
                if counts is None:
                    self._waiting[(day, key)] = [input_tokens, output_tokens, cost]
                else:
                    counts[0] += input_tokens
                    counts[1] += output_tokens
                    counts[2] += cost
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_later())
        return True

    async def totals(self, key: str, days: Sequence[str]) -> UsageTotals:
        """The usage under ``key`` over ``days`` (what waits in memory written first)."""
        marks = ",".join("?" * len(days))

        def read(conn: sqlite3.Connection) -> Any:
            self._write_waiting(conn)
            return conn.execute(
                "SELECT COALESCE(SUM(input), 0), COALESCE(SUM(output), 0), COALESCE(SUM(cost), 0) "
                f"FROM usage WHERE key = ? AND day IN ({marks})",
                (key, *days),
            ).fetchone()

        row = await self._do(read)
        return UsageTotals(input_tokens=int(row[0]), output_tokens=int(row[1]), cost_micros=int(row[2]))

    async def day_rows(self, days: Sequence[str]) -> list[tuple[str, str, UsageTotals]]:
        """Every ``(day, key, totals)`` counted on ``days`` (what waits in memory written first)."""
        marks = ",".join("?" * len(days))

        def read(conn: sqlite3.Connection) -> list[Any]:
            self._write_waiting(conn)
            return conn.execute(
                f"SELECT day, key, input, output, cost FROM usage WHERE day IN ({marks})", tuple(days)
            ).fetchall()

        rows = await self._do(read)
        return [
            (str(r[0]), str(r[1]), UsageTotals(input_tokens=int(r[2]), output_tokens=int(r[3]), cost_micros=int(r[4])))
            for r in rows
        ]

    async def close(self) -> None:
        """Write what waits in memory, then close the file."""
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done():
            writer.cancel()  # (a write it began goes on in its thread; the one below waits for the lock)
            await asyncio.wait((writer,))
        if self._waiting:
            try:
                await self._do(self._write_waiting)
            except Exception:
                log.exception("could not write the usage counted before the stop")
        await super().close()
