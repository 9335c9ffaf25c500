"""The knowledge base in SQLite and in PostgreSQL: documents indexed from a folder, only what changed indexed again,
what is gone removed, searches limited to collections, conversations' scopes, and embeddings ranked with the words
(SQLite; PostgreSQL without pgvector searches words alone and says why)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from core.knowledge import Indexer, KnowledgeStore, Passage, SQLiteKnowledge, query_terms

from .support import CITE, QUESTION, write_corpus


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[KnowledgeStore]:
    if request.param == "sqlite":
        found: KnowledgeStore = SQLiteKnowledge(tmp_path / "knowledge.sqlite3")
    else:
        from core.knowledge.postgres import PostgresKnowledge

        found = PostgresKnowledge(request.getfixturevalue("database_url"))
    try:
        yield found
    finally:
        await found.close()


async def test_a_folder_is_indexed_once_and_again_only_where_it_changed(store: KnowledgeStore, tmp_path: Path) -> None:
    folder = write_corpus(tmp_path / "docs")
    indexer = Indexer(store)
    first = await indexer.add([str(folder)], collection="acme")
    assert len(first.added) == 2 and not first.failed
    again = await indexer.add([str(folder)], collection="acme")
    assert (len(again.added), len(again.changed), len(again.unchanged)) == (0, 0, 2)

    [hit] = await indexer.search(QUESTION, limit=1)
    assert hit.cite == CITE and "five working days" in hit.text
    [gift] = await indexer.search("are gift cards valid long?", limit=1)
    assert gift.cite == "Acme FAQ § Gift cards"

    handbook = folder / "handbook.md"
    handbook.write_text(handbook.read_text().replace("five working days", "ten working days"), encoding="utf-8")
    (folder / "faq.html").unlink()
    report = await indexer.reindex()
    assert [Path(s).name for s in report.changed] == ["handbook.md"]
    assert [Path(s).name for s in report.removed] == ["faq.html"]
    [hit] = await indexer.search(QUESTION, limit=1)
    assert "ten working days" in hit.text
    assert [d.title for d in await store.documents()] == ["Acme Handbook"]


async def test_collections_and_conversation_scopes(store: KnowledgeStore, tmp_path: Path) -> None:
    folder = write_corpus(tmp_path / "docs")
    indexer = Indexer(store)
    await indexer.add([str(folder / "handbook.md")], collection="hr")
    await indexer.add([str(folder / "faq.html")], collection="shop")
    assert [h.collection for h in await store.search("refund gift cards", collections=["shop"])] == ["shop"]
    assert await store.search(QUESTION, collections=[]) == []

    assert await store.scope("telegram:chat:1") is None
    await store.set_scope("telegram:chat:1", ["shop", "hr"])
    assert await store.scope("telegram:chat:1") == ("shop", "hr")
    await store.set_scope("telegram:chat:1", None)
    assert await store.scope("telegram:chat:1") is None

    assert await store.remove("shop") == 1
    assert [d.collection for d in await store.documents()] == ["hr"]


async def test_what_cannot_be_read_is_reported(store: KnowledgeStore, tmp_path: Path) -> None:
    (tmp_path / "picture.png").write_bytes(b"\x89PNG")
    report = await Indexer(store).add([str(tmp_path / "missing"), str(tmp_path / "picture.png")])
    assert [why for _, why in report.failed] == [
        f"{tmp_path / 'missing'}: no such file or folder",
        "not a document read here (one of .htm, .html, .markdown, .md, .pdf, .text, .txt)",
    ]


async def test_a_common_word_only_ranks_what_the_rarer_words_find(store: KnowledgeStore) -> None:
    """A word in ``common_at`` passages or more finds none by itself; the counts follow documents replaced and
    removed (PostgreSQL keeps them per collection in kb_terms, SQLite asks its index)."""
    store.common_at = 3

    async def put(source: str, text: str) -> None:
        passages = [Passage(section="Power", text=text)]
        await store.put(collection="c", source=source, title=source, digest=text, passages=passages)

    await put("a", "The battery of the zorblax lasts a week.")
    await put("b", "The battery lasts a day.")
    await put("c", "Charge the battery overnight.")
    assert [h.source for h in await store.search("zorblax battery", limit=3)] == ["a"]
    assert len(await store.search("battery", limit=3)) == 3  # only common words: those with all, then any

    await put("c", "Charge it overnight.")  # replaced: two passages left with the word
    assert sorted(h.source for h in await store.search("zorblax battery", limit=3)) == ["a", "b"]
    await put("c", "Charge the battery overnight.")
    assert [h.source for h in await store.search("zorblax battery", limit=3)] == ["a"]
    assert await store.remove("c", "b") == 1
    assert sorted(h.source for h in await store.search("zorblax battery", limit=3)) == ["a", "c"]
    assert await store.remove("c") == 2
    assert await store.search("battery", limit=3) == []


def test_questions_keep_their_telling_words() -> None:
    assert query_terms("How long does a Refund take, and what is the 2nd step?") == [
        "long",
        "refund",
        "take",
        "2nd",
        "step",
    ]


class Letters:
    """A test embedding: how often each letter of a..z occurs (texts that share words are near)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(t.lower().count(chr(97 + i))) for i in range(26)] for t in texts]

    async def aclose(self) -> None:
        return None


async def test_with_an_embedding_model_meaning_ranks_too_in_sqlite(tmp_path: Path) -> None:
    store = SQLiteKnowledge(tmp_path / "k.sqlite3", vectors=True)
    try:
        indexer = Indexer(store, embedder=Letters())
        await indexer.add([str(write_corpus(tmp_path / "docs"))])
        hits = await indexer.search("zzzz qqqq", limit=2)  # no word matches: the vectors alone find passages
        assert len(hits) == 2 and all(math.isfinite(h.score) for h in hits)
        [hit] = await indexer.search(QUESTION, limit=1)
        assert hit.cite == CITE
    finally:
        await store.close()


async def test_postgres_without_pgvector_searches_words_and_says_why(database_url: str, tmp_path: Path) -> None:
    from core.knowledge.postgres import PostgresKnowledge

    store = PostgresKnowledge(database_url, vectors=True)
    try:
        indexer = Indexer(store, embedder=Letters())
        await indexer.add([str(write_corpus(tmp_path / "docs"))])
        if store.vectors:
            pytest.skip("this server has pgvector: the fallback is not exercised")
        assert "pgvector" in store.why_no_vectors
        [hit] = await indexer.search(QUESTION, limit=1)
        assert hit.cite == CITE
    finally:
        await store.close()
