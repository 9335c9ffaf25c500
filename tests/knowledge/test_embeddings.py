"""The OpenAI-compatible embeddings client against the fake ``/v1/embeddings``: vectors in the texts' order, sent
in batches, ranked with the words in SQLite (a question sharing no word with its passage is found by meaning), and
the API key never in an error or a log line, whatever the server echoes."""

from __future__ import annotations

import logging
import sqlite3
import traceback
from pathlib import Path

import pytest

from core.errors import ModelAuthError, ModelError
from core.knowledge import Indexer, OpenAIEmbedder, SQLiteKnowledge
from core.knowledge.embeddings import BATCH
from tests.fakes.openai_server import EMBED_DIMENSIONS, FakeOpenAIServer, fake_embedding

from .support import CITE, write_corpus

KEY = "sk-embed-secret-0123456789abcdef"
MONEY = "Will my money be reimbursed?"  # no word of it is in the Refunds section: only the vectors find it


async def test_vectors_come_back_in_order_in_batches_with_the_key_and_model() -> None:
    texts = [f"text number {i} about refunds" if i % 2 else f"parcel {i}" for i in range(BATCH + 5)]
    async with FakeOpenAIServer(api_key=KEY) as server:
        embedder = OpenAIEmbedder(base_url=server.url, model="embed-small", api_key=KEY)
        try:
            vectors = await embedder.embed(texts)
        finally:
            await embedder.aclose()
    assert [len(v) for v in vectors] == [EMBED_DIMENSIONS] * len(texts)
    for text, vector in zip(texts, vectors, strict=True):  # in order: the index says which, not the order sent
        assert vector == pytest.approx(fake_embedding(text), abs=1e-6)
    sizes = [len(r.body["input"]) for r in server.requests]
    assert sizes == [BATCH, 5]
    assert {r.body["model"] for r in server.requests} == {"embed-small"}
    assert {r.headers["Authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    assert KEY not in repr(embedder)


async def test_meaning_ranks_with_the_words_in_sqlite(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="core.knowledge")
    async with FakeOpenAIServer() as server:
        embedder = OpenAIEmbedder(base_url=server.url, model="embed-small")
        words_only = SQLiteKnowledge(tmp_path / "words.sqlite3")
        store = SQLiteKnowledge(tmp_path / "k.sqlite3", vectors=True)
        try:
            corpus = write_corpus(tmp_path / "docs")
            await Indexer(words_only).add([str(corpus)])
            plain = await Indexer(words_only).search(MONEY, limit=3)
            assert CITE not in [h.cite for h in plain]  # no word in common: full-text alone misses it

            indexer = Indexer(store, embedder=embedder)
            report = await indexer.add([str(corpus)])
            assert len(report.added) == 2 and not report.failed
            sent = [text for r in server.requests for text in r.body["input"]]
            assert any(text.startswith("Refunds\nA refund is paid back") for text in sent)  # section and text
            hits = await indexer.search(MONEY, limit=3)
            assert hits[0].cite == CITE
            [word_hit] = await indexer.search("express delivery euros", limit=1)  # the words still rank
            assert word_hit.cite == "Acme Handbook § Shipping"
            if not hasattr(sqlite3.Connection, "enable_load_extension"):  # this machine's Python: ranked in Python
                assert not store.vec_sql and "cannot load extensions; embeddings are ranked in Python" in caplog.text
        finally:
            await embedder.aclose()
            await store.close()
            await words_only.close()


async def test_the_key_is_never_in_errors_or_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with FakeOpenAIServer(api_key="the-right-key") as server:
        wrong = OpenAIEmbedder(base_url=server.url, model="m", api_key=KEY)
        with pytest.raises(ModelAuthError) as refused:
            await wrong.embed(["hello"])
        await wrong.aclose()
        assert "KNOWLEDGE_EMBED_API_KEY" in str(refused.value)

        server.api_key = KEY
        embedder = OpenAIEmbedder(base_url=server.url, model="m", api_key=KEY)
        store = SQLiteKnowledge(tmp_path / "k.sqlite3", vectors=True)
        try:
            indexer = Indexer(store, embedder=embedder)
            assert not (await indexer.add([str(write_corpus(tmp_path / "docs"))])).failed
            server.embeddings_status = 500  # the server fails, and its message repeats the key
            with pytest.raises(ModelError) as failed:
                await embedder.embed(["hello"])
            assert "500" in str(failed.value) and "KNOWLEDGE_EMBED_MODEL" in str(failed.value)
            [hit] = await indexer.search("how long does a refund take", limit=1)  # the words alone, said in the log
            assert hit.cite == CITE
            (tmp_path / "docs" / "new.md").write_text("# New\n\nSomething new.", encoding="utf-8")
            report = await indexer.add([str(tmp_path / "docs" / "new.md")])
            [(_, why)] = report.failed
            assert "500" in why
        finally:
            await embedder.aclose()
            await store.close()

    assert "could not be embedded" in caplog.text
    for error in (refused.value, failed.value):
        shown = "".join(traceback.format_exception(error))  # as a log's traceback would show it, causes too
        assert "KNOWLEDGE_EMBED" in shown and KEY not in shown and KEY[:8] not in shown
    assert KEY not in caplog.text and KEY[:8] not in caplog.text and why.count("***") >= 1
