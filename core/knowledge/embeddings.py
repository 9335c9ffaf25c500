"""Embeddings for the knowledge base: any OpenAI-compatible ``/embeddings`` endpoint (``KNOWLEDGE_EMBED_*``).
Optional: without a model, a search is full-text alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..errors import BotError
from ..models.openai_endpoint import OpenAIEndpoint
from ..models.retry import safe_url

__all__ = ("BATCH", "Embedder", "OpenAIEmbedder")

BATCH = 64
"""Texts sent in one request at most."""


class Embedder(Protocol):
    """Turns texts into vectors (the same model for the passages and the questions)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; ``ModelError`` on failure."""
        ...

    async def aclose(self) -> None:
        """Release its connections."""
        ...


class OpenAIEmbedder(OpenAIEndpoint):
    """Vectors from ``POST {base_url}/embeddings``."""

    prefix = "KNOWLEDGE_EMBED"

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, timeout: float = 30.0) -> None:
        super().__init__(base_url=base_url, model=model, api_key=api_key, timeout=timeout)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        where = f"the embeddings server at {safe_url(self.base_url)}"
        found: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            try:
                batch = list(texts[start : start + BATCH])
                result = await self._client.embeddings.create(model=self.model, input=batch)
            # the server's own error may repeat the key: it is not chained (and redacted where shown)
            except openai.APIStatusError as exc:
                raise self._failed(exc, where) from None
            except openai.APIError as exc:
                raise self._failed(exc, where) from exc
            except BotError:
                raise
            found.extend(list(item.embedding) for item in sorted(result.data, key=lambda item: item.index))
        return found
