"""A SQLite memory store, the embedded default (``./data/memory.sqlite3``), kept across restarts.

sqlite3 is blocking, so every call runs in a worker thread; one connection serialised by a lock.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import MemoryStoreError

__all__ = ("SQLiteFile", "SQLiteStore")

T = TypeVar("T")


OPEN_TRIES = 50
"""Times the switch to WAL is tried while another connection opens the same file (it does not wait on its own)."""


def _wal(conn: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while another connection to the file (the memory store and the
    history share one) holds the lock it needs: SQLite answers "database is locked" at once there."""
    for attempt in range(OPEN_TRIES):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == OPEN_TRIES - 1:
                raise
            time.sleep(0.02)


class SQLiteFile:
    """One SQLite file (WAL mode) behind one connection serialised by a lock; sqlite3 blocks, so ``_do`` runs the
    work in a worker thread. A subclass names what the file holds (``what``, for errors) and creates its tables
    (``schema``), the first time the file is used."""

    what = "the SQLite file"
    """How errors name the file."""
    schema = ""
    """The SQL script that creates the tables if they are missing."""
    needs = ""
    """What the file needs of SQLite beyond the basics, said when it cannot be opened."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        """The database file."""
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                _wal(conn)
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(self.schema)
            except (OSError, sqlite3.Error) as exc:
                raise MemoryStoreError(
                    f"cannot open {self.what} at {self.path}: {exc}; check BOT_DATA_DIR points to a writable "
                    f"folder{self.needs}"
                ) from exc
            self._conn = conn
        return self._conn

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return work(self._connect())
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"{self.what} {self.path}: {exc}") from exc

    async def _do(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` with the connection, in a worker thread."""
        return await asyncio.to_thread(self._locked, work)

    async def close(self) -> None:
        """Close the connection."""

        def _close() -> None:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await asyncio.to_thread(_close)


class SQLiteStore(SQLiteFile):
    """Key-value memory in one SQLite file (WAL mode)."""

    what = "the SQLite memory store"
    schema = "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

    async def _run(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return await self._do(lambda conn: conn.execute(sql, params).fetchall())

    async def get(self, key: str) -> Any | None:
        """The value under ``key``, or None."""
        rows = await self._run("SELECT value FROM kv WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    async def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON) under ``key``."""
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        await self._run(
            "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, text),
        )

    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        await self._run("DELETE FROM kv WHERE key = ?", (key,))
