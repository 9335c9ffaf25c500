"""A SQLite memory store, the embedded default (``./data/memory.sqlite3``), kept across restarts, and the base of every
SQLite file of the bot (``SQLiteFile``: the history, usage, the knowledge base, the web chat's visitors).

sqlite3 is blocking, so every call runs in a worker thread; one connection serialised by a lock.

Schema versions, as PostgreSQL's history has (``core.memory.postgres``): each kind of content of a file (a
``component``: several share ``memory.sqlite3``) has its steps, ``schema`` (version 1) then ``migrations`` (2, 3...),
applied in order when the file is opened, each in a transaction with the version reached, recorded in the file's
``bot_schema`` table. ``PRAGMA user_version`` is the layout of that bookkeeping (``SQLITE_LAYOUT``); a file of
version 0 was made before versions, and its tables are taken as they are (``schema`` only creates what is missing).
A file that a newer version of the bot migrated further than this one knows is refused, naming what to do. A
deployed step is never changed, only followed by new ones.

The files and the folder made for them are the bot's user's alone (0600, 0700): a chat's history is private.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import MemoryStoreError

__all__ = ("SQLITE_LAYOUT", "SQLiteFile", "SQLiteStore", "probe")

log = logging.getLogger("core.memory.sqlite")

T = TypeVar("T")

SQLITE_LAYOUT = 1
"""``PRAGMA user_version`` of a file whose components record their versions in ``bot_schema`` (0: older)."""


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
    component = "file"
    """The name its versions are recorded under in ``bot_schema`` (several components may share a file)."""
    migrations: tuple[str, ...] = ()
    """The steps after ``schema``: ``migrations[0]`` makes version 2, and so on."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        """The database file."""
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @property
    def steps(self) -> tuple[str, ...]:
        """Every step of the schema, in order: ``schema`` (version 1), then ``migrations``."""
        return (self.schema, *self.migrations)

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            conn: sqlite3.Connection | None = None
            try:
                _private_file(self.path)
                conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                _wal(conn)
                conn.execute("PRAGMA synchronous=NORMAL")
                self._migrate(conn)
            except (OSError, sqlite3.Error) as exc:
                if conn is not None:
                    conn.close()
                raise MemoryStoreError(
                    f"cannot open {self.what} at {self.path}: {exc}; {_fix(exc, self.path)}{self.needs}"
                ) from exc
            except MemoryStoreError:
                if conn is not None:
                    conn.close()
                raise
            self._conn = conn
        return self._conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Bring the component to the newest version, one step per transaction (``BEGIN IMMEDIATE``: another
        process opening the file at the same time waits, then finds the step done)."""
        layout = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if layout > SQLITE_LAYOUT:
            raise MemoryStoreError(self._newer(f"its layout is {layout}, this version knows {SQLITE_LAYOUT}"))
        conn.execute("CREATE TABLE IF NOT EXISTS bot_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        steps = self.steps
        while True:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT version FROM bot_schema WHERE component = ?", (self.component,)).fetchone()
                version = int(row[0]) if row is not None else 0
                if version > len(steps):
                    raise MemoryStoreError(
                        self._newer(f"{self.component} is at version {version}, this version knows {len(steps)}")
                    )
                if version == len(steps):
                    if layout < SQLITE_LAYOUT:
                        conn.execute(f"PRAGMA user_version = {SQLITE_LAYOUT}")
                    conn.execute("COMMIT")
                    return
                for statement in _statements(steps[version]):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO bot_schema (component, version) VALUES (?, ?) "
                    "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                    (self.component, version + 1),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if version > 0:  # (version 1 of a new file, or of one made before versions, is no news)
                log.info("%s %s: migrated %s to version %d", self.what, self.path, self.component, version + 1)

    async def check(self) -> None:
        """Open the file now (``MemoryStoreError`` naming it and the fix when it cannot be used), so a process
        refuses to start rather than fail on every message (``bots run`` checks its files at start)."""
        await self._do(lambda _conn: None)

    def _newer(self, detail: str) -> str:
        return (
            f"{self.what} at {self.path} was written by a newer version of the bot ({detail}): run that version, "
            "or restore the backup taken before the upgrade (docs/how-to/backup.md)"
        )

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


def _fix(exc: BaseException, path: Path) -> str:
    """What to do about ``exc``, raised opening the data file ``path``."""
    text = str(exc).lower()
    if "disk i/o" in text or "disk is full" in text or "no space" in text:
        with contextlib.suppress(OSError):
            if shutil.disk_usage(path.parent).free < 1024 * 1024:
                text = "disk is full"
    if isinstance(exc, PermissionError) or "readonly" in text or "read-only" in text or "permission" in text:
        return "give the bot's user read and write access to the file and its folder (chown), or set BOT_DATA_DIR"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return "the file is damaged: restore it from a backup (docs/how-to/backup.md) or move it away to start afresh"
    if "disk is full" in text or "no space" in text:
        return "the disk is full: free space where BOT_DATA_DIR points, or point it at another disk"
    return "check BOT_DATA_DIR points to a writable folder"


def probe(path: Path) -> None:
    """Check that the SQLite file ``path`` of the bot can be used, whatever it holds: it can be read and written,
    it is a database, and its layout is not a newer version's (``MemoryStoreError`` naming it and the fix)."""
    try:
        if not os.access(path, os.R_OK | os.W_OK):
            raise PermissionError(f"[Errno 13] Permission denied: {str(path)!r}")
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, check_same_thread=False)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            layout = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        raise MemoryStoreError(f"cannot open the bot's data file {path}: {exc}; {_fix(exc, path)}") from exc
    if layout > SQLITE_LAYOUT:
        raise MemoryStoreError(
            f"the bot's data file {path} was written by a newer version of the bot (its layout is {layout}, this "
            f"version knows {SQLITE_LAYOUT}): run that version, or restore the backup taken before the upgrade "
            "(docs/how-to/backup.md)"
        )


def _private_file(path: Path) -> None:
    """Make ``path``'s folder (0700, when it is made here) and the file (0600) before SQLite opens it; a file that
    others may read is made private (SQLite gives its -wal and -shm files the database file's permissions)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _statements(script: str) -> list[str]:
    """The statements of ``script`` one by one (a trigger's body, or a string holding a semicolon, stays whole)."""
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" ;\n\t"):
                found.append(pending.strip())
            pending = ""
    if pending.strip(" ;\n\t"):
        found.append(pending.strip())
    return found


class SQLiteStore(SQLiteFile):
    """Key-value memory in one SQLite file (WAL mode)."""

    what = "the SQLite memory store"
    component = "memory"
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
