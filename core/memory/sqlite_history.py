"""Full history in SQLite with FTS5, the embedded default (next to the memory store, ``./data``).

sqlite3 is blocking, so every call runs in a worker thread; one connection serialised by a lock. The
full-text index is an external-content FTS5 table kept in step by triggers; searches walk it newest
first and stop at the limit, so a common word costs the same as a rare one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..entries import now_ms
from .history import FOREVER, ConversationInfo, HistoryEntry, Summary, message_prefix, query_words, time_range
from .sqlite import SQLiteFile

__all__ = ("SQLiteHistory",)

SCHEMA = """
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY,
    cid TEXT NOT NULL,
    id TEXT NOT NULL,
    ts INTEGER NOT NULL,
    role TEXT NOT NULL,
    who TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (cid, id)
);
CREATE INDEX IF NOT EXISTS history_cid_seq ON history (cid, seq);
CREATE INDEX IF NOT EXISTS history_ts ON history (ts);
CREATE INDEX IF NOT EXISTS history_cid_ts ON history (cid, ts);
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(
    text, content='history', content_rowid='seq', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
    INSERT INTO history_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER IF NOT EXISTS history_ad AFTER DELETE ON history BEGIN
    INSERT INTO history_fts (history_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TABLE IF NOT EXISTS summaries (
    cid TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    upto INTEGER NOT NULL,
    updated INTEGER NOT NULL
);
"""

_COLUMNS = "h.seq, h.id, h.ts, h.role, h.who, h.text"
PRUNE_CHUNK = 5000
"""Rows deleted per transaction by ``prune`` (the writer lock is held only that long)."""


def _entry(row: tuple[Any, ...]) -> HistoryEntry:
    return HistoryEntry(seq=row[0], id=row[1], ts=row[2], role=row[3], who=row[4], text=row[5])


class SQLiteHistory(SQLiteFile):
    """Every conversation's messages and summary in one SQLite file (WAL mode)."""

    what = "the SQLite history"
    component = "history"
    schema = SCHEMA
    needs = " (SQLite needs FTS5)"

    async def append(self, cid: str, entries: Sequence[HistoryEntry]) -> None:
        """Store ``entries`` (ids already stored are skipped), in one transaction."""
        if not entries:
            return
        rows = [(cid, e.id, e.ts, e.role, e.who, e.text) for e in entries]

        def work(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN")
                conn.executemany(
                    "INSERT OR IGNORE INTO history (cid, id, ts, role, who, text) VALUES (?, ?, ?, ?, ?, ?)", rows
                )

        await self._do(work)

    async def search(
        self, cid: str, *, words: str = "", since: int | None = None, until: int | None = None, limit: int = 5
    ) -> list[HistoryEntry]:
        """The newest entries of ``cid`` with every word of ``words`` (whole words, any case), within the range."""
        terms = query_words(words)
        low, high = time_range(since, until)
        ranged = since is not None or until is not None
        if terms:
            match = " ".join(f'"{t}"' for t in terms)  # whole words: a short prefix would merge thousands

            def work(conn: sqlite3.Connection) -> list[Any]:
                first, last = -FOREVER, FOREVER
                if ranged:  # the arrivals of that time, from the (cid, ts) index: the full-text walk skips the rest
                    first, last = conn.execute(
                        "SELECT coalesce(min(seq), 0), coalesce(max(seq), -1) FROM history "
                        "WHERE cid = ? AND ts BETWEEN ? AND ?",
                        (cid, low, high),
                    ).fetchone()
                return conn.execute(
                    f"SELECT {_COLUMNS} FROM history_fts f JOIN history h ON h.seq = f.rowid "
                    "WHERE history_fts MATCH ? AND f.rowid BETWEEN ? AND ? AND h.cid = ? AND h.ts BETWEEN ? AND ? "
                    "ORDER BY f.rowid DESC LIMIT ?",
                    (match, first, last, cid, low, high, limit),
                ).fetchall()

            rows = await self._do(work)
        else:
            order = "h.ts DESC, h.seq DESC" if ranged else "h.seq DESC"
            sql = (  # the newest arrivals; a date range by time, from the (cid, ts) index however old it is
                f"SELECT {_COLUMNS} FROM history h WHERE h.cid = ? AND h.ts BETWEEN ? AND ? ORDER BY {order} LIMIT ?"
            )
            params = (cid, low, high, limit)
            rows = await self._do(lambda conn: conn.execute(sql, params).fetchall())
        return [_entry(row) for row in rows]

    async def conversations(self, *, words: str = "", limit: int = 50) -> list[ConversationInfo]:
        """The conversations with an entry matching ``words`` (all when empty), most recently active first."""
        terms = query_words(words)
        if terms:
            sql = (
                "SELECT h.cid, count(*), max(h.ts) FROM history_fts f JOIN history h ON h.seq = f.rowid "
                "WHERE history_fts MATCH ? GROUP BY h.cid ORDER BY max(h.ts) DESC LIMIT ?"
            )
            params: tuple[Any, ...] = (" ".join(f'"{t}"' for t in terms), limit)
        else:
            sql = "SELECT cid, count(*), max(ts) FROM history GROUP BY cid ORDER BY max(ts) DESC LIMIT ?"
            params = (limit,)
        rows = await self._do(lambda conn: conn.execute(sql, params).fetchall())
        return [ConversationInfo(cid=row[0], entries=int(row[1]), last_ts=int(row[2])) for row in rows]

    async def pending(self, cid: str, *, after: int, keep: int, limit: int) -> list[HistoryEntry]:
        """The oldest ``limit`` entries after ``after`` if ``keep`` newer ones follow them."""
        rows = await self._do(
            lambda conn: conn.execute(
                f"SELECT {_COLUMNS} FROM history h WHERE h.cid = ? AND h.seq > ? ORDER BY h.seq LIMIT ?",
                (cid, after, limit + keep),
            ).fetchall()
        )
        if len(rows) < limit + keep:
            return []
        return [_entry(row) for row in rows[:limit]]

    async def summary(self, cid: str) -> Summary:
        """The summary of ``cid``, or an empty one."""
        rows = await self._do(
            lambda conn: conn.execute("SELECT text, upto, updated FROM summaries WHERE cid = ?", (cid,)).fetchall()
        )
        return Summary(text=rows[0][0], upto=rows[0][1], updated=rows[0][2]) if rows else Summary()

    async def set_summary(self, cid: str, summary: Summary, *, expected: int) -> bool:
        """Replace the summary if it still covers up to ``expected``."""

        def work(conn: sqlite3.Connection) -> bool:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute("SELECT upto FROM summaries WHERE cid = ?", (cid,)).fetchone()
                if (row[0] if row else 0) != expected:
                    return False
                if (
                    summary.upto
                    and not conn.execute(
                        "SELECT 1 FROM history WHERE seq = ? AND cid = ?", (summary.upto, cid)
                    ).fetchone()
                ):
                    return False  # a fold that raced with ``forget``
                conn.execute(
                    "INSERT INTO summaries (cid, text, upto, updated) VALUES (?, ?, ?, ?) ON CONFLICT(cid) DO UPDATE "
                    "SET text = excluded.text, upto = excluded.upto, updated = excluded.updated",
                    (cid, summary.text, summary.upto, summary.updated or now_ms()),
                )
                return True

        return await self._do(work)

    async def count(self, cid: str) -> int:
        """How many entries ``cid`` has."""
        rows = await self._do(
            lambda conn: conn.execute("SELECT count(*) FROM history WHERE cid = ?", (cid,)).fetchall()
        )
        return int(rows[0][0])

    async def forget(self, cid: str) -> None:
        """Delete the history and summary of ``cid``."""

        def work(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DELETE FROM history WHERE cid = ?", (cid,))
                conn.execute("DELETE FROM summaries WHERE cid = ?", (cid,))

        await self._do(work)

    async def delete(self, cid: str, ids: Sequence[str], *, messages: Sequence[str] = ()) -> int:
        """Delete the entries ``ids`` of ``cid`` and those of the platform messages ``messages``; how many went."""
        if not ids and not messages:
            return 0

        def work(conn: sqlite3.Connection) -> int:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                count = 0
                if ids:
                    marks = ",".join("?" * len(ids))
                    count += conn.execute(
                        f"DELETE FROM history WHERE cid = ? AND id IN ({marks})", (cid, *ids)
                    ).rowcount
                for message in messages:
                    prefix = message_prefix(message)
                    count += conn.execute(
                        "DELETE FROM history WHERE cid = ? AND substr(id, 1, ?) = ?", (cid, len(prefix), prefix)
                    ).rowcount
                return count

        count: int = await self._do(work)
        return count

    async def prune(self, *, before: int) -> int:
        """Delete entries said before ``before`` (ms), a chunk per transaction; returns how many."""

        def chunk(conn: sqlite3.Connection) -> int:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                cur = conn.execute(
                    "DELETE FROM history WHERE seq IN (SELECT seq FROM history WHERE ts < ? LIMIT ?)",
                    (before, PRUNE_CHUNK),
                )
                return cur.rowcount

        total = 0
        while True:
            n = await self._do(chunk)
            total += n
            if n < PRUNE_CHUNK:
                return total
