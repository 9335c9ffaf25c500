"""The knowledge base in PostgreSQL (``DATABASE_URL``), shared by a fleet's gateways and workers: a generated
``tsvector`` column (the ``english`` configuration: stemmed, as SQLite's Porter tokenizer) with a GIN index, ranked
by ``ts_rank_cd``; and, where the server has the ``pgvector`` extension and an embedding model is configured, the
passages' embeddings (nearest by cosine distance). Where ``pgvector`` is not installed on the server, searches are
full-text alone and the reason is logged once. The connection, the migrations (at the first connection, under an
advisory lock, in their own version table ``knowledge_schema``, apart from the history's) and the errors are
``core.memory.pg_store.PostgresStore``'s.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from ..entries import now_ms
from ..memory.pg_store import PostgresStore
from .model import DocumentInfo, Hit, Passage
from .store import COMMON_AT, DOCUMENT_COLUMNS, HIT_COLUMNS, RankedSearch, document_info, hit, word_plan

__all__ = ("MIGRATIONS", "PostgresKnowledge")

log = logging.getLogger("core.knowledge")

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE kb_documents (
        id bigserial PRIMARY KEY,
        collection text NOT NULL,
        source text NOT NULL,
        title text NOT NULL,
        digest text NOT NULL,
        passages integer NOT NULL,
        updated bigint NOT NULL,
        UNIQUE (collection, source)
    );
    CREATE TABLE kb_passages (
        id bigserial PRIMARY KEY,
        doc bigint NOT NULL REFERENCES kb_documents (id) ON DELETE CASCADE,
        section text NOT NULL,
        text text NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('english', section), 'A') || to_tsvector('english', text)
        ) STORED
    );
    CREATE INDEX kb_passages_doc ON kb_passages (doc);
    CREATE INDEX kb_passages_tsv ON kb_passages USING GIN (tsv);
    CREATE TABLE kb_scopes (
        conversation text PRIMARY KEY,
        collections text NOT NULL
    );
    """,
    # 2: how many passages of each collection hold each word, so that a search leaves the common ones out of its match
    """
    CREATE TABLE kb_terms (
        lexeme text NOT NULL,
        collection text NOT NULL,
        passages integer NOT NULL,
        PRIMARY KEY (lexeme, collection)
    );
    INSERT INTO kb_terms (lexeme, collection, passages)
    SELECT u.lexeme, d.collection, count(*) FROM kb_passages p JOIN kb_documents d ON d.id = p.doc
    CROSS JOIN LATERAL unnest(p.tsv) u GROUP BY u.lexeme, d.collection;
    """,
)
"""The schema, one step per version; a deployed step is never changed, only followed by new ones."""

VECTORS = "ALTER TABLE kb_passages ADD COLUMN IF NOT EXISTS embedding vector"
"""The embeddings' column, added where the server has pgvector (any dimension: one model per knowledge base)."""

MIGRATION_LOCK = 0x6264_6B62  # "bdkb"
WRITE_LOCK = 0x6264_6B77  # "bdkw", with the collection's hash: one writer of a collection's word counts at a time


class PostgresKnowledge(PostgresStore, RankedSearch):
    """Documents and passages in PostgreSQL (one connection per process, serialised)."""

    what = "knowledge base"
    database = "knowledge"
    migrations = MIGRATIONS
    version_table = "knowledge_schema"
    migration_lock = MIGRATION_LOCK
    log = log

    def __init__(self, url: str, *, vectors: bool = False, timeout: float = 10.0) -> None:
        super().__init__(url, timeout=timeout)
        self.vectors = vectors
        """Embeddings are stored and searched: set when asked for and the server has pgvector."""
        self.why_no_vectors = "" if vectors else "no embedding model is configured"
        """Why the embeddings are not used, when they are not."""
        self.common_at = COMMON_AT
        """A word in this many passages or more finds none by itself (``word_plan``)."""

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await super()._migrate(conn)
        if self.vectors:
            try:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                    await conn.execute(VECTORS)
            except psycopg.Error as exc:
                self.vectors = False
                self.why_no_vectors = f"the server has no pgvector extension ({type(exc).__name__}: {exc})".strip()
                log.warning("knowledge database %s: searches are full-text alone: %s", self.shown, self.why_no_vectors)

    async def digest(self, collection: str, source: str) -> str | None:
        rows = await self._rows(
            "reading a document",
            "SELECT digest FROM kb_documents WHERE collection = %s AND source = %s",
            (collection, source),
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
        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction():
                await _forget(conn, collection, source)
                cur = await conn.execute(
                    "INSERT INTO kb_documents (collection, source, title, digest, passages, updated) "
                    "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                    (collection, source, title, digest, len(passages), now_ms()),
                )
                row = await cur.fetchone()
                assert row is not None
                async with conn.cursor() as many:
                    if vectors is not None and self.vectors:
                        await many.executemany(
                            "INSERT INTO kb_passages (doc, section, text, embedding) VALUES (%s, %s, %s, %s::vector)",
                            [(row[0], p.section, p.text, _vector(v)) for p, v in zip(passages, vectors, strict=True)],
                        )
                    else:
                        await many.executemany(
                            "INSERT INTO kb_passages (doc, section, text) VALUES (%s, %s, %s)",
                            [(row[0], p.section, p.text) for p in passages],
                        )
                await _count(conn, collection, row[0], 1)

        await self._do("storing a document", work)

    async def remove(self, collection: str, source: str | None = None) -> int:
        async def work(conn: psycopg.AsyncConnection[Any]) -> int:
            async with conn.transaction():
                return await _forget(conn, collection, source)

        return await self._do("removing a collection" if source is None else "removing a document", work)

    async def documents(self, collection: str | None = None) -> list[DocumentInfo]:
        where, params = ("WHERE collection = %s", (collection,)) if collection is not None else ("", ())
        rows = await self._rows(
            "listing documents",
            f"SELECT {DOCUMENT_COLUMNS} FROM kb_documents {where} ORDER BY collection, source",
            params,
        )
        return [document_info(r) for r in rows]

    async def _found(
        self, terms: Sequence[str], collections: Sequence[str] | None, wanted: int, vector: Sequence[float] | None
    ) -> tuple[list[Hit], list[Hit]]:
        within = " AND d.collection = ANY(%s)" if collections is not None else ""
        extra: tuple[Any, ...] = (list(collections),) if collections is not None else ()
        found: list[Hit] = []
        if terms:
            found = await self._do("searching", lambda conn: self._words(conn, terms, within, extra, wanted))
        near: list[Hit] = []
        if vector is not None:
            rows = await self._rows(
                "searching by meaning",
                f"SELECT {HIT_COLUMNS}, 1 - (p.embedding <=> %s::vector) AS score "
                "FROM kb_passages p JOIN kb_documents d ON d.id = p.doc "
                f"WHERE p.embedding IS NOT NULL{within} ORDER BY p.embedding <=> %s::vector LIMIT %s",
                (_vector(vector), *extra, _vector(vector), wanted),
            )
            near = [hit(r, float(r[5])) for r in rows]
        return found, near

    async def _words(
        self, conn: psycopg.AsyncConnection[Any], terms: Sequence[str], within: str, extra: tuple[Any, ...], wanted: int
    ) -> list[Hit]:
        """The passages with the question's words (``word_plan``: the common ones only rank), ranked by all."""
        scope = " AND t.collection = ANY(%s)" if within else ""
        cur = await conn.execute(
            "SELECT q.lexeme, coalesce(sum(t.passages), 0) FROM unnest(to_tsvector('english', %s)) q "
            f"LEFT JOIN kb_terms t ON t.lexeme = q.lexeme{scope} GROUP BY q.lexeme",
            (" ".join(terms), *extra),
        )
        counts = {str(r[0]): int(r[1]) for r in await cur.fetchall()}
        lexemes = list(counts)
        if not lexemes:
            return []
        common = [w for w, n in counts.items() if n >= self.common_at]
        found: list[Hit] = []
        for words, joiner in word_plan(lexemes, common):
            cur = await conn.execute(
                f"SELECT {HIT_COLUMNS}, ts_rank_cd(p.tsv, %s::tsquery) AS rank "
                "FROM kb_passages p JOIN kb_documents d ON d.id = p.doc "
                f"WHERE p.tsv @@ %s::tsquery{within} ORDER BY rank DESC LIMIT %s",
                (_tsquery(lexemes, "OR"), _tsquery(words, joiner), *extra, wanted),
            )
            found = [hit(r, float(r[5])) for r in await cur.fetchall()]
            if len(found) >= wanted:
                break
        return found

    async def scope(self, conversation: str) -> tuple[str, ...] | None:
        rows = await self._rows(
            "reading a scope", "SELECT collections FROM kb_scopes WHERE conversation = %s", (conversation,)
        )
        return tuple(json.loads(rows[0][0])) if rows else None

    async def set_scope(self, conversation: str, collections: Sequence[str] | None) -> None:
        if not collections:
            await self._rows("writing a scope", "DELETE FROM kb_scopes WHERE conversation = %s", (conversation,))
            return
        await self._rows(
            "writing a scope",
            "INSERT INTO kb_scopes (conversation, collections) VALUES (%s, %s) "
            "ON CONFLICT (conversation) DO UPDATE SET collections = EXCLUDED.collections",
            (conversation, json.dumps(list(collections))),
        )


def _vector(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def _tsquery(lexemes: Sequence[str], joiner: str) -> str:
    """Lexemes (already normalised) as a ``tsquery``, each quoted so no character of it is an operator."""
    operator = " & " if joiner == "AND" else " | "
    return operator.join("'" + w.replace("\\", "").replace("'", "''") + "'" for w in lexemes)


async def _count(conn: psycopg.AsyncConnection[Any], collection: str, doc: int, sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) document ``doc``'s passages in its collection's word counts."""
    cur = await conn.execute(
        "INSERT INTO kb_terms (lexeme, collection, passages) "
        "SELECT u.lexeme, %s, %s * count(*) FROM kb_passages p CROSS JOIN LATERAL unnest(p.tsv) u "
        "WHERE p.doc = %s GROUP BY u.lexeme ORDER BY u.lexeme "
        "ON CONFLICT (lexeme, collection) DO UPDATE SET passages = kb_terms.passages + EXCLUDED.passages "
        "RETURNING lexeme, passages",
        (collection, sign, doc),
    )
    gone = [r[0] for r in await cur.fetchall() if r[1] <= 0]
    if gone:
        await conn.execute(
            "DELETE FROM kb_terms WHERE collection = %s AND lexeme = ANY(%s) AND passages <= 0", (collection, gone)
        )


async def _forget(conn: psycopg.AsyncConnection[Any], collection: str, source: str | None) -> int:
    """Remove document ``source`` of ``collection`` (None: every one) and its word counts, in the caller's
    transaction, one writer of the collection at a time; how many documents went."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (WRITE_LOCK, collection))
    if source is None:
        await conn.execute("DELETE FROM kb_terms WHERE collection = %s", (collection,))
        cur = await conn.execute("DELETE FROM kb_documents WHERE collection = %s", (collection,))
        return cur.rowcount
    cur = await conn.execute("SELECT id FROM kb_documents WHERE collection = %s AND source = %s", (collection, source))
    row = await cur.fetchone()
    if row is None:
        return 0
    await _count(conn, collection, int(row[0]), -1)
    await conn.execute("DELETE FROM kb_documents WHERE id = %s", (row[0],))
    return 1
