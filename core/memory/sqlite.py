"""A SQLite memory store, the embedded default (``./data/memory.sqlite3``), kept across restarts.

sqlite3 is blocking, so every call runs in a worker thread; one connection serialised by a lock.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ..errors import MemoryStoreError

__all__ = ("SQLiteStore",)


class SQLiteStore:
    """Key-value memory in one SQLite file (WAL mode)."""

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
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            except (OSError, sqlite3.Error) as exc:
                raise MemoryStoreError(
                    f"cannot open the SQLite memory store at {self.path}: {exc}; "
                    "check BOT_DATA_DIR points to a writable folder"
                ) from exc
            self._conn = conn
        return self._conn

    def _run(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            try:
                return self._connect().execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"SQLite memory store {self.path}: {exc}") from exc

    async def get(self, key: str) -> Any | None:
        """The value under ``key``, or None."""
        rows = await asyncio.to_thread(self._run, "SELECT value FROM kv WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    async def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON) under ``key``."""
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        await asyncio.to_thread(
            self._run,
            "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, text),
        )

    async def delete(self, key: str) -> None:
        """Remove ``key`` if present."""
        await asyncio.to_thread(self._run, "DELETE FROM kv WHERE key = ?", (key,))

    async def close(self) -> None:
        """Close the connection."""

        def _close() -> None:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await asyncio.to_thread(_close)
