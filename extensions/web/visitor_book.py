"""Who visits the web chat: when each visitor was last seen, so that an identity idle ``WEB_VISITOR_IDLE_DAYS`` is
forgotten with everything kept about it (``extensions.web.idle``), and how many new visitors each address started
lately (``WEB_NEW_VISITORS_PER_HOUR``).

A ``VisitorBook`` keeps both: ``LocalVisitorBook`` in one process (a SQLite file in the bot's data folder, or this
process's memory), ``core.fleet.RedisVisitorBook`` in a fleet, where every gateway counts an address's new visitors
in one window and whichever gateway sweeps takes each idle visitor out of the book once.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Protocol

from core.memory.sqlite import SQLiteFile

from ..chat.trust import SlidingCap

__all__ = ("VISITORS_FILE", "LocalVisitorBook", "VisitorBook")

VISITORS_FILE = "web_visitors.sqlite3"
"""The file in the bot's data folder keeping the visitors of one process."""


class VisitorBook(Protocol):
    """When each visitor was last seen, and the new visitors per address."""

    async def seen(self, visitor: str, *, at: float) -> None:
        """``visitor`` was seen at ``at`` (seconds since the epoch)."""
        ...

    async def idle(self, *, before: float, limit: int) -> list[str]:
        """At most ``limit`` visitors last seen before ``before``, taken out of the book: each is handed to one
        caller, whichever process asks."""
        ...

    async def newcomer(self, address: str, *, most: int, window: float, at: float) -> bool:
        """Count a new visitor from ``address`` at ``at``; False (nothing counted) when ``most`` were counted in the
        ``window`` seconds before."""
        ...

    async def drop_conversation(self, cid: str) -> None:
        """Remove what the fleet's queue keeps of the idle conversation ``cid`` (nothing in one process)."""
        ...

    async def close(self) -> None:
        """Release files and connections this book opened."""
        ...


class _VisitorsFile(SQLiteFile):
    what = "the web chat's visitors file"
    component = "visitors"
    schema = (
        "CREATE TABLE IF NOT EXISTS visitors (id TEXT PRIMARY KEY, seen REAL NOT NULL);"
        "CREATE INDEX IF NOT EXISTS visitors_seen ON visitors (seen);"
    )

    async def seen(self, visitor: str, at: float) -> None:
        sql = "INSERT INTO visitors (id, seen) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET seen = excluded.seen"
        await self._do(lambda conn: conn.execute(sql, (visitor, at)))

    async def idle(self, before: float, limit: int) -> list[str]:
        def take(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT id FROM visitors WHERE seen < ? LIMIT ?", (before, limit)).fetchall()
            found = [str(row[0]) for row in rows]
            conn.executemany("DELETE FROM visitors WHERE id = ?", [(v,) for v in found])
            return found

        return await self._do(take)


class LocalVisitorBook:
    """The visitors of one process: in the SQLite file ``path`` (kept across restarts), or in memory (None); new
    visitors are counted in this process's memory."""

    def __init__(self, path: Path | None = None) -> None:
        self._file = _VisitorsFile(path) if path is not None else None
        self._seen: dict[str, float] = {}
        self._cap: SlidingCap | None = None
        self._now = 0.0

    @property
    def path(self) -> Path | None:
        """The file (None: in memory)."""
        return self._file.path if self._file is not None else None

    async def seen(self, visitor: str, *, at: float) -> None:
        if self._file is not None:
            await self._file.seen(visitor, at)
        else:
            self._seen[visitor] = at

    async def idle(self, *, before: float, limit: int) -> list[str]:
        if self._file is not None:
            return await self._file.idle(before, limit)
        found = [visitor for visitor, at in self._seen.items() if at < before][:limit]
        for visitor in found:
            del self._seen[visitor]
        return found

    async def newcomer(self, address: str, *, most: int, window: float, at: float) -> bool:
        cap = self._cap
        if cap is None or (cap.most, cap.window) != (most, window):
            cap = self._cap = SlidingCap(most, window, clock=lambda: self._now)
        self._now = at
        return cap.take(address)

    async def drop_conversation(self, cid: str) -> None:
        return None

    async def close(self) -> None:
        if self._file is not None:
            await self._file.close()
