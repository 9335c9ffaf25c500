"""The knowledge base in SQLite (``BOT_DATA_DIR/knowledge.sqlite3``, beside the memory store): an FTS5 index of the
passages (Porter stemming, diacritics folded) ranked by BM25, and their embeddings where a model makes them.

The embeddings are float32 blobs beside the passages. Where this Python's sqlite3 may load extensions and the
``sqlite-vec`` package is installed, the nearest are found in SQL (``vec_distance_cosine``); otherwise in Python
(``core.knowledge.vectors``: the quantized copies stored beside them, held in memory until the file changes, choose
the candidates, which the float32 vectors rank).
"""

from __future__ import annotations

import array
import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from ..entries import now_ms
from ..memory.sqlite import SQLiteFile
from .model import DocumentInfo, Hit, Passage
from .store import COMMON_AT, DOCUMENT_COLUMNS, HIT_COLUMNS, RankedSearch, document_info, hit, word_plan
from .vectors import VectorIndex, cosine, quantize

__all__ = ("SQLiteKnowledge",)

log = logging.getLogger("core.knowledge")

SCHEMA = """
CREATE TABLE IF NOT EXISTS kb_documents (
    id INTEGER PRIMARY KEY,
    collection TEXT NOT NULL,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    digest TEXT NOT NULL,
    passages INTEGER NOT NULL,
    updated INTEGER NOT NULL,
    UNIQUE (collection, source)
);
CREATE TABLE IF NOT EXISTS kb_passages (
    id INTEGER PRIMARY KEY,
    doc INTEGER NOT NULL,
    section TEXT NOT NULL,
    text TEXT NOT NULL,
    vec BLOB
);
CREATE INDEX IF NOT EXISTS kb_passages_doc ON kb_passages (doc);
CREATE VIRTUAL TABLE IF NOT EXISTS kb_fts USING fts5(
    section, text, content='kb_passages', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS kb_passages_ai AFTER INSERT ON kb_passages BEGIN
    INSERT INTO kb_fts (rowid, section, text) VALUES (new.id, new.section, new.text);
END;
CREATE TRIGGER IF NOT EXISTS kb_passages_ad AFTER DELETE ON kb_passages BEGIN
    INSERT INTO kb_fts (kb_fts, rowid, section, text) VALUES ('delete', old.id, old.section, old.text);
END;
CREATE TABLE IF NOT EXISTS kb_scopes (
    conversation TEXT PRIMARY KEY,
    collections TEXT NOT NULL
);
"""

MIGRATIONS = ("ALTER TABLE kb_passages ADD COLUMN q BLOB",)  # 2: each embedding quantized (vectors.quantize)


def _blob(vector: Sequence[float]) -> bytes:
    return array.array("f", vector).tobytes()


def _floats(blob: bytes) -> array.array[float]:
    found = array.array("f")
    found.frombytes(blob)
    return found


def _within(collections: Sequence[str] | None) -> tuple[str, list[Any]]:
    if collections is None:
        return "", []
    return f" AND d.collection IN ({','.join('?' * len(collections))})", list(collections)


class SQLiteKnowledge(SQLiteFile, RankedSearch):
    """Documents, passages and their full-text index in one SQLite file (WAL mode)."""

    what = "the SQLite knowledge base"
    component = "knowledge"
    schema = SCHEMA
    migrations = MIGRATIONS
    needs = " (SQLite needs FTS5)"

    def __init__(self, path: Any, *, vectors: bool = False) -> None:
        super().__init__(path)
        self.vectors = vectors
        """Embeddings are stored and searched (an embedding model is configured)."""
        self.vec_sql = False
        """sqlite-vec is loaded: the nearest embeddings are found in SQL."""
        self.common_at = COMMON_AT
        """A word in this many passages or more finds none by itself (``word_plan``)."""
        self._index: tuple[int, VectorIndex] | None = None  # (the file's data_version, its vectors)

    def _connect(self) -> sqlite3.Connection:
        fresh = self._conn is None
        conn = super()._connect()
        if fresh and self.vectors:
            self.vec_sql = _load_vec(conn)
        return conn

    async def digest(self, collection: str, source: str) -> str | None:
        rows = await self._do(
            lambda conn: conn.execute(
                "SELECT digest FROM kb_documents WHERE collection = ? AND source = ?", (collection, source)
            ).fetchall()
        )
        return str(rows[0][0]) if rows else None

    async def put(
        self,
        *,
        collection: str,
        source: str,
        title: str,
        digest: str,
        passages: Sequence[Passage],
        vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        blobs = [(_blob(v), quantize(v)) for v in vectors] if vectors is not None else [(None, None)] * len(passages)

        def work(conn: sqlite3.Connection) -> None:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                _delete(conn, collection, source)
                cur = conn.execute(
                    "INSERT INTO kb_documents (collection, source, title, digest, passages, updated) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (collection, source, title, digest, len(passages), now_ms()),
                )
                doc = cur.lastrowid
                conn.executemany(
                    "INSERT INTO kb_passages (doc, section, text, vec, q) VALUES (?, ?, ?, ?, ?)",
                    [(doc, p.section, p.text, *blob) for p, blob in zip(passages, blobs, strict=True)],
                )
                self._index = None

        await self._do(work)

    async def remove(self, collection: str, source: str | None = None) -> int:
        def work(conn: sqlite3.Connection) -> int:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                if source is not None:
                    self._index = None
                    return _delete(conn, collection, source)
                self._index = None
                listed = conn.execute("SELECT source FROM kb_documents WHERE collection = ?", (collection,))
                sources = [row[0] for row in listed]
                return sum(_delete(conn, collection, s) for s in sources)

        return await self._do(work)

    async def documents(self, collection: str | None = None) -> list[DocumentInfo]:
        where, params = ("WHERE collection = ?", (collection,)) if collection is not None else ("", ())
        rows = await self._do(
            lambda conn: conn.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM kb_documents {where} ORDER BY collection, source",
                params,
            ).fetchall()
        )
        return [document_info(r) for r in rows]

    async def _found(
        self, terms: Sequence[str], collections: Sequence[str] | None, wanted: int, vector: Sequence[float] | None
    ) -> tuple[list[Hit], list[Hit]]:
        within, params = _within(collections)

        def work(conn: sqlite3.Connection) -> tuple[list[Hit], list[Hit]]:
            found: list[Hit] = []
            for match in _matches(conn, terms, self.common_at):
                rows = conn.execute(
                    f"SELECT {HIT_COLUMNS}, bm25(kb_fts, 2.0, 1.0) AS rank FROM kb_fts f "
                    "JOIN kb_passages p ON p.id = f.rowid JOIN kb_documents d ON d.id = p.doc "
                    f"WHERE kb_fts MATCH ?{within} ORDER BY rank LIMIT ?",
                    (match, *params, wanted),
                ).fetchall()
                found = [hit(r, -float(r[5])) for r in rows]
                if len(found) >= wanted:
                    break
            near = self._nearest(conn, vector, collections, wanted) if vector is not None else []
            return found, near

        return await self._do(work)

    def _nearest(
        self, conn: sqlite3.Connection, vector: Sequence[float], collections: Sequence[str] | None, limit: int
    ) -> list[Hit]:
        joined = "FROM kb_passages p JOIN kb_documents d ON d.id = p.doc WHERE p.vec IS NOT NULL"
        if self.vec_sql:
            within, params = _within(collections)
            rows = conn.execute(
                f"SELECT {HIT_COLUMNS}, vec_distance_cosine(p.vec, ?) AS distance {joined}{within} "
                "ORDER BY distance LIMIT ?",
                (_blob(vector), *params, limit),
            ).fetchall()
            return [hit(r, 1.0 - float(r[5])) for r in rows]
        ids = self._vectors(conn).nearest(vector, count=max(4 * limit, CANDIDATES), collections=collections)
        if not ids:
            return []
        rows = conn.execute(
            f"SELECT {HIT_COLUMNS}, p.vec {joined} AND p.id IN ({','.join('?' * len(ids))})", ids
        ).fetchall()
        scored = sorted(((cosine(vector, _floats(r[5])), r) for r in rows), key=lambda pair: pair[0], reverse=True)
        return [hit(r, score) for score, r in scored[:limit]]

    def _vectors(self, conn: sqlite3.Connection) -> VectorIndex:
        """Every passage's quantized vector in memory, built again when the file changed (``PRAGMA data_version``
        tells another connection's commits; this one's writes drop it); vectors stored before quantized copies
        were are quantized here."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if self._index is None or self._index[0] != version:
            rows = conn.execute(
                "SELECT p.id, d.collection, p.q, p.vec FROM kb_passages p JOIN kb_documents d ON d.id = p.doc "
                "WHERE p.vec IS NOT NULL ORDER BY p.id"
            )
            index = VectorIndex.build((r[0], r[1], r[2] if r[2] is not None else quantize(_floats(r[3]))) for r in rows)
            self._index = (version, index)
        return self._index[1]

    async def scope(self, conversation: str) -> tuple[str, ...] | None:
        rows = await self._do(
            lambda conn: conn.execute(
                "SELECT collections FROM kb_scopes WHERE conversation = ?", (conversation,)
            ).fetchall()
        )
        return tuple(json.loads(rows[0][0])) if rows else None

    async def set_scope(self, conversation: str, collections: Sequence[str] | None) -> None:
        params: tuple[str, ...]
        if not collections:
            sql, params = "DELETE FROM kb_scopes WHERE conversation = ?", (conversation,)
        else:
            sql = (
                "INSERT INTO kb_scopes (conversation, collections) VALUES (?, ?) "
                "ON CONFLICT(conversation) DO UPDATE SET collections = excluded.collections"
            )
            params = (conversation, json.dumps(list(collections)))
        await self._do(lambda conn: conn.execute(sql, params).fetchall())


CANDIDATES = 32
"""Passages the quantized vectors choose at least, for the float32 ones to rank."""


def _quoted(terms: Sequence[str], joiner: str) -> str:
    return f" {joiner} ".join('"' + t.replace('"', "") + '"' for t in terms)


def _matches(conn: sqlite3.Connection, terms: Sequence[str], common_at: int) -> list[str]:
    """The FTS5 queries to try in turn for ``terms`` (``word_plan``), each ranking by all the words."""
    if not terms:
        return []
    common = [
        t
        for t in terms
        if conn.execute(
            "SELECT count(*) FROM (SELECT rowid FROM kb_fts WHERE kb_fts MATCH ? LIMIT ?)",
            (_quoted([t], ""), common_at),
        ).fetchone()[0]
        >= common_at
    ]
    every = _quoted(terms, "OR")
    return [
        _quoted(words, joiner) if words == list(terms) else f"({_quoted(words, joiner)}) AND ({every})"
        for words, joiner in word_plan(terms, common)
    ]


def _delete(conn: sqlite3.Connection, collection: str, source: str) -> int:
    row = conn.execute(
        "SELECT id FROM kb_documents WHERE collection = ? AND source = ?", (collection, source)
    ).fetchone()
    if row is None:
        return 0
    conn.execute("DELETE FROM kb_passages WHERE doc = ?", (row[0],))
    conn.execute("DELETE FROM kb_documents WHERE id = ?", (row[0],))
    return 1


def _load_vec(conn: sqlite3.Connection) -> bool:
    """Load sqlite-vec into ``conn`` if this Python and the installed packages allow it; why not is logged once."""
    enable = getattr(conn, "enable_load_extension", None)
    if enable is None:
        log.info("knowledge: this Python's sqlite3 cannot load extensions; embeddings are ranked in Python")
        return False
    try:
        import sqlite_vec  # type: ignore[import-untyped,unused-ignore]

        enable(True)
        sqlite_vec.load(conn)
        enable(False)
    except (ImportError, sqlite3.Error, AttributeError) as exc:
        log.info("knowledge: sqlite-vec not loaded (%s); embeddings are ranked in Python", exc)
        return False
    return True
