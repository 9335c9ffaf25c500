"""Full history in PostgreSQL (``DATABASE_URL``), for workers that share: psycopg 3, async.

The table has a generated ``tsvector`` column (the ``simple`` configuration: no stemming, any language)
with a GIN index; searches take the newest matches of one conversation. The connection, the migrations (at the
first connection, under an advisory lock, recorded in ``bot_schema``) and the errors are ``PostgresStore``'s. Import
this module only when PostgreSQL is used: it needs the ``postgres`` extra (``psycopg[binary]``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from ..entries import now_ms
from .history import ConversationInfo, HistoryEntry, Summary, message_prefix, query_words, time_range
from .pg_store import PostgresStore

__all__ = ("MIGRATIONS", "PostgresHistory")

log = logging.getLogger("core.memory.postgres")

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE history (
        seq bigserial PRIMARY KEY,
        cid text NOT NULL,
        id text NOT NULL,
        ts bigint NOT NULL,
        role text NOT NULL,
        who text NOT NULL,
        text text NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
        UNIQUE (cid, id)
    );
    CREATE INDEX history_cid_seq ON history (cid, seq);
    CREATE INDEX history_ts ON history (ts);
    CREATE INDEX history_tsv ON history USING GIN (tsv);
    CREATE TABLE summaries (
        cid text PRIMARY KEY,
        text text NOT NULL,
        upto bigint NOT NULL,
        updated bigint NOT NULL
    );
    """,
    "CREATE INDEX history_cid_ts ON history (cid, ts);",  # 2: a date range alone, however old, from an index
)
"""The schema, one step per version; a deployed step is never changed, only followed by new ones."""

MIGRATION_LOCK = 0x6264_6873  # "bdhs": any constant shared by every process of the bot
PRUNE_CHUNK = 5000
_COLUMNS = "seq, id, ts, role, who, text"


def _entry(row: Sequence[Any]) -> HistoryEntry:
    return HistoryEntry(seq=row[0], id=row[1], ts=row[2], role=row[3], who=row[4], text=row[5])


class PostgresHistory(PostgresStore):
    """Every conversation's messages and summary in PostgreSQL (one connection per process, serialised)."""

    what = "history"
    database = "history"
    migrations = MIGRATIONS
    version_table = "bot_schema"
    migration_lock = MIGRATION_LOCK
    log = log

    async def append(self, cid: str, entries: Sequence[HistoryEntry]) -> None:
        """Store ``entries`` (ids already stored are skipped), in one statement."""
        if not entries:
            return
        rows = [(cid, e.id, e.ts, e.role, e.who, e.text) for e in entries]

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO history (cid, id, ts, role, who, text) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (cid, id) DO NOTHING",
                    rows,
                )

        await self._do("storing messages", work)

    async def search(
        self, cid: str, *, words: str = "", since: int | None = None, until: int | None = None, limit: int = 5
    ) -> list[HistoryEntry]:
        """The newest entries of ``cid`` with every word of ``words`` (whole words, any case), within the range."""
        terms = query_words(words)
        low, high = time_range(since, until)
        if terms:
            query = " & ".join(terms)  # whole words, as in SQLite
            rows = await self._rows(
                "searching",
                f"SELECT {_COLUMNS} FROM history WHERE cid = %s AND tsv @@ to_tsquery('simple', %s) "
                "AND ts BETWEEN %s AND %s ORDER BY seq DESC LIMIT %s",
                (cid, query, low, high, limit),
            )
        else:
            rows = await self._rows(
                "searching",
                f"SELECT {_COLUMNS} FROM history WHERE cid = %s AND ts BETWEEN %s AND %s "
                f"ORDER BY {'seq DESC' if since is None and until is None else 'ts DESC, seq DESC'} LIMIT %s",
                (cid, low, high, limit),
            )
        return [_entry(row) for row in rows]

    async def conversations(self, *, words: str = "", limit: int = 50) -> list[ConversationInfo]:
        """The conversations with an entry matching ``words`` (all when empty), most recently active first."""
        terms = query_words(words)
        if terms:
            rows = await self._rows(
                "listing conversations",
                "SELECT cid, count(*), max(ts) FROM history WHERE tsv @@ to_tsquery('simple', %s) "
                "GROUP BY cid ORDER BY max(ts) DESC LIMIT %s",
                (" & ".join(terms), limit),
            )
        else:
            rows = await self._rows(
                "listing conversations",
                "SELECT cid, count(*), max(ts) FROM history GROUP BY cid ORDER BY max(ts) DESC LIMIT %s",
                (limit,),
            )
        return [ConversationInfo(cid=row[0], entries=int(row[1]), last_ts=int(row[2])) for row in rows]

    async def pending(self, cid: str, *, after: int, keep: int, limit: int) -> list[HistoryEntry]:
        """The oldest ``limit`` entries after ``after`` if ``keep`` newer ones follow them."""
        rows = await self._rows(
            "reading messages to summarize",
            f"SELECT {_COLUMNS} FROM history WHERE cid = %s AND seq > %s ORDER BY seq LIMIT %s",
            (cid, after, limit + keep),
        )
        if len(rows) < limit + keep:
            return []
        return [_entry(row) for row in rows[:limit]]

    async def summary(self, cid: str) -> Summary:
        """The summary of ``cid``, or an empty one."""
        rows = await self._rows(
            "reading the summary", "SELECT text, upto, updated FROM summaries WHERE cid = %s", (cid,)
        )
        return Summary(text=rows[0][0], upto=rows[0][1], updated=rows[0][2]) if rows else Summary()

    async def set_summary(self, cid: str, summary: Summary, *, expected: int) -> bool:
        """Replace the summary if it still covers up to ``expected`` and its newest entry still exists (a
        fold that raced with ``forget`` is not written)."""
        rows = await self._rows(
            "writing the summary",
            """
            INSERT INTO summaries (cid, text, upto, updated)
            SELECT %(cid)s, %(text)s, %(upto)s, %(updated)s
            WHERE coalesce((SELECT upto FROM summaries WHERE cid = %(cid)s), 0) = %(expected)s
              AND (%(upto)s = 0 OR EXISTS (SELECT 1 FROM history WHERE cid = %(cid)s AND seq = %(upto)s))
            ON CONFLICT (cid) DO UPDATE SET text = EXCLUDED.text, upto = EXCLUDED.upto, updated = EXCLUDED.updated
            WHERE summaries.upto = %(expected)s
            """,
            {
                "cid": cid,
                "text": summary.text,
                "upto": summary.upto,
                "updated": summary.updated or now_ms(),
                "expected": expected,
            },
        )
        return bool(rows and rows[0] == 1)

    async def count(self, cid: str) -> int:
        """How many entries ``cid`` has."""
        rows = await self._rows("counting messages", "SELECT count(*) FROM history WHERE cid = %s", (cid,))
        return int(rows[0][0])

    async def forget(self, cid: str) -> None:
        """Delete the history and summary of ``cid`` (one transaction)."""

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction():
                await conn.execute("DELETE FROM history WHERE cid = %s", (cid,))
                await conn.execute("DELETE FROM summaries WHERE cid = %s", (cid,))

        await self._do("forgetting a conversation", work)

    async def delete(self, cid: str, ids: Sequence[str], *, messages: Sequence[str] = ()) -> int:
        """Delete the entries ``ids`` of ``cid`` and those of the platform messages ``messages``; how many went."""
        if not ids and not messages:
            return 0
        prefixes = [message_prefix(m) for m in messages]
        rows = await self._rows(
            "deleting history entries",
            "WITH gone AS (DELETE FROM history WHERE cid = %s AND (id = ANY(%s) OR EXISTS "
            "(SELECT 1 FROM unnest(%s::text[]) AS p(prefix) WHERE starts_with(history.id, p.prefix))) "
            "RETURNING 1) SELECT count(*) FROM gone",
            (cid, list(ids), prefixes),
        )
        return int(rows[0][0]) if rows else 0

    async def prune(self, *, before: int) -> int:
        """Delete entries said before ``before`` (ms), a chunk per statement; returns how many."""
        total = 0
        while True:
            rows = await self._rows(
                "removing old history",
                "DELETE FROM history WHERE seq IN (SELECT seq FROM history WHERE ts < %s LIMIT %s)",
                (before, PRUNE_CHUNK),
            )
            n = int(rows[0]) if rows else 0
            total += n
            if n < PRUNE_CHUNK:
                return total
