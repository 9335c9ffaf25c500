"""The nearest embeddings in Python (core.knowledge.vectors), where SQLite cannot load sqlite-vec: the quantized
index chooses candidates that hold the exact nearest, within the collections asked, and SQLite's store builds it
again when another process writes the file."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from core.knowledge import Passage, SQLiteKnowledge
from core.knowledge.vectors import WIDE_AT, VectorIndex, cosine, quantize


def test_the_candidates_hold_the_exact_nearest_within_the_collections() -> None:
    rng = random.Random(41)
    vectors = [[rng.gauss(0, 1) for _ in range(384)] for _ in range(300)]
    vectors += [[abs(rng.gauss(0, 1)) for _ in range(384)] for _ in range(100)]  # all positive, like word counts
    collections = ["a" if i % 3 else "b" for i in range(len(vectors))]
    index = VectorIndex.build((i, collections[i], quantize(v)) for i, v in enumerate(vectors))
    assert len(index) == 400
    for _ in range(5):
        query = [rng.gauss(0, 1) for _ in range(384)]
        exact = sorted(range(len(vectors)), key=lambda i: cosine(query, vectors[i]), reverse=True)
        assert set(exact[:6]) <= set(index.nearest(query, count=32))
        in_b = [i for i in exact if collections[i] == "b"]
        chosen = index.nearest(query, count=32, collections=["b"])
        assert set(in_b[:6]) <= set(chosen) and {collections[i] for i in chosen} == {"b"}
    assert index.nearest([0.0] * 384, count=3) == []  # a zero question is near nothing
    assert index.nearest([1.0] * 10, count=3) == []  # another model's size
    assert VectorIndex.build([]).nearest([1.0], count=3) == []


def test_large_vectors_get_wide_slots() -> None:
    rng = random.Random(3)
    vectors = [[rng.gauss(0, 1) for _ in range(1536)] for _ in range(40)]  # as OpenAI's text-embedding-3-small
    index = VectorIndex.build((i, "a", quantize(v)) for i, v in enumerate(vectors))
    assert index.width == 8
    query = [x + rng.gauss(0, 0.3) for x in vectors[17]]
    assert index.nearest(query, count=1) == [17]
    worst = [1.0] * 1536  # every slot's sum at its largest: no carry into the next passage's slot
    index = VectorIndex.build((i, "a", quantize(worst)) for i in range(3))
    assert list(index.sums) == [1536 * 2047] * 3 and sorted(index.nearest(worst, count=3)) == [0, 1, 2]
    largest = (2 * 1023 + 1) ** 2 * (WIDE_AT - 1)  # the most a 32-bit slot is asked to hold
    assert largest < 2**32 <= largest + (2 * 1023 + 1) ** 2


async def test_sqlite_builds_the_index_again_when_another_process_writes(tmp_path: Path) -> None:
    rng = random.Random(7)
    path = tmp_path / "k.sqlite3"
    bot, cli = SQLiteKnowledge(path, vectors=True), SQLiteKnowledge(path, vectors=True)

    async def put(store: SQLiteKnowledge, source: str, vector: list[float]) -> None:
        passages = [Passage(section="S", text=f"about {source}")]
        await store.put(collection="c", source=source, title=source, digest="d", passages=passages, vectors=[vector])

    try:
        for n in range(20):
            await put(bot, f"doc{n}", [rng.gauss(0, 1) for _ in range(16)])
        wanted = [rng.gauss(0, 1) for _ in range(16)]
        assert "new" not in [h.source for h in await bot.search("", vector=wanted, limit=3)]
        await put(cli, "new", wanted)  # another connection: bot learns it from the file's data_version
        [first, *_] = await bot.search("", vector=wanted, limit=3)
        assert first.source == "new"
        assert await bot.remove("c", "new") == 1  # its own write
        assert "new" not in [h.source for h in await bot.search("", vector=wanted, limit=3)]
    finally:
        await bot.close()
        await cli.close()


async def test_vectors_stored_before_their_quantized_copies_are_quantized_when_read(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite3"
    store = SQLiteKnowledge(path, vectors=True)
    passages = [Passage(section=f"S{i}", text="x") for i in range(3)]
    vectors = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    await store.put(collection="c", source="s", title="t", digest="d", passages=passages, vectors=vectors)
    await store.close()
    with sqlite3.connect(path) as conn:  # as a file of version 1 has them
        conn.execute("UPDATE kb_passages SET q = NULL")
    store = SQLiteKnowledge(path, vectors=True)
    try:
        [hit] = await store.search("", vector=[0.1, 0.9, 0.0], limit=1)
        assert hit.section == "S1"
    finally:
        await store.close()
