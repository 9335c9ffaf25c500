"""Where the knowledge base lives: ``KnowledgeStore``, kept in SQLite in one process (``SQLiteKnowledge``, beside
the memory store) or in PostgreSQL in a fleet (``core.knowledge.postgres.PostgresKnowledge``).

A search takes the words of a question (``query_terms``: small words left out) and ranks the passages holding any of
them by BM25 (SQLite's FTS5; PostgreSQL's ``ts_rank_cd``); with an embedding model, the passages nearest the
question's vector are ranked too and both lists merged by reciprocal rank (a passage high in either comes first).
"""

from __future__ import annotations

import abc
import dataclasses
import re
from collections.abc import Sequence
from typing import Any, Protocol

from .model import DocumentInfo, Hit, Passage

__all__ = (
    "COMMON_AT",
    "DOCUMENT_COLUMNS",
    "HIT_COLUMNS",
    "STOPWORDS",
    "KnowledgeStore",
    "RankedSearch",
    "document_info",
    "fuse",
    "hit",
    "query_terms",
    "word_plan",
)

_COMMON = """a about above after again all am an and any are as at be been before being below between both but by can
    could did do does doing down during each few for from further had has have having he her here hers him his how
    i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out over
    own same she should so some such than that the their theirs them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours"""
STOPWORDS = frozenset(_COMMON.split())
"""English words too common to tell passages apart, left out of a search."""

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 24
"""Words of a question searched at most."""


def query_terms(text: str) -> list[str]:
    """The words of ``text`` a search looks for: lower case, small and common words left out, each once."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOPWORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]


COMMON_AT = 1000
"""A word found in this many passages or more is common: it ranks the passages the question's rarer words find, but
does not find passages by itself (ranking every passage holding "battery" would cost a search at 100,000 passages
ten times its budget)."""


def word_plan(terms: Sequence[str], common: Sequence[str]) -> list[tuple[list[str], str]]:
    """The words a search matches in turn (``"OR"``: any of them, ``"AND"``: all), the passages found always ranked
    by all of ``terms``: those with any rare word; with only common words, those with all of them, then any."""
    rare = [t for t in terms if t not in common]
    if not common:
        return [(list(terms), "OR")]
    if rare:
        return [(rare, "OR")]
    return [(list(terms), "AND"), (list(terms), "OR")]


def fuse(*ranked: Sequence[Hit], limit: int, k: int = 60) -> list[Hit]:
    """Lists of hits merged by reciprocal rank (``1 / (k + rank)`` summed per passage), the best ``limit``."""
    scores: dict[tuple[str, str, str, str], float] = {}
    first: dict[tuple[str, str, str, str], Hit] = {}
    for hits in ranked:
        for rank, hit in enumerate(hits):
            key = (hit.collection, hit.source, hit.section, hit.text)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank + 1)
            first.setdefault(key, hit)
    order = sorted(scores, key=lambda key: scores[key], reverse=True)[:limit]
    return [dataclasses.replace(first[key], score=scores[key]) for key in order]


class KnowledgeStore(Protocol):
    """Documents split into passages, searchable, and the collections each conversation may read."""

    vectors: bool
    """It ranks by embedding too (sqlite-vec or Python in SQLite, pgvector in PostgreSQL)."""
    common_at: int
    """A word in this many passages or more finds none by itself (``word_plan``); ``COMMON_AT`` unless changed."""

    async def digest(self, collection: str, source: str) -> str | None:
        """The digest ``source`` was indexed with in ``collection``, None when it is not there."""
        ...

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
        """Store a document's passages (with their embeddings), replacing what it had, in one transaction."""
        ...

    async def remove(self, collection: str, source: str | None = None) -> int:
        """Remove one document (``source``) or the whole collection; how many documents went."""
        ...

    async def documents(self, collection: str | None = None) -> list[DocumentInfo]:
        """The documents (of ``collection``, or all), by collection and source."""
        ...

    async def search(
        self,
        query: str,
        *,
        collections: Sequence[str] | None = None,
        limit: int = 3,
        vector: Sequence[float] | None = None,
    ) -> list[Hit]:
        """The passages that best answer ``query`` (in ``collections``; None: all), best first."""
        ...

    async def scope(self, conversation: str) -> tuple[str, ...] | None:
        """The collections ``conversation`` is limited to, None when it is not limited."""
        ...

    async def set_scope(self, conversation: str, collections: Sequence[str] | None) -> None:
        """Limit ``conversation`` to ``collections`` (None or empty: lift the limit)."""
        ...

    async def close(self) -> None:
        """Close the connection."""
        ...


HIT_COLUMNS = "d.collection, d.source, d.title, p.section, p.text"
"""What a search selects of a passage (``p``) and its document (``d``), before its score (``hit``)."""
DOCUMENT_COLUMNS = "collection, source, title, digest, passages, updated"
"""What a listing selects of a document (``document_info``)."""


def hit(row: Sequence[Any], score: float) -> Hit:
    """The hit of a row of ``HIT_COLUMNS``."""
    return Hit(collection=row[0], source=row[1], title=row[2], section=row[3], text=row[4], score=score)


def document_info(row: Sequence[Any]) -> DocumentInfo:
    """The document of a row of ``DOCUMENT_COLUMNS``."""
    return DocumentInfo(collection=row[0], source=row[1], title=row[2], digest=row[3], passages=row[4], updated=row[5])


class RankedSearch(abc.ABC):
    """``search`` for a store that finds passages by words and, with embeddings, by meaning (``_found``)."""

    vectors: bool

    async def search(
        self,
        query: str,
        *,
        collections: Sequence[str] | None = None,
        limit: int = 3,
        vector: Sequence[float] | None = None,
    ) -> list[Hit]:
        """The passages that best answer ``query`` (in ``collections``; None: all), best first: those found by
        words and by meaning merged by reciprocal rank (``fuse``), or those found by words alone."""
        if collections is not None and not collections:
            return []
        meaning = vector if vector is not None and self.vectors else None
        wanted = limit * 2 if meaning is not None else limit
        found, near = await self._found(query_terms(query), collections, wanted, meaning)
        return fuse(found, near, limit=limit) if near else found[:limit]

    @abc.abstractmethod
    async def _found(
        self, terms: Sequence[str], collections: Sequence[str] | None, wanted: int, vector: Sequence[float] | None
    ) -> tuple[list[Hit], list[Hit]]:
        """The best ``wanted`` passages of ``collections`` with the words ``terms``, and (``vector`` given) the
        nearest ``wanted`` by meaning."""
