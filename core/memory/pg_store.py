"""What a store in PostgreSQL (``DATABASE_URL``) shares, whatever it keeps (the history, the knowledge base): one
connection per process serialised by a lock, made at the first statement and made again after a failure; its
migrations, run at that first connection under an advisory lock so that workers starting together do not race,
each step recorded in the store's own version table; a deadline on every statement; and psycopg's errors mapped to
``MemoryStoreError`` naming the store and what to check, the URL shown without its credentials. Import this module
only when PostgreSQL is used: it needs the ``postgres`` extra (``psycopg[binary]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar

import psycopg

from ..errors import MemoryStoreError

__all__ = ("PostgresStore", "safe_url")

T = TypeVar("T")


def safe_url(url: str) -> str:
    """``url`` without its credentials, for messages (``DATABASE_URL`` when it cannot be read)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "DATABASE_URL"
    return f"postgresql://{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


class PostgresStore:
    """One connection to PostgreSQL and the store's schema; a subclass names its ``migrations``."""

    what: ClassVar[str] = "store"
    """How errors name the store: ``PostgreSQL <what> at <url> failed ...``."""
    database: ClassVar[str] = "store"
    """How the migrations' log lines name the database: ``<database> database <url>: migrated ...``."""
    migrations: ClassVar[tuple[str, ...]] = ()
    """The schema, one step per version; a deployed step is never changed, only followed by new ones."""
    version_table: ClassVar[str] = "bot_schema"
    """The table the versions reached are recorded in (each store has its own)."""
    migration_lock: ClassVar[int] = 0
    """The advisory lock the migrations run under: any constant shared by every process of the bot."""
    log: ClassVar[logging.Logger] = logging.getLogger("core.memory.pg_store")

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url
        """The connection URL (secret: never logged; ``shown`` is)."""
        self.shown = safe_url(url)
        """The URL without credentials, for messages."""
        self.timeout = timeout
        """Seconds each statement (and the connection) may take."""
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            conn = await psycopg.AsyncConnection.connect(  # never prepared: a generic plan cannot know how
                self.url,  # common the searched words are, and sorts every match of a common one
                autocommit=True,
                connect_timeout=max(1, round(self.timeout)),
                prepare_threshold=None,
            )
            try:
                await self._migrate(conn)
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
        return self._conn

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Apply the steps after the version reached, in one transaction under the advisory lock."""
        table = self.version_table
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.migration_lock,))
            await conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (version integer NOT NULL)")
            row = await (await conn.execute(f"SELECT max(version) FROM {table}")).fetchone()
            version = int(row[0]) if row is not None and row[0] is not None else 0
            for number, step in enumerate(self.migrations[version:], start=version + 1):
                await conn.execute(step)
                await conn.execute(f"INSERT INTO {table} (version) VALUES (%s)", (number,))
                self.log.info("%s database %s: migrated to version %d", self.database, self.shown, number)

    async def _do(self, what: str, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``work`` with the connection, within the deadline; a failure is a ``MemoryStoreError`` saying
        ``what`` failed (and a broken or timed-out connection is made again next time)."""
        async with self._lock:
            try:
                async with asyncio.timeout(self.timeout):
                    return await work(await self._connect())
            except (psycopg.Error, OSError, TimeoutError) as exc:
                if self._conn is not None and (self._conn.broken or isinstance(exc, TimeoutError)):
                    await self._drop()
                raise MemoryStoreError(
                    f"PostgreSQL {self.what} at {self.shown} failed {what}: {type(exc).__name__}: {exc}; "
                    "check DATABASE_URL and that the server is up"
                ) from exc

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                await conn.close()

    async def _rows(self, what: str, sql: str, params: Sequence[Any] | dict[str, Any]) -> list[Any]:
        """The rows of one statement, or ``[rowcount]`` for one that returns none."""

        async def work(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(sql, params)
            return await cur.fetchall() if cur.description is not None else [cur.rowcount]

        return await self._do(what, work)

    async def start(self) -> None:
        """Connect and bring the schema up to date now (otherwise done by the first statement)."""

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            return None

        await self._do("migrating", work)

    async def close(self) -> None:
        """Close the connection."""
        async with self._lock:
            await self._drop()
